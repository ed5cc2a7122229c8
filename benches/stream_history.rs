//! `cargo bench --bench stream_history`: figure J1 — the echo through a pump whose history is
//! a NATS JetStream stream (one `nats-server`, one replica; then a three-node cluster, three
//! replicas; all on loopback), against the same pump on the durable SQLite history, in the
//! same run. Needs `nats-server` on the PATH (`apt-get install nats-server`).
//!
//! `AGENTPUMP_BENCH_STREAM_N` round trips per store (default 2000), over 32 concurrent threads.
//!
//! Figure J2 — retention: a prune of `AGENTPUMP_BENCH_PRUNE_N` stopped threads (default 1000,
//! each a message and its echo) on the one-replica stream, until its mark is acknowledged,
//! against the same prune on SQLite in the same run; and how long the stream then takes to
//! delete the messages the prune left unneeded.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agentpump::history::{HistoryStore, JetStreamHistory, JetStreamOptions, SqliteHistory};
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, QName, Registration};
use common::report::{Better, Figure};
use serde_json::json;

/// Threads in flight at once.
const CONCURRENT: usize = 32;
const PAYLOAD: &str = r#"<say xmlns="urn:bench:v1">ping</say>"#;

async fn rate(store: Arc<dyn HistoryStore>, n: usize) -> f64 {
    let pump = PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(QName::new("urn:bench:v1", "say")))
        .history(store)
        .build()
        .unwrap();
    let rate = common::posting::deliveries(&pump, n, CONCURRENT, PAYLOAD).await;
    pump.shutdown(Duration::from_secs(5)).await;
    rate
}

/// Milliseconds to prune `threads` stopped threads from `store` (what they hold made first).
async fn prune_ms(store: Arc<dyn HistoryStore>, threads: usize) -> f64 {
    let pump = PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(QName::new("urn:bench:v1", "say")))
        .history(store.clone())
        .build()
        .unwrap();
    let mut ids = Vec::with_capacity(threads);
    for _ in 0..threads {
        ids.push(
            pump.post(None, Some("echo"), PAYLOAD)
                .await
                .unwrap()
                .thread(),
        );
    }
    for &id in &ids {
        pump.settle(id).await;
        pump.stop(id).await.unwrap();
    }
    let cut = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap();
    let started = Instant::now();
    let pruned = store.prune(cut, None).await.unwrap();
    let ms = started.elapsed().as_secs_f64() * 1e3;
    assert_eq!(pruned.anchors.len(), threads);
    pump.shutdown(Duration::from_secs(5)).await;
    ms
}

/// Milliseconds until `stream`'s message count stops falling (checked every 20 ms), and the
/// count before and after.
async fn deleted_ms(url: &str, stream: &str) -> (f64, u64, u64) {
    let js = async_nats::jetstream::new(async_nats::connect(url).await.unwrap());
    let mut stream = js.get_stream(stream).await.unwrap();
    let started = Instant::now();
    let first = stream.info().await.unwrap().state.messages;
    let (mut last, mut at) = (first, started.elapsed());
    while started.elapsed() - at < Duration::from_millis(500) {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = stream.info().await.unwrap().state.messages;
        if now != last {
            (last, at) = (now, started.elapsed());
        }
    }
    (at.as_secs_f64() * 1e3, first, last)
}

fn main() {
    let cfg = common::Config::from_env(3);
    let n = cfg.size("AGENTPUMP_BENCH_STREAM_N", 2000, 64);
    let prunes = cfg.size("AGENTPUMP_BENCH_PRUNE_N", 1000, 32);
    let mut report = common::Report::new("stream_history", &cfg);
    let dir = std::env::temp_dir().join(format!("agentpump-bench-stream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_server, one) = common::nats::server(&dir.join("one"));
    let cluster = common::nats::Cluster::start(&dir);
    let three = cluster.url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let (mut sqlite, mut r1, mut r3) = (Vec::new(), Vec::new(), Vec::new());
    let (mut prune_sqlite, mut prune_stream, mut deletions) = (Vec::new(), Vec::new(), Vec::new());
    let mut messages = (0, 0);
    for run in 0..cfg.runs {
        rt.block_on(async {
            let file = dir.join(format!("run-{run}.db"));
            let store = Arc::new(SqliteHistory::open(&file).unwrap());
            sqlite.push(rate(store.clone(), n).await);
            store.close().unwrap();
            for (samples, url, replicas) in [(&mut r1, &one, 1), (&mut r3, &three, 3)] {
                let mut options = JetStreamOptions::new(url.as_str(), format!("bench-{run}"));
                options.replicas = replicas;
                options.patience = Duration::from_secs(30);
                let store = Arc::new(JetStreamHistory::open(options).await.unwrap());
                samples.push(rate(store, n).await);
            }
            let file = dir.join(format!("prune-{run}.db"));
            let store = Arc::new(SqliteHistory::open(&file).unwrap());
            prune_sqlite.push(prune_ms(store.clone(), prunes).await);
            store.close().unwrap();
            let name = format!("prune-{run}");
            let mut options = JetStreamOptions::new(one.as_str(), name.as_str());
            options.patience = Duration::from_secs(30);
            let store = Arc::new(JetStreamHistory::open(options).await.unwrap());
            prune_stream.push(prune_ms(store, prunes).await);
            let (ms, before, after) = deleted_ms(&one, &name).await;
            deletions.push(ms);
            messages = (before, after);
        });
    }
    let params = json!({ "round_trips": n, "concurrent": CONCURRENT });
    for (id, name, samples) in [
        ("J1", "echo, history on JetStream, 1 replica", r1),
        (
            "J1b",
            "echo, history on JetStream, 3 replicas (3-node cluster)",
            r3,
        ),
    ] {
        let figure = Figure::new(id, name, "round trips/s", Better::Higher, samples)
            .baseline(
                "the same echo on the durable SQLite history",
                sqlite.clone(),
            )
            .params(params.clone());
        let ratio = figure.value() / figure.baseline_value().unwrap_or(f64::NAN);
        report.add(figure.ratio(ratio, "JetStream / SQLite"));
    }
    let figure = Figure::new(
        "J2",
        "prune of stopped threads, history on JetStream (1 replica), until its mark is acknowledged",
        "ms",
        Better::Lower,
        prune_stream,
    )
    .baseline("the same prune on the durable SQLite history", prune_sqlite)
    .params(json!({
        "threads": prunes,
        "deletions_settled_ms": deletions,
        "stream_messages_when_the_prune_returned_and_after": [messages.0, messages.1],
    }));
    let ratio = figure.value() / figure.baseline_value().unwrap_or(f64::NAN);
    report.add(figure.ratio(ratio, "JetStream / SQLite"));
    report.finish();
    let _ = std::fs::remove_dir_all(&dir);
}
