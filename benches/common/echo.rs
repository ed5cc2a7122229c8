//! Figure 1 (echo round trip on one thread) and figure 7 (the governor's overhead on it).
//!
//! A client posts `PING` into one thread whose only listener is [`Echo`], and waits until the
//! thread has settled (the echo's reply is recorded as egress and the runner has ended); `n` times
//! per run, on a fresh pump per run. Sizes: `AGENTPUMP_BENCH_ECHO_N` round trips per run
//! (default 30 000).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentpump::governor::GovernorPolicy;
use agentpump::history::{HistoryStore, MemoryHistory};
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, PumpHandle, QName, Registration};
use serde_json::json;
use tokio::runtime::Runtime;

use super::baseline::{self, ECHO_NS, PING};
use super::report::{Better, Figure, Report};
use super::stores::{Counting, Forgetful};
use super::{Config, config, governed, median, on_workers, secs, ungoverned, unlimited};

/// A pump with one `Echo` listener for `<ping>`.
pub fn echo_pump(policy: GovernorPolicy, store: Arc<dyn HistoryStore>) -> PumpHandle {
    PumpBuilder::new()
        .config(config(policy))
        .history(store)
        .register(Registration::new("echo", Echo).accepts(QName::new(ECHO_NS, "ping")))
        .build()
        .expect("the echo pump builds")
}

/// `n` round trips on one fresh thread: post, then settle.
pub async fn round_trips(pump: PumpHandle, n: usize) -> Duration {
    pipelined(pump, n, 1).await
}

/// `n` round trips on one fresh thread in windows of `window`: post a window, then settle.
pub async fn pipelined(pump: PumpHandle, n: usize, window: usize) -> Duration {
    let thread = pump
        .post(None, None, PING)
        .await
        .expect("accepted")
        .thread();
    pump.settle(thread).await;
    let started = Instant::now();
    let mut left = n;
    while left > 0 {
        let k = window.min(left);
        for _ in 0..k {
            pump.post(Some(thread), None, PING).await.expect("accepted");
        }
        pump.settle(thread).await;
        left -= k;
    }
    let elapsed = started.elapsed();
    let delivered = pump.thread(thread).map_or(0, |t| t.counters.deliveries);
    assert_eq!(delivered, n as u64 + 1, "every ping was delivered once");
    elapsed
}

/// `n` round trips on one fresh thread, waiting for the egress record instead of `settle`.
pub async fn round_trips_to_egress(
    pump: PumpHandle,
    counting: Arc<Counting>,
    n: usize,
) -> Duration {
    let thread = pump
        .post(None, None, PING)
        .await
        .expect("accepted")
        .thread();
    counting.wait_egress(1).await;
    let started = Instant::now();
    for i in 0..n {
        pump.post(Some(thread), None, PING).await.expect("accepted");
        counting.wait_egress(i as u64 + 2).await;
    }
    started.elapsed()
}

/// The variants measured side by side, one run of each per round, interleaved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Baseline,
    /// Governor on, default policy with the turn limit lifted; `MemoryHistory`.
    Governed,
    /// Governor off.
    Ungoverned,
    /// Governor on, `Budget::unlimited()`.
    Unlimited,
    /// Governor on (as `Governed`), history store that keeps nothing.
    Forgetful,
    /// As `Governed`, but waiting for the egress record instead of `settle`.
    ToEgress,
}

async fn measure(variant: Variant, n: usize) -> Duration {
    let memory = || -> Arc<dyn HistoryStore> { Arc::new(MemoryHistory::new()) };
    match variant {
        Variant::Baseline => baseline::round_trips(n).await,
        Variant::Governed => round_trips(echo_pump(governed(), memory()), n).await,
        Variant::Ungoverned => round_trips(echo_pump(ungoverned(), memory()), n).await,
        Variant::Unlimited => round_trips(echo_pump(unlimited(), memory()), n).await,
        Variant::Forgetful => round_trips(echo_pump(governed(), Arc::new(Forgetful)), n).await,
        Variant::ToEgress => {
            let counting = Counting::new(memory());
            let store: Arc<dyn HistoryStore> = counting.clone();
            round_trips_to_egress(echo_pump(governed(), store), counting, n).await
        }
    }
}

/// Runs every variant `runs` times, interleaved (one run of each per round, after a warm-up
/// run of each); returns round trips/s per run, per variant.
fn sample(rt: &Runtime, variants: &[Variant], runs: usize, n: usize) -> Vec<(Variant, Vec<f64>)> {
    for &v in variants {
        on_workers(rt, measure(v, (n / 10).max(10)));
    }
    let mut rates: Vec<(Variant, Vec<f64>)> = variants.iter().map(|&v| (v, Vec::new())).collect();
    for _ in 0..runs {
        for (v, samples) in &mut rates {
            let elapsed = on_workers(rt, measure(*v, n));
            samples.push(n as f64 / secs(elapsed));
        }
    }
    rates
}

fn of(rates: &[(Variant, Vec<f64>)], v: Variant) -> Vec<f64> {
    rates
        .iter()
        .find(|(x, _)| *x == v)
        .map(|(_, s)| s.clone())
        .unwrap_or_default()
}

