//! Figures U1–U4: speed as users run the pump (issue 20).
//!
//! A program written against agentpump runs under `#[tokio::main]`: a multi-threaded runtime
//! with one worker per core, and `main`'s body — the client — on the program's own thread,
//! outside the workers. The other figures run their client as a task on the workers
//! (`on_workers`) or on a current-thread runtime; these run it with `Runtime::block_on` on the
//! bench's main thread, exactly as `#[tokio::main]` does, through the public API only (`post`,
//! `settle`, a listener's `Context`). Each is measured in the same run on a current-thread
//! runtime too (the lower bound: no wake-up crosses a core) and against the bare baseline
//! on the same runtime, driven the same way.
//!
//! - **U1** echo round trip on one thread: post, then settle, `AGENTPUMP_BENCH_ECHO_N` times.
//! - **U1p** the same, pipelined: the client posts a window of `AGENTPUMP_BENCH_WINDOW`
//!   pings (default 256) without waiting, then settles the thread, until `n` are answered.
//! - **U2** echo across `AGENTPUMP_BENCH_THREADS` threads: post once into each, then settle
//!   each, `AGENTPUMP_BENCH_ROUNDS` rounds (2 one-way messages per post: the ping, the answer).
//! - **U3** self-iteration hop: one post, `n` iterations, settle; µs per hop at 1 000 and at
//!   `AGENTPUMP_BENCH_ITERATIONS` iterations.
//! - **U4** spawn fan-out: `AGENTPUMP_BENCH_CHILDREN` children, µs per child, against U3's hop.
//! - **U5p / U5** the echo with a durable history, as `agentpump run` keeps it (`SqliteHistory`
//!   with its defaults: WAL, `synchronous=FULL`, a fresh file per run), pipelined by U1p's window
//!   and one at a time, against the same echo on `MemoryHistory` in the same run;
//!   `AGENTPUMP_BENCH_DURABLE_ECHO_N` round trips per run (default 5 000).
//! - **U6** many threads at once (issue 34): `AGENTPUMP_BENCH_SELF_THREADS` threads (default
//!   200) × `AGENTPUMP_BENCH_SELF_ROUNDS` self-iterations each (default 500), all posted at
//!   once, no client in the loop, on a multi-threaded runtime with 1 worker and with every
//!   core, beside the bare ceiling of the same shape in the same run; calls/s and the ratio
//!   all workers / 1 worker for both. **U6h**: U3's hop at 1 000 and at
//!   `AGENTPUMP_BENCH_ITERATIONS` on 1 worker and on every core, and their ratio.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use agentpump::history::{HistoryStore, MemoryHistory, SqliteHistory};
use agentpump::{PumpHandle, ThreadId};
use serde_json::json;
use tokio::runtime::Runtime;

use super::baseline::{self, PING};
use super::echo::{echo_pump, pipelined};
use super::iteration::{Counter, count, counter_pump, iterate};
use super::report::{Better, Figure, Report};
use super::spawn::fan_out;
use super::{Config, governed, median, secs};

/// `#[tokio::main]`'s runtime: multi-threaded, one worker per core.
fn main_runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a multi-threaded runtime")
}

/// A multi-threaded runtime with `workers` workers.
fn workers_runtime(workers: usize) -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("a multi-threaded runtime")
}

/// `#[tokio::main(flavor = "current_thread")]`'s runtime.
fn current_runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
}

/// U2's client: a new thread per ping, then `rounds` rounds of one ping into each, settling
/// every thread after each round. Returns the time of the rounds.
async fn many_threads(threads: usize, rounds: usize) -> Duration {
    let pump = echo_pump(governed(), Arc::new(MemoryHistory::new()));
    let mut ids: Vec<ThreadId> = Vec::with_capacity(threads);
    for _ in 0..threads {
        ids.push(
            pump.post(None, None, PING)
                .await
                .expect("accepted")
                .thread(),
        );
    }
    settle_all(&pump, &ids).await;
    let started = Instant::now();
    for _ in 0..rounds {
        for id in &ids {
            pump.post(Some(*id), None, PING).await.expect("accepted");
        }
        settle_all(&pump, &ids).await;
    }
    started.elapsed()
}

