//! [`Coordinator`]: runs one task thread — the goal, the worker, the verifier, the outcome.

use async_trait::async_trait;

use crate::governor::{Budget, CertificateType, Control, Goal, Signal};
use std::collections::BTreeSet;

use crate::tasks::wire::{Assignment, Outcome, TASKS_NS, Verdict, Verify, decode, payload};
use crate::tasks::{Delta, MAX_EXISTING_FILES, Task, project_path};
use crate::{Context, Delivery, Listener, ListenerError};

use super::{criterion_ids, last};

/// The listener a task thread starts with. On `<task>` it declares the goal (the acceptance
/// criteria and the verification, certificate EXACT, the task's budget) and briefs the worker
/// with `<work>`; on the worker's `<delta>` it asks the verifier; on the `<verdict>` it sends
/// the `<outcome>` to the client and signals `done` (passed) or `abort` (failed). A worker's
/// `<failed>`, another answer, or a pump notice about the worker or verifier fail the attempt.
#[derive(Debug, Clone)]
pub struct Coordinator {
    worker: String,
    verifier: String,
    budget: Budget,
}

impl Coordinator {
    /// A coordinator briefing `worker`, asking `verifier`, with `budget` per task thread.
    pub fn new(worker: impl Into<String>, verifier: impl Into<String>, budget: Budget) -> Self {
        Self {
            worker: worker.into(),
            verifier: verifier.into(),
            budget,
        }
    }

    fn start(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        let a: Assignment = decode(msg.payload().as_str())
            .map_err(|e| ListenerError::InvalidPayload(e.to_string()))?;
        let mut criteria: Vec<(String, String)> = criterion_ids(a.task.acceptance_criteria.len())
            .into_iter()
            .zip(a.task.acceptance_criteria.iter().cloned())
            .collect();
        criteria.push((
            "verification".into(),
            format!("`{}` exits 0", a.task.verification_command),
        ));
        cx.goal(&Goal {
            text: format!("{}: {}", a.task.id, a.task.title),
            criteria,
            certificates: vec![CertificateType::Exact],
            r_p: None,
            residual_metric: None,
            budget: self.budget.clone(),
        });
        cx.send(self.worker.clone(), payload("work", &a.task.id, &a));
        Ok(())
    }

    async fn delta(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        let a = assignment(cx).await?;
        let delta: Delta = match decode(msg.payload().as_str()) {
            Ok(d) => d,
            Err(e) => {
                fail(cx, &a.task.id, format!("the worker's delta: {e}"));
                return Ok(());
            }
        };
        // Seed 004: completed needs the "Context Delta"; an empty one says nothing was done.
        if delta == Delta::default() {
            fail(
                cx,
                &a.task.id,
                "the worker handed back an empty delta".into(),
            );
            return Ok(());
        }
        if let Some(why) = beyond_the_task(&a.task, &delta) {
            fail(cx, &a.task.id, why);
            return Ok(());
        }
        let verify = Verify {
            command: a.task.verification_command.clone(),
            criteria: criterion_ids(a.task.acceptance_criteria.len()),
        };
        cx.send(
            self.verifier.clone(),
            payload("verify", &a.task.id, &verify),
        );
        Ok(())
    }

    async fn verdict(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        let a = assignment(cx).await?;
        let verdict: Verdict = decode(msg.payload().as_str())
            .map_err(|e| ListenerError::InvalidPayload(e.to_string()))?;
        let records = cx.history().await.map_err(ListenerError::failed)?;
        let delta: Option<Delta> = last(&records, "delta").and_then(|d| decode(&d).ok());
        let command = &a.task.verification_command;
        if !verdict.passed {
            let out = if verdict.tail.is_empty() {
                "(no output)"
            } else {
                verdict.tail.as_str()
            };
            let why = match verdict.exit_code {
                Some(code) => format!("verification `{command}` exited {code}: {out}"),
                None => format!("verification `{command}` did not run: {out}"),
            };
            fail(cx, &a.task.id, why);
            return Ok(());
        }
        let summary = delta
            .as_ref()
            .and_then(|d| d.summary.clone())
            .unwrap_or_else(|| "done".into());
        let outcome = Outcome {
            task: a.task.id.clone(),
            completed: true,
            summary: format!("{summary}; verification `{command}` exited 0"),
            delta,
        };
        cx.send("client", payload("outcome", &a.task.id, &outcome));
        cx.signal(Signal::new(Control::Done));
        Ok(())
    }
}

