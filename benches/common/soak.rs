//! Figure 8: the HTTP API under sustained load (the soak).
//!
//! The pump runs with a durable `SqliteHistory` (default options: `synchronous=FULL`), an echo
//! listener and a queue capacity of 8, behind the real HTTP server on a loopback port, in this
//! process and on the same runtime as the clients (the load generator shares the two cores, so
//! the rates are a lower bound for the server alone). `AGENTPUMP_SOAK_CLIENTS` tasks (default
//! 200) share one `reqwest::Client` pool and post for `AGENTPUMP_SOAK_SECS` seconds (default 60):
//! every 50th request (`AGENTPUMP_SOAK_CONVERSATION`) starts a thread of the client's own, odd
//! ones go into one of 4 threads shared by all clients (whose queues fill: `503 queue-full`),
//! even ones into the client's own. The turn and wall-clock budgets are lifted so the shared
//! threads live through the soak.
//!
//! Every 5 s it prints requests/s, p50/p99 latency, refusals by code, CPU time per request and
//! cores used, resident memory, the history's size on disk and the number of threads started.
//! At the end it checks that the server still answers, that the set of messages from the client
//! in the store is exactly the set of acknowledged ones (by
//! [`Fingerprint`](client::Fingerprint)), and that every hash chain verifies; any answer other
//! than `201` or `503 queue-full` fails the soak.

mod client;
mod histogram;
mod output;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use agentpump::governor::{Budget, GovernorPolicy};
use agentpump::history::{RecordKind, SqliteHistory};
use agentpump::host::server;
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, PumpHandle, QName, Registration, ThreadId};
use tokio::runtime::Runtime;

use self::client::{Client, Fingerprint, Tally};
use self::histogram::Counts;
use super::baseline::{ECHO_NS, PING};
use super::report::Report;
use super::{Config, config, on_workers, resident_bytes};

const TOKEN: &str = "soak-token-0123456789";
/// Threads every client posts into.
const SHARED_THREADS: usize = 4;
/// Queue capacity of every thread (the default is 1024), small so that backpressure happens.
const QUEUE_CAPACITY: usize = 8;

/// How long, how many clients, how often to report.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Seconds of load (`AGENTPUMP_SOAK_SECS`, default 60; 2 in a smoke test).
    pub secs: u64,
    /// Concurrent clients (`AGENTPUMP_SOAK_CLIENTS`, default 200; 8 in a smoke test).
    pub clients: usize,
    /// Reporting interval (5 s; 1 s in a smoke test).
    pub every: Duration,
    /// Requests a client sends into a thread of its own before starting the next
    /// (`AGENTPUMP_SOAK_CONVERSATION`, default 50). Root threads stay open, so resident memory
    /// grows with them by design; a very large value keeps the thread count fixed, to see the
    /// memory of everything else alone.
    pub conversation: u64,
    /// How long a thread tree stays quiet before it leaves memory (`AGENTPUMP_SOAK_EVICT_MS`,
    /// default 10 000; 0 keeps every thread, as before issue 19's eviction).
    pub evict: Option<Duration>,
}

impl Settings {
    /// From the environment, at full size under `cargo bench`.
    pub fn from_config(cfg: &Config) -> Self {
        Self {
            secs: cfg.size("AGENTPUMP_SOAK_SECS", 60, 2) as u64,
            clients: cfg.size("AGENTPUMP_SOAK_CLIENTS", 200, 8).max(1),
            every: Duration::from_secs(if cfg.full { 5 } else { 1 }),
            conversation: cfg.size("AGENTPUMP_SOAK_CONVERSATION", 50, 50) as u64,
            evict: Some(cfg.size("AGENTPUMP_SOAK_EVICT_MS", 10_000, 10_000) as u64)
                .filter(|&ms| ms > 0)
                .map(Duration::from_millis),
        }
    }
}

/// What one reporting interval saw.
#[derive(Debug, Clone)]
struct Interval {
    /// Seconds since the load began, at the end of the interval.
    at: f64,
    /// Answered requests per second (acknowledged or refused).
    rate: f64,
    /// Acknowledged requests per second.
    acked_rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// Refusals in this interval, by status and code.
    refused: BTreeMap<String, u64>,
    /// CPU time of this process (server and clients) per answered request, in µs. Time spent
    /// waiting for a core is not in it, so other processes' load moves it less than the rate;
    /// it still moves with `cores` (more parallel work, more cross-core wake-ups: measured
    /// 75–99 µs/request at 0.9–1.5 cores in one run).
    cpu_us_per_request: f64,
    /// Cores this process kept busy (CPU seconds per second).
    cores: f64,
    rss: u64,
    /// Bytes of the history file and its WAL.
    history: u64,
    /// Threads started over HTTP so far (all stay open).
    threads: u64,
    /// Threads in the pump's memory at the end of the interval (the others were evicted).
    resident: usize,
}

