//! Figure 5: resident memory per idle thread.
//!
//! Each variant runs in a child process of its own (the bench binary started again with
//! `AGENTPUMP_BENCH_MEMORY_CHILD` set), so freed memory of one variant cannot hide the next
//! one's growth. The child warms up, reads `VmRSS`, then creates `AGENTPUMP_BENCH_IDLE_THREADS`
//! threads (default 1 000 000) in 5 steps — each thread by one post to `Echo`, waiting until
//! every reply is recorded and the thread has settled (idle: no task, an empty queue) — and
//! reads `VmRSS` after each step. Bytes per thread = growth / threads.
//!
//! One child process per variant and run; `AGENTPUMP_BENCH_MEMORY_RUNS` runs (default 1: a
//! million threads take about 10 s with the pump, 20 s with `MemoryHistory`, and the figure is
//! nearly deterministic; the JSON keeps the growth of each of the 5 steps to show it).
//!
//! Figure 5e: resident memory while new threads keep being opened on SQLite history, with
//! eviction on (`evict_idle_after` 100 ms) and off: `AGENTPUMP_BENCH_EVICT_THREADS` threads
//! (default 200 000; 2 000 in the smoke run) in 5 steps, each step followed by a pause of
//! 300 ms (eviction's idle time plus a sweep), `VmRSS` read after each pause. The figure is
//! the growth per thread over the last two steps (flat: the caches that fill first are full
//! by then at the default size; the smoke run's 2 000 threads only show them filling).
//!
//! Variants: the pump with a store that keeps nothing (the pump's own memory: what the target is
//! about), the pump with `MemoryHistory` (everything kept: two records and a snapshot per
//! thread), and the baseline: a bare map of `id → Arc<Mutex<(empty queue, last payload)>>`,
//! what a registry entry of an idle conversation cannot do without.

use std::collections::{HashMap, VecDeque};
use std::io::Write as _;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentpump::ThreadId;
use agentpump::governor::GovernorPolicy;
use agentpump::history::{HistoryStore, MemoryHistory};
use serde_json::{Value, json};

use super::baseline::PING;
use super::echo::echo_pump;
use super::report::{Better, Figure, Report};
use super::stores::{Counting, Forgetful};
use super::threads::post_all;
use super::{Config, resident_bytes, runtime};

/// The environment variable that makes a bench binary a memory child.
pub const CHILD: &str = "AGENTPUMP_BENCH_MEMORY_CHILD";
const STEPS: usize = 5;

/// Runs as a memory child if this process is one; returns whether it was.
pub fn child_if_asked() -> bool {
    let Ok(variant) = std::env::var(CHILD) else {
        return false;
    };
    let threads: usize = std::env::var("AGENTPUMP_BENCH_IDLE_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let result = match variant.as_str() {
        "baseline" => bare(threads),
        "forgetful" => pump(threads, Arc::new(Forgetful)),
        "memory" => pump(threads, Arc::new(MemoryHistory::new())),
        "sqlite" => durable(threads, None, true),
        "evicting" => durable(threads, Some(std::time::Duration::from_millis(100)), true),
        "evicting-no-wall-clock" => {
            durable(threads, Some(std::time::Duration::from_millis(100)), false)
        }
        other => panic!("unknown memory variant {other}"),
    };
    println!("RESULT {result}");
    std::io::stdout().flush().expect("stdout");
    true
}

fn per_step(threads: usize) -> Vec<usize> {
    let base = threads / STEPS;
    (0..STEPS)
        .map(|i| {
            if i + 1 == STEPS {
                threads - base * (STEPS - 1)
            } else {
                base
            }
        })
        .collect()
}

fn pump(threads: usize, store: Arc<dyn HistoryStore>) -> Value {
    let rt = runtime();
    let counting = Counting::new(store);
    let pump = echo_pump(GovernorPolicy::default(), counting.clone());
    let clients = 2;
    // Every id is kept for `settle`; the vector is filled before the first reading.
    let mut ids = vec![ThreadId::new(); threads];
    let warm = rt.block_on(async {
        let warm = post_all(&pump, Arc::new(vec![None; 1_000]), clients).await;
        counting.wait_egress(1_000).await;
        for id in &warm {
            pump.settle(*id).await;
        }
        warm.len()
    });
    let before = resident_bytes();
    let started = Instant::now();
    let (mut readings, mut made) = (Vec::new(), 0usize);
    for step in per_step(threads) {
        let new = rt.block_on(async {
            let new = post_all(&pump, Arc::new(vec![None; step]), clients).await;
            counting.wait_egress((warm + made + step) as u64).await;
            for id in &new {
                pump.settle(*id).await;
            }
            new
        });
        ids[made..made + step].copy_from_slice(&new);
        drop(new);
        made += step;
        readings.push((made, resident_bytes()));
    }
    let idle = ids.iter().step_by((threads / 1000).max(1)).all(|id| {
        pump.thread(*id)
            .is_some_and(|t| t.state == agentpump::ThreadState::Idle)
    });
    assert!(idle, "every thread is idle");
    result(before, &readings, started.elapsed().as_secs_f64())
}

