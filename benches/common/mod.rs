//! What every benchmark binary shares: run control (sizes, runs, figure selection), the runtime,
//! statistics, the bare baseline ([`baseline`]), benchmark-only history stores ([`stores`]),
//! the figures themselves and the report (a printed table and `target/agentpump-bench.json`).
//!
//! A bench binary run by `cargo bench` gets `--bench` and measures at full size, writing the
//! JSON file. Run without it (`cargo test --benches`), it only smoke-tests every figure at a
//! tiny size and writes nothing.
//!
//! Environment knobs (all optional):
//! - `AGENTPUMP_BENCH_RUNS`: runs per figure, the median is reported (default 5 or 7).
//! - `AGENTPUMP_BENCH_ONLY`: comma-separated figure numbers to run (`1,7`), default all.
//! - `AGENTPUMP_BENCH_FLAVOR=current`: the figures that use the shared runtime run on a
//!   current-thread runtime instead of the multi-threaded one.
//! - `AGENTPUMP_BENCH_BATCH`: the pump's scheduler batch (`PumpConfig::batch`), for experiments.
//! - `AGENTPUMP_BENCH_PROFILE`: run only the pump's side of figures 1, 2 and 3 and the process's
//!   side of P2 (no baseline, no report), for a profiler.
//! - per-figure sizes, named where each figure is defined (`AGENTPUMP_BENCH_ECHO_N`, …).

#![allow(dead_code)]

pub mod baseline;
pub mod echo;
pub mod iteration;
pub mod memory;
/// Real `nats-server` processes: the tests' own helper, shared.
#[path = "../../tests/support/nats.rs"]
pub mod nats;
pub mod posting;
pub mod report;
#[cfg(feature = "host")] // figure 8 serves the HTTP API
pub mod soak;
pub mod spawn;
pub mod stores;
pub mod threads;
pub mod users;

use std::future::Future;
use std::time::Duration;

use agentpump::governor::{Budget, GovernorPolicy};
use agentpump::{Limits, PumpConfig};

#[allow(unused_imports)] // a bench binary that prints its own table (remote) has no report
pub use report::Report;

/// How a bench binary was started and how big to measure.
#[derive(Debug, Clone)]
pub struct Config {
    /// Started by `cargo bench` (`--bench` on the command line): full sizes, JSON written.
    pub full: bool,
    /// Runs per figure (the median is reported).
    pub runs: usize,
    /// Figures to run (`None` = all).
    pub only: Option<Vec<String>>,
}

impl Config {
    /// Reads the command line and the environment; `default_runs` (at least 5) unless
    /// `AGENTPUMP_BENCH_RUNS` says otherwise.
    pub fn from_env(default_runs: usize) -> Self {
        let full = std::env::args().any(|a| a == "--bench");
        let runs = if full {
            env_usize("AGENTPUMP_BENCH_RUNS", default_runs).max(1)
        } else {
            1
        };
        let only = std::env::var("AGENTPUMP_BENCH_ONLY").ok().map(|s| {
            s.split(',')
                .map(|p| p.trim().to_owned())
                .filter(|p| !p.is_empty())
                .collect()
        });
        Self { full, runs, only }
    }

    /// A size: the environment variable `name` if set, else `full` under `cargo bench`, else `smoke`.
    pub fn size(&self, name: &str, full: usize, smoke: usize) -> usize {
        match std::env::var(name)
            .ok()
            .and_then(|v| v.replace('_', "").parse().ok())
        {
            Some(v) => v,
            None if self.full => full,
            None => smoke,
        }
    }

    /// Whether figure `number` (`"1"`, `"7"`) is selected.
    pub fn wants(&self, number: &str) -> bool {
        self.only
            .as_ref()
            .is_none_or(|o| o.iter().any(|x| x == number))
    }
}

/// Whether only the pump's side is to run, under a profiler (`AGENTPUMP_BENCH_PROFILE`).
pub fn profiling() -> bool {
    std::env::var_os("AGENTPUMP_BENCH_PROFILE").is_some()
}

/// The value of environment variable `name` as a number (underscores allowed), or `default`.
pub fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(default)
}

/// The tokio runtime every figure runs on: multi-threaded, one worker per core; or, with
/// `AGENTPUMP_BENCH_FLAVOR=current`, a current-thread runtime (one core, no cross-worker wake-ups).
pub fn runtime() -> tokio::runtime::Runtime {
    let current = std::env::var("AGENTPUMP_BENCH_FLAVOR").is_ok_and(|f| f == "current");
    let mut builder = if current {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    builder.enable_all().build().expect("a tokio runtime")
}

/// The runtime's description, for the parameters of a figure.
pub fn runtime_name() -> &'static str {
    if std::env::var("AGENTPUMP_BENCH_FLAVOR").is_ok_and(|f| f == "current") {
        "tokio current-thread"
    } else {
        "tokio multi-thread, one worker per core"
    }
}

/// Runs `f` as a task on the runtime's workers (not on the calling thread), so the measuring
/// client shares the workers with the pump's tasks just as the baseline's client does.
pub fn on_workers<F>(rt: &tokio::runtime::Runtime, f: F) -> F::Output
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    rt.block_on(async move { tokio::spawn(f).await.expect("the measured task panicked") })
}

/// The median of `samples` (the mean of the middle two for an even count).
pub fn median(samples: &[f64]) -> f64 {
    let mut s: Vec<f64> = samples.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// Seconds as a float.
pub fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

/// The governor as the default policy has it, with only the turn limit lifted, so that long runs
/// do not halt while every check (deadline, warnings, accounts, repeats) still runs.
pub fn governed() -> GovernorPolicy {
    GovernorPolicy {
        budget: Budget {
            turns: None,
            ..GovernorPolicy::default_budget()
        },
        ..GovernorPolicy::default()
    }
}

/// The governor on, with every limit lifted (`Budget::unlimited()`).
pub fn unlimited() -> GovernorPolicy {
    GovernorPolicy {
        budget: Budget::unlimited(),
        ..GovernorPolicy::default()
    }
}

/// The governor off (`enabled: false`).
pub fn ungoverned() -> GovernorPolicy {
    GovernorPolicy {
        enabled: false,
        budget: Budget::unlimited(),
        ..GovernorPolicy::default()
    }
}

/// A pump configuration with this governor policy and otherwise the defaults (the scheduler's
/// batch can be changed with `AGENTPUMP_BENCH_BATCH`, for experiments).
pub fn config(governor: GovernorPolicy) -> PumpConfig {
    PumpConfig {
        governor,
        batch: env_usize("AGENTPUMP_BENCH_BATCH", PumpConfig::DEFAULT_BATCH).max(1),
        ..PumpConfig::default()
    }
}

/// A pump configuration that lets one delivery emit `outputs` payloads.
pub fn config_with_outputs(governor: GovernorPolicy, outputs: usize) -> PumpConfig {
    PumpConfig {
        governor,
        limits: Limits {
            max_outputs: outputs.max(Limits::DEFAULT_MAX_OUTPUTS),
            ..Limits::default()
        },
        ..PumpConfig::default()
    }
}

/// Resident memory of this process in bytes (`VmRSS` of `/proc/self/status`).
pub fn resident_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
