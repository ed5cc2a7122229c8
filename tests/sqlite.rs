//! The durable SQLite store: the pump on it, reopening, tamper evidence, refusals.

mod support;

use std::sync::Arc;

use agentpump::history::{HistoryStore, SqliteHistory};
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, Registration, ThreadId};
use support::{Scratch, egress, p, q, start};

fn echo_pump(store: Arc<SqliteHistory>) -> agentpump::PumpHandle {
    PumpBuilder::new()
        .history(store)
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap()
}

#[tokio::test]
async fn history_survives_closing_and_reopening_the_file() {
    let dir = Scratch::new("sqlite");
    let (thread, before) = {
        let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
        let pump = echo_pump(Arc::clone(&store));
        let thread = start(&pump, &p("say", "one")).await;
        pump.post(Some(thread), None, &p("say", "two"))
            .await
            .unwrap();
        pump.settle(thread).await;
        pump.shutdown(std::time::Duration::from_secs(1)).await;
        (thread, pump.history(thread).await.unwrap())
    };
    let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    assert_eq!(
        store.thread(thread, 0).await.unwrap(),
        before,
        "byte for byte, digest for digest"
    );
    let pump = echo_pump(Arc::clone(&store));
    // The thread is still there and takes more messages, its chain continuing.
    pump.post(Some(thread), None, &p("say", "three"))
        .await
        .unwrap();
    pump.settle(thread).await;
    assert_eq!(
        egress(&pump, thread).await,
        [p("say", "one"), p("say", "two"), p("say", "three")]
    );
    assert!(pump.verify().await.unwrap() >= 8);
}

#[tokio::test]
async fn a_closed_store_is_one_self_contained_file() {
    let dir = Scratch::new("sqlite");
    let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let pump = echo_pump(Arc::clone(&store));
    let thread = start(&pump, &p("say", "one")).await;
    pump.settle(thread).await;
    pump.shutdown(std::time::Duration::from_secs(1)).await;
    let records = pump.history(thread).await.unwrap();
    store.close().unwrap();
    store.close().unwrap(); // closing twice is harmless
    let wal = std::fs::metadata(dir.write("probe", "").with_file_name("history.db-wal"));
    assert!(
        wal.map_or(true, |m| m.len() == 0),
        "the log was checkpointed"
    );
    // Only the database file, copied elsewhere, holds the whole history.
    let copy = Scratch::new("sqlite-copy");
    std::fs::copy(dir.db(), copy.db()).unwrap();
    let copied = SqliteHistory::open_read_only(copy.db()).unwrap();
    assert_eq!(copied.thread(thread, 0).await.unwrap(), records);
}

fn sql(db: &std::path::Path, statement: &str) {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.execute_batch(statement).unwrap();
}

