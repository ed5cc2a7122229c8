//! Figure 4: spawn fan-out. One delivery of `<fan>` makes the spawner emit
//! `AGENTPUMP_BENCH_CHILDREN` (default 10 000) `spawn-thread` requests; each child's worker
//! answers once with `thread-done`, which reaches the spawner as `thread-result` in the parent
//! thread. Timed from the post to the spawner's handling of the last `thread-result`.
//! The spawner runs with `Budget::unlimited()` and `limits.max_outputs` raised to the fan-out.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentpump::history::{HistoryStore, MemoryHistory};
use agentpump::pump::spread::{Courier, Parcel, Undelivered};
use agentpump::system::Spawn;
use agentpump::thread::Partition;
use agentpump::{
    Context, Delivery, Listener, ListenerError, PumpBuilder, PumpHandle, QName, Registration,
};
use futures_util::future::BoxFuture;
use serde_json::json;
use tokio::runtime::Runtime;
use tokio::sync::mpsc;

use super::baseline;
use super::report::{Better, Figure, Report};
use super::{Config, config_with_outputs, on_workers, secs, unlimited};

/// Namespace of the fan-out payloads.
pub const FAN_NS: &str = "urn:agentpump:bench:fan:v1";

/// Spawns `n` children on `<fan>`, and reports the moment the `n`-th `thread-result` arrives.
#[derive(Debug)]
pub struct Spawner {
    n: usize,
    results: AtomicUsize,
    last: mpsc::UnboundedSender<Instant>,
}

#[async_trait::async_trait]
impl Listener for Spawner {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        match (msg.is_system(), msg.qname().local()) {
            (false, "fan") => {
                for i in 0..self.n {
                    let job = format!(r#"<job xmlns="{FAN_NS}">{i}</job>"#);
                    cx.spawn(Spawn::new(job).to("worker"));
                }
            }
            (true, "thread-result")
                if self.results.fetch_add(1, Ordering::AcqRel) + 1 == self.n =>
            {
                let _ = self.last.send(Instant::now());
            }
            _ => {}
        }
        Ok(())
    }
}

/// Answers its job once, ending its thread.
#[derive(Debug)]
pub struct Worker;

