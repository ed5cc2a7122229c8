//! Self-iteration costs constant memory: the pump keeps no state that grows with the number of
//! iterations (no path, chain or list per hop). Measured with dhat's counting allocator while the
//! history store keeps nothing, so every byte still live is the pump's own.

use std::sync::Arc;

use agentpump::governor::{Budget, GovernorPolicy};
use agentpump::{
    Context, Delivery, Listener, ListenerError, PumpBuilder, PumpConfig, QName, Registration,
};

/// The benches' stores: `Forgetful` keeps nothing, so every byte still live is the pump's.
#[allow(dead_code)]
#[path = "../benches/common/stores.rs"]
mod stores;

use stores::Forgetful;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

const NS: &str = "urn:test:v1";

/// Iterates while the number is below the target in `<count to="T">N</count>`.
struct Counter;

#[async_trait::async_trait]
impl Listener for Counter {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        #[derive(serde::Deserialize)]
        struct Count {
            #[serde(rename = "@to")]
            to: u64,
            #[serde(rename = "$text")]
            n: u64,
        }
        if msg.is_system() {
            return Ok(());
        }
        let c: Count = msg.decode()?;
        if c.n < c.to {
            cx.emit(format!(
                r#"<count xmlns="{NS}" to="{}">{}</count>"#,
                c.to,
                c.n + 1
            ));
        }
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn live_memory_does_not_grow_with_iterations() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let pump = PumpBuilder::new()
        .history(Arc::new(Forgetful))
        .config(PumpConfig {
            governor: GovernorPolicy {
                budget: Budget::unlimited(),
                ..GovernorPolicy::default()
            },
            ..PumpConfig::default()
        })
        .register(
            Registration::new("counter", Counter)
                .accepts(QName::new(NS, "count"))
                .may_loop(true),
        )
        .build()
        .unwrap();
    let run = |iterations: u64| {
        let pump = pump.clone();
        async move {
            let payload = format!(r#"<count xmlns="{NS}" to="{iterations}">1</count>"#);
            let thread = pump.post(None, None, &payload).await.unwrap().thread();
            pump.settle(thread).await;
            assert_eq!(pump.thread(thread).unwrap().counters.deliveries, iterations);
            thread
        }
    };
    // Warm up (runtime, maps), then compare a short and a long run on fresh threads.
    run(1_000).await;
    let before_short = dhat::HeapStats::get().curr_bytes;
    run(1_000).await;
    let short = dhat::HeapStats::get().curr_bytes - before_short;
    let before_long = dhat::HeapStats::get().curr_bytes;
    run(20_000).await;
    let long = dhat::HeapStats::get().curr_bytes - before_long;
    // A thread that has finished keeps only its registry entry; 19 000 more iterations may not
    // leave anything behind (even 8 bytes per hop would be 152 000 bytes).
    assert!(
        long <= short + 4096,
        "1 000 iterations left {short} bytes, 20 000 left {long}"
    );
}