/// CPU time (user + system) this process has used, in seconds: `utime` and `stime` of
/// `/proc/self/stat`, in clock ticks of 1/100 s (Linux's `USER_HZ`).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces): state is the first, utime the 12th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / 100.0
}

/// The pump, its store's folder, and the API's address.
struct Host {
    base: Arc<str>,
    pump: PumpHandle,
    dir: PathBuf,
}

impl Host {
    /// A pump over a fresh `SqliteHistory` in a scratch folder, served on a loopback port.
    async fn start(evict: Option<Duration>) -> Self {
        let dir = std::env::temp_dir().join(format!("agentpump-bench-soak-{}", ThreadId::new()));
        std::fs::create_dir_all(&dir).expect("scratch folder");
        let store = SqliteHistory::open(dir.join("history.db")).expect("open the history");
        let policy = GovernorPolicy {
            budget: Budget {
                turns: None,
                wall_clock: None,
                ..GovernorPolicy::default_budget()
            },
            ..GovernorPolicy::default()
        };
        let pump = PumpBuilder::new()
            .history(Arc::new(store))
            .config(agentpump::PumpConfig {
                queue_capacity: QUEUE_CAPACITY,
                evict_idle_after: evict,
                ..config(policy)
            })
            .register(Registration::new("echo", Echo).accepts(QName::new(ECHO_NS, "ping")))
            .build()
            .expect("the soak pump builds");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a loopback port");
        let base = format!("http://{}", listener.local_addr().expect("an address"));
        let served = pump.clone();
        tokio::spawn(async move {
            server::serve(listener, served, TOKEN, 64 * 1024, std::future::pending()).await
        });
        Self {
            base: Arc::from(base),
            pump,
            dir,
        }
    }

    /// Bytes of the history file, its WAL and its shared-memory index.
    fn history_bytes(&self) -> u64 {
        ["history.db", "history.db-wal", "history.db-shm"]
            .iter()
            .filter_map(|f| std::fs::metadata(self.dir.join(f)).ok())
            .map(|m| m.len())
            .sum()
    }
}

/// What a soak measured and checked.
#[derive(Debug)]
struct Soak {
    settings: Settings,
    intervals: Vec<Interval>,
    /// Resident memory after start-up, before the load.
    rss_before: u64,
    /// Latencies of the whole soak.
    latency: Counts,
    refused: BTreeMap<String, u64>,
    /// Acknowledged messages (setup and final check included).
    acked: u64,
    /// Records whose hash chains verified at the end.
    verified: u64,
}

/// Runs the soak and adds figure 8 (rate, p50, p99, resident memory) to `report`.
pub fn figures(cfg: &Config, rt: &Runtime, report: &mut Report) {
    if !cfg.wants("8") {
        return;
    }
    let settings = Settings::from_config(cfg);
    println!(
        "soak: {} clients for {} s over HTTP, durable SqliteHistory, queue capacity {QUEUE_CAPACITY}",
        settings.clients, settings.secs
    );
    let soak = on_workers(rt, soak(settings));
    output::print_summary(&soak);
    output::add_figures(&soak, report);
    output::add_drift(&soak, report);
}

/// Starts the host and the shared threads, runs the clients while reporting every interval,
/// then checks the server and the history.
async fn soak(settings: Settings) -> Soak {
    let host = Host::start(settings.evict).await;
    let tally = Arc::new(Tally::new());
    let client = Client {
        http: {
            agentpump::listeners::llm::install_tls_provider();
            reqwest::Client::new()
        },
        base: Arc::clone(&host.base),
        token: Arc::from(TOKEN),
        shared: Arc::from(Vec::new()),
        payload: PING,
        conversation: settings.conversation,
    };
    let mut acked = Fingerprint::default();
    let client = start_shared(client, &tally, &mut acked).await;
    tally.latency.drain();
    let rss_before = resident_bytes();
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..settings.clients)
        .map(|n| tokio::spawn(client.clone().run(n, Arc::clone(&tally), Arc::clone(&stop))))
        .collect();
    let (intervals, mut latency) = observe(&host, &tally, settings).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        acked.merge(t.await.expect("a client panicked"));
    }
    latency.add(&tally.latency.drain());
    let after = client.post("/threads", &tally).await;
    let after = after.expect("the server still answers after the soak");
    after.ids.iter().for_each(|id| acked.add(*id));
    let checking = Instant::now();
    let verified = check(&host, &tally, acked).await;
    println!("soak: checked in {:.1} s", checking.elapsed().as_secs_f64());
    host.pump.shutdown(Duration::from_secs(10)).await;
    let _ = std::fs::remove_dir_all(&host.dir);
    Soak {
        settings,
        intervals,
        rss_before,
        latency,
        refused: tally.refusals(),
        acked: acked.count(),
        verified,
    }
}

