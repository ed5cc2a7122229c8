//! `cargo bench --bench remote`: the echo round trip through a remote listener (a real
//! `nats-server -js` on loopback and one real `agentpump worker`) against the same echo in the
//! pump, in the same run. Needs `nats-server` on the PATH (`apt-get install nats-server`).
//!
//! `AGENTPUMP_BENCH_REMOTE_N` round trips per figure (default 2000), over 32 concurrent threads.

use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentpump::history::MemoryHistory;
use agentpump::host::cluster::ClusterSection;
use agentpump::host::cluster::hub::Hub;
use agentpump::listeners::{Echo, Sleep};
use agentpump::{PumpBuilder, PumpHandle, QName, Registration};

/// Threads in flight at once.
const CONCURRENT: usize = 32;

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

/// Round trips per second: `n` posts, each into a new thread, `CONCURRENT` at a time.
async fn rate(pump: &PumpHandle, n: usize) -> f64 {
    let payload = r#"<say xmlns="urn:bench:v1">ping</say>"#;
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENT)
        .map(|_| {
            let pump = pump.clone();
            tokio::spawn(async move {
                for _ in 0..n / CONCURRENT {
                    let thread = pump.post(None, None, payload).await.unwrap().thread();
                    pump.settle(thread).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (n / CONCURRENT * CONCURRENT) as f64 / started.elapsed().as_secs_f64()
}

/// `agentpump worker` for `listener`, once it serves.
fn worker(organism: &std::path::Path, listener: &str, concurrency: usize) -> Kill {
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
    Kill(worker)
}

/// Deliveries per second of `n` naps of `ms` each, `CONCURRENT` threads at a time.
async fn naps(pump: &PumpHandle, n: usize, ms: u64) -> f64 {
    let payload = format!(r#"<nap xmlns="urn:bench:v1" ms="{ms}"/>"#);
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONCURRENT)
        .map(|_| {
            let (pump, payload) = (pump.clone(), payload.clone());
            tokio::spawn(async move {
                for _ in 0..n / CONCURRENT {
                    let thread = pump.post(None, None, &payload).await.unwrap().thread();
                    pump.settle(thread).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    (n / CONCURRENT * CONCURRENT) as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let n: usize = std::env::var("AGENTPUMP_BENCH_REMOTE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let dir = std::env::temp_dir().join(format!("agentpump-bench-remote-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}");
    let _nats = Kill(
        Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.join("js"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start nats-server: `apt-get install nats-server`"),
    );
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let organism = dir.join("organism.toml");
    std::fs::write(
        &organism,
        format!(
            "[organism]\nname = \"bench\"\n[cluster]\nurl = \"{url}\"\n\
             [[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\n\
             accepts = [\"{{urn:bench:v1}}say\"]\nremote = true\n\
             [[listener]]\nname = \"nap\"\nkind = \"builtin\"\nbuiltin = \"sleep\"\n\
             accepts = [\"{{urn:bench:v1}}nap\"]\nremote = true\n"
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
        let hub = Hub::start(&cluster, &dir, "bench", store.clone())
            .await
            .unwrap();
        let nap = QName::new("urn:bench:v1", "nap");
        let remote = PumpBuilder::new()
            .history(store)
            .register(hub.remote(Registration::new("echo", Echo).accepts(say)))
            .register(hub.remote(Registration::new("nap", Sleep).accepts(nap)))
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
        let one = {
            let _a = worker(&organism, "nap", 1);
            let one = naps(&remote, naps_n, 20).await;
            let _b = worker(&organism, "nap", 1);
            let two = naps(&remote, naps_n, 20).await;
            (one, two)
        };
        println!("sleep 20 ms, {naps_n} deliveries, one delivery at a time per worker");
        println!("  one worker   {:>8.1} deliveries/s", one.0);
        println!(
            "  two workers  {:>8.1} deliveries/s (x{:.2})",
            one.1,
            one.1 / one.0
        );
        local.shutdown(Duration::from_secs(5)).await;
        remote.shutdown(Duration::from_secs(5)).await;
    });
    let _ = std::fs::remove_dir_all(&dir);
}