/// Threads opened on SQLite history (a scratch file), a pause after each step so that quiet
/// trees can leave (with `evict`), `VmRSS` after each pause. The default policy's wall clock
/// (1 h) makes the pump keep each evicted thread's deadline until it passes; `wall_clock`
/// false takes it out of the policy.
fn durable(threads: usize, evict: Option<std::time::Duration>, wall_clock: bool) -> Value {
    let rt = runtime();
    let dir = std::env::temp_dir().join(format!("agentpump-bench-evict-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch folder");
    let sqlite = agentpump::history::SqliteHistory::open(dir.join("history.db")).expect("history");
    let counting = Counting::new(Arc::new(sqlite));
    let mut policy = GovernorPolicy::default();
    if !wall_clock {
        policy.budget.wall_clock = None;
    }
    let config = agentpump::PumpConfig {
        evict_idle_after: evict,
        ..super::config(policy)
    };
    let pump = rt.block_on(async {
        agentpump::PumpBuilder::new()
            .config(config)
            .history(counting.clone())
            .register(
                agentpump::Registration::new("echo", agentpump::listeners::Echo)
                    .accepts(agentpump::QName::new(super::baseline::ECHO_NS, "ping")),
            )
            .build()
            .expect("the echo pump builds")
    });
    let clients = 8;
    let pause = std::time::Duration::from_millis(300);
    let mut opened = 0usize;
    let mut open = |n: usize| {
        let new = rt.block_on(async {
            let new = post_all(&pump, Arc::new(vec![None; n]), clients).await;
            counting.wait_egress((opened + n) as u64).await;
            for id in &new {
                pump.settle(*id).await;
            }
            tokio::time::sleep(pause).await;
            new
        });
        opened += n;
        new
    };
    let early: Vec<ThreadId> = open(1_000).into_iter().take(200).collect();
    let before = resident_bytes();
    let started = Instant::now();
    let (mut readings, mut made) = (Vec::new(), 0usize);
    for step in per_step(threads) {
        open(step);
        made += step;
        readings.push((made, resident_bytes()));
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut value = result(before, &readings, seconds);
    let r = pump.residency();
    value["resident_threads"] = json!(r.resident);
    value["evicted"] = json!(r.evicted);
    value["rss_by_step"] = json!(readings.iter().map(|(_, rss)| rss).collect::<Vec<_>>());
    // Reloads, timed: the first threads opened are long gone when eviction is on.
    let reload = rt.block_on(async {
        let t = Instant::now();
        for id in &early {
            assert!(pump.load(*id).await.expect("reload"), "a known thread");
        }
        t.elapsed().as_secs_f64() / early.len() as f64
    });
    value["reload_us"] = json!(reload * 1e6);
    drop(pump);
    let _ = std::fs::remove_dir_all(&dir);
    value
}

type Entry = Arc<Mutex<(VecDeque<Arc<str>>, Option<Arc<str>>)>>;

fn bare(threads: usize) -> Value {
    let mut map: HashMap<u128, Entry> = HashMap::new();
    let before = resident_bytes();
    let started = Instant::now();
    let (mut readings, mut made) = (Vec::new(), 0usize);
    for step in per_step(threads) {
        for _ in 0..step {
            let id = uuid::Uuid::new_v4().as_u128();
            let last: Arc<str> = Arc::from(PING);
            map.insert(id, Arc::new(Mutex::new((VecDeque::new(), Some(last)))));
        }
        made += step;
        readings.push((made, resident_bytes()));
    }
    assert_eq!(map.len(), threads);
    result(before, &readings, started.elapsed().as_secs_f64())
}

fn result(before: u64, readings: &[(usize, u64)], seconds: f64) -> Value {
    let (threads, after) = readings.last().copied().unwrap_or((0, before));
    let mut steps = Vec::new();
    let mut previous = (0usize, before);
    for &(made, rss) in readings {
        let grown = rss.saturating_sub(previous.1) as f64;
        steps.push(grown / (made - previous.0).max(1) as f64);
        previous = (made, rss);
    }
    json!({
        "threads": threads,
        "rss_before": before,
        "rss_after": after,
        "bytes_per_thread": after.saturating_sub(before) as f64 / threads.max(1) as f64,
        "bytes_per_thread_by_step": steps,
        "seconds": seconds,
    })
}

/// Starts this bench binary again as a memory child for `variant`; returns its result.
fn run_child(variant: &str, threads: usize, full: bool) -> Value {
    let exe = std::env::current_exe().expect("the bench binary's path");
    let mut command = Command::new(exe);
    if full {
        command.arg("--bench");
    }
    let output = command
        .env(CHILD, variant)
        .env("AGENTPUMP_BENCH_IDLE_THREADS", threads.to_string())
        .output()
        .expect("the memory child starts");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| {
            panic!(
                "memory child `{variant}` gave no result: {}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            )
        });
    serde_json::from_str(line).expect("the child's result is JSON")
}

/// Measures figure 5, if `cfg` selects it; `suffix` labels the ids.
pub fn figures(cfg: &Config, report: &mut Report, suffix: &str) {
    if !cfg.wants("5") {
        return;
    }
    let threads = cfg.size("AGENTPUMP_BENCH_IDLE_THREADS", 1_000_000, 2_000);
    let runs = cfg.size("AGENTPUMP_BENCH_MEMORY_RUNS", 1, 1).max(1);
    let mut results: HashMap<&str, Vec<Value>> = HashMap::new();
    for _ in 0..runs {
        for variant in ["baseline", "forgetful", "memory"] {
            let r = run_child(variant, threads, cfg.full);
            results.entry(variant).or_default().push(r);
        }
    }
    let per_thread = |variant: &str| -> Vec<f64> {
        results[variant]
            .iter()
            .map(|r| r["bytes_per_thread"].as_f64().unwrap_or(f64::NAN))
            .collect()
    };
    let steps = |variant: &str| -> Vec<Value> {
        results[variant]
            .iter()
            .map(|r| json!({ "bytes_per_thread_by_step": r["bytes_per_thread_by_step"],
                "seconds": r["seconds"], "rss_before": r["rss_before"], "rss_after": r["rss_after"] }))
            .collect()
    };
    let baseline_name = "bare map id → Arc<Mutex<(empty VecDeque, last payload)>>";
    let f = Figure::new(
        &format!("5{suffix}"),
        &format!("resident memory per idle thread, {threads} threads, store keeping nothing"),
        "bytes/thread",
        Better::Lower,
        per_thread("forgetful"),
    )
    .baseline(baseline_name, per_thread("baseline"))
    .params(json!({ "threads": threads, "runs": runs, "pump_runs": steps("forgetful"),
        "baseline_runs": steps("baseline"), "governor": "default policy" }))
    .note("VmRSS growth / threads, each variant in a fresh child process; every thread made by one echo and settled (idle)");
    let met = f.value() <= 2048.0;
    report.add(f.target("≤ 2 KiB/thread", met));
    evicting(cfg, report, suffix);
    report.add(
        Figure::new(
            &format!("5b{suffix}"),
            &format!("resident memory per idle thread, {threads} threads, MemoryHistory"),
            "bytes/thread",
            Better::Lower,
            per_thread("memory"),
        )
        .baseline(baseline_name, per_thread("baseline"))
        .params(json!({ "threads": threads, "runs": runs, "pump_runs": steps("memory") }))
        .note("includes the in-memory history: 2 records and a thread snapshot per thread"),
    );
}

/// Figure 5e: memory growth per thread opened on SQLite history, eviction on against off.
fn evicting(cfg: &Config, report: &mut Report, suffix: &str) {
    let threads = cfg.size("AGENTPUMP_BENCH_EVICT_THREADS", 200_000, 2_000);
    let on = run_child("evicting", threads, cfg.full);
    let no_clock = run_child("evicting-no-wall-clock", threads, cfg.full);
    let off = run_child("sqlite", threads, cfg.full);
    // Flat or not: the growth per thread over the last two steps, once the caches that fill
    // first (SQLite's pages, the writer's search-index cache) are full.
    let per = |r: &Value| {
        let steps = r["bytes_per_thread_by_step"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let last: Vec<f64> = steps
            .iter()
            .rev()
            .take(2)
            .filter_map(Value::as_f64)
            .collect();
        last.iter().sum::<f64>() / last.len().max(1) as f64
    };
    let f = Figure::new(
        &format!("5e{suffix}"),
        &format!("resident memory growth per thread opened over the last 2 of 5 steps, {threads} threads, SQLite history, eviction on (100 ms)"),
        "bytes/thread",
        Better::Lower,
        vec![per(&on)],
    )
    .baseline("the same with eviction off", vec![per(&off)])
    .params(json!({ "threads": threads, "evicting": on, "evicting_no_wall_clock": no_clock,
        "resident": off }))
    .note("VmRSS growth / threads after a 300 ms pause per step (idle time + a sweep), default policy (its 1 h wall clock keeps each evicted thread's deadline until it passes); evicting_no_wall_clock: the same without one; reload_us: one evicted thread brought back by PumpHandle::load");
    let met = f.value() <= 64.0;
    report.add(f.target("≤ 64 B/thread (flat)", met));
}
