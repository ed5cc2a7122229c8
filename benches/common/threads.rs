//! Figure 2: echo across many threads concurrently, in one-way messages per second.
//!
//! `AGENTPUMP_BENCH_THREADS` threads (default 10 000) are created first, each by one post to the
//! `Echo` listener. Then, per round, client tasks (`AGENTPUMP_BENCH_CLIENTS`, default 2) post one
//! `PING` into every thread, and the round ends when every reply is recorded as egress. Each
//! round moves `2 × threads` one-way messages (client → echo, echo → client), each one parsed,
//! routed, recorded and queued. `AGENTPUMP_BENCH_ROUNDS` rounds per run (default 8).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentpump::history::{HistoryStore, MemoryHistory};
use agentpump::{PumpHandle, ThreadId};
use serde_json::json;
use tokio::runtime::Runtime;

use super::baseline::{self, PING};
use super::echo::echo_pump;
use super::report::{Better, Figure, Report};
use super::stores::{Counting, Forgetful};
use super::{Config, governed, on_workers, secs};

/// Posts `PING` into new threads (`threads[i] == None`) or the given ones, from `clients` tasks.
/// Returns the ids, in order.
pub async fn post_all(
    pump: &PumpHandle,
    threads: Arc<Vec<Option<ThreadId>>>,
    clients: usize,
) -> Vec<ThreadId> {
    let mut tasks = Vec::with_capacity(clients);
    for c in 0..clients {
        let pump = pump.clone();
        let threads = Arc::clone(&threads);
        tasks.push(tokio::spawn(async move {
            let mut ids = Vec::with_capacity(threads.len() / clients + 1);
            for i in (c..threads.len()).step_by(clients) {
                let receipt = pump.post(threads[i], None, PING).await.expect("accepted");
                ids.push(receipt.thread());
            }
            ids
        }));
    }
    let mut per_client = Vec::with_capacity(clients);
    for t in tasks {
        per_client.push(t.await.expect("client task"));
    }
    let mut out = Vec::with_capacity(threads.len());
    for i in 0..threads.len() {
        out.push(per_client[i % clients][i / clients]);
    }
    out
}

/// One run: creates `threads` threads, then `rounds` rounds of one post per thread.
/// Returns (time to create the threads, time of the rounds).
pub async fn run(
    store: Arc<dyn HistoryStore>,
    threads: usize,
    rounds: usize,
    clients: usize,
) -> (Duration, Duration) {
    let counting = Counting::new(store);
    let pump = echo_pump(governed(), counting.clone());
    let started = Instant::now();
    let ids = post_all(&pump, Arc::new(vec![None; threads]), clients).await;
    counting.wait_egress(threads as u64).await;
    let created = started.elapsed();
    let ids: Arc<Vec<Option<ThreadId>>> = Arc::new(ids.into_iter().map(Some).collect());
    let started = Instant::now();
    for round in 0..rounds {
        post_all(&pump, Arc::clone(&ids), clients).await;
        counting.wait_egress((threads * (round + 2)) as u64).await;
    }
    let elapsed = started.elapsed();
    for id in ids.iter().flatten() {
        pump.settle(*id).await;
    }
    (created, elapsed)
}

/// Measures figure 2, if `cfg` selects it; `suffix` labels the ids.
pub fn figures(cfg: &Config, rt: &Runtime, report: &mut Report, suffix: &str) {
    if !cfg.wants("2") {
        return;
    }
    let threads = cfg.size("AGENTPUMP_BENCH_THREADS", 10_000, 100);
    let rounds = cfg.size("AGENTPUMP_BENCH_ROUNDS", 8, 1).max(1);
    let clients = cfg.size("AGENTPUMP_BENCH_CLIENTS", 2, 2).max(1);
    let messages = (2 * threads * rounds) as f64;
    let memory = || -> Arc<dyn HistoryStore> { Arc::new(MemoryHistory::new()) };
    if super::profiling() {
        for _ in 0..cfg.runs {
            on_workers(rt, run(memory(), threads, rounds, clients));
        }
        return;
    }
    on_workers(rt, run(memory(), threads / 10 + 1, 1, clients));
    on_workers(rt, baseline::many_tasks(threads / 10 + 1, 1, clients));
    let (mut base, mut pump, mut forgetful, mut create) = (vec![], vec![], vec![], vec![]);
    for _ in 0..cfg.runs {
        let b = on_workers(rt, baseline::many_tasks(threads, rounds, clients));
        base.push(messages / secs(b));
        let (c, p) = on_workers(rt, run(memory(), threads, rounds, clients));
        create.push(threads as f64 / secs(c));
        pump.push(messages / secs(p));
        let (_, f) = on_workers(rt, run(Arc::new(Forgetful), threads, rounds, clients));
        forgetful.push(messages / secs(f));
    }
    let params = json!({ "threads": threads, "rounds_per_run": rounds, "client_tasks": clients,
        "messages_per_run": messages, "runtime": super::runtime_name() });
    let baseline_name = "bare: one task + bounded channel per thread, parse per hop";
    let f = Figure::new(
        &format!("2{suffix}"),
        &format!("echo across {threads} threads concurrently"),
        "messages/s",
        Better::Higher,
        pump,
    )
    .baseline(baseline_name, base.clone())
    .params(params.clone())
    .note("one-way messages: each round trip is 2 (client → echo, echo → client); MemoryHistory, governor on");
    let met = f.value() >= 400_000.0;
    report.add(f.target("≥ 400 000 messages/s", met));
    report.add(
        Figure::new(
            &format!("2b{suffix}"),
            &format!("echo across {threads} threads, store keeping nothing"),
            "messages/s",
            Better::Higher,
            forgetful,
        )
        .baseline(baseline_name, base)
        .params(params.clone()),
    );
    report.add(
        Figure::new(
            &format!("2c{suffix}"),
            &format!("thread creation: {threads} new threads, one echo each"),
            "threads/s",
            Better::Higher,
            create,
        )
        .params(params)
        .note("a post without <thread> starts a thread; timed until every first reply is recorded"),
    );
}
