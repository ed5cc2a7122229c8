//! Figure 3: self-iteration hop latency on one thread.
//!
//! A counter listener answers `<count to="N">i</count>` with `<count to="N">i+1</count>` (its own
//! root: one iteration) until `i = N`. Each delivery stamps the time it started, so the latency of
//! hop `i` (from delivery `i` to delivery `i+1`: handler, re-parse, route, history, queue,
//! dispatch) is `stamp[i+1] − stamp[i]`. Reported per position k: the mean of the `W` hops
//! starting at hop k (`AGENTPUMP_BENCH_WINDOW`, default 1 000), all from the same run of
//! `AGENTPUMP_BENCH_ITERATIONS + W` iterations (default 100 000), so hop(1) and hop(100 000)
//! are measured alike. Also: the first hop of fresh threads, and whole-run averages.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentpump::history::{HistoryStore, MemoryHistory};
use agentpump::{
    Context, Delivery, Listener, ListenerError, PumpBuilder, PumpHandle, QName, Registration,
};
use serde_json::json;
use tokio::runtime::Runtime;

use super::baseline;
use super::report::{Better, Figure, Report};
use super::stores::Forgetful;
use super::{Config, config, governed, median, on_workers, secs};

/// Namespace of the counter's payloads.
pub const COUNT_NS: &str = "urn:agentpump:bench:count:v1";