#[tokio::test]
async fn verify_names_the_first_record_that_was_altered_deleted_or_reordered() {
    let dir = Scratch::new("sqlite");
    let thread = {
        let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
        let pump = echo_pump(store);
        let thread = start(&pump, &p("say", "a")).await;
        for word in ["b", "c", "d"] {
            pump.post(Some(thread), None, &p("say", word))
                .await
                .unwrap();
            pump.settle(thread).await;
        }
        thread
    };
    let seqs: Vec<i64> = {
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        let mut stmt = conn
            .prepare("SELECT seq FROM records WHERE thread = ?1 ORDER BY seq")
            .unwrap();
        stmt.query_map([thread.to_string()], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    let backup = std::fs::read(dir.db()).unwrap();
    let restore = || {
        let _ = std::fs::remove_file(dir.db().with_extension("db-wal"));
        let _ = std::fs::remove_file(dir.db().with_extension("db-shm"));
        std::fs::write(dir.db(), &backup).unwrap();
    };
    // One payload byte.
    sql(
        &dir.db(),
        &format!(
            "UPDATE records SET payload = replace(payload, '>c<', '>C<') WHERE seq = {}",
            seqs[4]
        ),
    );
    check(&dir.db(), thread, seqs[4]).await;
    restore();
    // A deleted record: the next one no longer chains.
    sql(
        &dir.db(),
        &format!("DELETE FROM records WHERE seq = {}", seqs[3]),
    );
    check(&dir.db(), thread, seqs[4]).await;
    restore();
    // Two records swapped: the first of the pair is out of place.
    sql(
        &dir.db(),
        &format!(
            "UPDATE records SET seq = -1 WHERE seq = {a}; UPDATE records SET seq = {a} WHERE seq = {b}; UPDATE records SET seq = {b} WHERE seq = -1;",
            a = seqs[2],
            b = seqs[3]
        ),
    );
    check(&dir.db(), thread, seqs[2]).await;
}

async fn check(db: &std::path::Path, thread: ThreadId, expected_seq: i64) {
    let store = SqliteHistory::open(db).unwrap();
    let err = store.verify().await.unwrap_err().to_string();
    assert!(
        err.contains(&format!("thread {thread} breaks at seq {expected_seq}")),
        "{err}"
    );
}

#[tokio::test]
async fn files_that_are_not_ours_or_are_newer_are_refused_clearly() {
    let dir = Scratch::new("sqlite");
    std::fs::write(
        dir.db(),
        "hello, I am a text file, not a database at all.............................",
    )
    .unwrap();
    let err = SqliteHistory::open(dir.db()).unwrap_err().to_string();
    assert!(err.ends_with("not an agentpump database"), "{err}");
    std::fs::remove_file(dir.db()).unwrap();
    sql(&dir.db(), "CREATE TABLE notes (body TEXT);");
    let err = SqliteHistory::open(dir.db()).unwrap_err().to_string();
    assert!(err.ends_with("not an agentpump database"), "{err}");
    let mode: String = rusqlite::Connection::open(dir.db())
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete", "a refused file is left as it was");
    std::fs::remove_file(dir.db()).unwrap();
    drop(SqliteHistory::open(dir.db()).unwrap());
    sql(
        &dir.db(),
        "UPDATE meta SET value = '99' WHERE key = 'schema_version';",
    );
    let err = SqliteHistory::open(dir.db()).unwrap_err().to_string();
    assert!(
        err.contains("database schema version 99 is newer than this agentpump understands (4)"),
        "{err}"
    );
    let missing = SqliteHistory::open_read_only(dir.0.join("nope.db"))
        .unwrap_err()
        .to_string();
    assert!(missing.ends_with("nope.db: no such file"), "{missing}");
}

/// A full writer queue makes `append` wait for the writer; the writer must still make progress
/// (it once needed the lock `append` held while waiting, and both stopped forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_writer_queue_slows_appends_but_never_stalls_them() {
    use agentpump::history::SqliteOptions;
    let dir = Scratch::new("sqlite");
    let options = SqliteOptions {
        group: 0,
        backlog: 0,
        ..SqliteOptions::default()
    };
    let store = Arc::new(SqliteHistory::open_with(dir.db(), options).unwrap());
    let pump = echo_pump(Arc::clone(&store));
    let mut threads = Vec::new();
    for i in 0..64 {
        threads.push(start(&pump, &p("say", &i.to_string())).await);
    }
    let settled = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        for thread in &threads {
            pump.settle(*thread).await;
        }
    })
    .await;
    assert!(
        settled.is_ok(),
        "appends stalled behind a full writer queue"
    );
    for (i, thread) in threads.iter().enumerate() {
        assert_eq!(egress(&pump, *thread).await, [p("say", &i.to_string())]);
    }
    assert!(
        pump.verify().await.unwrap() >= 64 * 2,
        "every thread holds its message and the echo"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_sees_every_record_appended_before_it() {
    // A listener reads its thread while the commit of the message it is handling may still be
    // in flight (the demo's planner missed its last `thread-result` this way, now and then).
    let dir = Scratch::new("sqlite");
    let store = SqliteHistory::open(dir.db()).unwrap();
    let thread = ThreadId::new();
    let limits = agentpump::Limits::default();
    for n in 1..=50 {
        let payload = agentpump::Payload::parse(&p("say", &n.to_string()), &limits).unwrap();
        let envelope = agentpump::Envelope::new("client".into(), thread, payload);
        let batch = agentpump::history::Batch {
            records: vec![agentpump::history::NewRecord {
                envelope,
                kind: agentpump::history::RecordKind::Message,
                pending: false,
            }],
            ..Default::default()
        };
        let ticket = store.append(batch).unwrap();
        // Read at once, before waiting for the ticket.
        assert_eq!(store.thread(thread, 0).await.unwrap().len(), n);
        ticket.wait().await.unwrap();
    }
}

/// The store remembers the last digest of a bounded number of threads (4 096); past that it
/// forgets those whose records are committed and reads their digest back from the file. The
/// chains stay whole across the forgetting, with appends in flight and without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chains_stay_whole_when_the_store_forgets_last_digests() {
    let dir = Scratch::new("sqlite-digests");
    let store = SqliteHistory::open(dir.db()).unwrap();
    let limits = agentpump::Limits::default();
    let append = |thread: ThreadId, n: usize| {
        let payload = agentpump::Payload::parse(&p("say", &n.to_string()), &limits).unwrap();
        let envelope = agentpump::Envelope::new("client".into(), thread, payload);
        store
            .append(agentpump::history::Batch {
                records: vec![agentpump::history::NewRecord {
                    envelope,
                    kind: agentpump::history::RecordKind::Message,
                    pending: false,
                }],
                ..Default::default()
            })
            .unwrap()
    };
    let threads: Vec<ThreadId> = (0..5_000).map(|_| ThreadId::new()).collect();
    let mut tickets = Vec::new();
    for round in 0..3 {
        for (i, thread) in threads.iter().enumerate() {
            // Some rounds wait for commits as they go, some leave them in flight.
            let ticket = append(*thread, round * 10_000 + i);
            if round == 1 && i % 7 == 0 {
                ticket.wait().await.unwrap();
            } else {
                tickets.push(ticket);
            }
        }
    }
    for ticket in tickets {
        ticket.wait().await.unwrap();
    }
    assert_eq!(store.verify().await.unwrap(), 15_000);
}

