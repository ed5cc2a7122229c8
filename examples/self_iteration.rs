//! cargo run --example self_iteration [N]
//!
//! A listener that counts to N by messaging itself: each self-message is one iteration, recorded
//! in the thread's history like any other message. Prints the first and last hops and the timing.

use std::time::Instant;

use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};

const NS: &str = "urn:example:count:v1";

/// `<count to="N">i</count>`: emits `<count to="N">i+1</count>` until i = N, then reports out.
struct Counter;

#[derive(serde::Deserialize)]
struct Count {
    #[serde(rename = "@to")]
    to: u64,
    #[serde(rename = "$text")]
    i: u64,
}

#[async_trait::async_trait]
impl Listener for Counter {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        let Count { to, i } = msg.decode()?;
        if i < to {
            cx.emit(format!(
                r#"<count xmlns="{NS}" to="{to}">{}</count>"#,
                i + 1
            ));
        } else {
            cx.send("client", format!(r#"<counted xmlns="{NS}">{i}</counted>"#));
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::args().nth(1).map_or(Ok(1_000), |a| a.parse())?;
    let pump = PumpBuilder::new()
        .register(
            Registration::new("counter", Counter)
                .accepts(QName::new(NS, "count"))
                .role(agentpump::Role::Agent)
                .description("counts to N by messaging itself"),
        )
        .build()?;

    let started = Instant::now();
    let receipt = pump
        .post(
            None,
            None,
            &format!(r#"<count xmlns="{NS}" to="{n}">1</count>"#),
        )
        .await?;
    pump.settle(receipt.thread()).await;
    let elapsed = started.elapsed();

    let history = pump.history(receipt.thread()).await?;
    for record in history
        .iter()
        .take(3)
        .chain(history.iter().skip(history.len().saturating_sub(2)))
    {
        println!(
            "#{:<6} {:>7} -> {:<7} {}",
            record.seq,
            record.from,
            record.to.as_deref().unwrap_or("-"),
            record.payload
        );
    }
    let hops = pump
        .thread(receipt.thread())
        .map_or(0, |t| t.counters.deliveries);
    println!(
        "{hops} deliveries, {} records in {elapsed:.2?} ({:.2} µs per hop, history included)",
        history.len(),
        elapsed.as_secs_f64() * 1e6 / hops.max(1) as f64
    );
    pump.verify().await?;
    Ok(())
}