/// Why a worker's delta goes beyond its task (seed 004: a task is atomic), or `None`: a path
/// outside the task's `context.files`, or more existing files changed or removed than the
/// atomic constraint allows.
fn beyond_the_task(task: &Task, delta: &Delta) -> Option<String> {
    let allowed: BTreeSet<String> = task
        .context
        .files
        .iter()
        .filter_map(|f| project_path(f))
        .collect();
    let touched = delta
        .files_added
        .iter()
        .chain(&delta.files_changed)
        .chain(&delta.files_removed);
    for path in touched {
        if !project_path(path).is_some_and(|p| allowed.contains(&p)) {
            let listed: Vec<&str> = allowed.iter().map(String::as_str).collect();
            return Some(format!(
                "the worker's delta touches `{path}`, which is not in {}'s context.files [{}]: a \
                 worker changes only its task's files",
                task.id,
                listed.join(", ")
            ));
        }
    }
    let modified: BTreeSet<String> = delta
        .files_changed
        .iter()
        .chain(&delta.files_removed)
        .filter_map(|f| project_path(f))
        .collect();
    (modified.len() > MAX_EXISTING_FILES).then(|| {
        let listed: Vec<&str> = modified.iter().map(String::as_str).collect();
        format!(
            "the worker's delta modifies {} existing files ({}), more than the {MAX_EXISTING_FILES} \
             the atomic constraint allows",
            modified.len(),
            listed.join(", ")
        )
    })
}

/// The assignment this thread started with.
async fn assignment(cx: &Context) -> Result<Assignment, ListenerError> {
    let records = cx.history().await.map_err(ListenerError::failed)?;
    let task =
        last(&records, "task").ok_or_else(|| ListenerError::failed("no <task> in this thread"))?;
    decode(&task).map_err(ListenerError::failed)
}

/// Sends a failed outcome to the client and aborts the thread.
fn fail(cx: &mut Context, task: &str, summary: String) {
    let outcome = Outcome {
        task: task.to_owned(),
        completed: false,
        summary,
        delta: None,
    };
    cx.send("client", payload("outcome", task, &outcome));
    cx.signal(Signal::new(Control::Abort));
}

#[async_trait]
impl Listener for Coordinator {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            let why = if let Some(e) = msg.system_error() {
                if e.code() == "budget-warning" {
                    return Ok(());
                }
                format!("{} from the pump: {}", e.code(), e.message())
            } else if let Some(h) = msg.huh() {
                format!("huh {}: {}", h.code(), h.message())
            } else {
                return Ok(());
            };
            let task = assignment(cx).await.map(|a| a.task.id).unwrap_or_default();
            fail(cx, &task, why);
            return Ok(());
        }
        let root = msg.qname();
        if root.namespace() != TASKS_NS {
            let a = assignment(cx).await?;
            let why = format!(
                "{} answered {{{}}}{} instead of a <delta>",
                msg.from(),
                root.namespace(),
                root.local()
            );
            fail(cx, &a.task.id, why);
            return Ok(());
        }
        match root.local() {
            "task" => self.start(msg, cx),
            "delta" => self.delta(msg, cx).await,
            "verdict" => self.verdict(msg, cx).await,
            "failed" => {
                let a = assignment(cx).await?;
                let why: serde_json::Value = decode(msg.payload().as_str()).unwrap_or_default();
                let why = why["summary"]
                    .as_str()
                    .unwrap_or("no reason given")
                    .to_owned();
                fail(cx, &a.task.id, format!("the worker failed: {why}"));
                Ok(())
            }
            other => Err(ListenerError::InvalidPayload(format!(
                "a task coordinator reads task, delta, verdict or failed, not {other}"
            ))),
        }
    }
}