/// Root threads and record windows a page at a time, the same from SQLite's indexed queries and
/// from the scan any store has: every root once, newest first, filters by state, halt class and
/// text (with LIKE's wildcards taken literally, and the records of child threads searched too);
/// record windows read forward and from the end.
#[tokio::test]
async fn pages_of_threads_and_records_agree_between_stores() {
    use agentpump::history::{MemoryHistory, ThreadFilter};
    let dir = Scratch::new("sqlite-pages");
    let stores: [(&str, Arc<dyn HistoryStore>); 2] = [
        ("sqlite", Arc::new(SqliteHistory::open(dir.db()).unwrap())),
        ("memory", Arc::new(MemoryHistory::new())),
    ];
    for (name, store) in stores {
        let pump = PumpBuilder::new()
            .history(Arc::clone(&store))
            .register(Registration::new("echo", Echo).accepts(q("say")))
            .register(Registration::new("crier", Echo).accepts(q("yell")))
            .register(Registration::new("diver", Echo).accepts(q("deep")))
            .register(
                Registration::new(
                    "forker",
                    support::Script::new(|msg, cx| {
                        if msg.qname().local() == "fork" {
                            cx.spawn(agentpump::Spawn::new(p("deep", "")).sub_id("below"));
                        }
                        Ok(())
                    }),
                )
                .accepts(q("fork"))
                .peers(["diver"]),
            )
            .build()
            .unwrap();
        let mut roots = Vec::new();
        for i in 0..23 {
            let payload = if i % 5 == 0 {
                p("yell", "hear")
            } else {
                p("say", &i.to_string())
            };
            roots.push(start(&pump, &payload).await);
        }
        for &t in &roots[3..6] {
            pump.stop(t).await.unwrap();
        }
        let page = |filter: ThreadFilter| {
            let store = Arc::clone(&store);
            async move {
                let mut seen = Vec::new();
                let mut filter = ThreadFilter { limit: 7, ..filter };
                loop {
                    let page = store.roots(&filter).await.unwrap();
                    assert!(page.threads.len() <= 7);
                    seen.extend(page.threads.iter().map(|t| t.info.id));
                    match page.next {
                        Some(next) => filter.before = Some(next),
                        None => return seen,
                    }
                }
            }
        };
        let all = page(ThreadFilter::default()).await;
        let mut newest_first: Vec<ThreadId> = roots.iter().rev().copied().collect();
        newest_first.push(pump.system_thread());
        assert_eq!(all, newest_first, "{name}");
        let halted = page(ThreadFilter {
            state: Some(agentpump::ThreadState::Halted),
            ..Default::default()
        })
        .await;
        let stopped: Vec<ThreadId> = roots[3..6].iter().rev().copied().collect();
        assert_eq!(halted, stopped);
        let backpressure = page(ThreadFilter {
            class: Some("BACKPRESSURE".into()),
            ..Default::default()
        })
        .await;
        assert_eq!(backpressure, stopped);
        let yells = page(ThreadFilter {
            text: Some("YELL".into()),
            ..Default::default()
        })
        .await;
        let expected: Vec<ThreadId> = roots.iter().step_by(5).rev().copied().collect();
        assert_eq!(yells, expected, "payload root names, case-insensitive");
        let criers = page(ThreadFilter {
            text: Some("crie".into()),
            ..Default::default()
        })
        .await;
        assert_eq!(criers, expected, "listener names");
        let wild = page(ThreadFilter {
            text: Some("%".into()),
            ..Default::default()
        })
        .await;
        assert!(wild.is_empty(), "`%` is a character, not a wildcard");

        let summary = &store.roots(&ThreadFilter::default()).await.unwrap().threads[17];
        assert_eq!(summary.info.id, roots[5]);
        assert_eq!(summary.class.as_deref(), Some("BACKPRESSURE"));
        assert_eq!(summary.info.counters.deliveries, 1);
        assert!(summary.started_us.is_some());
        // Issue 47: what the thread is (its first message) and how long it ran, from its own
        // first and latest records.
        let records = store.thread(roots[5], 0).await.unwrap();
        let opening = summary.opening.as_ref().expect("an opening");
        assert_eq!(opening.root, q("yell"), "{name}");
        assert_eq!(opening.to.as_deref(), Some("crier"), "{name}");
        assert_eq!(opening.text, "hear", "{name}");
        assert_eq!(summary.started_us, Some(records[0].time_us), "{name}");
        assert_eq!(summary.last_us, records.last().map(|r| r.time_us), "{name}");

        let records = store.thread(roots[0], 0).await.unwrap();
        let mut windowed = Vec::new();
        let mut after = 0;
        loop {
            let window = store.records_after(roots[0], after, 1).await.unwrap();
            let Some(last) = window.last() else { break };
            after = last.seq;
            windowed.extend(window);
        }
        assert_eq!(windowed, records);
        let mut backwards = Vec::new();
        let mut before = u64::MAX;
        loop {
            let window = store.records_before(roots[0], before, 2).await.unwrap();
            let Some(first) = window.first() else { break };
            before = first.seq;
            backwards.splice(0..0, window);
        }
        assert_eq!(backwards, records, "{name}: windows read from the end");
        assert_eq!(
            store.verify_thread(roots[0]).await.unwrap(),
            records.len() as u64
        );

        // The search reads the threads below a root: only the child speaks with `diver`.
        let fork = start(&pump, &p("fork", "")).await;
        pump.settle(fork).await;
        let divers = page(ThreadFilter {
            text: Some("diver".into()),
            ..Default::default()
        })
        .await;
        assert_eq!(divers, vec![fork], "{name}: a child's records");
        pump.shutdown(std::time::Duration::from_secs(1)).await;
    }
}

