//! [`plan`]: seed 004's Planner — a goal turned into task files by a planner listener (an LLM
//! agent, a process, any listener of `{urn:agentpump:tasks:v1}plan`), checked as `tasks check`
//! checks before a file is written, with one more round when the check says "split it".
//!
//! The planner receives `<plan xmlns="urn:agentpump:tasks:v1">` with JSON `goal`, `existing`
//! (the ids already planned) and `advice` (the check's problems of its last proposal) and
//! answers `<tasks xmlns="urn:agentpump:tasks:v1">` with a JSON list of task files, which the
//! [`PLAN_INTAKE`] listener takes in for the host to read.

use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::wire::{TASKS_NS, decode};
use super::{Layout, Task, TasksError};
use crate::{Context, Delivery, Listener, ListenerError, PumpHandle, QName, Registration, Role};

/// The listener that takes in a planner's `<tasks>`.
pub const PLAN_INTAKE: &str = "tasks-plan";

/// Planner rounds at most: the first proposal, and one more with the check's advice.
pub const ROUNDS: usize = 2;

/// What the planner is asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRequest {
    /// The goal to split into tasks.
    pub goal: String,
    /// Ids of the tasks already planned (task files and archived).
    pub existing: Vec<String>,
    /// Why the last proposal was refused (the check's problems); empty on the first round.
    pub advice: Vec<String>,
}

/// Takes in a planner's `<tasks>`: it is recorded in the thread, which the host reads.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanIntake;

#[async_trait]
impl Listener for PlanIntake {
    async fn handle(&self, _msg: &Delivery, _cx: &mut Context) -> Result<(), ListenerError> {
        Ok(())
    }
}

/// The intake's registration (accepts `{urn:agentpump:tasks:v1}tasks`).
pub fn intake() -> Registration {
    Registration::new(PLAN_INTAKE, PlanIntake)
        .accepts(QName::new(TASKS_NS, "tasks"))
        .role(Role::Tool)
        .description("takes in the planner's task files (a JSON list in <tasks>)")
}

/// Asks `planner` for tasks reaching `goal` (at most [`ROUNDS`] rounds, each waiting at most
/// `patience`), checks them together with the project's tasks, and writes them. Returns the
/// ids written.
///
/// # Errors
///
/// [`TasksError::Check`] with the last proposal's problems (nothing written);
/// [`TasksError::Pump`] when the planner gives no `<tasks>`; a file cannot be written.
pub async fn plan(
    pump: &PumpHandle,
    planner: &str,
    layout: &Layout,
    goal: &str,
    patience: Duration,
) -> Result<Vec<String>, TasksError> {
    let existing = super::check(layout)?;
    let mut request = PlanRequest {
        goal: goal.to_owned(),
        existing: existing
            .tasks
            .iter()
            .map(|(_, t)| t.id.clone())
            .chain(existing.archived)
            .collect(),
        advice: Vec::new(),
    };
    let mut thread = None;
    for _ in 0..ROUNDS {
        let json = serde_json::to_string(&request).expect("a request serializes");
        let payload = format!(
            "<plan xmlns=\"{TASKS_NS}\">{}</plan>",
            quick_xml::escape::escape(json.as_str())
        );
        let receipt = pump
            .post(thread, Some(planner), &payload)
            .await
            .map_err(|e| TasksError::Pump(format!("the pump refused the plan request: {e}")))?;
        let id = receipt.thread();
        thread = Some(id);
        let _ = tokio::time::timeout(patience, pump.settle(id)).await;
        let proposed = proposal(pump, id, planner).await?;
        match refusals(layout, &proposed)? {
            problems if problems.is_empty() => return write(layout, &proposed),
            problems => request.advice = problems,
        }
    }
    Err(TasksError::Check(request.advice))
}

/// The planner's last `<tasks>` in `thread`.
async fn proposal(
    pump: &PumpHandle,
    thread: crate::ThreadId,
    planner: &str,
) -> Result<Vec<Task>, TasksError> {
    let records = pump
        .history(thread)
        .await
        .map_err(|e| TasksError::Pump(e.to_string()))?;
    let last = records
        .iter()
        .rev()
        .find(|r| r.root.is(TASKS_NS, "tasks"))
        .ok_or_else(|| {
            TasksError::Pump(format!(
                "the planner `{planner}` answered no <tasks xmlns=\"{TASKS_NS}\"> in thread {thread}"
            ))
        })?;
    decode(&last.payload).map_err(|e| TasksError::Pump(format!("the planner's <tasks>: {e}")))
}

/// The problems `tasks check` would find with `proposed` added to the project (none: they may
/// be written). The proposal is checked in a scratch copy of the task directory.
fn refusals(layout: &Layout, proposed: &[Task]) -> Result<Vec<String>, TasksError> {
    let scratch = layout.tasks_dir().join(".plan");
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).map_err(TasksError::io(&scratch))?;
    let copy = |from: &Path| -> Result<(), TasksError> {
        let to = scratch.join(from.file_name().unwrap_or_default());
        std::fs::copy(from, &to)
            .map(|_| ())
            .map_err(TasksError::io(&to))
    };
    for path in Task::files(layout.tasks_dir())? {
        copy(&path)?;
    }
    if layout.archive().is_file() {
        copy(&layout.archive())?;
    }
    let mut problems = names(&scratch, proposed);
    if problems.is_empty() {
        for task in proposed {
            write_file(&scratch.join(format!("{}.json", task.id)), task)?;
        }
    }
    let as_if = Layout::with(
        layout.root(),
        &scratch.to_string_lossy(),
        &layout.ledger().to_string_lossy(),
    );
    if !problems.is_empty() {
        let _ = std::fs::remove_dir_all(&scratch);
        return Ok(problems);
    }
    problems = match super::check(&as_if) {
        Ok(_) => Vec::new(),
        Err(TasksError::Check(problems)) => problems
            .into_iter()
            .map(|p| {
                p.replace(
                    &*scratch.to_string_lossy(),
                    &layout.tasks_dir().to_string_lossy(),
                )
            })
            .collect(),
        Err(e) => vec![e.to_string()],
    };
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(problems)
}

/// What is wrong with the proposal's ids before any file is written: an id that is not of the
/// `T-XXX` form (it names the file: never a path), one proposed twice, one already a task.
fn names(scratch: &Path, proposed: &[Task]) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    for task in proposed {
        let id = &task.id;
        if !super::is_task_id(id) {
            problems.push(format!(
                "`{id}`: not a task id (T- and three or more digits)"
            ));
        } else if !seen.insert(id) {
            problems.push(format!("{id}: proposed twice"));
        } else if scratch.join(format!("{id}.json")).exists() {
            problems.push(format!(
                "{id}: already a task: give the new task another id"
            ));
        }
    }
    if proposed.is_empty() {
        problems.push("the planner proposed no task".into());
    }
    problems
}

/// Writes the checked tasks; returns their ids.
fn write(layout: &Layout, tasks: &[Task]) -> Result<Vec<String>, TasksError> {
    for task in tasks {
        write_file(&layout.tasks_dir().join(format!("{}.json", task.id)), task)?;
    }
    Ok(tasks.iter().map(|t| t.id.clone()).collect())
}

/// A task file, written whole (a temporary file renamed).
fn write_file(path: &Path, task: &Task) -> Result<(), TasksError> {
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(task).expect("a task serializes") + "\n";
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(TasksError::io(path))
}
