//! `agentpump process check`: exit code and output on good and bad files, text and JSON.

use std::path::PathBuf;

fn path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Runs the binary in the repository root: (exit 0?, stdout, stderr).
fn agentpump(args: &[&str]) -> (bool, String, String) {
    crate::support::agentpump_in(std::path::Path::new(env!("CARGO_MANIFEST_DIR")), args)
}

fn check(args: &[&str], files: &[PathBuf]) -> (bool, String, String) {
    let mut all = vec!["process", "check"];
    all.extend_from_slice(args);
    all.extend(files.iter().map(|f| f.to_str().unwrap()));
    agentpump(&all)
}

#[test]
fn the_shipped_processes_and_the_construct_fixture_check_clean() {
    let files = [
        path("listeners/processes/newton.aps"),
        path("listeners/processes/planner.aps"),
        path("listeners/processes/safety.aps"),
        path("tests/fixtures/processes/all_constructs.aps"),
    ];
    let (ok, stdout, stderr) = check(&[], &files);
    assert!(ok, "{stdout}{stderr}");
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
    assert!(
        stdout.lines().all(|l| l.ends_with(" 0 errors, 0 warnings")),
        "{stdout}"
    );
    assert!(stdout.contains("planner.aps: 2 processes"), "{stdout}");
}

#[test]
fn a_bad_file_fails_with_rustc_style_diagnostics() {
    let file = path("tests/fixtures/processes/errors.aps");
    let (ok, stdout, stderr) = check(&[], std::slice::from_ref(&file));
    assert!(!ok);
    assert!(
        stderr.contains("agentpump: 5 errors in process files"),
        "{stderr}"
    );
    let shown = file.display().to_string();
    for expected in [
        format!(
            "error[AG-004 ProcessIdMismatch]: RUN names process missing, which is not defined\n --> {shown}:6:7\n  |\n6 |   RUN `missing` where: count=1\n  |       ^^^^^^^^^\n"
        ),
        format!(
            "error[AG-008 CaptureMissing]: CAPTURE from `calculator`, which no earlier USE calls\n --> {shown}:7:23\n"
        ),
        format!(
            "error[AG-013 DuplicateSymbol]: LIMIT is a constant and cannot be rebound\n --> {shown}:8:7\n"
        ),
        format!("error[AG-012 KeyOrder]: key a after op in where:\n --> {shown}:9:37\n"),
        format!(
            "error[AG-027 TimeoutRetryPolicy]: timeout_ms=0 is not a whole number from 1 to 86400000\n --> {shown}:9:53\n"
        ),
        format!(
            "warning[AG-W01 SymbolNotUsed]: UNSED is bound but never used\n  --> {shown}:10:7\n"
        )
        .replace("UNSED", "UNUSED"),
    ] {
        assert!(
            stdout.contains(&expected),
            "missing\n{expected}\nin\n{stdout}"
        );
    }
    assert!(
        stdout.ends_with(&format!("{shown}: 1 processes, 5 errors, 3 warnings\n")),
        "{stdout}"
    );
}

#[test]
fn json_output_is_one_object_per_diagnostic() {
    let file = path("tests/fixtures/processes/errors.aps");
    let (ok, stdout, _) = check(&["--format", "json"], std::slice::from_ref(&file));
    assert!(!ok);
    let objects: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objects.len(), 8);
    let first_error = objects.iter().find(|o| o["severity"] == "error").unwrap();
    assert_eq!(first_error["file"], file.display().to_string());
    assert_eq!(first_error["code"], "AG-004");
    assert_eq!(first_error["name"], "ProcessIdMismatch");
    assert_eq!(
        (first_error["line"].as_u64(), first_error["column"].as_u64()),
        (Some(6), Some(7))
    );
    assert!(first_error["message"].as_str().unwrap().contains("missing"));
    assert!(first_error["hint"].is_string());
    let (ok, stdout, _) = check(
        &["--format", "json"],
        &[path("listeners/processes/newton.aps")],
    );
    assert!(ok && stdout.is_empty(), "{stdout}");
}

#[test]
fn a_missing_file_fails() {
    let (ok, _, stderr) = check(&[], &[path("tests/fixtures/processes/none.aps")]);
    assert!(!ok);
    assert!(
        stderr.contains("none.aps") && stderr.contains("No such file"),
        "{stderr}"
    );
}

fn run(args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["process", "run"];
    all.extend_from_slice(args);
    agentpump(&all)
}

#[test]
fn process_run_prints_the_transcript_and_the_return() {
    // Issue 15: "`agentpump process run FILE --input k=v …` (in-process with the organism's
    // tools, prints the transcript and the RETURN)".
    let (ok, stdout, stderr) = run(&["listeners/processes/newton.aps", "--input", "target=2"]);
    assert!(ok, "{stdout}{stderr}");
    assert!(stdout.contains("newton → calculator"), "{stdout}");
    let last = stdout.lines().last().unwrap();
    assert!(
        last.starts_with("RETURN {\"residual\":") && last.contains("\"root\":1.41421356237"),
        "{last}"
    );
    // The planner's workers run in child threads, shown indented under the parent.
    let (ok, stdout, stderr) = run(&[
        "listeners/processes/planner.aps",
        "--input",
        "left=1 + 1",
        "--input",
        "middle=2 * 3",
        "--input",
        "right=10 / 4",
    ]);
    assert!(ok, "{stdout}{stderr}");
    assert!(
        stdout.contains("\n      ") && stdout.contains("worker → calculator"),
        "{stdout}"
    );
    assert_eq!(
        stdout.lines().last().unwrap(),
        "RETURN {\"parts\":[2,6,2.5],\"total\":10.5}"
    );
}

