//! cargo run --example spawn_threads
//!
//! A parent fans out to three child threads, each child asks a tool in its own thread and ends
//! with `thread-done`; the parent collects the three `thread-result`s and prints the tree.

use agentpump::system::Spawn;
use agentpump::{
    Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration, Role,
};

const NS: &str = "urn:example:fanout:v1";

/// On `<research>`, spawns one child per topic; on each `thread-result`, counts the results in
/// its history and, once all three are in, reports out.
struct Parent;

#[async_trait::async_trait]
impl Listener for Parent {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        match msg.qname().local() {
            "research" => {
                for topic in ["alpha", "beta", "gamma"] {
                    let job = format!(r#"<topic xmlns="{NS}">{topic}</topic>"#);
                    cx.spawn(Spawn::new(job).sub_id(topic).to("child"));
                }
            }
            "thread-result" => {
                let history = cx.history().await.map_err(ListenerError::failed)?;
                let results = history
                    .iter()
                    .filter(|r| r.root.local() == "thread-result")
                    .count();
                if results == 3 {
                    cx.send(
                        "client",
                        format!(r#"<collected xmlns="{NS}">{results}</collected>"#),
                    );
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// Looks its topic up with the `lookup` tool, then finishes its thread with the answer.
struct Child;

#[async_trait::async_trait]
impl Listener for Child {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        match msg.qname().local() {
            "topic" => cx.send("lookup", msg.payload().as_str().replace("topic", "lookup")),
            "fact" => cx.done(msg.payload().as_str()),
            _ => {}
        }
        Ok(())
    }
}

/// A tool: answers `<lookup>x</lookup>` with `<fact>x has N letters</fact>`.
struct Lookup;

#[async_trait::async_trait]
impl Listener for Lookup {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        #[derive(serde::Deserialize)]
        struct Word {
            #[serde(rename = "$text")]
            word: String,
        }
        let Word { word } = msg.decode()?;
        cx.reply(format!(
            r#"<fact xmlns="{NS}">{word} has {} letters</fact>"#,
            word.len()
        ));
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let pump = PumpBuilder::new()
        .register(
            Registration::new("parent", Parent)
                .accepts(QName::new(NS, "research"))
                .role(Role::Agent)
                .peers(["child"]),
        )
        .register(
            Registration::new("child", Child)
                .accepts(QName::new(NS, "topic"))
                .role(Role::Agent)
                .peers(["lookup"]),
        )
        .register(
            Registration::new("lookup", Lookup)
                .accepts(QName::new(NS, "lookup"))
                .description("counts letters"),
        )
        .build()?;

    let root = pump
        .post(None, None, &format!(r#"<research xmlns="{NS}"/>"#))
        .await?
        .thread();
    pump.settle(root).await;

    for thread in pump.tree(root) {
        let indent = "  ".repeat(thread.depth as usize);
        println!("{indent}{} [{}]", thread.path, thread.state);
        for r in pump.history(thread.id).await? {
            println!(
                "{indent}  {:>6} -> {:<7} {}",
                r.from,
                r.to.as_deref().unwrap_or("-"),
                r.payload
            );
        }
    }
    println!("chains verified: {} records", pump.verify().await?);
    Ok(())
}
