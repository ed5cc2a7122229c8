//! `agentpump process check`: exit code and output on good and bad files, text and JSON.

use std::path::PathBuf;
use std::process::Command;

fn path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(rel)
}

fn check(args: &[&str], files: &[PathBuf]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .args(["process", "check"])
        .args(args)
        .args(files)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
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