async fn settle_all(pump: &PumpHandle, ids: &[ThreadId]) {
    for id in ids {
        pump.settle(*id).await;
    }
}

/// U3's client: µs per hop over a run of `n` iterations on a fresh pump.
async fn hops(n: u64) -> f64 {
    let counter = Counter {
        stamps: Arc::new(Vec::<AtomicU64>::new()),
        base: Instant::now(),
    };
    let pump = counter_pump(Arc::new(MemoryHistory::new()), counter);
    secs(iterate(&pump, n).await) * 1e6 / n as f64
}

/// U3's hop at `short` and at `n` iterations on runtimes `a` and `b`, `runs` of each,
/// interleaved: `[a short, b short, a long, b long]`, µs per hop.
fn hop_samples((a, b): (&Runtime, &Runtime), short: u64, n: u64, runs: usize) -> [Vec<f64>; 4] {
    let mut samples: [Vec<f64>; 4] = Default::default();
    for _ in 0..runs {
        for (i, (rt, length)) in [(a, short), (b, short), (a, n), (b, n)]
            .into_iter()
            .enumerate()
        {
            samples[i].push(once(rt, || hops(length)));
        }
    }
    samples
}

/// U6's client: `threads` counters of `rounds` iterations each, all posted at once; returns
/// calls (deliveries) per second from the first post to the last thread settled.
async fn many_selves(threads: usize, rounds: usize) -> f64 {
    let counter = Counter {
        stamps: Arc::new(Vec::<AtomicU64>::new()),
        base: Instant::now(),
    };
    let pump = counter_pump(Arc::new(MemoryHistory::new()), counter);
    let started = Instant::now();
    let mut ids = Vec::with_capacity(threads);
    for _ in 0..threads {
        let posted = pump.post(None, None, &count(1, rounds as u64)).await;
        ids.push(posted.expect("accepted").thread());
    }
    settle_all(&pump, &ids).await;
    (threads * rounds) as f64 / secs(started.elapsed())
}

/// U5's client: `n` echo round trips in windows of `window` on a fresh store, durable (a new
/// `SqliteHistory` file with `agentpump run`'s defaults, removed afterwards) or in memory.
async fn stored_echo(durable: bool, n: usize, window: usize) -> f64 {
    let dir = std::env::temp_dir().join(format!("agentpump-bench-users-{}", ThreadId::new()));
    let store: Arc<dyn HistoryStore> = if durable {
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        Arc::new(SqliteHistory::open(dir.join("history.db")).expect("a fresh history file"))
    } else {
        Arc::new(MemoryHistory::new())
    };
    let rate = n as f64 / secs(pipelined(echo_pump(governed(), store), n, window).await);
    if durable {
        let _ = std::fs::remove_dir_all(&dir);
    }
    rate
}

/// U5p (`window` > 1) or U5: the echo on a durable history against the same in memory, both
/// on `#[tokio::main]`'s runtime, `runs` of each, interleaved.
fn durable_figure(mt: &Runtime, runs: usize, n: usize, window: usize, runtime: &str) -> Figure {
    let (mut durable, mut memory) = (vec![], vec![]);
    once(mt, || stored_echo(true, n / 10, window));
    for _ in 0..runs {
        durable.push(once(mt, || stored_echo(true, n, window)));
        memory.push(once(mt, || stored_echo(false, n, window)));
    }
    let (id, how) = if window == 1 {
        ("U5", "one at a time (post, settle)".to_owned())
    } else {
        ("U5p", format!("pipelined by {window}"))
    };
    Figure::new(
        id,
        &format!(
            "durable echo round trip (SqliteHistory, synchronous=FULL), {how}, as users run it"
        ),
        "round trips/s",
        Better::Higher,
        durable,
    )
    .baseline(
        "the same echo on MemoryHistory, same runtime, same run",
        memory,
    )
    .params(
        json!({ "round_trips_per_run": n, "window": window, "runtime": runtime,
        "store": "SqliteHistory::open defaults (WAL, synchronous=FULL), fresh file per run" }),
    )
    .note("synchronous=FULL: every group commit is an fsync; the in-memory store writes nothing")
}

