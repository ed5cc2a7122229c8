//! `cargo bench --bench partitions`: figures P1–P3 — the echo through `agentpump run` hosts
//! whose threads are in 1, 2 or 3 partitions (one host writing each, on a three-node
//! `nats-server` cluster keeping three replicas, all on loopback), against one host on the
//! durable SQLite history, in the same run. Clients post over HTTP to every host's front in
//! turn; a round trip is a post acknowledged and the echo's answer recorded. Needs
//! `nats-server` on the PATH (`apt-get install nats-server`).
//!
//! `AGENTPUMP_BENCH_PARTITIONS_N` round trips per setup (default 2000), 32 clients at once.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::report::{Better, Figure};
use serde_json::json;

/// Clients posting at once.
const CONCURRENT: usize = 32;
const TOKEN: &str = "bench-partitions-token";
const PAYLOAD: &str = r#"<say xmlns="urn:bench:v1">ping</say>"#;
const ECHO: &str = "[[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\naccepts = [\"{urn:bench:v1}say\"]\n";

/// Posts asked again (a partition with no writer known to the front yet).
static RETRIED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// An `agentpump run` host, killed when dropped.
struct Host(Child);

impl Drop for Host {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

/// `agentpump run` in `dir` with `store` as its `[store]` section (`--partition I` when
/// given); its front's address once it writes (each partition it should).
fn host(dir: &Path, store: &str, partition: Option<(u32, u32)>) -> (Host, String) {
    use std::io::BufRead as _;
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("agentpump.token"), TOKEN).unwrap();
    std::fs::write(
        dir.join("organism.toml"),
        format!("[organism]\nname = \"bench\"\n\n[store]\n{store}\n{ECHO}"),
    )
    .unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentpump"));
    command.args(["run", "organism.toml", "--port", "0"]);
    if let Some((index, _)) = partition {
        command.args(["--partition", &index.to_string()]);
    }
    let mut child = command
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok);
    let first = lines.next().expect("agentpump run prints where it listens");
    let base = first
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .to_owned();
    if let Some((index, count)) = partition.filter(|&(_, count)| count > 1) {
        let writing = format!("partition {index} of {count}: writing");
        assert!(
            lines.by_ref().any(|l| l.contains(&writing)),
            "host never wrote partition {index}"
        );
    }
    std::thread::spawn(move || lines.for_each(drop));
    (Host(child), base)
}

/// Round trips per second: `n` posts by [`CONCURRENT`] clients over `fronts` in turn, timed
/// until every thread's echo answered.
async fn rate(fronts: &[String], n: usize) -> f64 {
    agentpump::listeners::llm::install_tls_provider();
    let http = reqwest::Client::new();
    let fronts = Arc::new(fronts.to_vec());
    let started = Instant::now();
    let clients: Vec<_> = (0..CONCURRENT)
        .map(|c| {
            let (http, fronts) = (http.clone(), Arc::clone(&fronts));
            tokio::spawn(async move {
                let mut threads = Vec::new();
                for i in (c..n).step_by(CONCURRENT) {
                    let base = &fronts[i % fronts.len()];
                    threads.push((base.clone(), post(&http, base).await));
                }
                for (base, thread) in threads {
                    answered(&http, &base, &thread).await;
                }
            })
        })
        .collect();
    for client in clients {
        client.await.unwrap();
    }
    n as f64 / started.elapsed().as_secs_f64()
}

async fn post(http: &reqwest::Client, base: &str) -> String {
    for _ in 0..200 {
        let answer = http
            .post(format!("{base}/threads?to=echo"))
            .bearer_auth(TOKEN)
            .body(PAYLOAD)
            .send()
            .await;
        if let Ok(answer) = answer
            && answer.status().is_success()
        {
            let body: serde_json::Value = answer.json().await.unwrap();
            return body["thread"].as_str().unwrap().to_owned();
        }
        // A front that has not yet seen a partition's writer answers 503: ask again.
        RETRIED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{base} never took a post");
}

async fn answered(http: &reqwest::Client, base: &str, thread: &str) {
    loop {
        let answers: serde_json::Value = http
            .get(format!("{base}/threads/{thread}/answers"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if answers.as_array().is_some_and(|a| !a.is_empty()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn main() {
    let cfg = common::Config::from_env(1);
    let n = cfg.size("AGENTPUMP_BENCH_PARTITIONS_N", 2000, 64);
    let mut report = common::Report::new("partitions", &cfg);
    let dir = std::env::temp_dir().join(format!("agentpump-bench-parts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cluster = common::nats::Cluster::start(&dir);
    let url = cluster.url();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(cluster.elected());
    let mut sqlite = Vec::new();
    let mut pumps: [Vec<f64>; 3] = Default::default();
    for run in 0..cfg.runs {
        let (one, base) = host(
            &dir.join(format!("sqlite-{run}")),
            "path = \"bench.db\"",
            None,
        );
        sqlite.push(rt.block_on(rate(&[base], n)));
        drop(one);
        for count in 1..=3u32 {
            let store = format!(
                "kind = \"jetstream\"\nurl = \"{url}\"\nstream = \"bench-{run}-{count}\"\nreplicas = 3\nlease_ms = 5000\npartitions = {count}\n"
            );
            let hosts: Vec<(Host, String)> = (0..count)
                .map(|i| {
                    host(
                        &dir.join(format!("js-{run}-{count}-{i}")),
                        &store,
                        Some((i, count)),
                    )
                })
                .collect();
            let fronts: Vec<String> = hosts.iter().map(|(_, base)| base.clone()).collect();
            pumps[count as usize - 1].push(rt.block_on(rate(&fronts, n)));
            let retried = RETRIED.swap(0, std::sync::atomic::Ordering::Relaxed);
            eprintln!("  {count} partition(s): {retried} post(s) asked again");
        }
    }
    let params = json!({ "round_trips": n, "concurrent": CONCURRENT, "replicas": 3 });
    for (i, samples) in pumps.into_iter().enumerate() {
        let count = i + 1;
        let figure = Figure::new(
            &format!("P{count}"),
            &format!(
                "echo over HTTP, threads in {count} partition(s), one host writing each, 3 replicas"
            ),
            "round trips/s",
            Better::Higher,
            samples,
        )
        .baseline("one host on the durable SQLite history", sqlite.clone())
        .params(params.clone());
        let ratio = figure.value() / figure.baseline_value().unwrap_or(f64::NAN);
        report.add(figure.ratio(ratio, "partitioned / SQLite"));
    }
    report.finish();
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}
