//! Replay from any record (issue 33): `PumpHandle::fork` starts a new thread from a record of
//! an old one, with the history before it as context (or the same first message), optionally
//! another listener or budget; the fork's first record names what it was forked from.

mod support;

use std::sync::Arc;

use agentpump::governor::{Budget, ForkMode};
use agentpump::history::{HistoryStore, RecordKind, SqliteHistory};
use agentpump::listeners::Echo;
use agentpump::pump::{ForkError, ForkOptions};
use agentpump::{PumpBuilder, PumpHandle, Registration, ThreadId};
use support::{Script, p, q};

/// `echo` answers a `say` with itself; `shout` answers it in capitals.
fn pump_on(store: Option<Arc<dyn HistoryStore>>) -> PumpHandle {
    let shout = Script::new(|msg, cx| {
        cx.reply(p("say", &support::body(msg).to_uppercase()));
        Ok(())
    });
    let mut builder = PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .register(Registration::new("shout", shout).accepts(q("say")));
    if let Some(store) = store {
        builder = builder.history(store);
    }
    builder.build().unwrap()
}

/// A thread of two exchanges with `echo`: say one, its echo, say two, its echo. Returns it and
/// the seq of "say two".
async fn conversation(pump: &PumpHandle) -> (ThreadId, u64) {
    let thread = pump
        .post(None, Some("echo"), &p("say", "one"))
        .await
        .unwrap()
        .thread();
    pump.settle(thread).await;
    pump.post(Some(thread), Some("echo"), &p("say", "two"))
        .await
        .unwrap();
    pump.settle(thread).await;
    let records = pump.history(thread).await.unwrap();
    let two = records.iter().find(|r| r.payload.contains("two")).unwrap();
    (thread, two.seq)
}

/// "Replay: start a new thread from any record of an old one — the history up to that record
/// as its context … The hash chain makes the fork provable: the new thread records what it was
/// forked from."
#[tokio::test]
async fn a_fork_in_context_mode_carries_the_history_and_delivers_the_record_again() {
    let pump = pump_on(None);
    let (old, at) = conversation(&pump).await;
    let source = pump.history(old).await.unwrap();
    let fork = pump.fork(old, at, ForkOptions::default()).await.unwrap();
    pump.settle(fork).await;
    let records = pump.history(fork).await.unwrap();
    let chosen = source.iter().find(|r| r.seq == at).unwrap();
    let decision = &records[0];
    assert_eq!(decision.kind, RecordKind::Decision);
    for named in [
        format!("action=\"fork\" source=\"{old}\" at=\"{at}\""),
        format!("digest=\"{}\"", hex::encode(chosen.digest)),
        "mode=\"context\"".to_owned(),
    ] {
        assert!(
            decision.payload.contains(&named),
            "{named} in {}",
            decision.payload
        );
    }
    // Context: the first exchange, copied under new ids, its answer still answering it.
    let before: Vec<_> = source.iter().filter(|r| r.seq < at).collect();
    assert_eq!(before.len(), 2);
    for (copy, original) in records[1..3].iter().zip(&before) {
        assert_eq!(
            (copy.kind, &copy.from, &copy.to, &copy.payload),
            (
                original.kind,
                &original.from,
                &original.to,
                &original.payload
            )
        );
        assert_ne!(copy.id, original.id);
    }
    assert_eq!(records[2].in_reply_to, Some(records[1].id));
    // Not re-run: only "two" is delivered again, and echoed once.
    assert_eq!(records[3].payload, chosen.payload);
    assert_eq!(records[3].to.as_deref(), Some("echo"));
    assert_eq!(records.len(), 5, "{records:#?}");
    assert_eq!(records[4].payload, chosen.payload);
    assert_eq!(pump.thread(fork).unwrap().counters.deliveries, 1);
    pump.verify().await.unwrap();
}