/// Runs `f` once on `rt` from the calling thread, as `#[tokio::main]` runs `main`'s body.
fn once<Fut: Future<Output = f64>>(rt: &Runtime, f: impl Fn() -> Fut) -> f64 {
    rt.block_on(f())
}

/// U1 (`window` 1: post, then settle) or U1p (post a window, then settle): the echo on
/// `#[tokio::main]`'s runtime beside the same on a current-thread runtime and the bare loop
/// driven the same way, `runs` of each, interleaved.
fn echo_figure(
    (mt, ct): (&Runtime, &Runtime),
    runs: usize,
    n: usize,
    window: usize,
    runtime: &str,
) -> Figure {
    let echo = || async move {
        let pump = echo_pump(governed(), Arc::new(MemoryHistory::new()));
        n as f64 / secs(pipelined(pump, n, window).await)
    };
    let bare = || async move { n as f64 / secs(baseline::pipelined(n, window).await) };
    once(mt, echo);
    once(ct, echo);
    let (mut pump, mut base, mut current) = (vec![], vec![], vec![]);
    for _ in 0..runs {
        pump.push(once(mt, echo));
        base.push(once(mt, bare));
        current.push(once(ct, echo));
    }
    let to_current = median(&pump) / median(&current);
    let (id, how) = if window == 1 {
        ("U1", "one at a time (post, settle)".to_owned())
    } else {
        (
            "U1p",
            format!("pipelined by {window} (post {window}, settle)"),
        )
    };
    let f = Figure::new(
        id,
        &format!("echo round trip, one thread, {how}, as users run it"),
        "round trips/s",
        Better::Higher,
        pump,
    )
    .baseline(
        "bare parse + channel, same windows, same runtime, client on main",
        base,
    )
    .params(
        json!({ "round_trips_per_run": n, "window": window, "runtime": runtime,
        "current_thread_samples": current }),
    )
    .note(&format!(
        "{to_current:.2} of the current-thread figure in the same run ({:.0} /s)",
        median(&current)
    ));
    let met = f.ratio_value().is_some_and(|r| r.0 >= 0.6) && to_current >= 0.8;
    f.target(
        "≥ 0.6 of the same-runtime baseline and ≥ 0.8 of the current-thread figure",
        met,
    )
}