#[async_trait::async_trait]
impl Listener for Worker {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if !msg.is_system() && msg.qname().local() == "job" {
            let text = msg.payload().as_str();
            let i = &text[text.find('>').unwrap_or(0) + 1..text.rfind("</").unwrap_or(0)];
            cx.done(format!(r#"<answer xmlns="{FAN_NS}">{i}</answer>"#));
        }
        Ok(())
    }
}

fn fan_pump(
    store: Arc<dyn HistoryStore>,
    n: usize,
) -> (PumpHandle, mpsc::UnboundedReceiver<Instant>) {
    fan_builder(store, n, None)
}

/// The fan-out pump, holding partition `index` of two when `spread` is given (with its
/// courier).
fn fan_builder(
    store: Arc<dyn HistoryStore>,
    n: usize,
    spread: Option<(u32, Arc<Carrier>)>,
) -> (PumpHandle, mpsc::UnboundedReceiver<Instant>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let spawner = Spawner {
        n,
        results: AtomicUsize::new(0),
        last: tx,
    };
    let mut config = config_with_outputs(unlimited(), n);
    let mut builder = PumpBuilder::new();
    if let Some((index, courier)) = spread {
        config.partition = Partition::new(index, 2);
        builder = builder.courier(courier);
    }
    let pump = builder
        .config(config)
        .history(store)
        .register(
            Registration::new("spawner", spawner)
                .accepts(QName::new(FAN_NS, "fan"))
                .peers(["worker"]),
        )
        .register(Registration::new("worker", Worker).accepts(QName::new(FAN_NS, "job")))
        .build()
        .expect("the fan-out pump builds");
    (pump, rx)
}

/// Carries parcels between two pumps in the process: each to the pump of its thread's
/// partition (the host's courier posts them to its front, one HTTP hop more).
#[derive(Debug, Default)]
pub struct Carrier(std::sync::OnceLock<[PumpHandle; 2]>);

impl Courier for Carrier {
    fn carry<'a>(&'a self, parcel: &'a Parcel) -> BoxFuture<'a, Result<(), Undelivered>> {
        Box::pin(async move {
            let pumps = self.0.get().expect("both pumps are built");
            let to = Partition::of(parcel.thread(), 2) as usize;
            pumps[to].take_parcel(parcel.clone()).await
        })
    }
}

/// One fan-out of `n` children from a pump holding partition 0 of 2 whose children go to the
/// partitions in turn: half run on the pump of partition 1 (`spread_children`); time to the
/// last `thread-result`.
pub async fn fan_out_spread(n: usize) -> Duration {
    let carrier = Arc::new(Carrier::default());
    let store = || -> Arc<dyn HistoryStore> { Arc::new(MemoryHistory::new()) };
    let (pump, mut last) = fan_builder(store(), n, Some((0, Arc::clone(&carrier))));
    let (other, _) = fan_builder(store(), n, Some((1, Arc::clone(&carrier))));
    let _ = carrier.0.set([pump.clone(), other]);
    let (elapsed, children) = fan(&pump, &mut last, n).await;
    let elsewhere = children
        .iter()
        .filter(|c| Partition::of(**c, 2) == 1)
        .count();
    assert_eq!(elsewhere, n / 2, "every other child ran on the other pump");
    elapsed
}

/// One fan-out of `n` children on a fresh pump; time to the last `thread-result`.
pub async fn fan_out(n: usize) -> Duration {
    let (pump, mut last) = fan_pump(Arc::new(MemoryHistory::new()), n);
    fan(&pump, &mut last, n).await.0
}

/// Posts `<fan>` to `pump`: the time to the last `thread-result` (`last` says when), and the
/// `n` children.
async fn fan(
    pump: &PumpHandle,
    last: &mut mpsc::UnboundedReceiver<Instant>,
    n: usize,
) -> (Duration, Vec<agentpump::ThreadId>) {
    let started = Instant::now();
    let root = pump
        .post(None, None, &format!(r#"<fan xmlns="{FAN_NS}"/>"#))
        .await
        .expect("accepted")
        .thread();
    let at = last.recv().await.expect("the last thread-result arrives");
    pump.settle(root).await;
    let children = pump.thread(root).map_or(Vec::new(), |t| t.children);
    assert_eq!(children.len(), n, "every child was spawned");
    (at - started, children)
}

/// Measures figure 4, if `cfg` selects it; `suffix` labels the ids.
pub fn figures(cfg: &Config, rt: &Runtime, report: &mut Report, suffix: &str) {
    if !cfg.wants("4") {
        return;
    }
    let n = cfg.size("AGENTPUMP_BENCH_CHILDREN", 10_000, 100);
    let small = (n / 10).max(1);
    on_workers(rt, fan_out(small));
    on_workers(rt, baseline::fan_out(small));
    let (mut base, mut pump, mut base_small, mut pump_small) = (vec![], vec![], vec![], vec![]);
    for _ in 0..cfg.runs {
        base.push(secs(on_workers(rt, baseline::fan_out(n))) * 1e3);
        pump.push(secs(on_workers(rt, fan_out(n))) * 1e3);
        base_small.push(secs(on_workers(rt, baseline::fan_out(small))) * 1e3);
        pump_small.push(secs(on_workers(rt, fan_out(small))) * 1e3);
    }
    let baseline_name =
        "bare: spawn a tokio task per child, parse, answer through a bounded channel";
    let f = Figure::new(
        &format!("4{suffix}"),
        &format!("spawn fan-out: {n} children, time to the last thread-result"),
        "ms",
        Better::Lower,
        pump,
    )
    .baseline(baseline_name, base)
    .params(
        json!({ "children": n, "store": "MemoryHistory", "governor": "on, Budget::unlimited()",
        "max_outputs": n }),
    );
    let per_child = f.value() * 1e3 / n as f64;
    report.add(f.note(&format!(
        "{per_child:.2} µs per child; no target in the issue"
    )));
    let f = Figure::new(
        &format!("4b{suffix}"),
        &format!("spawn fan-out: {small} children (scaling check)"),
        "ms",
        Better::Lower,
        pump_small,
    )
    .baseline(baseline_name, base_small)
    .params(json!({ "children": small }));
    let per_child_small = f.value() * 1e3 / small as f64;
    report.add(f.note(&format!(
        "{per_child_small:.2} µs per child; a per-child cost that grows from {small} to {n} \
         children means work that grows with the fan-out"
    )));
    on_workers(rt, fan_out_spread(small));
    let (mut here, mut spread) = (vec![], vec![]);
    for _ in 0..cfg.runs {
        here.push(secs(on_workers(rt, fan_out(small))) * 1e3);
        spread.push(secs(on_workers(rt, fan_out_spread(small))) * 1e3);
    }
    let f = Figure::new(
        &format!("4c{suffix}"),
        &format!("spawn fan-out: {small} children, half on another pump (spread_children)"),
        "ms",
        Better::Lower,
        spread,
    )
    .baseline(
        "the same fan-out with every child on the spawner's pump",
        here,
    )
    .params(json!({ "children": small, "pumps": 2, "courier": "in the process" }));
    let ratio = f.value() / f.baseline_value().unwrap_or(f64::NAN);
    report.add(f.ratio(ratio, "spread / on one pump").note(
        "a remote child: its parcel recorded, carried, adopted with a record; its result \
         recorded, carried back and applied with a record",
    ));
}
