//! `cargo bench --bench durable`: figure 6 — append throughput of the durable `SqliteHistory`
//! (group commit, many writers each waiting for its commit) against a raw batched rusqlite
//! insert of the same rows, in the same run, on the same disk.
//!
//! Sizes: `AGENTPUMP_BENCH_DURABLE_N` records (default 100 000), `AGENTPUMP_BENCH_DURABLE_WRITERS`
//! concurrent writers (default 64) for figures 6 to 6d, `AGENTPUMP_BENCH_DURABLE_MANY_WRITERS`
//! (default 1 024) for figure 6e.

mod common;

use std::sync::Arc;
use std::time::Instant;

use agentpump::history::{
    Batch, Durability, HistoryStore, NewRecord, RecordKind, SqliteHistory, SqliteOptions,
};
use agentpump::{Envelope, Limits, Payload, ThreadId};
use common::report::{Better, Figure};
use serde_json::json;

const PAYLOAD: &str = r#"<say xmlns="urn:bench:v1">a payload of about a hundred bytes, like a small tool call or answer</say>"#;

fn scratch() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("agentpump-bench-durable-{}", ThreadId::new()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The pump's store: `writers` tasks, each appending single-record batches (as deliveries do)
/// and waiting for each commit. Returns records/s.
fn store_rate(
    rt: &tokio::runtime::Runtime,
    n: usize,
    writers: usize,
    durability: Durability,
) -> f64 {
    let dir = scratch();
    let store = Arc::new(
        SqliteHistory::open_with(
            dir.join("h.db"),
            SqliteOptions {
                durability,
                ..SqliteOptions::default()
            },
        )
        .unwrap(),
    );
    let payload = Payload::parse(PAYLOAD, &Limits::default()).unwrap();
    let started = Instant::now();
    rt.block_on(async {
        let tasks: Vec<_> = (0..writers)
            .map(|_| {
                let (store, payload) = (Arc::clone(&store), payload.clone());
                tokio::spawn(async move {
                    let thread = ThreadId::new();
                    for _ in 0..n / writers {
                        let envelope = Envelope::new("bench".into(), thread, payload.clone());
                        let batch = Batch {
                            records: vec![NewRecord {
                                envelope,
                                kind: RecordKind::Message,
                                pending: false,
                            }],
                            ..Batch::default()
                        };
                        store.append(batch).unwrap().wait().await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    });
    let rate = (n / writers * writers) as f64 / started.elapsed().as_secs_f64();
    drop(store);
    std::fs::remove_dir_all(&dir).unwrap();
    rate
}

/// The same rows, inserted by one connection in transactions of `group` rows. Returns rows/s.
/// As in the store's run, the rows belong to `threads` threads and arrive interleaved (the
/// `(thread, seq)` index then takes them on as many pages).
fn raw_rate(n: usize, group: usize, threads: usize, durability: Durability) -> f64 {
    let dir = scratch();
    let conn = rusqlite::Connection::open(dir.join("raw.db")).unwrap();
    conn.pragma_update(None, "journal_mode", "WAL").unwrap();
    conn.pragma_update(
        None,
        "synchronous",
        if durability == Durability::Full {
            "FULL"
        } else {
            "NORMAL"
        },
    )
    .unwrap();
    conn.execute_batch(
        "CREATE TABLE records (seq INTEGER PRIMARY KEY, thread TEXT NOT NULL, id TEXT NOT NULL UNIQUE, time_us INTEGER NOT NULL,
         kind TEXT NOT NULL, sender TEXT NOT NULL, recipient TEXT, in_reply_to TEXT, root TEXT NOT NULL, payload TEXT NOT NULL,
         digest BLOB NOT NULL, pending INTEGER NOT NULL DEFAULT 0);
         CREATE INDEX records_by_thread ON records (thread, seq);",
    )
    .unwrap();
    let threads: Vec<String> = (0..threads).map(|_| ThreadId::new().to_string()).collect();
    let digest = [7u8; 32];
    let started = Instant::now();
    let mut conn = conn;
    let mut seq = 0i64;
    while (seq as usize) < n {
        let tx = conn.transaction().unwrap();
        {
            let mut insert = tx
                .prepare_cached("INSERT INTO records (seq, thread, id, time_us, kind, sender, recipient, in_reply_to, root, payload, digest, pending) VALUES (?1, ?2, ?3, ?4, 'message', 'bench', NULL, NULL, '{urn:bench:v1}say', ?5, ?6, 0)")
                .unwrap();
            for _ in 0..group.min(n - seq as usize) {
                seq += 1;
                insert
                    .execute(rusqlite::params![
                        seq,
                        threads[seq as usize % threads.len()],
                        agentpump::MessageId::new().to_string(),
                        seq,
                        PAYLOAD,
                        &digest[..]
                    ])
                    .unwrap();
            }
        }
        tx.commit().unwrap();
    }
    let rate = n as f64 / started.elapsed().as_secs_f64();
    drop(conn);
    std::fs::remove_dir_all(&dir).unwrap();
    rate
}

fn main() {
    let cfg = common::Config::from_env(5);
    let rt = common::runtime();
    let mut report = common::Report::new("durable", &cfg);
    let n = if cfg.full {
        common::env_usize("AGENTPUMP_BENCH_DURABLE_N", 100_000)
    } else {
        2_000
    };
    let writers = common::env_usize("AGENTPUMP_BENCH_DURABLE_WRITERS", 64);
    for (id, same, durability, label) in [
        ("6", "6c", Durability::Normal, "normal"),
        ("6b", "6d", Durability::Full, "full"),
    ] {
        let (mut pump, mut raw, mut raw_grouped) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..cfg.runs {
            pump.push(store_rate(&rt, n, writers, durability));
            raw.push(raw_rate(n, 1024, writers, durability));
            raw_grouped.push(raw_rate(n, writers, writers, durability));
        }
        let name = format!("durable append, SqliteHistory group commit, synchronous={label}");
        let params = json!({ "records": n, "writers": writers, "payload_bytes": PAYLOAD.len() });
        let figure = Figure::new(id, &name, "records/s", Better::Higher, pump.clone())
            .baseline(&format!("raw rusqlite insert of the same rows (as many threads, interleaved), transactions of 1024 rows, synchronous={label}"), raw)
            .params(params.clone())
            .note("each writer appends one record per batch and waits for its commit, as a delivery does; seq, digests and the writer thread included");
        let met = figure
            .baseline_value()
            .is_some_and(|b| figure.value() >= 0.5 * b);
        report.add(figure.target("≥ 50% of the raw batched insert", met));
        // What limits figure 6: a commit can hold at most one record per waiting writer, and
        // each commit rewrites the index pages of every thread in it. The raw insert with
        // transactions of that size shows the cost of the grouping alone.
        report.add(
            Figure::new(same, &format!("{name}, against transactions of {writers} rows"), "records/s", Better::Higher, pump)
                .baseline(&format!("raw rusqlite insert of the same rows, transactions of {writers} rows (one per writer), synchronous={label}"), raw_grouped)
                .params(params)
                .note("no target: separates the pump's own overhead from the group size the writers allow"),
        );
    }
    // The same store when enough writers wait at once to fill a group as large as the raw
    // transactions (a busy host: many threads, each waiting for its delivery's commit).
    let many = common::env_usize("AGENTPUMP_BENCH_DURABLE_MANY_WRITERS", 1024);
    let (mut pump, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..cfg.runs {
        pump.push(store_rate(&rt, n, many, Durability::Normal));
        raw.push(raw_rate(n, 1024, many, Durability::Normal));
    }
    let figure = Figure::new(
        "6e",
        &format!("durable append, SqliteHistory group commit, synchronous=normal, {many} writers"),
        "records/s",
        Better::Higher,
        pump,
    )
    .baseline(
        "raw rusqlite insert of the same rows (as many threads, interleaved), transactions of 1024 rows, synchronous=normal",
        raw,
    )
    .params(json!({ "records": n, "writers": many, "payload_bytes": PAYLOAD.len() }))
    .note("as figure 6 with enough waiting writers to fill groups like the raw transactions");
    let met = figure
        .baseline_value()
        .is_some_and(|b| figure.value() >= 0.5 * b);
    report.add(figure.target("≥ 50% of the raw batched insert", met));
    report.finish();
}