/// Measures U1–U4, those `cfg` selects.
pub fn figures(cfg: &Config, report: &mut Report) {
    let mt = main_runtime();
    let ct = current_runtime();
    let runs = cfg.runs;
    let workers = std::thread::available_parallelism().map_or(1, usize::from);
    let runtime = format!("#[tokio::main]: multi-thread, {workers} workers, client on main");
    let n = cfg.size("AGENTPUMP_BENCH_ECHO_N", 30_000, 200);
    if cfg.wants("U1") {
        report.add(echo_figure((&mt, &ct), runs, n, 1, &runtime));
    }
    if cfg.wants("U1p") {
        let window = cfg
            .size("AGENTPUMP_BENCH_WINDOW", 256, 16)
            .min(baseline::CAPACITY);
        report.add(echo_figure((&mt, &ct), runs, n, window, &runtime));
    }
    if cfg.wants("U5p") || cfg.wants("U5") {
        let n = cfg.size("AGENTPUMP_BENCH_DURABLE_ECHO_N", 5_000, 100);
        let window = cfg
            .size("AGENTPUMP_BENCH_WINDOW", 256, 16)
            .min(baseline::CAPACITY);
        if cfg.wants("U5p") {
            report.add(durable_figure(&mt, runs, n, window, &runtime));
        }
        if cfg.wants("U5") {
            report.add(durable_figure(&mt, runs, n, 1, &runtime));
        }
    }
    if cfg.wants("U2") {
        let threads = cfg.size("AGENTPUMP_BENCH_THREADS", 10_000, 100);
        let rounds = cfg.size("AGENTPUMP_BENCH_ROUNDS", 8, 1).max(1);
        let messages = (2 * threads * rounds) as f64;
        let pumped = || async move { messages / secs(many_threads(threads, rounds).await) };
        let bare =
            || async move { messages / secs(baseline::many_tasks(threads, rounds, 1).await) };
        let (mut pump, mut base, mut current) = (vec![], vec![], vec![]);
        for _ in 0..runs {
            pump.push(once(&mt, pumped));
            base.push(once(&mt, bare));
            current.push(once(&ct, pumped));
        }
        let to_current = median(&pump) / median(&current);
        let f = Figure::new(
            "U2",
            &format!("echo across {threads} threads, as users run it"),
            "msg/s",
            Better::Higher,
            pump,
        )
        .baseline(
            "bare: a task per thread, same runtime, client on main",
            base,
        )
        .params(
            json!({ "threads": threads, "rounds": rounds, "runtime": runtime,
            "current_thread_samples": current }),
        )
        .note(&format!(
            "posts from main, then settle each thread; {to_current:.2} of the current-thread \
             figure in the same run ({:.0} msg/s)",
            median(&current)
        ));
        let met = f.ratio_value().is_some_and(|r| r.0 >= 0.5);
        report.add(f.target("≥ 0.5 of the same-runtime baseline", met));
    }
    if cfg.wants("U6") || cfg.wants("U6h") {
        cores_figures(cfg, report, workers);
    }
    if cfg.wants("U3") || cfg.wants("U4") {
        let n = cfg.size("AGENTPUMP_BENCH_ITERATIONS", 100_000, 100) as u64;
        let short = 1_000.min(n);
        let [mt_short, ct_short, mt_long, ct_long] = hop_samples((&mt, &ct), short, n, runs);
        let ratio = median(&mt_long) / median(&ct_long);
        let flat = median(&mt_long) / median(&mt_short);
        let hop = median(&mt_long);
        if cfg.wants("U3") {
            let f = Figure::new(
                "U3",
                &format!("self-iteration hop over {n} iterations, as users run it"),
                "µs/hop",
                Better::Lower,
                mt_long,
            )
            .baseline(
                "the same hop on a current-thread runtime, same run",
                ct_long,
            )
            .ratio(ratio, "multi-thread hop / current-thread hop")
            .params(
                json!({ "iterations": n, "short_run": short, "runtime": runtime,
                "multi_thread_short_samples": mt_short, "current_thread_short_samples": ct_short }),
            )
            .note(&format!(
                "hop({n}) / hop({short}) on the multi-thread runtime: {flat:.2}"
            ));
            report.add(f.target(
                "≤ 1.3× the current-thread hop, flat to 100 000",
                ratio <= 1.3 && flat <= 1.2,
            ));
        }
        if cfg.wants("U4") {
            let children = cfg.size("AGENTPUMP_BENCH_CHILDREN", 10_000, 100);
            let per_child = |rt: &Runtime| {
                let fan = || async move { secs(fan_out(children).await) * 1e6 / children as f64 };
                once(rt, fan);
                (0..runs).map(|_| once(rt, fan)).collect::<Vec<_>>()
            };
            let (mt_fan, ct_fan) = (per_child(&mt), per_child(&ct));
            let per_hop = median(&mt_fan) / hop;
            let f = Figure::new(
                "U4",
                &format!("spawn fan-out, {children} children, as users run it"),
                "µs/child",
                Better::Lower,
                mt_fan,
            )
            .baseline(
                "the same fan-out on a current-thread runtime, same run",
                ct_fan,
            )
            .ratio(per_hop, "µs per child / µs per self-iteration hop (U3)")
            .params(json!({ "children": children, "runtime": runtime }));
            report.add(f.target(
                "≤ 2× a self-iteration hop per child (issue 19)",
                per_hop <= 2.0,
            ));
        }
    }
}

