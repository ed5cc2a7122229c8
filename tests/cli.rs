//! The `agentpump` binary: `check` prints what a file is, or one precise error line and exit 1.

mod support;

/// Errors with a way forward (issue 47): each names what to do next.
#[path = "cli/errors_forward.rs"]
mod errors_forward;

use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn check(files: &[PathBuf]) -> (bool, String, String) {
    let mut args = vec!["check"];
    args.extend(files.iter().map(|f| f.to_str().expect("utf-8 path")));
    support::agentpump_in(std::path::Path::new(env!("CARGO_MANIFEST_DIR")), &args)
}

#[test]
fn check_describes_valid_envelopes_and_payloads() {
    let (ok, stdout, stderr) = check(&[
        fixture("envelope.xml"),
        fixture("agentserver.xml"),
        fixture("payload.xml"),
    ]);
    assert!(ok, "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].ends_with("Agentpump envelope, to calculator, thread (new), payload {urn:example:calc:v1}add (55 bytes)"), "{}", lines[0]);
    assert!(
        lines[1].contains(
            "AgentServer envelope, to calc, thread sess-1, payload {urn:example:calc:v1}add"
        ),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].ends_with("payload {urn:example:calc:v1}add (69 bytes)"),
        "{}",
        lines[2]
    );
}

#[test]
fn check_fails_with_one_precise_line() {
    let cases = [
        ("malformed.xml", "malformed XML at line 3, column"),
        (
            "doctype.xml",
            "DOCTYPE declarations are refused, found one at line 1, column 1",
        ),
        ("missing.xml", "No such file"),
    ];
    for (name, words) in cases {
        let (ok, stdout, stderr) = check(&[fixture(name)]);
        assert!(!ok, "{name} must fail");
        assert!(stdout.is_empty());
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("agentpump: ") && stderr.contains(name) && stderr.contains(words),
            "{stderr}"
        );
    }
}

#[test]
fn check_accepts_every_shipped_example() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("schemas/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "xml"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "{files:?}");
    let (ok, stdout, stderr) = check(&files);
    assert!(ok, "{stderr}");
    assert_eq!(stdout.lines().count(), files.len(), "{stdout}");
}

/// Reads a gzip-compressed JSON-lines archive back into records, line by line.
fn read_archive(path: &std::path::Path) -> Vec<agentpump::history::Record> {
    use std::io::Read as _;
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn history_export_then_prune_archives_what_goes_and_verify_shows_the_cut() {
    let dir = support::Scratch::new("cli-prune");
    let (halted, open, cut) = support::finished_and_open(&dir.db()).await;
    let (db, cut) = (dir.db(), agentpump::history::export::rfc3339(cut));
    let db = db.to_str().unwrap();
    let run = |args: &[&str]| support::agentpump_in(&dir.0, args);

    let (ok, stdout, stderr) = run(&[
        "history",
        "export",
        "--db",
        db,
        "--before",
        &cut,
        "--gzip",
        "--out",
        "export.jsonl.gz",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("exported 2 records of 1 threads"),
        "{stdout}"
    );
    let exported = read_archive(&dir.0.join("export.jsonl.gz"));
    assert!(exported.iter().all(|r| r.thread == halted), "{exported:#?}");
    assert_eq!(exported.len(), 2);

    let (ok, stdout, stderr) = run(&[
        "history",
        "prune",
        "--db",
        db,
        "--before",
        &cut,
        "--archive",
        "pruned.jsonl.gz",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("pruned 2 records of 1 threads before"),
        "{stdout}"
    );
    assert_eq!(
        read_archive(&dir.0.join("pruned.jsonl.gz")),
        exported,
        "the archive holds what went"
    );

    let (ok, stdout, stderr) = run(&["verify", "--db", db]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("every chain intact"), "{stdout}");
    assert!(stdout.contains(&format!("cut before {cut}")), "{stdout}");
    assert!(stdout.contains("2 records of 1 threads"), "{stdout}");

    // The pruned thread's transcript says where it starts.
    let (ok, stdout, stderr) = run(&["history", &halted.to_string(), "--db", db]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains(&format!(
            "[pruned: 2 records up to seq {}, accepted before {cut}",
            exported[1].seq
        )),
        "{stdout}"
    );
    // The open thread keeps its records; a second prune finds nothing.
    let (ok, stdout, _) = run(&[
        "history",
        &open.to_string(),
        "--db",
        db,
        "--format",
        "jsonl",
    ]);
    assert!(ok);
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    let (ok, stdout, stderr) = run(&["history", "prune", "--db", db, "--before", &cut]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("nothing to prune"), "{stdout}");
}

#[test]
fn history_prune_refuses_a_bad_cut_with_one_precise_error() {
    let dir = support::Scratch::new("cli-prune-args");
    let cases: [(&[&str], &str); 6] = [
        (&["--before", "2026-13-01"], "the month is not 01-12"),
        (&["--before", "last week"], "`last week` is not a date"),
        (&["--keep-days", "-3"], "'-3'"),
        (
            &["--before", "2026-01-01", "--keep-days", "3"],
            "cannot be used with",
        ),
        (&[], "--before <DATE>|--keep-days <N>"),
        (&["--keep-days", "3", "--archive", "a.gz"], "--db"),
    ];
    for (extra, words) in cases {
        let mut args = vec!["history", "prune"];
        args.extend_from_slice(extra);
        let (ok, stdout, stderr) = support::agentpump_in(&dir.0, &args);
        assert!(!ok, "{args:?} must fail");
        assert!(stdout.is_empty(), "{stdout}");
        let first = stderr.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("error: ") && stderr.contains(words),
            "{args:?}: {stderr}"
        );
    }
    let (ok, _, stderr) = support::agentpump_in(
        &dir.0,
        &["history", "prune", "--db", "missing.db", "--keep-days", "3"],
    );
    assert!(!ok);
    assert_eq!(stderr, "agentpump: missing.db: no such file\n");
}