/// The root threads a text search finds, newest first, every page read.
async fn search(store: &dyn HistoryStore, text: &str) -> Vec<ThreadId> {
    use agentpump::history::ThreadFilter;
    let mut filter = ThreadFilter {
        text: Some(text.into()),
        limit: 100,
        ..ThreadFilter::default()
    };
    let mut found = Vec::new();
    loop {
        let page = store.roots(&filter).await.unwrap();
        found.extend(page.threads.iter().map(|t| t.info.id));
        match page.next {
            Some(next) => filter.before = Some(next),
            None => return found,
        }
    }
}

/// A count from the file itself.
fn count(db: &std::path::Path, query: &str) -> i64 {
    rusqlite::Connection::open(db)
        .unwrap()
        .query_row(query, [], |r| r.get(0))
        .unwrap()
}

/// Many threads, one rare term: the search index (schema 3) finds the one thread whose child
/// used it, and a deleted thread's records (as `history prune` deletes them) take their terms
/// out of the index with them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rare_term_is_found_through_the_search_index() {
    let dir = Scratch::new("sqlite-search");
    let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let pump = PumpBuilder::new()
        .history(Arc::clone(&store) as Arc<dyn HistoryStore>)
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .register(Registration::new("zookeeper", Echo).accepts(q("zebrafish")))
        .register(
            Registration::new(
                "forker",
                support::Script::new(|_, cx| {
                    cx.spawn(agentpump::Spawn::new(p("zebrafish", "")).sub_id("zoo"));
                    Ok(())
                }),
            )
            .accepts(q("fork"))
            .peers(["zookeeper"]),
        )
        .build()
        .unwrap();
    let mut roots = Vec::new();
    for i in 0..1_500 {
        let payload = if i == 500 {
            p("fork", "")
        } else {
            p("say", "")
        };
        roots.push(pump.post(None, None, &payload).await.unwrap().thread());
    }
    for &t in &roots {
        pump.settle(t).await;
    }
    let rare = roots[500];
    for text in ["zebrafish", "ZOOKEEPER", "ebrafi"] {
        assert_eq!(search(&*store, text).await, [rare], "{text}");
    }
    assert_eq!(search(&*store, "say").await.len(), 1_499, "a common root");
    assert_eq!(search(&*store, "no such term").await, []);
    let path = &rare.to_string()[..8];
    assert_eq!(search(&*store, path).await, [rare], "a root's path");
    // Process events, a namespace at a time, agree with the thread's records.
    let child = store.subtree(rare).await.unwrap()[1].id;
    let all = store.thread(child, 0).await.unwrap();
    let zebras = store.records_in(child, support::NS, 0, 10).await.unwrap();
    let expected: Vec<_> = all
        .into_iter()
        .filter(|r| r.root.namespace() == support::NS)
        .collect();
    assert!(!expected.is_empty());
    assert_eq!(zebras, expected);
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    store.close().unwrap();
    drop(store);

    // Deleting the thread's records and snapshots, as a prune would: the terms go with them.
    // (The forker spawns again on each notice it gets; its children are `zoo`, `zoo-2`, ….)
    let db = dir.db();
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM terms WHERE text LIKE '%zebrafish%'"
        ),
        1
    );
    sql(
        &db,
        "DELETE FROM records WHERE thread IN (SELECT id FROM threads WHERE json_extract(info, '$.path') LIKE '%.zoo%' OR id IN (SELECT parent FROM threads WHERE json_extract(info, '$.path') LIKE '%.zoo%'));",
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM terms WHERE text LIKE '%zebrafish%' OR text = 'zookeeper' OR text = 'forker'"
        ),
        0,
        "the vocabulary forgets terms no record uses"
    );
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM terms_fts WHERE terms_fts MATCH '\"zebrafish\"'"
        ),
        0,
        "and so does its FTS index"
    );
    sql(
        &db,
        "INSERT INTO terms_fts (terms_fts) VALUES ('integrity-check');",
    );
    let reopened = SqliteHistory::open_read_only(&db).unwrap();
    assert_eq!(search(&reopened, "zebrafish").await, []);
    assert_eq!(search(&reopened, "say").await.len(), 1_499);
}