/// "… optionally with a different listener or budget"
#[tokio::test]
async fn a_fork_goes_to_the_listener_and_budget_given() {
    let pump = pump_on(None);
    let (old, at) = conversation(&pump).await;
    let options = ForkOptions {
        listener: Some("shout".into()),
        budget: Some(Budget {
            turns: Some(7),
            ..Budget::unlimited()
        }),
        ..ForkOptions::default()
    };
    let fork = pump.fork(old, at, options).await.unwrap();
    pump.settle(fork).await;
    let records = pump.history(fork).await.unwrap();
    let answer = records.last().unwrap();
    assert_eq!(
        (&*answer.from, answer.payload.as_ref()),
        ("shout", &*p("say", "TWO"))
    );
    let turns = &pump.budget(fork).unwrap()["max-turns"];
    assert_eq!(turns.limit.as_deref(), Some("7"));
    assert!(
        records[0].payload.contains("turns=\"7\""),
        "{}",
        records[0].payload
    );
}

/// "(or the same first message)"
#[tokio::test]
async fn a_fork_in_first_message_mode_posts_the_first_message_again_without_context() {
    let pump = pump_on(None);
    let (old, at) = conversation(&pump).await;
    let options = ForkOptions {
        mode: ForkMode::FirstMessage,
        ..ForkOptions::default()
    };
    let fork = pump.fork(old, at, options).await.unwrap();
    pump.settle(fork).await;
    let records = pump.history(fork).await.unwrap();
    assert!(records[0].payload.contains("mode=\"first-message\""));
    assert!(!records[0].payload.contains("carried="));
    let payloads: Vec<&str> = records[1..].iter().map(|r| &*r.payload).collect();
    assert_eq!(payloads, [p("say", "one"), p("say", "one")]);
}

/// Errors: "unknown thread, unknown seq, a record that cannot be re-delivered …, an unknown
/// listener — each a typed error".
#[tokio::test]
async fn a_fork_of_an_unknown_thread_seq_record_or_listener_is_a_typed_error() {
    let pump = pump_on(None);
    let (old, at) = conversation(&pump).await;
    let egress = pump.history(old).await.unwrap()[1].seq;
    let with = |listener: &str| ForkOptions {
        listener: Some(listener.into()),
        ..ForkOptions::default()
    };
    let nobody = ThreadId::new();
    let cases = [
        (
            nobody,
            at,
            ForkOptions::default(),
            format!("no thread {nobody}"),
        ),
        (
            old,
            999_999,
            ForkOptions::default(),
            format!("thread {old} has no record 999999"),
        ),
        (
            old,
            egress,
            ForkOptions::default(),
            format!(
                "record {egress} is a egress record; only a message record can be delivered again"
            ),
        ),
        (old, at, with("ghost"), "no listener ghost".to_owned()),
    ];
    for (thread, seq, options, message) in cases {
        let err = pump.fork(thread, seq, options).await.unwrap_err();
        assert_eq!(err.to_string(), message);
    }
    let system = pump.system_thread();
    assert!(matches!(
        pump.fork(system, 1, ForkOptions::default()).await,
        Err(ForkError::UnknownThread(t)) if t == system
    ));
    assert_eq!(pump.threads().len(), 2, "no thread was started"); // the source and the system's
}

/// A restart gives a fork back its own budget, from its first record.
#[tokio::test]
async fn a_restarted_pump_gives_a_fork_its_budget_again() {
    let dir = support::Scratch::new("fork-restart");
    let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let pump = pump_on(Some(Arc::clone(&store) as Arc<dyn HistoryStore>));
    let (old, at) = conversation(&pump).await;
    let options = ForkOptions {
        budget: Some(Budget {
            turns: Some(9),
            ..Budget::unlimited()
        }),
        ..ForkOptions::default()
    };
    let fork = pump.fork(old, at, options).await.unwrap();
    pump.settle(fork).await;
    let before = pump.budget(fork).unwrap()["max-turns"].clone();
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    store.close().unwrap();
    let store: Arc<dyn HistoryStore> = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let again = pump_on(Some(store));
    let after = again.budget(fork).unwrap()["max-turns"].clone();
    assert_eq!((after.limit, after.spent), (before.limit, before.spent));
}

