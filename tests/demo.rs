//! `agentpump demo`, tried as a new user would: it runs offline to completion, its halts carry
//! the certificates it promises, its database verifies, and every command it suggests works.

mod support;

fn agentpump(args: &[&str], dir: &std::path::Path) -> (bool, String, String) {
    support::agentpump_in(dir, args)
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
        // The planner process's RETURN: the three parts in lexical order, and their sum.
        let returned = out
            .lines()
            .find_map(|l| l.strip_prefix("The planner process returned: "))
            .unwrap_or_else(|| panic!("no planner RETURN in:\n{out}"));
        for field in [
            r#"<field name="parts" type="json">[50,1.5,0.3]</field>"#,
            r#"<field name="total" type="number">51.8</field>"#,
        ] {
            assert!(returned.contains(field), "{returned}");
        }
        assert_eq!(
            out.matches(".planner-").count(),
            3,
            "three worker child threads"
        );
        assert!(out.contains("Hash chains verified"));
    }
    let (_, out, _) = agentpump(&["demo"], &dir);
    // The count the demo prints is the count `verify` prints: shutdown records included.
    let printed = out
        .lines()
        .find_map(|l| l.strip_prefix("Hash chains verified: "))
        .and_then(|l| l.strip_suffix(" records."))
        .unwrap_or_else(|| panic!("no count in:\n{out}"))
        .to_owned();
    let (_, verified, _) = agentpump(&["verify", "--db", "agentpump-demo.db"], &dir);
    assert!(
        verified.contains(&format!(": {printed} records verified")),
        "demo says {printed}, verify says {verified}"
    );
    // A root that stays idle says why.
    let idle: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Thread tree:"))
        .take_while(|l| !l.is_empty())
        .filter(|l| l.contains(" idle "))
        .collect();
    assert!(
        !idle.is_empty() && idle.iter().all(|l| l.contains("open for more input")),
        "{idle:?}"
    );
    // Finished threads get no shutdown notices; the pump's thread says nothing was left.
    let (ok, system, err) = agentpump(&["history", "system", "--db", "agentpump-demo.db"], &dir);
    assert!(ok, "{err}");
    assert!(system.contains("undelivered=\"0\""), "{system}");
    let (_, json, _) = agentpump(
        &["threads", "--db", "agentpump-demo.db", "--format", "json"],
        &dir,
    );
    let threads: Vec<agentpump::ThreadInfo> = serde_json::from_str(&json).unwrap();
    for t in threads.iter().filter(|t| t.state.is_closed()) {
        let (_, history, _) = agentpump(
            &["history", &t.id.to_string(), "--db", "agentpump-demo.db"],
            &dir,
        );
        assert!(!history.contains("shutting-down"), "{}: {history}", t.path);
    }
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
    // Not even with a `-wal` beside it (an empty file, a text file), or a `-wal` alone: every
    // file is left exactly as it was, and nothing is added.
    for (main, wal) in [
        (Some("my notes"), "not a wal"),
        (Some(""), "not a wal"),
        (None, "an orphan wal"),
    ] {
        let name = format!("other-{}.db", agentpump::ThreadId::new());
        if let Some(text) = main {
            std::fs::write(dir.join(&name), text).unwrap();
        }
        std::fs::write(dir.join(format!("{name}-wal")), wal).unwrap();
        let (ok, _, err) = agentpump(&["demo", "--db", &name], &dir);
        assert!(
            !ok && err.contains("the demo replaces only an agentpump history"),
            "{err}"
        );
        if let Some(text) = main {
            assert_eq!(std::fs::read_to_string(dir.join(&name)).unwrap(), text);
        }
        assert!(
            !dir.join(&name).exists() || main.is_some(),
            "{name} was created"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join(format!("{name}-wal"))).unwrap(),
            wal
        );
        assert!(
            !dir.join(format!("{name}-shm")).exists(),
            "{name}-shm was created"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The number in `agentpump verify`'s line (`FILE: N records verified, …`).
fn verified_records(out: &str) -> u64 {
    out.split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no record count in {out}"))
}

#[test]
fn the_demo_database_is_one_self_contained_file_after_it_exits() {
    let dir = std::env::temp_dir().join(format!("agentpump-demo-{}", agentpump::ThreadId::new()));
    let copy = dir.join("copy");
    std::fs::create_dir_all(&copy).unwrap();
    let (ok, _, err) = agentpump(&["demo", "--db", "x.db"], &dir);
    assert!(ok, "{err}");
    let (ok, out, err) = agentpump(&["verify", "--db", "x.db"], &dir);
    assert!(ok, "{err}");
    let records = verified_records(&out);
    assert!(records > 50, "{out}");
    let wal = dir.join("x.db-wal");
    assert!(
        !wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0,
        "a non-empty write-ahead log is left behind"
    );
    // A user copies only the database file.
    std::fs::copy(dir.join("x.db"), copy.join("copy.db")).unwrap();
    let (ok, out, err) = agentpump(&["verify", "--db", "copy.db"], &copy);
    assert!(ok, "{err}");
    assert_eq!(verified_records(&out), records, "{out}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Issue 13, case 16: "`agentpump verify --certificates` re-derives every halt from the recorded
/// history … and compares it with the stored report: exit 0 on the demo database, non-zero naming
/// the thread after a report is edited."
#[test]
fn verify_certificates_rederives_every_halt_and_catches_an_edited_report() {
    let dir = std::env::temp_dir().join(format!("agentpump-certs-{}", agentpump::ThreadId::new()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ok, _, err) = agentpump(&["demo"], &dir);
    assert!(ok, "{err}");
    let args = ["verify", "--db", "agentpump-demo.db", "--certificates"];
    let (ok, out, err) = agentpump(&args, &dir);
    assert!(ok, "{err}");
    assert!(
        out.contains("halts re-derived from the history, every certificate agrees")
            && out.contains("replayed twice to the same certificate: each halt's class and certificate follow from its recorded messages alone")
            && out.contains("(phuc-loop's verification rung 274177: at least 2 replays produce the same certificate)")
            && !out.contains("rung 274177 achieved"),
        "{out}"
    );
    // Someone turns the runaway's TIMEOUT into a CONVERGED in the stored report.
    let db = rusqlite::Connection::open(dir.join("agentpump-demo.db")).unwrap();
    let (thread, json): (String, String) = db
        .query_row(
            "SELECT thread, json FROM reports WHERE json LIKE '%\"stop_reason\":\"max-turns\"%' LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let edited = json.replace("\"EXIT_BUDGET_EXCEEDED\"", "\"EXIT_CONVERGED\"");
    assert_ne!(edited, json);
    db.execute(
        "UPDATE reports SET json = ?1 WHERE thread = ?2",
        [&edited, &thread],
    )
    .unwrap();
    drop(db);
    let (ok, _, err) = agentpump(&args, &dir);
    assert!(!ok, "an edited report must fail the check");
    assert!(err.contains(&format!("thread {thread}")), "{err}");
    assert!(err.contains("digest differs"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 36, done when: "`agentpump demo` runs one phuc-loop (scripted roles, offline) and
/// prints its AGENTS.md and certificate".
#[test]
fn the_demo_runs_a_phuc_loop_and_prints_its_agents_md_and_certificate() {
    let dir = std::env::temp_dir().join(format!("agentpump-demo-{}", agentpump::ThreadId::new()));
    std::fs::create_dir_all(&dir).unwrap();
    let (ok, out, err) = agentpump(&["demo"], &dir);
    assert!(ok, "{err}");
    let md = std::fs::read_to_string(dir.join("agentpump-demo-loop/AGENTS.md")).unwrap();
    let shown: String = out
        .lines()
        .skip_while(|l| !l.starts_with("The phuc-loop's agentpump-demo-loop/AGENTS.md"))
        .skip(2)
        .take_while(|l| !l.starts_with("The phuc-loop's halting certificate"))
        .map(|l| format!("{}\n", l.strip_prefix("  ").unwrap_or(l)))
        .collect();
    assert_eq!(
        shown.trim_end(),
        md.trim_end(),
        "the printed AGENTS.md is the file"
    );
    assert!(
        md.contains("- goal: approximate √2 by Newton steps"),
        "{md}"
    );
    assert!(
        md.contains("## Iteration 2") && !md.contains("## Iteration 3"),
        "three Newton steps reach |x² − 2| < 0.0001: {md}\n{out}"
    );
    assert!(
        md.contains("- direction: IMPROVING\n- certificate: CONVERGED"),
        "{md}"
    );
    let certificate: String = out
        .lines()
        .skip_while(|l| !l.starts_with("The phuc-loop's halting certificate"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert!(certificate.contains("\"CONVERGED\""), "{certificate}");
    assert!(
        certificate.contains("\"0.25\"") && certificate.contains("\"0.000006007306\""),
        "the residuals as decimal strings: {certificate}"
    );
    // The demo replaces its own loop workspace, never a folder that is not one.
    let (ok, _, err) = agentpump(&["demo"], &dir);
    assert!(ok, "a second run replaces the workspace: {err}");
    std::fs::remove_dir_all(dir.join("agentpump-demo-loop")).unwrap();
    std::fs::create_dir_all(dir.join("agentpump-demo-loop")).unwrap();
    std::fs::write(dir.join("agentpump-demo-loop/mine.txt"), "mine").unwrap();
    let (ok, _, err) = agentpump(&["demo"], &dir);
    assert!(!ok && err.contains("is not a phuc-loop workspace"), "{err}");
    assert!(dir.join("agentpump-demo-loop/mine.txt").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// "the demo includes a thread that waits for approval (and `agentpump demo` answers it itself
/// after printing the request, so the demo stays offline and finishes)".
#[test]
fn the_demo_prints_a_request_for_approval_and_approves_it_itself() {
    let dir = support::Scratch::new("demo-approval");
    let (ok, out, err) = agentpump(&["demo", "--db", "demo.db"], &dir.0);
    assert!(ok, "{err}");
    let shown = &out[out.find("A thread that waits for a person").expect(&out)..];
    let request = shown
        .lines()
        .find_map(|l| l.trim().strip_prefix("inbox: "))
        .unwrap_or_else(|| panic!("no request printed: {shown}"));
    let id = request.split_whitespace().next().unwrap();
    assert!(
        request.contains("call `command`") && request.contains("state waiting"),
        "{request}"
    );
    assert!(
        shown.contains(&format!("agentpump answer {id} --approve")),
        "{shown}"
    );
    assert!(
        shown.contains("deploying v1.2"),
        "the approved command ran: {shown}"
    );
    // Answered once, by the demo, and nothing is left open.
    let (ok, out, err) = agentpump(&["inbox", "--db", "demo.db"], &dir.0);
    assert!(ok && out == "no open requests\n", "{out}{err}");
    let (_, threads, _) = agentpump(&["threads", "--db", "demo.db", "--format", "json"], &dir.0);
    let threads: Vec<serde_json::Value> = serde_json::from_str(&threads).unwrap();
    let waited = threads
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .find(|t| {
            let (_, history, _) = agentpump(
                &["history", t, "--db", "demo.db", "--format", "json"],
                &dir.0,
            );
            history.contains(id)
        })
        .expect("the thread that waited");
    let (_, history, _) = agentpump(
        &["history", waited, "--db", "demo.db", "--format", "json"],
        &dir.0,
    );
    let records: Vec<serde_json::Value> = serde_json::from_str(&history).unwrap();
    let answers: Vec<&str> = records
        .iter()
        .filter(|r| r["root"].as_str().unwrap().ends_with("}answer"))
        .map(|r| r["payload"].as_str().unwrap())
        .collect();
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert!(
        answers[0].contains("&quot;by&quot;:&quot;demo&quot;")
            || answers[0].contains(r#""by":"demo""#),
        "{}",
        answers[0]
    );
}

/// Issue 30, done when: "the demo gains one MCP tool used by a process (no network)".
#[test]
fn the_demo_runs_a_process_that_uses_a_tool_of_its_mcp_server() {
    let dir = support::Scratch::new("demo-mcp");
    let (ok, out, err) = agentpump(&["demo", "--db", "demo.db"], &dir.0);
    assert!(ok, "{err}");
    let (line, _, _) = agentpump::host::demo::STARTS[6];
    let short = out
        .lines()
        .find(|l| l.ends_with(line))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("the MCP thread is not listed:\n{out}"))
        .to_owned();
    // The transcript shows the call to the MCP tool, its answer and what the process returned.
    let shown = &out[out.find("Transcript of the MCP thread").expect(&out)..];
    for expected in [
        r#"distance -> units.convert"#,
        r#"<arg name="value" type="number">42.195</arg>"#,
        "units.convert -> distance",
        r#"<field name="text">42.195 km = 26.218757 mi</field>"#,
        r#"<field name="miles" type="number">26.218757</field>"#,
    ] {
        assert!(shown.contains(expected), "{expected} in:\n{shown}");
    }
    // The same records are in the history file, and it verifies.
    let (ok, history, err) = agentpump(
        &["history", &short, "--db", "demo.db", "--format", "json"],
        &dir.0,
    );
    assert!(ok, "{err}");
    let records: Vec<serde_json::Value> = serde_json::from_str(&history).unwrap();
    let crossing: Vec<String> = records
        .iter()
        .filter(|r| r["from"] == "units.convert" || r["to"] == "units.convert")
        .map(|r| r["root"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        crossing,
        [
            "{urn:agentpump:tool:v1}call",
            "{urn:agentpump:tool:v1}result"
        ]
    );
    let (ok, out, err) = agentpump(&["verify", "--db", "demo.db"], &dir.0);
    assert!(ok, "{out}{err}");
}