/// A file from before the search index (schema 1): read-only it is searched by reading its
/// records; opened for writing it is migrated to schema 3 and searched through the index, with
/// the same answers.
#[tokio::test]
async fn an_older_file_gets_the_search_index_when_opened() {
    let dir = Scratch::new("sqlite-migrate");
    let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let pump = echo_pump(Arc::clone(&store));
    let mut threads = Vec::new();
    for text in ["alpha", "beta", "gamma"] {
        threads.push(start(&pump, &p("say", text)).await);
    }
    let yell = pump
        .post(None, Some("echo"), &p("say", "hello"))
        .await
        .unwrap()
        .thread();
    pump.settle(yell).await;
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    store.close().unwrap();
    drop((pump, store));
    // What an older agentpump wrote: no index, schema 1.
    sql(
        &dir.db(),
        "DROP TRIGGER records_removed; DROP TRIGGER threads_removed; DROP TABLE thread_terms; DROP TABLE terms; DROP TABLE terms_fts; DROP INDEX records_process; UPDATE meta SET value = '1' WHERE key = 'schema_version';",
    );
    let old = SqliteHistory::open_read_only(dir.db()).unwrap();
    let mut all: Vec<ThreadId> = threads.iter().rev().copied().collect();
    all.insert(0, yell);
    assert_eq!(
        search(&old, "echo").await,
        all,
        "read-only: no index, a scan"
    );
    drop(old);
    assert_eq!(
        count(
            &dir.db(),
            "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'"
        ),
        1
    );

    let migrated = SqliteHistory::open(dir.db()).unwrap();
    assert_eq!(
        count(
            &dir.db(),
            "SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'"
        ),
        4
    );
    assert!(count(&dir.db(), "SELECT count(*) FROM thread_terms") > 0);
    assert_eq!(search(&migrated, "echo").await, all, "through the index");
    assert_eq!(search(&migrated, support::NS).await, all);
    let path = &threads[1].to_string()[..8];
    assert_eq!(search(&migrated, path).await, [threads[1]]);
}

