//! `scripted-planner` and `scripted-worker`: a parent that fans out to child threads with budget
//! carve-outs and collects their `thread-result`s; children that ask the calculator and finish.

use async_trait::async_trait;

use super::{DEMO_NS, text};
use crate::governor::Budget;
use crate::listeners::calculator::CALC_NS;
use crate::system::Spawn;
use crate::{Context, Delivery, Listener, ListenerError};

/// On `<plan>` with `;`-separated expressions, spawns one child per expression, each with a
/// carve-out of 6 turns; when every `thread-result` is in, reports them out.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedPlanner;

#[async_trait]
impl Listener for ScriptedPlanner {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        match msg.qname().local() {
            "plan" => {
                for (i, expression) in text(msg).split(';').enumerate() {
                    let task = format!(r#"<task xmlns="{DEMO_NS}">{}</task>"#, expression.trim());
                    let budget = Budget {
                        turns: Some(6),
                        ..Budget::default()
                    };
                    cx.spawn(
                        Spawn::new(task)
                            .sub_id(format!("part{}", i + 1))
                            .to("scripted-worker")
                            .budget(budget),
                    );
                }
            }
            "thread-result" => {
                let history = cx.history().await.map_err(ListenerError::failed)?;
                let plan = history
                    .iter()
                    .find(|r| r.root.local() == "plan")
                    .map(|r| r.payload.matches(';').count() + 1);
                // Results in plan order, whatever order the children finished in.
                let attr = |payload: &str, name: &str| -> Option<String> {
                    payload
                        .split(&format!("{name}=\""))
                        .nth(1)?
                        .split('"')
                        .next()
                        .map(str::to_owned)
                };
                let part_of = |thread: &str| {
                    history
                        .iter()
                        .filter(|r| r.root.local() == "thread-spawned")
                        .find(|r| attr(&r.payload, "assigned-id").as_deref() == Some(thread))
                        .and_then(|r| attr(&r.payload, "suggested-sub-id"))
                };
                let mut results: Vec<(String, String)> = history
                    .iter()
                    .filter(|r| r.root.local() == "thread-result")
                    .filter_map(|r| {
                        let part = part_of(&attr(&r.payload, "thread")?)?;
                        let value = r
                            .payload
                            .split("<result")
                            .nth(1)?
                            .split('>')
                            .nth(1)?
                            .split('<')
                            .next()?
                            .to_owned();
                        Some((part, value))
                    })
                    .collect();
                results.sort();
                let results: Vec<String> = results.into_iter().map(|(_, value)| value).collect();
                if Some(results.len()) == plan {
                    cx.send(
                        "client",
                        format!(
                            r#"<collected xmlns="{DEMO_NS}">{}</collected>"#,
                            results.join(" ; ")
                        ),
                    );
                }
            }
            _ => {}
        }
        Ok(())
    }
}

/// In a child thread: asks the calculator for its task, then ends the thread with the answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct ScriptedWorker;

#[async_trait]
impl Listener for ScriptedWorker {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        match msg.qname().local() {
            "task" => cx.send(
                "calculator",
                format!(r#"<calc xmlns="{CALC_NS}">{}</calc>"#, text(msg)),
            ),
            "result" => cx.done(msg.payload().as_str()),
            _ => {}
        }
        Ok(())
    }
}