/// Rewrites `payload`'s first `from` into `to` in record `seq` of `db`, then re-seals that
/// record's thread's chain as a forger would, so only the fork check can tell.
async fn forge(db: &std::path::Path, thread: ThreadId, seq: u64, from: &str, to: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    let payload: String = conn
        .query_row(
            "SELECT payload FROM records WHERE seq = ?1",
            [seq as i64],
            |r| r.get(0),
        )
        .unwrap();
    assert!(payload.contains(from), "{payload}");
    conn.execute(
        "UPDATE records SET payload = ?1 WHERE seq = ?2",
        rusqlite::params![payload.replacen(from, to, 1), seq as i64],
    )
    .unwrap();
    drop(conn);
    support::reseal(db, thread).await;
}

/// A SQLite history in `dir` holding the conversation and a context fork of it at "say two":
/// (source, its seq forked from, its first seq, the fork, the fork's copy of that first record).
async fn forked_file(dir: &support::Scratch) -> (ThreadId, u64, u64, ThreadId, u64) {
    let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let pump = pump_on(Some(Arc::clone(&store) as Arc<dyn HistoryStore>));
    let (old, at) = conversation(&pump).await;
    let fork = pump.fork(old, at, ForkOptions::default()).await.unwrap();
    pump.settle(fork).await;
    let first = pump.history(old).await.unwrap()[0].seq;
    let copied = pump.history(fork).await.unwrap()[1].seq;
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    store.close().unwrap();
    (old, at, first, fork, copied)
}

/// "`agentpump verify` … checks every fork decision against the source: the named record exists
/// with that digest, and in Context mode the carried records match the source's; a tampered
/// source or fork fails verify naming the record."
#[tokio::test]
async fn verify_proves_a_fork_and_names_the_record_of_a_forged_source_or_fork() {
    let dir = support::Scratch::new("fork-verify");
    forked_file(&dir).await;
    let (ok, out, err) = support::agentpump_in(&dir.0, &["verify", "--db", "history.db"]);
    assert!(ok, "{err}");
    assert!(out.contains("1 forks verified"), "{out}");
    // The record forked from, a record the fork carried (re-sealing the source moves the
    // digest the fork names), and the fork's copy of it.
    for forged in 0..3 {
        let dir = support::Scratch::new("fork-forged");
        let (old, at, first, fork, copied) = forked_file(&dir).await;
        let (thread, seq, named) = match forged {
            0 => (old, at, format!("record {at} of {old} has digest")),
            1 => (old, first, format!("record {at} of {old} has digest")),
            _ => (
                fork,
                copied,
                format!("record {copied} is not record {first} of {old}"),
            ),
        };
        forge(&dir.db(), thread, seq, ">", "> forged").await;
        let (ok, _, err) = support::agentpump_in(&dir.0, &["verify", "--db", "history.db"]);
        assert!(!ok, "a forgery of record {seq} passed verify");
        assert!(err.contains(&format!("fork {fork}: ")), "{err}");
        assert!(err.contains(&named), "{named} in {err}");
    }
}

const TOKEN: &str = "fork-token";