/// A current-thread runtime: client, pump and baseline on one core, no wake-ups across workers.
fn current_thread_runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime")
}

/// Measures figures 1 and 7 (those of them `cfg` selects); `suffix` labels the ids (`-mimalloc`).
///
/// Figures 1, 1b, 1c and 7 run on a current-thread runtime: client, pump and baseline share one
/// core, so a run measures the work of a round trip. On the two-worker runtime (`rt`, row 1d)
/// where the client and the runner happen to run — the same worker or not, decided by the
/// scheduler and kept for a while — moves the pump *and* the baseline by up to 2× from run to
/// run and process to process; its samples are kept in the JSON.
pub fn figures(cfg: &Config, rt: &Runtime, report: &mut Report, suffix: &str) {
    let (one, seven) = (cfg.wants("1"), cfg.wants("7"));
    if !one && !seven {
        return;
    }
    let n = cfg.size("AGENTPUMP_BENCH_ECHO_N", 30_000, 200);
    let current_rt = current_thread_runtime();
    if super::profiling() {
        for _ in 0..cfg.runs {
            on_workers(&current_rt, measure(Variant::Governed, n));
        }
        return;
    }
    let mut params = json!({ "round_trips_per_run": n, "payload_bytes": PING.len(),
        "baseline_envelope_bytes": baseline::envelope(PING).len(), "runtime": "tokio current-thread" });
    let baseline_name = "bare parse (NsReader) + bounded channel, 2 hops per round trip";
    let mut current = vec![Variant::Baseline, Variant::Governed];
    if one {
        current.extend([Variant::Forgetful, Variant::ToEgress]);
    }
    if seven {
        current.extend([Variant::Ungoverned, Variant::Unlimited]);
    }
    let rates = sample(&current_rt, &current, cfg.runs, n);
    let base = of(&rates, Variant::Baseline);
    let target = "≥ 40% of baseline and ≥ 190 000/s (5× peer)";
    let meets = |f: &Figure| f.ratio_value().is_some_and(|r| r.0 >= 0.4) && f.value() >= 190_000.0;
    if one {
        let f = Figure::new(
            &format!("1{suffix}"),
            "echo round trip, one thread (post → echo → settled)",
            "round trips/s",
            Better::Higher,
            of(&rates, Variant::Governed),
        )
        .baseline(baseline_name, base.clone())
        .params(params.clone())
        .note("governor on (default policy, turn limit lifted), MemoryHistory; a fresh pump and thread per run; current-thread runtime");
        let met = meets(&f);
        report.add(f.target(target, met));
        report.add(
            Figure::new(
                &format!("1b{suffix}"),
                "echo round trip, history store keeping nothing",
                "round trips/s",
                Better::Higher,
                of(&rates, Variant::Forgetful),
            )
            .baseline(baseline_name, base.clone())
            .params(params.clone())
            .note("as figure 1 with a store that keeps nothing: the pump's own cost"),
        );
        report.add(
            Figure::new(
                &format!("1c{suffix}"),
                "echo round trip, waiting for the egress record (no settle)",
                "round trips/s",
                Better::Higher,
                of(&rates, Variant::ToEgress),
            )
            .baseline(baseline_name, base.clone())
            .params(params.clone())
            .note(
                "as figure 1, but the client waits until the reply is recorded instead of settle",
            ),
        );
    }
    if seven {
        let off = of(&rates, Variant::Ungoverned);
        let off_name = "the same echo with the governor off (enabled: false)";
        for (id, name, on, what) in [
            (
                "7",
                "governor overhead: echo round trip, governor on vs off",
                of(&rates, Variant::Governed),
                "on = default policy with the turn limit lifted (deadline, warnings, accounts, \
                 repeats all checked)",
            ),
            (
                "7b",
                "governor overhead, on with Budget::unlimited() vs off",
                of(&rates, Variant::Unlimited),
                "on = Budget::unlimited(): no limit to check",
            ),
        ] {
            let overhead = median(&off) / median(&on) - 1.0;
            report.add(
                Figure::new(
                    &format!("{id}{suffix}"),
                    name,
                    "round trips/s",
                    Better::Higher,
                    on,
                )
                .baseline(off_name, off.clone())
                .target("overhead ≤ 10% (ratio on/off ≥ 0.909)", overhead <= 0.10)
                .params(params.clone())
                .note(&format!(
                    "overhead {:.1}% (off rate / on rate − 1), current-thread runtime; {what}",
                    overhead * 100.0
                )),
            );
        }
    }
    if one {
        let rates = sample(rt, &[Variant::Baseline, Variant::Governed], cfg.runs, n);
        params["runtime"] = serde_json::Value::from(super::runtime_name());
        let f = Figure::new(
            &format!("1d{suffix}"),
            "echo round trip, one thread, multi-thread runtime (2 workers)",
            "round trips/s",
            Better::Higher,
            of(&rates, Variant::Governed),
        )
        .baseline(
            "the same baseline on the same runtime",
            of(&rates, Variant::Baseline),
        )
        .params(params)
        .note(
            "as figure 1 on two workers; noisy: pump and baseline each move by up to 2× with \
             task placement (same worker or not), see the samples",
        );
        let met = meets(&f);
        report.add(f.target(target, met));
    }
}
