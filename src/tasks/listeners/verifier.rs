//! [`Verifier`]: runs a task's verification command through the `command` tool and records
//! each goal criterion with the exit code as its evidence.

use async_trait::async_trait;

use crate::tasks::wire::{
    TOOL_NS, ToolAnswer, Verdict, Verify, command_call, decode, payload, tail, tool_answer,
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

#[async_trait]
impl Listener for Verifier {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        let task = msg.envelope().payload().as_str().to_owned();
        if msg.qname().is(crate::tasks::wire::TASKS_NS, "verify") {
            let id = crate::tasks::wire::attributes(&task)
                .ok()
                .and_then(|a| a.get("task").cloned())
                .unwrap_or_default();
            let v: Verify = decode(&task).map_err(ListenerError::InvalidPayload)?;
            cx.send(
                super::COMMAND,
                command_call(&format!("{id}.verify"), &self.root, &v.command, &[]),
            );
            return Ok(());
        }
        let records = cx.history().await.map_err(ListenerError::failed)?;
        let asked = last(&records, "verify")
            .ok_or_else(|| ListenerError::failed("no <verify> in this thread"))?;
        let id = crate::tasks::wire::attributes(&asked)
            .ok()
            .and_then(|a| a.get("task").cloned())
            .unwrap_or_default();
        let v: Verify = decode(&asked).map_err(ListenerError::failed)?;
        let verdict = if msg.qname().namespace() == TOOL_NS {
            match tool_answer(&task) {
                Ok(ToolAnswer::Result(fields)) => {
                    let code = fields.get("exit_code").and_then(|c| c.trim().parse().ok());
                    let out = format!(
                        "{}{}",
                        fields.get("stdout").map_or("", String::as_str),
                        fields.get("stderr").map_or("", String::as_str)
                    );
                    Verdict {
                        passed: code == Some(0),
                        exit_code: code,
                        tail: tail(&out, TAIL),
                    }
                }
                Ok(ToolAnswer::Error { kind, message }) => Verdict {
                    passed: false,
                    exit_code: None,
                    tail: format!("command tool error {kind}: {message}"),
                },
                Err(e) => Verdict {
                    passed: false,
                    exit_code: None,
                    tail: format!("unreadable tool answer: {e}"),
                },
            }
        } else if let Some(e) = msg.system_error() {
            if e.code() == "budget-warning" {
                return Ok(());
            }
            Verdict {
                passed: false,
                exit_code: None,
                tail: format!("{}: {}", e.code(), e.message()),
            }
        } else if let Some(h) = msg.huh() {
            Verdict {
                passed: false,
                exit_code: None,
                tail: format!("huh {}: {}", h.code(), h.message()),
            }
        } else {
            return Ok(());
        };
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
        cx.send(self.coordinator.clone(), payload("verdict", &id, &verdict));
        Ok(())
    }
}
