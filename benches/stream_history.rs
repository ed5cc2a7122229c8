//! `cargo bench --bench stream_history`: figure J1 — the echo through a pump whose history is
//! a NATS JetStream stream (one `nats-server`, one replica; then a three-node cluster, three
//! replicas; all on loopback), against the same pump on the durable SQLite history, in the
//! same run. Needs `nats-server` on the PATH (`apt-get install nats-server`).
//!
//! `AGENTPUMP_BENCH_STREAM_N` round trips per store (default 2000), over 32 concurrent threads.

mod common;

use std::process::{Child, Command, Stdio};
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

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn nats(args: &[String], port: u16) -> Kill {
    let child = Command::new("nats-server")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("cannot start nats-server: `apt-get install nats-server`");
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    Kill(child)
}

/// Three routed JetStream nodes in `dir`; their client URLs, comma-separated.
fn cluster(dir: &std::path::Path) -> (Vec<Kill>, String) {
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let routes: Vec<String> = ports
        .iter()
        .map(|(_, c)| format!("nats://127.0.0.1:{c}"))
        .collect();
    let nodes = ports
        .iter()
        .enumerate()
        .map(|(i, (p, c))| {
            let args = [
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &p.to_string(),
                "-n",
                &format!("n{i}"),
                "--cluster_name",
                "bench",
                "--cluster",
                &format!("nats://127.0.0.1:{c}"),
                "--routes",
                &routes.join(","),
                "-sd",
                &dir.join(format!("n{i}")).display().to_string(),
            ]
            .map(str::to_owned);
            nats(&args, *p)
        })
        .collect();
    let urls: Vec<String> = ports
        .iter()
        .map(|(p, _)| format!("nats://127.0.0.1:{p}"))
        .collect();
    (nodes, urls.join(","))
}

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
    let port = free_port();
    let one = format!("nats://127.0.0.1:{port}");
    let args = [
        "-js",
        "-a",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-sd",
        &dir.join("one").display().to_string(),
    ]
    .map(str::to_owned);
    let _server = nats(&args, port);
    let (_nodes, three) = cluster(&dir);
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