/// `<count to="N">i</count>`.
pub fn count(i: u64, to: u64) -> String {
    format!(r#"<count xmlns="{COUNT_NS}" to="{to}">{i}</count>"#)
}

/// Counts by messaging itself, stamping the start of every delivery.
#[derive(Debug)]
pub struct Counter {
    /// Nanoseconds since `base` at which delivery `i` started, at index `i`.
    pub stamps: Arc<Vec<AtomicU64>>,
    /// Time zero of the stamps.
    pub base: Instant,
}

fn read_count(text: &str) -> Option<(u64, u64)> {
    let to_at = text.find("to=\"")? + 4;
    let to = text[to_at..].split('"').next()?.parse().ok()?;
    let i = text[text.find('>')? + 1..text.rfind("</")?].parse().ok()?;
    Some((i, to))
}

#[async_trait::async_trait]
impl Listener for Counter {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        let now = self.base.elapsed().as_nanos() as u64;
        if msg.is_system() {
            return Ok(());
        }
        let (i, to) = read_count(msg.payload().as_str())
            .ok_or_else(|| ListenerError::InvalidPayload("not a count".into()))?;
        if let Some(stamp) = self.stamps.get(i as usize) {
            stamp.store(now, Ordering::Relaxed);
        }
        if i < to {
            cx.emit(count(i + 1, to));
        } else {
            cx.send(
                "client",
                format!(r#"<counted xmlns="{COUNT_NS}">{i}</counted>"#),
            );
        }
        Ok(())
    }
}

/// A pump with the counter, stamping into `stamps`.
pub fn counter_pump(store: Arc<dyn HistoryStore>, counter: Counter) -> PumpHandle {
    PumpBuilder::new()
        .config(config(governed()))
        .history(store)
        .register(
            Registration::new("counter", counter)
                .accepts(QName::new(COUNT_NS, "count"))
                .may_loop(true),
        )
        .build()
        .expect("the counter pump builds")
}

/// Runs one thread to `n` iterations; returns the time from post to settled.
pub async fn iterate(pump: &PumpHandle, n: u64) -> Duration {
    let started = Instant::now();
    let thread = pump
        .post(None, None, &count(1, n))
        .await
        .expect("accepted")
        .thread();
    pump.settle(thread).await;
    let elapsed = started.elapsed();
    let delivered = pump.thread(thread).map_or(0, |t| t.counters.deliveries);
    assert_eq!(delivered, n, "every iteration was delivered");
    elapsed
}

/// Mean latency in µs of the `w` hops starting at hop `k`.
fn window(stamps: &[AtomicU64], k: usize, w: usize) -> f64 {
    let at = |i: usize| stamps[i].load(Ordering::Relaxed) as f64;
    (at(k + w) - at(k)) / w as f64 / 1000.0
}

/// What one long run yields: hop(1), hop(1 000), hop(N) in µs, and µs per hop over the run.
#[derive(Debug, Clone, Copy)]
struct Long {
    first: f64,
    thousand: f64,
    last: f64,
    average: f64,
}

fn long_run(
    rt: &Runtime,
    store: Arc<dyn HistoryStore>,
    stamps: &Arc<Vec<AtomicU64>>,
    n: usize,
    w: usize,
) -> Long {
    let counter = Counter {
        stamps: Arc::clone(stamps),
        base: Instant::now(),
    };
    let pump = counter_pump(store, counter);
    let total = (n + w) as u64;
    let elapsed = on_workers(rt, async move { iterate(&pump, total).await });
    Long {
        first: window(stamps, 1, w),
        thousand: window(stamps, 1000.min(n), w),
        last: window(stamps, n, w),
        average: secs(elapsed) * 1e6 / total as f64,
    }
}

/// Median µs of the first hop (delivery 1 → delivery 2) of `threads` fresh threads.
fn fresh_first_hops(rt: &Runtime, stamps: &Arc<Vec<AtomicU64>>, threads: usize) -> f64 {
    let counter = Counter {
        stamps: Arc::clone(stamps),
        base: Instant::now(),
    };
    let pump = counter_pump(Arc::new(MemoryHistory::new()), counter);
    let stamps = Arc::clone(stamps);
    on_workers(rt, async move {
        let mut hops = Vec::with_capacity(threads);
        for _ in 0..threads {
            iterate(&pump, 2).await;
            hops.push(window(&stamps, 1, 1));
        }
        median(&hops)
    })
}

/// Measures figure 3, if `cfg` selects it; `suffix` labels the ids.
pub fn figures(cfg: &Config, rt: &Runtime, report: &mut Report, suffix: &str) {
    if !cfg.wants("3") {
        return;
    }
    let n = cfg.size("AGENTPUMP_BENCH_ITERATIONS", 100_000, 2_000);
    let w = cfg.size("AGENTPUMP_BENCH_WINDOW", 1_000, 50).max(1);
    let fresh = cfg.size("AGENTPUMP_BENCH_FRESH_THREADS", 1_000, 20);
    let short = 1_000usize;
    let stamps: Arc<Vec<AtomicU64>> = Arc::new((0..=n + w).map(|_| AtomicU64::new(0)).collect());
    let memory = || -> Arc<dyn HistoryStore> { Arc::new(MemoryHistory::new()) };
    if super::profiling() {
        for _ in 0..cfg.runs {
            long_run(rt, memory(), &stamps, n, w);
        }
        return;
    }
    // Warm-up.
    long_run(rt, memory(), &stamps, n.min(10_000), w);
    on_workers(rt, baseline::self_hops(n / 10));
    let (mut base, mut mem, mut forget, mut fresh_hops, mut short_avg) =
        (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..cfg.runs {
        base.push(secs(on_workers(rt, baseline::self_hops(n))) * 1e6 / n as f64);
        mem.push(long_run(rt, memory(), &stamps, n, w));
        forget.push(long_run(rt, Arc::new(Forgetful), &stamps, n, w));
        fresh_hops.push(fresh_first_hops(rt, &stamps, fresh));
        let counter = Counter {
            stamps: Arc::clone(&stamps),
            base: Instant::now(),
        };
        let pump = counter_pump(memory(), counter);
        let took = on_workers(rt, async move { iterate(&pump, short as u64).await });
        short_avg.push(secs(took) * 1e6 / short as f64);
    }
    let pick = |runs: &[Long], f: fn(&Long) -> f64| runs.iter().map(f).collect::<Vec<f64>>();
    let params = json!({ "iterations": n + w, "window_hops": w, "fresh_threads": fresh,
        "store": "MemoryHistory", "governor": "on, turn limit lifted" });
    let baseline_name = "bare: one task, parse + send to its own bounded channel";
    let hop = |id: &str, name: &str, samples: Vec<f64>| {
        let f = Figure::new(
            &format!("{id}{suffix}"),
            name,
            "µs/hop",
            Better::Lower,
            samples,
        )
        .baseline(baseline_name, base.clone())
        .params(params.clone());
        let met = f.value() <= 5.0;
        f.target("≤ 5 µs/hop", met)
    };
    report.add(hop(
        "3a",
        &format!("self-iteration hop(1): mean of hops 1..{w}"),
        pick(&mem, |l| l.first),
    ));
    report.add(hop(
        "3b",
        &format!(
            "self-iteration hop(1 000): mean of hops 1 000..{}",
            1000 + w - 1
        ),
        pick(&mem, |l| l.thousand),
    ));
    report.add(hop(
        "3c",
        &format!("self-iteration hop({n}): mean of hops {n}..{}", n + w - 1),
        pick(&mem, |l| l.last),
    ));
    report.add(ratio_figure(
        &format!("3d{suffix}"),
        &format!("hop({n}) / hop(1), same run"),
        &mem,
        params.clone(),
    ));
    report.add(
        hop(
            "3e",
            "self-iteration hop(1) on fresh threads (median first hop)",
            fresh_hops,
        )
        .note("delivery 1 → delivery 2 of a thread just created; median over the fresh threads"),
    );
    report.add(
        hop(
            "3f",
            "self-iteration, 1 000 iterations: post → settled / 1 000",
            short_avg,
        )
        .note("whole-run average, including the post and settle"),
    );
    report.add(
        hop(
            "3g",
            &format!("self-iteration, {} iterations: post → settled / N", n + w),
            pick(&mem, |l| l.average),
        )
        .note("whole-run average, including the post and settle (the README's figure)"),
    );
    let forget_params = json!({ "iterations": n + w, "window_hops": w, "store": "keeps nothing",
        "governor": "on, turn limit lifted" });
    report.add(
        hop(
            "3h",
            &format!(
                "self-iteration, {} iterations, store keeping nothing",
                n + w
            ),
            pick(&forget, |l| l.average),
        )
        .params(forget_params.clone()),
    );
    report.add(ratio_figure(
        &format!("3i{suffix}"),
        &format!("hop({n}) / hop(1), store keeping nothing"),
        &forget,
        forget_params,
    ));
}

/// hop(N) / hop(1) per run (the median is the value; it is its own ratio).
fn ratio_figure(id: &str, name: &str, runs: &[Long], params: serde_json::Value) -> Figure {
    let f = Figure::new(
        id,
        name,
        "×",
        Better::Lower,
        runs.iter().map(|l| l.last / l.first).collect(),
    )
    .params(params);
    let ratio = f.value();
    f.ratio(ratio, "hop(N) / hop(1) of the same run, median over runs")
        .target("≤ 1.2", ratio <= 1.2)
}
