//! cargo run --example hello_pump
//!
//! Registers a greeter listener, sends it a message from outside, and prints the thread's history.

use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};

const NS: &str = "urn:example:hello:v1";

/// Answers `<hello>NAME</hello>` with `<greeting>Hello, NAME!</greeting>`.
struct Greeter;

#[async_trait::async_trait]
impl Listener for Greeter {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        #[derive(serde::Deserialize)]
        struct Hello {
            #[serde(rename = "$text")]
            name: String,
        }
        let hello: Hello = msg.decode()?;
        cx.reply(format!(
            r#"<greeting xmlns="{NS}">Hello, {}!</greeting>"#,
            hello.name.trim()
        ));
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pump = PumpBuilder::new()
        .register(
            Registration::new("greeter", Greeter)
                .accepts(QName::new(NS, "hello"))
                .description("greets whoever says hello"),
        )
        .build()?;

    let receipt = pump
        .post(None, None, &format!(r#"<hello xmlns="{NS}">world</hello>"#))
        .await?;
    pump.settle(receipt.thread()).await;

    println!("thread {}", receipt.thread());
    for record in pump.history(receipt.thread()).await? {
        let to = record.to.as_deref().unwrap_or("-");
        println!(
            "#{:<3} {:<8} {:>8} -> {:<8} {}",
            record.seq, record.kind, record.from, to, record.payload
        );
    }
    println!("chains verified: {} records", pump.verify().await?);
    Ok(())
}