/// Starts the shared threads, one message each (fingerprinted into `acked`); returns `client`
/// set to post into them.
async fn start_shared(client: Client, tally: &Tally, acked: &mut Fingerprint) -> Client {
    let mut shared = Vec::new();
    for _ in 0..SHARED_THREADS {
        let receipt = client
            .post("/threads", tally)
            .await
            .expect("a shared thread");
        receipt.ids.iter().for_each(|id| acked.add(*id));
        shared.push(receipt.thread);
    }
    Client {
        shared: shared.into(),
        ..client
    }
}

/// Prints one line per interval until the soak's time is up; returns the intervals and the
/// latencies of them all.
async fn observe(host: &Host, tally: &Tally, settings: Settings) -> (Vec<Interval>, Counts) {
    let started = Instant::now();
    let end = started + Duration::from_secs(settings.secs);
    let (mut last, mut last_acked, mut last_refused, mut last_cpu) = (
        started,
        tally.acked.load(Ordering::Relaxed),
        tally.refusals(),
        cpu_seconds(),
    );
    let (mut intervals, mut all) = (Vec::new(), Counts::empty());
    while last < end {
        tokio::time::sleep_until((last + settings.every).min(end).into()).await;
        let now = Instant::now();
        let secs = (now - last).as_secs_f64();
        let counts = tally.latency.drain();
        let acked = tally.acked.load(Ordering::Relaxed);
        let refused = tally.refusals();
        let cpu = cpu_seconds();
        let interval = Interval {
            at: (now - started).as_secs_f64(),
            rate: counts.total() as f64 / secs,
            acked_rate: (acked - last_acked) as f64 / secs,
            p50_ms: counts.quantile_ms(0.5),
            p99_ms: counts.quantile_ms(0.99),
            refused: difference(&refused, &last_refused),
            cpu_us_per_request: (cpu - last_cpu) * 1e6 / counts.total().max(1) as f64,
            cores: (cpu - last_cpu) / secs,
            rss: resident_bytes(),
            history: host.history_bytes(),
            threads: tally.started.load(Ordering::Relaxed),
            resident: host.pump.residency().resident,
        };
        output::print_interval(&interval);
        all.add(&counts);
        intervals.push(interval);
        (last, last_acked, last_refused, last_cpu) = (now, acked, refused, cpu);
    }
    (intervals, all)
}

/// `now - before`, per key.
fn difference(
    now: &BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
) -> BTreeMap<String, u64> {
    now.iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .collect()
}

/// Fails the soak on any unexpected answer, or if the client messages in the store are not
/// exactly the acknowledged ones; returns how many records verified.
async fn check(host: &Host, tally: &Tally, acked: Fingerprint) -> u64 {
    let unexpected = tally.unexpected.load(Ordering::Relaxed);
    let examples = tally.examples.lock().expect("tally lock").clone();
    assert!(
        unexpected == 0,
        "{unexpected} unexpected answers, the first: {examples:#?}"
    );
    let store = host.pump.store();
    let mut stored = Fingerprint::default();
    for info in store.threads(None).await.expect("threads readable") {
        for r in store.thread(info.id, 0).await.expect("history readable") {
            if r.kind == RecordKind::Message && &*r.from == "client" {
                stored.add(r.id);
            }
        }
    }
    assert_eq!(
        stored,
        acked,
        "the client messages in the store are not the acknowledged ones ({} stored, {} acknowledged)",
        stored.count(),
        acked.count()
    );
    println!(
        "soak: all {} acknowledged messages are in the history, and nothing else from the client",
        acked.count()
    );
    store.verify().await.expect("every hash chain verifies")
}