/// Records deleted by another connection while the store is open (a prune beside a running
/// host): the writer notices and writes the pair again when the thread uses the term again.
#[tokio::test]
async fn the_writer_notices_deletes_by_another_connection() {
    let dir = Scratch::new("sqlite-prune-live");
    let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let pump = echo_pump(Arc::clone(&store));
    let thread = start(&pump, &p("say", "one")).await;
    assert_eq!(search(&*store, "echo").await, [thread]);
    sql(
        &dir.db(),
        &format!("DELETE FROM records WHERE thread = '{thread}';"),
    );
    assert_eq!(search(&*store, "echo").await, [], "its pairs went with it");
    pump.post(Some(thread), Some("echo"), &p("say", "two"))
        .await
        .unwrap();
    pump.settle(thread).await;
    assert_eq!(search(&*store, "echo").await, [thread], "and came back");
}

/// "Nothing is silent": a second store on a file another store writes would fork its hash
/// chains (each continues a thread from the digest it read); it is refused at its open, naming
/// the file, and the file opens again once the first store is closed. A read-only store (the
/// inspection commands) opens meanwhile.
#[tokio::test]
async fn a_second_writing_store_on_one_file_is_refused_until_the_first_closes() {
    let dir = Scratch::new("sqlite-lock");
    let first = SqliteHistory::open(dir.db()).unwrap();
    let err = SqliteHistory::open(dir.db()).unwrap_err().to_string();
    assert!(
        err.contains(&dir.db().display().to_string())
            && err.contains("already open for writing by another history store"),
        "{err}"
    );
    assert!(SqliteHistory::open_read_only(dir.db()).is_ok());
    first.close().unwrap();
    let second = SqliteHistory::open(dir.db()).unwrap();
    drop(second);
    let third = Arc::new(SqliteHistory::open(dir.db()).expect("dropping a store closes it"));
    // A pump holds its store: shut down, it still does (a new pump may be built on it) ...
    let pump = echo_pump(Arc::clone(&third));
    start(&pump, &p("say", "one")).await;
    pump.shutdown(std::time::Duration::from_secs(1)).await;
    assert!(SqliteHistory::open(dir.db()).is_err());
    let again = echo_pump(Arc::clone(&third));
    start(&again, &p("say", "two")).await;
    again.shutdown(std::time::Duration::from_secs(1)).await;
    let records = third.verify().await.unwrap();
    // ... and once every handle is dropped, the file is free.
    drop((pump, again, third));
    let after = reopen(&dir.db()).await;
    assert_eq!(after.verify().await.unwrap(), records);
}

/// Opens `db` for writing once the pumps that held it have let go (their tasks hold the store
/// only weakly, and drop it a moment after the last handle).
async fn reopen(db: &std::path::Path) -> SqliteHistory {
    for _ in 0..100 {
        if let Ok(store) = SqliteHistory::open(db) {
            return store;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    SqliteHistory::open(db).unwrap()
}