/// POSTs `body` to `/threads/{thread}/fork` at `base` with the token.
async fn post_fork(base: &str, thread: ThreadId, body: &str) -> reqwest::Response {
    support::http_client()
        .post(format!("{base}/threads/{thread}/fork"))
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

/// "`POST /threads/{id}/fork` (JSON body: at, mode, listener?, budget?) on the API …"; errors
/// are "each a typed error, problem JSON over HTTP".
#[tokio::test]
async fn post_fork_starts_the_thread_and_answers_bad_input_with_problem_json() {
    let pump = pump_on(None);
    let (old, at) = conversation(&pump).await;
    let egress = pump.history(old).await.unwrap()[1].seq;
    let base = support::serve(&pump, TOKEN, 64 * 1024).await;
    let body = format!(
        r#"{{"at": {at}, "mode": "context", "listener": "shout", "budget": {{"turns": 4}}}}"#
    );
    let answer = post_fork(&base, old, &body).await;
    assert_eq!(answer.status(), 201);
    let answer: serde_json::Value = answer.json().await.unwrap();
    let fork: ThreadId = answer["thread"].as_str().unwrap().parse().unwrap();
    assert_eq!(answer["forked_from"], old.to_string());
    pump.settle(fork).await;
    let records = pump.history(fork).await.unwrap();
    assert_eq!(&*records.last().unwrap().from, "shout");
    assert_eq!(
        pump.budget(fork).unwrap()["max-turns"].limit.as_deref(),
        Some("4")
    );

    let nobody = ThreadId::new();
    let cases = [
        (nobody, format!(r#"{{"at": {at}}}"#), 404, "unknown-thread"),
        (old, r#"{"at": 999999}"#.to_owned(), 404, "unknown-record"),
        (
            old,
            format!(r#"{{"at": {egress}}}"#),
            422,
            "not-redeliverable",
        ),
        (
            old,
            format!(r#"{{"at": {at}, "listener": "ghost"}}"#),
            422,
            "unknown-listener",
        ),
        (
            old,
            format!(r#"{{"at": {at}, "mode": "sideways"}}"#),
            400,
            "bad-fork",
        ),
        (
            old,
            format!(r#"{{"at": {at}, "budget": {{"turns": -1}}}}"#),
            400,
            "bad-fork",
        ),
        (old, format!(r#"{{"seq": {at}}}"#), 400, "unknown-key"),
        (old, "{}".to_owned(), 400, "bad-fork"),
        (old, "not json".to_owned(), 400, "bad-fork"),
    ];
    for (thread, body, status, code) in cases {
        let (got, problem) = support::problem(post_fork(&base, thread, &body).await).await;
        assert_eq!(
            (got.as_u16(), problem["code"].as_str()),
            (status, Some(code)),
            "{body}: {problem}"
        );
    }
    let unauthorised = support::http_client()
        .post(format!("{base}/threads/{old}/fork"))
        .body(format!(r#"{{"at": {at}}}"#))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorised.status(), 401);
}

/// "Read-only viewer: no control." — and the route says why.
#[tokio::test]
async fn a_read_only_viewer_refuses_a_fork_with_a_problem() {
    let store: Arc<dyn HistoryStore> = Arc::new(agentpump::history::MemoryHistory::new());
    let app = agentpump::host::server::viewer::read_only(store, TOKEN, None);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let (status, problem) =
        support::problem(post_fork(&base, ThreadId::new(), r#"{"at": 1}"#).await).await;
    assert_eq!(
        (status.as_u16(), problem["code"].as_str()),
        (405, Some("read-only"))
    );
}

/// A fork carries the conversation, not the source's governor records: a residual the source's
/// listener reported stays the source's, before and after a restart alike.
#[tokio::test]
async fn a_fork_leaves_the_sources_governor_records_behind_and_still_verifies() {
    let measure = Script::new(|msg, cx| {
        cx.residual(rust_decimal::Decimal::new(5, 1));
        cx.reply(p("say", support::body(msg)));
        Ok(())
    });
    let pump = PumpBuilder::new()
        .register(Registration::new("measure", measure).accepts(q("say")))
        .build()
        .unwrap();
    let old = support::start(&pump, &p("say", "one")).await;
    pump.post(Some(old), None, &p("say", "two")).await.unwrap();
    pump.settle(old).await;
    let source = pump.history(old).await.unwrap();
    let two = source
        .iter()
        .find(|r| r.kind == RecordKind::Message && r.payload.contains("two"));
    let at = two.unwrap().seq;
    assert!(
        source
            .iter()
            .any(|r| r.seq < at && r.to.as_deref() == Some("governor"))
    );
    let fork = pump.fork(old, at, ForkOptions::default()).await.unwrap();
    pump.settle(fork).await;
    let records = pump.history(fork).await.unwrap();
    let carried: Vec<_> = records[1..]
        .iter()
        .take_while(|r| !r.payload.contains("two"))
        .collect();
    assert_eq!(carried.len(), 2, "the say and its answer: {carried:#?}");
    assert!(carried.iter().all(|r| r.to.as_deref() != Some("governor")));
    agentpump::history::verify_fork(&records, &source).unwrap();
}
