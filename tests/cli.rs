//! The `agentpump` binary: `check` prints what a file is, or one precise error line and exit 1.

mod support;

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
