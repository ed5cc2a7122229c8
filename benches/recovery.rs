//! `cargo bench --bench recovery`: figure R — time from a restart to ready (the store opened,
//! the pump built with its pending work re-queued, the first post accepted) over a history of
//! 10 000 records and over one of 10 000 000, with the same threads and the same pending work:
//! what a restart reads should not grow with the records the file holds.
//!
//! Sizes: `AGENTPUMP_BENCH_RECOVERY_SMALL` records (default 10 000) and
//! `AGENTPUMP_BENCH_RECOVERY_BIG` (default 10 000 000; e.g. 1 000 000 to shorten the run), in
//! `AGENTPUMP_BENCH_RECOVERY_THREADS` threads at both sizes (default 1 000), with
//! `AGENTPUMP_BENCH_RECOVERY_PENDING` accepted, undelivered messages (default 10).
//!
//! The histories are written once and kept between runs in `AGENTPUMP_BENCH_RECOVERY_DIR`
//! (default `agentpump-bench-recovery` in the system's temporary directory), one file per
//! size, `history-<records>-<threads>.db` (10 M records take about 4 GB); delete them to
//! write them again. Every restart adds a few records to the file it measures.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentpump::history::{
    Batch, Durability, HistoryStore, NewRecord, RecordKind, SqliteHistory, SqliteOptions,
};
use agentpump::{Envelope, Limits, Payload, PumpHandle, ThreadId};
use common::baseline::PING;
use common::echo::echo_pump;
use common::report::{Better, Figure};
use serde_json::json;

const REPLY: &str = r#"<pong xmlns="urn:agentpump:bench:echo:v1"><seq>00000001</seq><body>a short answer, as an echo gives</body></pong>"#;

/// Records per appended batch while a history is written.
const BATCH: usize = 1_000;

/// How a history is shaped.
#[derive(Debug, Clone, Copy)]
struct Shape {
    records: usize,
    threads: usize,
    pending: usize,
}

