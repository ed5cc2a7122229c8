//! The inspection commands on a history file, and the exports at scale: a 10 000-iteration
//! thread and a 1 000-thread spawn tree read back complete and in order through every format.

mod support;

/// Search for text inside payloads, through the API and the CLI, on every store (issue 47).
#[path = "inspect/search.rs"]
mod search;

/// The whole history as data (`history --all`) and what `history export` selects (issue 47).
#[path = "inspect/history_all.rs"]
mod history_all;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use agentpump::governor::{Budget, GovernorPolicy, HaltingReport};
use agentpump::history::{Durability, Record, SqliteHistory, SqliteOptions, export};
use agentpump::system::Spawn;
use agentpump::{
    Incoming, Limits, PumpBuilder, PumpConfig, PumpHandle, Registration, Role, ThreadId,
};
use support::{Scratch, Script, p, q, start};

fn run(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Counts to the number in `<count to="N">` by messaging itself; spawns N children on `<fan>`.
fn worker() -> Registration {
    Registration::new(
        "worker",
        Script::new(|msg, cx| {
            if msg.is_system() {
                return Ok(());
            }
            let t = msg.payload().as_str();
            let text = &t[t.find('>').unwrap() + 1..t.rfind("</").unwrap_or(t.len())];
            match msg.qname().local() {
                "count" => {
                    let (n, to): (u64, u64) = {
                        let (n, to) = text.split_once('/').unwrap();
                        (n.parse().unwrap(), to.parse().unwrap())
                    };
                    if n < to {
                        cx.emit(p("count", &format!("{}/{to}", n + 1)));
                    }
                }
                "fan" => {
                    for i in 0..text.parse::<u64>().unwrap() {
                        cx.spawn(Spawn::new(p("leaf", &i.to_string())).sub_id(format!("leaf{i}")));
                    }
                }
                "leaf" => cx.done(p("leafdone", text)),
                "aim" => cx.goal(&agentpump::governor::Goal {
                    text: text.to_owned(),
                    certificates: vec![agentpump::governor::CertificateType::Exact],
                    ..Default::default()
                }),
                _ => {}
            }
            Ok(())
        }),
    )
    .accepts(q("count"))
    .accepts(q("fan"))
    .accepts(q("leaf"))
    .accepts(q("aim"))
    .role(Role::Agent)
}

fn pump_on(db: &Path, budget: Budget) -> PumpHandle {
    let options = SqliteOptions {
        durability: Durability::Normal,
        ..SqliteOptions::default()
    };
    let store = Arc::new(SqliteHistory::open_with(db, options).unwrap());
    let governor = GovernorPolicy {
        budget,
        ..GovernorPolicy::default()
    };
    let limits = Limits {
        max_outputs: 1000,
        ..Limits::default()
    };
    PumpBuilder::new()
        .history(store)
        .config(PumpConfig {
            governor,
            limits,
            ..PumpConfig::default()
        })
        .register(worker())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_commands_read_a_history_file() {
    let dir = Scratch::new("inspect");
    let db = dir.db();
    let (root, halted) = {
        let pump = pump_on(
            &db,
            Budget {
                turns: Some(50),
                ..GovernorPolicy::default_budget()
            },
        );
        let root = start(&pump, &p("fan", "3")).await;
        let halted = start(&pump, &p("count", "1/1000")).await;
        start(&pump, &p("aim", "reach the aim")).await;
        pump.shutdown(std::time::Duration::from_secs(5)).await;
        (root, halted)
    };
    let db_arg = db.to_str().unwrap();

    let (ok, out, err) = run(&["threads", "--db", db_arg]);
    assert!(ok, "{err}");
    assert!(
        out.contains(&root.to_string()) && out.contains(".leaf2"),
        "{out}"
    );
    assert!(
        out.trim_end()
            .ends_with("threads: 3 done, 1 halted, 3 idle"),
        "{out}"
    );
    let (_, out, _) = run(&[
        "threads", "--db", db_arg, "--state", "halted", "--format", "json",
    ]);
    let listed: Vec<agentpump::ThreadInfo> = serde_json::from_str(&out).unwrap();
    assert_eq!(listed.iter().map(|t| t.id).collect::<Vec<_>>(), [halted]);

    let (ok, out, err) = run(&["history", &root.to_string(), "--db", db_arg, "--tree"]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!("== thread {}", &root.to_string()[..8])),
        "{out}"
    );
    assert_eq!(
        out.matches("\n  == thread ").count(),
        3,
        "three children, indented: {out}"
    );
    assert!(
        out.contains("client -> worker")
            && out.contains("<leafdone xmlns=\"urn:test:v1\">2</leafdone>")
    );
    let (_, out, _) = run(&["history", &halted.to_string(), "--db", db_arg]);
    assert!(
        out.contains("[HALT]") && out.contains("reason=\"max-turns\""),
        "{out}"
    );

    let (ok, out, err) = run(&["report", &halted.to_string(), "--db", db_arg]);
    assert!(ok, "{err}");
    // Always an array, oldest first, even for one halt.
    let reports: Vec<HaltingReport> = serde_json::from_str(&out).unwrap();
    assert_eq!(reports.len(), 1, "{out}");
    assert_eq!(
        (reports[0].class.as_str(), reports[0].thread),
        ("TIMEOUT", halted)
    );
    let (_, table, _) = run(&["threads", "--db", db_arg]);
    let row = table
        .lines()
        .find(|l| l.contains(&halted.to_string()))
        .unwrap();
    assert!(
        table.starts_with("ID ") && row.contains("TIMEOUT"),
        "{table}"
    );
    // A thread that has not halted shows the goal it declared.
    let aiming = table
        .lines()
        .find(|l| l.contains(" idle ") && l.contains("reach the aim"));
    assert!(aiming.is_some(), "{table}");

    let (ok, out, _) = run(&["verify", "--db", db_arg]);
    assert!(
        ok && out.contains("records verified, every chain intact"),
        "{out}"
    );

    // Errors: one precise line, non-zero exit.
    let text_file = dir.0.join("notes.txt");
    std::fs::write(&text_file, "x".repeat(200)).unwrap();
    let unknown = ThreadId::new().to_string();
    let root_text = root.to_string();
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["threads", "--db", "/nonexistent/history.db"],
            "/nonexistent/history.db: no such file".into(),
        ),
        (
            vec!["threads", "--db", text_file.to_str().unwrap()],
            "not an agentpump database".into(),
        ),
        (
            vec!["history", "nope", "--db", db_arg],
            "`nope` is not a thread id".into(),
        ),
        (
            vec!["history", &unknown, "--db", db_arg],
            format!("no thread {unknown} in"),
        ),
        (
            vec!["report", &root_text, "--db", db_arg],
            "has no halting report: it is idle".into(),
        ),
    ];
    for (args, words) in cases {
        let (ok, out, err) = run(&args);
        assert!(!ok && out.is_empty(), "{args:?}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("agentpump: ") && err.contains(&words),
            "{args:?}: {err}"
        );
    }

    // A newer schema is refused, and a tampered record makes verify fail naming it.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let seq: i64 = conn
        .query_row(
            "SELECT max(seq) FROM records WHERE thread = ?1",
            [root.to_string()],
            |r| r.get(0),
        )
        .unwrap();
    conn.execute(
        "UPDATE records SET sender = 'mallory' WHERE seq = ?1",
        [seq],
    )
    .unwrap();
    let (ok, _, err) = run(&["verify", "--db", db_arg]);
    assert!(
        !ok && err.contains(&format!("hash chain of thread {root} breaks at seq {seq}")),
        "{err}"
    );
    conn.execute(
        "UPDATE meta SET value = '5' WHERE key = 'schema_version'",
        [],
    )
    .unwrap();
    let (ok, _, err) = run(&["threads", "--db", db_arg]);
    assert!(
        !ok && err
            .contains("database schema version 5 is newer than this agentpump understands (4)"),
        "{err}"
    );
    conn.execute(
        "UPDATE meta SET value = '4' WHERE key = 'schema_version'",
        [],
    )
    .unwrap();

    // A database another process holds locked.
    conn.execute_batch(
        "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE; UPDATE meta SET value = value;",
    )
    .unwrap();
    let (ok, _, err) = run(&["threads", "--db", db_arg]);
    assert!(!ok && err.contains("database is locked"), "{err}");
    conn.execute_batch("COMMIT;").unwrap();
}

