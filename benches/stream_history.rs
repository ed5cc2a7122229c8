//! `cargo bench --bench stream_history`: figure J1 — the echo through a pump whose history is
//! a NATS JetStream stream (one `nats-server`, one replica; then a three-node cluster, three
//! replicas; all on loopback), against the same pump on the durable SQLite history, in the
//! same run. Needs `nats-server` on the PATH (`apt-get install nats-server`).
//!
//! `AGENTPUMP_BENCH_STREAM_N` round trips per store (default 2000), over 32 concurrent threads.

mod common;

use std::sync::Arc;
use std::time::Duration;

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

fn main() {
    let cfg = common::Config::from_env(3);
    let n = cfg.size("AGENTPUMP_BENCH_STREAM_N", 2000, 64);
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
    report.finish();
    let _ = std::fs::remove_dir_all(&dir);
}
