//! `cargo bench --bench remote`: the echo round trip through a remote listener (a real
//! `nats-server -js` on loopback and one real `agentpump worker`) against the same echo in the
//! pump, in the same run. Needs `nats-server` on the PATH (`apt-get install nats-server`).
//!
//! `AGENTPUMP_BENCH_REMOTE_N` round trips per figure (default 2000), over 32 concurrent threads.
//!
//! Then workers as capacity: a listener that waits 20 ms a delivery (`sleep`), and one that
//! computes (`digest`, SHA-256 rounds calibrated to about `AGENTPUMP_BENCH_CPU_MS` ms of one core
//! a delivery, default 20), each with one worker and then two, one delivery at a time per worker.

mod common;

use std::io::BufRead as _;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentpump::history::MemoryHistory;
use agentpump::host::cluster::ClusterSection;
use agentpump::host::cluster::hub::Hub;
use agentpump::listeners::{Digest, Echo, Sleep};
use agentpump::{PumpBuilder, PumpHandle, QName, Registration};
use common::nats::Process;

/// Threads in flight at once.
const CONCURRENT: usize = 32;

/// Round trips per second of the echo: `n` posts, each into a new thread, `CONCURRENT` at a time.
async fn rate(pump: &PumpHandle, n: usize) -> f64 {
    deliveries(pump, n, r#"<say xmlns="urn:bench:v1">ping</say>"#).await
}

/// `agentpump worker` for `listener`, once it serves.
fn worker(organism: &std::path::Path, listener: &str, concurrency: usize) -> Process {
    let mut worker = Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .args(["worker", "--organism", organism.to_str().unwrap()])
        .args([
            "--listeners",
            listener,
            "--concurrency",
            &concurrency.to_string(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ready = std::io::BufReader::new(worker.stdout.take().unwrap())
        .lines()
        .next();
    assert!(ready.is_some_and(|l| l.is_ok_and(|l| l.contains("worker serving"))));
    Process(worker)
}

/// Deliveries per second of `n` posts of `payload`, each into a new thread, `CONCURRENT` at a
/// time.
async fn deliveries(pump: &PumpHandle, n: usize, payload: &str) -> f64 {
    common::posting::deliveries(pump, n, CONCURRENT, payload).await
}

/// SHA-256 rounds that take about `ms` milliseconds of one core here (as `Digest` computes them).
fn rounds_for(ms: u64) -> u64 {
    use sha2::Digest as _;
    const SAMPLE: u64 = 200_000;
    let started = Instant::now();
    let mut hash = sha2::Sha256::digest(b"calibrate");
    for _ in 1..SAMPLE {
        hash = sha2::Sha256::digest(hash);
    }
    std::hint::black_box(hash);
    let per_round = started.elapsed().as_secs_f64() / SAMPLE as f64;
    ((ms as f64 / 1000.0) / per_round) as u64
}

/// The machine's own scaling at this moment: `n` chains of `rounds` SHA-256 rounds on one OS
/// thread of this process, then on two (no pump, no NATS) — the ceiling for two workers.
fn cores_now(rounds: u64, n: usize) -> f64 {
    use sha2::Digest as _;
    let chain = move |_| {
        let mut hash = sha2::Sha256::digest(b"ceiling");
        for _ in 1..rounds {
            hash = sha2::Sha256::digest(hash);
        }
        std::hint::black_box(hash);
    };
    let started = Instant::now();
    (0..n).for_each(chain);
    let one = started.elapsed();
    let started = Instant::now();
    std::thread::scope(|s| {
        for half in [0..n / 2, n / 2..n] {
            s.spawn(move || half.for_each(chain));
        }
    });
    one.as_secs_f64() / started.elapsed().as_secs_f64()
}

/// One worker serving `listener`, then a second one joining it: deliveries per second of each.
async fn one_then_two(
    pump: &PumpHandle,
    organism: &std::path::Path,
    listener: &str,
    n: usize,
    payload: &str,
) -> (f64, f64) {
    let _a = worker(organism, listener, 1);
    let one = deliveries(pump, n, payload).await;
    let _b = worker(organism, listener, 1);
    let two = deliveries(pump, n, payload).await;
    (one, two)
}

fn main() {
    let n: usize = std::env::var("AGENTPUMP_BENCH_REMOTE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = std::env::temp_dir().join(format!("agentpump-bench-remote-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_nats, url) = common::nats::server(&dir);
    let organism = dir.join("organism.toml");
    std::fs::write(
        &organism,
        format!(
            "[organism]\nname = \"bench\"\n[cluster]\nurl = \"{url}\"\n\
             [[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\n\
             accepts = [\"{{urn:bench:v1}}say\"]\nremote = true\n\
             [[listener]]\nname = \"nap\"\nkind = \"builtin\"\nbuiltin = \"sleep\"\n\
             accepts = [\"{{urn:bench:v1}}nap\"]\nremote = true\n\
             [[listener]]\nname = \"digest\"\nkind = \"builtin\"\nbuiltin = \"digest\"\n\
             accepts = [\"{{urn:bench:v1}}work\"]\nremote = true\n"
        ),
    )
    .unwrap();
    let _worker = worker(&organism, "echo", 32);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let say = QName::new("urn:bench:v1", "say");
        let local = PumpBuilder::new()
            .register(Registration::new("echo", Echo).accepts(say.clone()))
            .build()
            .unwrap();
        let store = Arc::new(MemoryHistory::new());
        let cluster: ClusterSection = toml::from_str(&format!("url = \"{url}\"")).unwrap();
        let hub = Hub::start(&cluster, &dir, "bench", store.clone(), None)
            .await
            .unwrap();
        let nap = QName::new("urn:bench:v1", "nap");
        let work = QName::new("urn:bench:v1", "work");
        let remote = PumpBuilder::new()
            .history(store)
            .register(hub.remote(Registration::new("echo", Echo).accepts(say)))
            .register(hub.remote(Registration::new("nap", Sleep).accepts(nap)))
            .register(hub.remote(Registration::new("digest", Digest).accepts(work)))
            .build()
            .unwrap();
        let _ = rate(&remote, CONCURRENT).await; // warm: the stream, the consumer, the connections
        let _ = rate(&local, CONCURRENT * 10).await;
        let local_rate = rate(&local, n).await;
        let remote_rate = rate(&remote, n).await;
        println!("remote echo: {n} round trips, {CONCURRENT} threads at once");
        println!("  local  echo  {local_rate:>10.0} round trips/s");
        println!(
            "  remote echo  {remote_rate:>10.0} round trips/s (one worker, nats-server on loopback)"
        );
        println!("  ratio remote/local  {:.4}", remote_rate / local_rate);
        // Workers as capacity: a listener that takes 20 ms a delivery (waiting, not computing),
        // one delivery at a time per worker; then a second worker joins the same consumer.
        let naps_n = CONCURRENT * 4;
        let nap = r#"<nap xmlns="urn:bench:v1" ms="20"/>"#;
        let naps = one_then_two(&remote, &organism, "nap", naps_n, nap).await;
        println!("sleep 20 ms, {naps_n} deliveries, one delivery at a time per worker");
        println!("  one worker   {:>8.1} deliveries/s", naps.0);
        println!(
            "  two workers  {:>8.1} deliveries/s (x{:.2})",
            naps.1,
            naps.1 / naps.0
        );
        // The same with CPU work: the second worker needs a core of its own, and this machine's
        // cores also run the pump, nats-server and the bench's clients.
        let cpu_ms: u64 = std::env::var("AGENTPUMP_BENCH_CPU_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(20);
        let rounds = rounds_for(cpu_ms);
        let work = format!(r#"<work xmlns="urn:bench:v1" rounds="{rounds}"/>"#);
        let cpu = one_then_two(&remote, &organism, "digest", naps_n, &work).await;
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let ceiling = cores_now(rounds, 32);
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!(
            "digest, about {cpu_ms} ms of CPU ({rounds} SHA-256 rounds), {naps_n} deliveries, \
             one delivery at a time per worker, {cores} cores"
        );
        println!("  one worker   {:>8.1} deliveries/s", cpu.0);
        println!(
            "  two workers  {:>8.1} deliveries/s (x{:.2})",
            cpu.1,
            cpu.1 / cpu.0
        );
        println!(
            "  the same work on two OS threads of this process against one, no NATS: x{ceiling:.2} \
             (load average {})",
            load.split(' ').take(3).collect::<Vec<_>>().join(" ")
        );
        local.shutdown(Duration::from_secs(5)).await;
        remote.shutdown(Duration::from_secs(5)).await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}