/// U6 and U6h (issue 34): the same work on 1 worker and on every core.
fn cores_figures(cfg: &Config, report: &mut Report, workers: usize) {
    let (one, all) = (workers_runtime(1), workers_runtime(workers));
    let runs = cfg.runs;
    if cfg.wants("U6") {
        let threads = cfg.size("AGENTPUMP_BENCH_SELF_THREADS", 200, 20);
        let rounds = cfg.size("AGENTPUMP_BENCH_SELF_ROUNDS", 500, 50);
        let calls = (threads * rounds) as f64;
        let pumped = || many_selves(threads, rounds);
        if super::profiling() {
            // Only the pump's side, on `AGENTPUMP_BENCH_WORKERS` workers (default every core),
            // for `perf record` / `perf stat` of one side at a time.
            let rt = workers_runtime(super::env_usize("AGENTPUMP_BENCH_WORKERS", workers));
            for _ in 0..runs {
                eprintln!("U6 pump: {:.0} calls/s", once(&rt, pumped));
            }
            return;
        }
        let bare = || async move { calls / secs(baseline::many_selves(threads, rounds).await) };
        let (mut p1, mut pn, mut b1, mut bn) = (vec![], vec![], vec![], vec![]);
        once(&all, pumped);
        for _ in 0..runs {
            p1.push(once(&one, pumped));
            pn.push(once(&all, pumped));
            b1.push(once(&one, bare));
            bn.push(once(&all, bare));
        }
        let (mp1, mpn, mb1, mbn) = (median(&p1), median(&pn), median(&b1), median(&bn));
        let (pump_ratio, bare_ratio) = (mpn / mp1, mbn / mb1);
        let f = Figure::new(
            "U6",
            &format!("{threads} threads × {rounds} self-iterations at once, {workers} workers"),
            "calls/s",
            Better::Higher,
            pn,
        )
        .baseline(
            "bare ceiling: a task per thread (parse, SHA-256 chain, send to itself)",
            bn,
        )
        .ratio(
            pump_ratio / bare_ratio,
            "(pump all/1 worker) / (ceiling all/1 worker)",
        )
        .params(
            json!({ "threads": threads, "rounds": rounds, "workers": workers,
            "pump_one_worker_samples": p1, "bare_one_worker_samples": b1 }),
        )
        .note(&format!(
            "all/1 worker: pump {pump_ratio:.2} ({:.0} → {:.0} calls/s), bare {bare_ratio:.2} \
             ({:.0} → {:.0} calls/s)",
            mp1, mpn, mb1, mbn
        ));
        report.add(f.target(
            "ratio(pump) ≥ 0.95 × ratio(ceiling), all workers / 1 worker",
            pump_ratio >= 0.95 * bare_ratio,
        ));
    }
    if cfg.wants("U6h") {
        let n = cfg.size("AGENTPUMP_BENCH_ITERATIONS", 100_000, 100) as u64;
        let short = 1_000.min(n);
        let [s1, sn, l1, ln] = hop_samples((&one, &all), short, n, runs);
        // Issue 34: the hop stays flat — at n iterations ≤ 1.1 × at 1 000, on each runtime.
        let (flat_one, flat_all) = (median(&l1) / median(&s1), median(&ln) / median(&sn));
        let cores_ratio = median(&ln) / median(&l1);
        let f = Figure::new(
            "U6h",
            &format!("self-iteration hop over {n} iterations, {workers} workers"),
            "µs/hop",
            Better::Lower,
            ln,
        )
        .baseline("the same hop on 1 worker, same run", l1)
        .ratio(cores_ratio, "hop on every core / hop on 1 worker")
        .params(
            json!({ "iterations": n, "short_run": short, "workers": workers,
            "one_worker_short_samples": s1, "all_workers_short_samples": sn }),
        )
        .note(&format!(
            "hop({n}) / hop({short}): 1 worker {flat_one:.2}, {workers} workers {flat_all:.2}"
        ));
        report.add(f.target(
            "hop at 100 000 ≤ 1.1 × hop at 1 000, on 1 worker and on every core",
            flat_one <= 1.1 && flat_all <= 1.1,
        ));
    }
}