#[test]
fn process_run_fails_precisely() {
    // A missing argument: the process answers AG-044 and the command exits 1 saying so.
    let (ok, _, stderr) = run(&["listeners/processes/newton.aps"]);
    assert!(!ok);
    assert!(
        stderr.contains("AG-044: ProcessArgsMismatch: argument `target` (Number) is missing"),
        "{stderr}"
    );
    // An input that is not name=value.
    let (ok, _, stderr) = run(&["listeners/processes/newton.aps", "--input", "2"]);
    assert!(
        !ok && stderr.contains("--input `2`: write name=value"),
        "{stderr}"
    );
    // A file with hard errors runs nothing and shows them.
    let (ok, stdout, stderr) = run(&["tests/fixtures/processes/errors.aps"]);
    assert!(
        !ok && stdout.contains("error[AG-") && stderr.contains("errors; nothing ran"),
        "{stdout}{stderr}"
    );
    let (ok, _, stderr) = run(&["no/such/file.aps"]);
    assert!(!ok && stderr.contains("no/such/file.aps"), "{stderr}");
}

#[test]
fn process_run_shows_the_warnings_on_stderr_and_still_runs() {
    // 07: "AG-W01, name: SymbolNotUsed, desc: Defined but never used." — a warning, surfaced
    // (rustc-style, as `process check` shows it) without stopping the run.
    let (ok, stdout, stderr) = run(&["tests/fixtures/processes/warning.aps"]);
    assert!(ok, "{stdout}{stderr}");
    assert!(
        stderr.contains(
            "warning[AG-W01 SymbolNotUsed]: UNUSED is defined but never used\n --> tests/fixtures/processes/warning.aps:2:1\n  |\n2 | UNUSED: 1\n"
        ),
        "{stderr}"
    );
    assert!(
        !stdout.contains("warning["),
        "warnings stay off stdout: {stdout}"
    );
    assert_eq!(
        stdout.lines().last().unwrap(),
        "RETURN {\"greeting\":\"hello\"}"
    );
}

#[test]
fn the_organism_s_tools_and_the_time_policy_reach_process_check() {
    // 07: "AG-034 … Conflicting tool signatures across host and predefinedTools.json" (a
    // process of the file called by a name the organism gives a tool) and "AG-W02 … Step
    // without explicit time where policy requires".
    let scratch = crate::support::Scratch::new("process-check-policy");
    let aps = scratch.write(
        "main.aps",
        "<processes>\n<process id=\"main\">\n  RUN `double` where: x=1\n  USE `double` where: expression=\"1\" (timeout_ms=50)\n  CAPTURE AA from `double`\n  RETURN: AA\n</process>\n<process id=\"double\" args=\"x: Number\">\n  RETURN: y=x\n</process>\n</processes>\n",
    );
    let organism = scratch.write(
        "organism.toml",
        "[[listener]]\nname = \"double\"\nkind = \"builtin\"\nbuiltin = \"calculator\"\n\n[[listener]]\nname = \"main\"\nkind = \"process\"\nfile = \"main.aps\"\n",
    );
    let (ok, stdout, _) = check(&[], std::slice::from_ref(&aps));
    assert!(ok, "no organism, no policy: clean\n{stdout}");
    let organism = organism.to_str().unwrap();
    let (ok, stdout, stderr) = check(&["--organism", organism], std::slice::from_ref(&aps));
    assert!(!ok, "{stdout}");
    assert!(
        stdout.contains("error[AG-034 PredefinedToolCollision]: `double` is a process of this file and a tool the host registers")
            && stdout.contains("main.aps:3:7")
            && stdout.contains("main.aps:4:7"),
        "{stdout}"
    );
    assert!(stderr.contains("2 errors in process files"), "{stderr}");
    let lax = scratch.write(
        "lax.aps",
        "<processes>\n<process id=\"lax\">\n  USE `calc`\n  RETURN: ok=true\n</process>\n</processes>\n",
    );
    let (ok, stdout, _) = check(&[], std::slice::from_ref(&lax));
    assert!(ok && !stdout.contains("AG-W02"), "{stdout}");
    let (ok, stdout, _) = check(&["--require-timeout"], &[lax, aps]);
    assert!(ok, "a warning does not fail the check\n{stdout}");
    assert!(
        stdout.contains("warning[AG-W02 LaxTime]: USE `calc` gives no timeout_ms")
            && stdout.contains("lax.aps:3:3")
            && stdout.contains("lax.aps: 1 processes, 0 errors, 1 warnings")
            && stdout.contains("main.aps: 2 processes, 0 errors, 0 warnings"),
        "{stdout}"
    );
}
