//! `cargo bench --bench search`: the viewer's text search over a big `SqliteHistory` — a rare
//! payload root and a rare listener name (one thread among all), a root's short id, a common
//! root, and a text that matches nothing — through the search index (schema 3), against the
//! same file without it (schema 1, opened read-only: each root's records are read until one
//! matches), in the same run.
//!
//! Size: `AGENTPUMP_BENCH_SEARCH_RECORDS` records (default 1 000 000), ten per root thread.
//! Each search runs three times, the median printed. The file is written through
//! `HistoryStore::append` in batches of 2 000 (the append rate, index included, is printed
//! too); the copy without the index is the same file with the index dropped, as an older
//! agentpump left it; opening that copy for writing migrates it, and the time the migration
//! takes is printed last.

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentpump::history::{
    Batch, Durability, HistoryStore, NewRecord, RecordKind, SqliteHistory, SqliteOptions,
    ThreadFilter,
};
use agentpump::{Counters, Envelope, Limits, Payload, ThreadId, ThreadInfo, ThreadState};

/// Records per root thread.
const PER_THREAD: usize = 10;
const SENDERS: [&str; 4] = ["researcher", "calculator", "planner", "critic"];

fn payload(local: &str, ns: &str) -> Payload {
    Payload::parse(
        &format!(r#"<{local} xmlns="{ns}">a payload of about a hundred bytes, like a small tool call</{local}>"#),
        &Limits::default(),
    )
    .unwrap()
}

fn snapshot(id: ThreadId) -> ThreadInfo {
    ThreadInfo {
        id,
        parent: None,
        spawner: None,
        depth: 0,
        path: Arc::from(&id.to_string()[..8]),
        state: ThreadState::Idle,
        children: Vec::new(),
        counters: Counters::default(),
        dialect: Default::default(),
    }
}

/// Writes `threads` root threads of [`PER_THREAD`] records; the one at a third of the way is
/// the rare one (root `{urn:bench:rare:v1}zebrafish`, sender `zookeeper`). Returns it and the
/// append rate.
async fn fill(store: &SqliteHistory, threads: usize) -> (ThreadId, f64) {
    let common = [
        payload("say", "urn:bench:v1"),
        payload("add", "urn:example:calc:v1"),
        payload("step", "urn:example:sqrt:v1"),
    ];
    let rare_payload = payload("zebrafish", "urn:bench:rare:v1");
    let rare_at = threads / 3;
    let mut rare = None;
    let started = Instant::now();
    let mut batch = Batch::default();
    for t in 0..threads {
        let id = ThreadId::new();
        batch.threads.push(snapshot(id));
        for i in 0..PER_THREAD {
            let (from, p) = if t == rare_at && i == PER_THREAD / 2 {
                rare = Some(id);
                ("zookeeper", rare_payload.clone())
            } else {
                (SENDERS[(t + i) % 4], common[(t + i) % 3].clone())
            };
            batch.records.push(NewRecord {
                envelope: Envelope::new(from.into(), id, p),
                kind: RecordKind::Message,
                pending: false,
            });
        }
        if batch.records.len() >= 2_000 || t + 1 == threads {
            let full = std::mem::take(&mut batch);
            store.append(full).unwrap().wait().await.unwrap();
        }
    }
    let rate = (threads * PER_THREAD) as f64 / started.elapsed().as_secs_f64();
    (rare.unwrap(), rate)
}

/// The median of three searches for `text`, and the first page's thread count.
async fn search(store: &SqliteHistory, text: &str) -> (Duration, usize) {
    let filter = ThreadFilter {
        text: Some(text.into()),
        ..ThreadFilter::default()
    };
    let mut times = Vec::new();
    let mut found = 0;
    for _ in 0..3 {
        let started = Instant::now();
        found = store.roots(&filter).await.unwrap().threads.len();
        times.push(started.elapsed());
    }
    times.sort();
    (times[1], found)
}

fn main() {
    let records: usize = std::env::var("AGENTPUMP_BENCH_SEARCH_RECORDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let threads = records / PER_THREAD;
    let dir = std::env::temp_dir().join(format!("agentpump-bench-search-{}", ThreadId::new()));
    std::fs::create_dir_all(&dir).unwrap();
    let (db, old) = (dir.join("h.db"), dir.join("schema1.db"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let options = SqliteOptions {
            durability: Durability::Normal,
            ..SqliteOptions::default()
        };
        let store = SqliteHistory::open_with(&db, options).unwrap();
        let (rare, rate) = fill(&store, threads).await;
        store.close().unwrap();
        drop(store);
        println!(
            "search over {records} records in {threads} root threads ({rate:.0} records/s appended, index included)"
        );
        std::fs::copy(&db, &old).unwrap();
        let conn = rusqlite::Connection::open(&old).unwrap();
        conn.execute_batch(
            "DROP TRIGGER records_removed; DROP TRIGGER threads_removed; DROP TABLE thread_terms; DROP TABLE terms; DROP TABLE terms_fts; DROP INDEX records_process; UPDATE meta SET value = '1' WHERE key = 'schema_version';",
        )
        .unwrap();
        drop(conn);
        let indexed = SqliteHistory::open_read_only(&db).unwrap();
        let walked = SqliteHistory::open_read_only(&old).unwrap();
        println!(
            "{:<44} {:>12} {:>14} {:>7}",
            "text", "index (ms)", "no index (ms)", "found"
        );
        let short = rare.to_string()[..8].to_owned();
        for (what, text) in [
            ("rare payload root `zebrafish`", "zebrafish"),
            ("rare listener `zookeeper`", "zookeeper"),
            ("a root's short id (its path)", short.as_str()),
            ("common root `calc`, first page of 50", "calc"),
            ("nothing matches `nomatch`", "nomatch"),
        ] {
            let (fast, found) = search(&indexed, text).await;
            let (slow, found_too) = search(&walked, text).await;
            assert_eq!(found, found_too, "both find the same for {text}");
            println!(
                "{what:<44} {:>12.1} {:>14.1} {found:>7}",
                fast.as_secs_f64() * 1e3,
                slow.as_secs_f64() * 1e3
            );
        }
        let page = indexed
            .roots(&ThreadFilter {
                text: Some("zebrafish".into()),
                ..ThreadFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(page.threads[0].info.id, rare);
        // The schema 1 copy opened by a writer: migrated, the index built from its records.
        drop(walked);
        let started = Instant::now();
        let migrated = SqliteHistory::open_with(&old, options).unwrap();
        let took = started.elapsed();
        let (_, found) = search(&migrated, "zebrafish").await;
        assert_eq!(found, 1, "the migrated file finds it");
        println!(
            "migrating the schema 1 copy (the index built from its {records} records): {:.1} s",
            took.as_secs_f64()
        );
        migrated.close().unwrap();
    });
    std::fs::remove_dir_all(&dir).unwrap();
}
