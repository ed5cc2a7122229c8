//! `agentpump demo`, tried as a new user would: it runs offline to completion, its halts carry
//! the certificates it promises, its database verifies, and every command it suggests works.

use std::process::Command;

fn agentpump(args: &[&str], dir: &std::path::Path) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn the_demo_runs_and_everything_it_suggests_works() {
    let dir = std::env::temp_dir().join(format!("agentpump-demo-{}", agentpump::ThreadId::new()));
    std::fs::create_dir_all(&dir).unwrap();
    // Twice: the second run replaces the first run's database.
    for _ in 0..2 {
        let (ok, out, err) = agentpump(&["demo"], &dir);
        assert!(ok, "{err}");
        for (class, reason, certificate) in [
            (
                "CONVERGED",
                "residual-below-r-p",
                "certificate CONVERGED (lane B)",
            ),
            ("EXACT", "all-criteria-met", "certificate EXACT (lane A)"),
            ("TIMEOUT", "max-turns", "certificate TIMEOUT (lane C)"),
            ("no-progress", "repeated-message", "no certificate"),
        ] {
            let line = out
                .lines()
                .skip_while(|l| !l.starts_with("Halts"))
                .find(|l| l.contains(class))
                .unwrap_or_else(|| panic!("no {class} halt in:\n{out}"));
            assert!(
                line.contains(reason) && line.contains(certificate),
                "{line}"
            );
        }
        assert!(out.contains("The planner collected: <collected xmlns=\"urn:agentpump:demo:v1\">50 ; 1.5 ; 0.3</collected>"), "{out}");
        assert_eq!(
            out.matches(".part").count(),
            3,
            "three children with carve-outs"
        );
        assert!(out.contains("Hash chains verified"));
    }
    let (_, out, _) = agentpump(&["demo"], &dir);
    let suggested: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Inspect it yourself:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.trim().strip_prefix("agentpump "))
        .collect();
    assert_eq!(suggested.len(), 5, "{out}");
    // The viewer is suggested apart: it serves until stopped (tests/viewer.rs runs it).
    assert!(
        out.contains("\n  agentpump view --db agentpump-demo.db\n"),
        "{out}"
    );
    for command in suggested {
        let args: Vec<&str> = command.split_whitespace().collect();
        let (ok, out, err) = agentpump(&args, &dir);
        assert!(ok, "agentpump {command}: {err}");
        assert!(!out.is_empty(), "agentpump {command} printed nothing");
    }
    let (ok, out, _) = agentpump(&["verify", "--db", "agentpump-demo.db"], &dir);
    assert!(ok && out.contains("every chain intact"));
    // The demo replaces its own history, never a file that is not one.
    std::fs::write(dir.join("notes.txt"), "my notes").unwrap();
    let (ok, _, err) = agentpump(&["demo", "--db", "notes.txt"], &dir);
    assert!(!ok && err.contains("not an agentpump database"), "{err}");
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "my notes"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