fn check_exports(records: &[Record], thread_of: impl Fn(&Record) -> bool) {
    assert!(records.windows(2).all(|w| w[0].seq < w[1].seq), "in order");
    assert!(records.iter().all(thread_of));
    let lines: Vec<Record> = export::to_jsonl(records)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines, records);
    let xml = export::to_xml(records);
    // Well-formed, and every envelope parses back with the codec to the same payload.
    let mut reader = quick_xml::Reader::from_str(&xml);
    let mut envelopes = Vec::new();
    loop {
        match reader.read_event().unwrap() {
            quick_xml::events::Event::Start(e) if e.name().as_ref() == "record" => {
                let span = reader.read_to_end(e.name()).unwrap();
                envelopes.push(&xml[span.start as usize..span.end as usize]);
            }
            quick_xml::events::Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(envelopes.len(), records.len());
    for (env, r) in envelopes.iter().zip(records) {
        let back = Incoming::parse(env.as_bytes(), &Limits::default()).unwrap();
        assert_eq!(
            (back.payload().as_str(), back.thread()),
            (&*r.payload, Some(r.thread.to_string().as_str()))
        );
    }
    assert_eq!(
        export::transcript(records, 0).matches(" -> ").count(),
        records.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_threads_and_big_trees_read_back_complete_through_every_format() {
    let dir = Scratch::new("inspect");
    let pump = pump_on(&dir.db(), Budget::unlimited());
    let long = start(&pump, &p("count", "1/10000")).await;
    let tree = start(&pump, &p("fan", "1000")).await;
    let history = pump.history(long).await.unwrap();
    assert_eq!(history.len(), 10_000);
    check_exports(&history, |r| r.thread == long);
    let threads = pump.tree(tree);
    assert_eq!(threads.len(), 1001);
    let mut all = Vec::new();
    for t in &threads {
        let records = pump.history(t.id).await.unwrap();
        assert!(!records.is_empty());
        all.extend(records);
    }
    all.sort_by_key(|r| r.seq);
    assert_eq!(
        all.iter()
            .filter(|r| r.root.local() == "thread-result")
            .count(),
        1000
    );
    let ids: std::collections::HashSet<ThreadId> = threads.iter().map(|t| t.id).collect();
    check_exports(&all, |r| ids.contains(&r.thread));
    // And through the binary, the same counts.
    drop(pump);
    let (ok, out, err) = run(&[
        "history",
        &tree.to_string(),
        "--db",
        dir.db().to_str().unwrap(),
        "--tree",
        "--format",
        "jsonl",
    ]);
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), all.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_are_named_by_a_unique_prefix_or_a_displayed_path() {
    let dir = Scratch::new("inspect");
    let db = dir.db();
    // 21 threads and the system thread: more than 16, so two ids share a first hex digit.
    let root = {
        let pump = pump_on(&db, Budget::unlimited());
        let root = start(&pump, &p("fan", "20")).await;
        pump.shutdown(std::time::Duration::from_secs(5)).await;
        root
    };
    let db_arg = db.to_str().unwrap();
    let full = root.to_string();
    let short = &full[..8];

    let (ok, out, err) = run(&["history", short, "--db", db_arg]);
    assert!(ok, "{err}");
    assert!(out.starts_with(&format!("== thread {short} ")), "{out}");
    let (ok, out, err) = run(&["history", &format!("{short}.leaf7"), "--db", db_arg]);
    assert!(ok, "{err}");
    assert!(
        out.starts_with(&format!("== thread {short}.leaf7 ")) && out.contains(">7</leafdone>"),
        "{out}"
    );
    let (ok, out, err) = run(&["history", &short.to_uppercase(), "--db", db_arg, "--tree"]);
    assert!(ok && out.matches("== thread ").count() == 21, "{err}");

    // An ambiguous prefix names every thread it matches; the exit is non-zero.
    let (_, json, _) = run(&["threads", "--db", db_arg, "--format", "json"]);
    let listed: Vec<agentpump::ThreadInfo> = serde_json::from_str(&json).unwrap();
    let ids: Vec<String> = listed.iter().map(|t| t.id.to_string()).collect();
    let digit = (0..16)
        .map(|d| format!("{d:x}"))
        .find(|d| ids.iter().filter(|id| id.starts_with(d.as_str())).count() >= 2)
        .unwrap();
    let matching: Vec<&String> = ids.iter().filter(|id| id.starts_with(&digit)).collect();
    let (ok, out, err) = run(&["report", &digit, "--db", db_arg]);
    assert!(!ok && out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("`{digit}` matches {} threads", matching.len()))
            && matching.iter().all(|id| err.contains(id.as_str())),
        "{err}"
    );
    let (ok, _, err) = run(&["history", &format!("{short}.nope"), "--db", db_arg]);
    assert!(
        !ok && err.contains(&format!("no thread matches `{short}.nope`")),
        "{err}"
    );
}

/// Issue 35: "`agentpump verify` … work[s] against" a history that is not a local file: `verify
/// --url` reads every thread's records from a running host and recomputes each chain itself,
/// so a record altered under the host is named, as `--db` names it.
#[cfg(feature = "host")]
#[test]
fn verify_over_http_recomputes_every_chain_and_names_an_altered_record() {
    let dir = Scratch::new("verify-url");
    std::fs::write(
        dir.0.join("organism.toml"),
        "[[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\naccepts = [\"{urn:example:say:v1}say\"]\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .args(["run", "organism.toml", "--port", "0"])
        .current_dir(&dir.0)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let base = support::listening_on(&lines.next().unwrap().unwrap());
    let token = support::token_in(&dir.0);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (stopped, thread): (ThreadId, ThreadId) = runtime.block_on(async {
        let http = support::http_client();
        let mut posted_ids = Vec::new();
        for i in 0..3 {
            let posted = support::json(
                http.post(format!("{base}/threads?to=echo"))
                    .bearer_auth(&token)
                    .body(format!(r#"<say xmlns="urn:example:say:v1">{i}</say>"#)),
            )
            .await;
            posted_ids.push(posted["thread"].as_str().unwrap().parse().unwrap());
        }
        // One halt, for `--certificates` to re-derive.
        let stop = http
            .post(format!("{base}/threads/{}/stop", posted_ids[0]))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        assert_eq!(stop.status().as_u16(), 202);
        (posted_ids[0], posted_ids[2])
    });
    let verify = |extra: &[&str]| {
        let mut args = vec!["verify", "--url", &base, "--token", &token];
        args.extend_from_slice(extra);
        run(&args)
    };
    let (ok, out, err) = verify(&[]);
    assert!(ok, "{err}");
    assert!(
        out.contains(&format!("{base}: ")) && out.contains("threads verified, every chain intact"),
        "{out}"
    );
    // `--certificates` re-derives every halt from the records the API serves, read twice.
    let (ok, out, err) = verify(&["--certificates"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("1 halts re-derived from the history, every certificate agrees"),
        "{out}"
    );

    let conn = rusqlite::Connection::open(dir.0.join("agentpump.db")).unwrap();
    // A report that claims another class than its records earn is named.
    conn.execute(
        "UPDATE reports SET json = replace(json, '\"class\":\"BACKPRESSURE\"', '\"class\":\"CONVERGED\"') WHERE thread = ?1",
        [stopped.to_string()],
    )
    .unwrap();
    let (ok, _, err) = verify(&["--certificates"]);
    assert!(
        !ok && err.contains(&format!("thread {stopped}"))
            && err.contains("not what the history supports"),
        "{err}"
    );
    let seq: i64 = conn
        .query_row(
            "SELECT min(seq) FROM records WHERE thread = ?1",
            [thread.to_string()],
            |r| r.get(0),
        )
        .unwrap();
    let last: i64 = conn
        .query_row(
            "SELECT max(seq) FROM records WHERE thread = ?1",
            [thread.to_string()],
            |r| r.get(0),
        )
        .unwrap();
    assert!(last > seq, "the echo answered");
    conn.execute(
        "UPDATE records SET sender = 'mallory' WHERE seq = ?1",
        [last],
    )
    .unwrap();
    let (ok, _, err) = verify(&[]);
    assert!(
        !ok && err.contains(&format!(
            "hash chain of thread {thread} breaks at seq {last}"
        )),
        "{err}"
    );
    // A thread's first record altered looks, from outside, like a pruned thread's (it chains
    // from something not served): the host's own check decides, and names the break.
    conn.execute(
        "UPDATE records SET sender = 'mallory' WHERE seq = ?1",
        [seq],
    )
    .unwrap();
    let (ok, _, err) = verify(&[]);
    assert!(
        !ok && err.contains(&format!("breaks at seq {seq}"))
            && err.contains("the host's own check"),
        "{err}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// The CLI against a host whose partition is changing hands: a read answered `502` (the
/// writer did not answer) is asked again, a write is not (it may have reached the writer).
#[test]
fn a_read_answered_502_is_asked_again_and_a_write_is_not() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (gets, posts) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let base = runtime.block_on(async {
        let (g, w) = (Arc::clone(&gets), Arc::clone(&posts));
        let gateway = || {
            (
                axum::http::StatusCode::BAD_GATEWAY,
                [("content-type", "application/problem+json")],
                r#"{"type":"urn:agentpump:problem:writer-unreachable","status":502,"detail":"the writer did not answer","code":"writer-unreachable"}"#,
            )
        };
        let app = axum::Router::new().route(
            "/threads",
            axum::routing::get(move || async move {
                // The first read finds the partition changing hands; the next its new writer.
                if g.fetch_add(1, Ordering::SeqCst) == 0 {
                    axum::response::IntoResponse::into_response(gateway())
                } else {
                    axum::response::IntoResponse::into_response(axum::Json(serde_json::json!([])))
                }
            })
            .post(move || async move {
                w.fetch_add(1, Ordering::SeqCst);
                gateway()
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        base
    });
    let (ok, out, err) = run(&["verify", "--url", &base, "--token", "t"]);
    assert!(ok, "{err}");
    assert!(out.contains("0 records of 0 threads verified"), "{out}");
    assert_eq!(gets.load(Ordering::SeqCst), 2);
    let dir = Scratch::new("cli-502");
    let file = dir.write("say.xml", r#"<say xmlns="urn:example:say:v1">once</say>"#);
    let file = file.to_str().unwrap();
    let (ok, _, err) = run(&["send", file, "--url", &base, "--token", "t"]);
    assert!(!ok && err.contains("writer-unreachable"), "{err}");
    assert_eq!(posts.load(Ordering::SeqCst), 1, "a write is sent once");
    drop(runtime);
}
