//! [`Verifier`]: runs a task's verification command through the `command` tool and records
//! each goal criterion with the exit code as its evidence.

use async_trait::async_trait;

use crate::tasks::wire::{
    TASKS_NS, TOOL_NS, ToolAnswer, Verdict, Verify, attributes, command_call, decode, payload,
    tail, tool_answer,
};
use crate::{Context, Delivery, Listener, ListenerError};

use super::last;

/// Characters of output kept in a verdict.
const TAIL: usize = 600;

/// On `<verify>` it calls the `command` tool with `sh -c "cd ROOT && COMMAND"`; on the tool's
/// `<result>` or `<error>` it records every criterion of the goal (met exactly when the exit
/// code is 0, the evidence naming the code and the tool's message) and answers the coordinator
/// with a `<verdict>`. A listener other than the coordinator records the criteria, so the
/// coordinator's `done` is certified EXACT.
#[derive(Debug, Clone)]
pub struct Verifier {
    root: String,
    coordinator: String,
}

impl Verifier {
    /// A verifier running commands in `root`, answering `coordinator`.
    pub fn new(root: impl Into<String>, coordinator: impl Into<String>) -> Self {
        Self {
            root: root.into(),
            coordinator: coordinator.into(),
        }
    }
}

impl Verifier {
    /// `<verify>` from the coordinator: call the `command` tool.
    fn ask(&self, xml: &str, cx: &mut Context) -> Result<(), ListenerError> {
        let id = task_of(xml);
        let v: Verify = decode(xml).map_err(|e| ListenerError::InvalidPayload(e.to_string()))?;
        let call = command_call(&format!("{id}.verify"), &self.root, &v.command, &[]);
        cx.send(super::COMMAND, call);
        Ok(())
    }

    /// The tool's answer (or a notice about the call): record the criteria, answer the
    /// coordinator.
    async fn judge(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        let Some(verdict) = verdict_of(msg) else {
            return Ok(());
        };
        let records = cx.history().await.map_err(ListenerError::failed)?;
        let asked = last(&records, "verify")
            .ok_or_else(|| ListenerError::failed("no <verify> in this thread"))?;
        let v: Verify = decode(&asked).map_err(ListenerError::failed)?;
        let evidence = match verdict.exit_code {
            Some(code) => format!(
                "`{}` exited {code} (command tool, message {})",
                v.command,
                msg.id()
            ),
            None => format!("`{}` did not run: {}", v.command, verdict.tail),
        };
        for criterion in &v.criteria {
            cx.criterion(criterion, verdict.passed, &evidence);
        }
        let answer = payload("verdict", &task_of(&asked), &verdict);
        cx.send(self.coordinator.clone(), answer);
        Ok(())
    }
}

/// The `task` attribute of a tasks payload.
fn task_of(xml: &str) -> String {
    attributes(xml)
        .ok()
        .and_then(|a| a.get("task").cloned())
        .unwrap_or_default()
}

/// What a delivery to the verifier says about the verification: a tool answer, or a pump
/// notice about the call; `None` for notices that say nothing about it (a budget warning).
fn verdict_of(msg: &Delivery) -> Option<Verdict> {
    let failed = |tail: String| Verdict {
        passed: false,
        exit_code: None,
        tail,
    };
    if msg.qname().namespace() == TOOL_NS {
        return Some(match tool_answer(msg.payload().as_str()) {
            Ok(ToolAnswer::Result(fields)) => {
                let code = fields.get("exit_code").and_then(|c| c.trim().parse().ok());
                let field = |name: &str| fields.get(name).map_or("", String::as_str);
                Verdict {
                    passed: code == Some(0),
                    exit_code: code,
                    tail: tail(&format!("{}{}", field("stdout"), field("stderr")), TAIL),
                }
            }
            Ok(ToolAnswer::Error { kind, message }) => {
                failed(format!("command tool error {kind}: {message}"))
            }
            Err(e) => failed(format!("unreadable tool answer: {e}")),
        });
    }
    if let Some(e) = msg.system_error() {
        return (e.code() != "budget-warning")
            .then(|| failed(format!("{}: {}", e.code(), e.message())));
    }
    msg.huh()
        .map(|h| failed(format!("huh {}: {}", h.code(), h.message())))
}

#[async_trait]
impl Listener for Verifier {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.qname().is(TASKS_NS, "verify") {
            return self.ask(msg.payload().as_str(), cx);
        }
        self.judge(msg, cx).await
    }
}
