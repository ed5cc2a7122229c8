//! [`ShellWorker`]: a worker that does a task by running a shell command through the `command`
//! tool, and reads its context delta from the command's output.

use async_trait::async_trait;

use crate::tasks::Delta;
use crate::tasks::wire::{
    Assignment, TASKS_NS, ToolAnswer, command_call, decode, payload, tail, tool_answer,
};
use crate::{Context, Delivery, Listener, ListenerError};

use super::last;

/// On `<work>` it calls the `command` tool with `sh -c "cd ROOT && WORK_COMMAND" sh ID ATTEMPT
/// FEEDBACK`; on the result it answers the coordinator. Exit 0: a `<delta>` read from standard
/// output — `+ path` added, `~ path` changed, `- path` removed, every other line the summary.
/// Otherwise `<failed>` with the tail of the output.
#[derive(Debug, Clone)]
pub struct ShellWorker {
    root: String,
    command: String,
}

impl ShellWorker {
    /// A worker running `command` in `root`.
    pub fn new(root: impl Into<String>, command: impl Into<String>) -> Self {
        Self {
            root: root.into(),
            command: command.into(),
        }
    }
}

/// Reads a delta from the work command's standard output.
pub fn parse_delta(stdout: &str) -> Delta {
    let mut delta = Delta::default();
    let mut summary = Vec::new();
    for line in stdout.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match line.split_once(' ') {
            Some(("+", path)) => delta.files_added.push(path.trim().to_owned()),
            Some(("~", path)) => delta.files_changed.push(path.trim().to_owned()),
            Some(("-", path)) => delta.files_removed.push(path.trim().to_owned()),
            _ => summary.push(line),
        }
    }
    if !summary.is_empty() {
        delta.summary = Some(tail(&summary.join(" "), 400));
    }
    delta
}

#[async_trait]
impl Listener for ShellWorker {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        let text = msg.payload().as_str();
        if msg.qname().is(TASKS_NS, "work") {
            let a: Assignment =
                decode(text).map_err(|e| ListenerError::InvalidPayload(e.to_string()))?;
            let attempt = a.attempt.to_string();
            let feedback = a.feedback.clone().unwrap_or_default();
            let call = command_call(
                &format!("{}.work", a.task.id),
                &self.root,
                &self.command,
                &[&a.task.id, &attempt, &feedback],
            );
            cx.send(super::COMMAND, call);
            return Ok(());
        }
        if msg.is_system() {
            return Ok(());
        }
        let records = cx.history().await.map_err(ListenerError::failed)?;
        let work = last(&records, "work").ok_or_else(|| ListenerError::failed("no <work>"))?;
        let a: Assignment = decode(&work).map_err(ListenerError::failed)?;
        let answer = match tool_answer(text) {
            Ok(ToolAnswer::Result(f)) if f.get("exit_code").map(|c| c.trim()) == Some("0") => {
                let delta = parse_delta(f.get("stdout").map_or("", String::as_str));
                payload("delta", &a.task.id, &delta)
            }
            Ok(ToolAnswer::Result(f)) => {
                let out = format!(
                    "{}{}",
                    f.get("stdout").map_or("", String::as_str),
                    f.get("stderr").map_or("", String::as_str)
                );
                let why = format!(
                    "work command exited {}: {}",
                    f.get("exit_code").map_or("?", String::as_str),
                    tail(&out, 400)
                );
                payload("failed", &a.task.id, &serde_json::json!({ "summary": why }))
            }
            Ok(ToolAnswer::Error { kind, message }) => payload(
                "failed",
                &a.task.id,
                &serde_json::json!({ "summary": format!("command tool error {kind}: {message}") }),
            ),
            Err(e) => return Err(ListenerError::InvalidPayload(e.to_string())),
        };
        cx.send(super::COORDINATOR, answer);
        Ok(())
    }
}
