//! `cargo bench --bench soak`: figure 8 — the HTTP API with a durable history under sustained
//! load from concurrent clients, reported every 5 s (rate, latency, refusals, resident memory,
//! history size) and checked at the end (every acknowledged message is in the history).
//!
//! `AGENTPUMP_SOAK_SECS` (default 60) and `AGENTPUMP_SOAK_CLIENTS` (default 200) set its length
//! and load; `cargo test --bench soak` runs a 2 s smoke test with 8 clients.

mod common;

fn main() {
    let cfg = common::Config::from_env(1);
    let rt = common::runtime();
    let mut report = common::Report::new("soak", &cfg);
    common::soak::figures(&cfg, &rt, &mut report);
    report.finish();
}