fn dir() -> PathBuf {
    let dir = std::env::var_os("AGENTPUMP_BENCH_RECOVERY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("agentpump-bench-recovery"));
    std::fs::create_dir_all(&dir).expect("the bench directory can be created");
    dir
}

fn open(path: &Path, durability: Durability) -> Arc<SqliteHistory> {
    let options = SqliteOptions {
        durability,
        ..SqliteOptions::default()
    };
    Arc::new(SqliteHistory::open_with(path, options).expect("the history opens"))
}

fn pump(store: &Arc<SqliteHistory>) -> PumpHandle {
    echo_pump(
        common::unlimited(),
        Arc::clone(store) as Arc<dyn HistoryStore>,
    )
}

/// The file of `shape`, written unless a complete one is kept: `threads` real threads opened
/// by a pump (their snapshots and first exchanges), then the rest of the records appended to
/// them as an echo would write them, in batches through the store's own `append` (sealed,
/// chained and indexed like every record).
fn history(rt: &tokio::runtime::Runtime, shape: Shape, keep: bool) -> PathBuf {
    let base = if keep { dir() } else { scratch() };
    let path = base.join(format!("history-{}-{}.db", shape.records, shape.threads));
    if path.is_file() {
        return path;
    }
    let part = base.join(format!("history-{}-{}.part", shape.records, shape.threads));
    let _ = std::fs::remove_file(&part);
    let started = Instant::now();
    let store = open(&part, Durability::Normal);
    let threads = rt.block_on(async {
        let pump = pump(&store);
        let mut threads = Vec::with_capacity(shape.threads);
        for _ in 0..shape.threads {
            let receipt = pump.post(None, None, PING).await.expect("accepted");
            threads.push(receipt.thread());
        }
        for &thread in &threads {
            pump.settle(thread).await;
        }
        pump.shutdown(Duration::from_secs(30)).await;
        threads
    });
    // Each opened thread holds its post and the echo's answer; the boot record is the system's.
    fill(
        rt,
        &store,
        &threads,
        shape.records.saturating_sub(2 * shape.threads + 1),
    );
    store.close().expect("the history closes");
    drop(store);
    std::fs::rename(&part, &path).expect("the history is kept");
    for leftover in ["part-wal", "part-shm"] {
        let _ = std::fs::remove_file(part.with_extension(leftover));
    }
    eprintln!(
        "recovery: wrote {} records in {} threads in {:.1} s: {}",
        shape.records,
        shape.threads,
        started.elapsed().as_secs_f64(),
        path.display()
    );
    path
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("agentpump-bench-recovery-{}", ThreadId::new()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Appends `n` delivered exchanges' records round-robin to `threads`, batches in flight
/// together, and waits for every commit.
fn fill(rt: &tokio::runtime::Runtime, store: &SqliteHistory, threads: &[ThreadId], n: usize) {
    let limits = Limits::default();
    let (ping, pong) = (
        Payload::parse(PING, &limits).unwrap(),
        Payload::parse(REPLY, &limits).unwrap(),
    );
    let mut tickets = Vec::new();
    let mut done = 0;
    while done < n {
        let records = (done..n.min(done + BATCH))
            .map(|i| {
                let thread = threads[(i / 2) % threads.len()];
                let envelope = if i % 2 == 0 {
                    Envelope::new("client".into(), thread, ping.clone())
                        .with_to(Some("echo".into()))
                } else {
                    Envelope::new("echo".into(), thread, pong.clone())
                        .with_to(Some("client".into()))
                };
                NewRecord {
                    envelope,
                    kind: RecordKind::Message,
                    pending: false,
                }
            })
            .collect::<Vec<_>>();
        done += records.len();
        let batch = Batch {
            records,
            threads: Vec::new(),
            delivered: None,
            reports: Vec::new(),
        };
        tickets.push(store.append(batch).expect("appended"));
        if tickets.len() >= 256 {
            rt.block_on(async {
                for t in tickets.drain(..) {
                    t.wait().await.expect("committed");
                }
            });
        }
    }
    rt.block_on(async {
        for t in tickets {
            t.wait().await.expect("committed");
        }
    });
}

/// Leaves `shape.pending` messages to `echo` accepted and not delivered, as a crash would.
fn leave_pending(rt: &tokio::runtime::Runtime, path: &Path, shape: Shape) {
    let store = open(path, Durability::Normal);
    let threads = rt.block_on(store.threads(None)).expect("threads");
    let ping = Payload::parse(PING, &Limits::default()).unwrap();
    let records = threads
        .iter()
        .filter(|t| t.parent.is_none() && &*t.path != "system")
        .take(shape.pending)
        .map(|t| NewRecord {
            envelope: Envelope::new("client".into(), t.id, ping.clone())
                .with_to(Some("echo".into())),
            kind: RecordKind::Message,
            pending: true,
        })
        .collect();
    let batch = Batch {
        records,
        threads: Vec::new(),
        delivered: None,
        reports: Vec::new(),
    };
    rt.block_on(store.append(batch).expect("appended").wait())
        .expect("committed");
    store.close().expect("the history closes");
}

/// One restart: open the store as `agentpump run` does, build the pump (recovery), post a first
/// message and wait for it to be accepted. Returns seconds; the pump then delivers what was
/// pending and stops, outside the measure.
fn restart(rt: &tokio::runtime::Runtime, path: &Path, shape: Shape) -> f64 {
    leave_pending(rt, path, shape);
    let (elapsed, pump, store) = rt.block_on(async {
        let started = Instant::now();
        let store = open(path, Durability::Full);
        let pump = pump(&store);
        pump.post(None, None, PING).await.expect("accepted");
        (started.elapsed(), pump, store)
    });
    assert_eq!(
        pump.recovered().requeued,
        shape.pending,
        "pending work re-queued"
    );
    rt.block_on(pump.shutdown(Duration::from_secs(30)));
    store.close().expect("the history closes");
    common::secs(elapsed)
}

fn main() {
    let cfg = common::Config::from_env(5);
    let rt = common::runtime();
    let mut report = common::Report::new("recovery", &cfg);
    let threads = cfg.size("AGENTPUMP_BENCH_RECOVERY_THREADS", 1_000, 10);
    let pending = cfg.size("AGENTPUMP_BENCH_RECOVERY_PENDING", 10, 3);
    let small = Shape {
        records: cfg.size("AGENTPUMP_BENCH_RECOVERY_SMALL", 10_000, 100),
        threads,
        pending,
    };
    let big = Shape {
        records: cfg.size("AGENTPUMP_BENCH_RECOVERY_BIG", 10_000_000, 1_000),
        ..small
    };
    let (small_path, big_path) = (history(&rt, small, cfg.full), history(&rt, big, cfg.full));
    // An untimed restart each: a file of an older schema is migrated by its first open.
    restart(&rt, &small_path, small);
    restart(&rt, &big_path, big);
    let (mut at_small, mut at_big) = (Vec::new(), Vec::new());
    for _ in 0..cfg.runs {
        at_small.push(restart(&rt, &small_path, small) * 1e3);
        at_big.push(restart(&rt, &big_path, big) * 1e3);
    }
    let figure = Figure::new(
        "R",
        &format!(
            "restart to ready: open the SqliteHistory, build the pump, first post accepted, {} records",
            big.records
        ),
        "ms",
        Better::Lower,
        at_big,
    )
    .baseline(
        &format!("the same restart over {} records", small.records),
        at_small,
    )
    .params(json!({
        "records": big.records,
        "small_records": small.records,
        "threads": threads,
        "pending": pending,
    }))
    .note("same threads and pending work at both sizes; the file is in the page cache (a cold cache adds the disk reads of the pages recovery touches)");
    let ratio = figure.value() / figure.baseline_value().unwrap_or(f64::NAN);
    eprintln!(
        "recovery: {:.1} ms at {} records, {:.1} ms at {} records, ratio {ratio:.2}",
        figure.baseline_value().unwrap_or(f64::NAN),
        small.records,
        figure.value(),
        big.records,
    );
    report.add(
        figure
            .ratio(
                ratio,
                &format!(
                    "time to ready at {} records / at {} records",
                    big.records, small.records
                ),
            )
            .target("≤ 2× the small history's", ratio <= 2.0),
    );
    if !cfg.full {
        let _ = std::fs::remove_dir_all(small_path.parent().expect("in a directory"));
        let _ = std::fs::remove_dir_all(big_path.parent().expect("in a directory"));
    }
    report.finish();
}
