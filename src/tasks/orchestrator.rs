//! The orchestrator (`agentpump tasks run`): task files in dependency order, each attempt in its
//! own thread of the pump, every status change a durable ledger line written by this one writer.
//!
//! Restart: the ledger says where each task is. A task whose last line is `in-progress` has its
//! attempt's thread looked up in the recovered pump (the first record of every task thread is
//! its `<task>`): a thread with an outcome is read, a live one is awaited (the pump's recovery
//! continues it), and an attempt whose thread never started is started — with no new line.
//! Completed tasks are never started again.

mod attempt;
mod plan;
mod registrations;
mod retry;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use tokio::task::JoinSet;

use super::wire::{Assignment, Outcome};
use super::{
    Checked, Exhausted, Layout, Ledger, Line, Repair, Status, Task, TasksConfig, TasksError,
    archive,
};
use crate::{PumpHandle, ThreadId};

use plan::Plan;
pub use plan::Row;
pub use registrations::{TASKS_ENV, check_command_policy, command_policy, guarded, registrations};
pub use retry::retry;

/// What a run did.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// One row per task, in dependency order.
    pub rows: Vec<Row>,
    /// A torn ledger line cut off when the ledger was opened.
    pub repaired: Option<Repair>,
    /// Task files moved into the archive.
    pub archived: Vec<String>,
    /// Attempts started in this run (continued ones included).
    pub started: usize,
}

impl Report {
    /// Whether every task is completed.
    pub fn all_completed(&self) -> bool {
        self.rows.iter().all(|r| r.status == Status::Completed)
    }

    /// The summary table.
    pub fn table(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{:<16} {:<12} {:>8}  summary",
            "task", "status", "attempts"
        );
        for r in &self.rows {
            let _ = writeln!(
                t,
                "{:<16} {:<12} {:>8}  {}",
                r.id,
                r.status.as_str(),
                r.attempts,
                super::wire::tail(&r.summary, 100)
            );
        }
        let done = self
            .rows
            .iter()
            .filter(|r| r.status == Status::Completed)
            .count();
        let _ = writeln!(t, "{done} of {} task(s) completed", self.rows.len());
        t
    }
}

/// Runs every startable task to its end with at most `parallel` at once; returns the report.
///
/// # Errors
///
/// A setting out of range ([`TasksConfig::check`]), the ledger cannot be written, a fix task
/// file cannot be written, or the pump refuses a task.
pub async fn run(
    pump: &PumpHandle,
    mut ledger: Ledger,
    checked: Checked,
    layout: &Layout,
    config: &TasksConfig,
    parallel: usize,
) -> Result<Report, TasksError> {
    config.check()?;
    let mut plan = Plan::new(&checked, ledger.lines());
    for id in plan.unlisted() {
        let line = Line::now(&id, Status::Pending, "Task initialized by Orchestrator");
        ledger.append(line.clone())?;
        plan.record(&line);
    }
    let mut jobs = Jobs::new(pump, config.wall_clock_ms);
    // In-progress attempts from before a restart: continue them (or start them: no new line).
    let found = attempt::recovered(pump).await?;
    let mut continued = BTreeSet::new();
    let mut resumed = std::collections::VecDeque::new();
    for (id, attempt, assignment) in plan.in_progress() {
        let thread = found.get(&(id.clone(), attempt)).copied();
        continued.extend(thread);
        resumed.push_back((thread, assignment));
    }
    attempt::stop_orphans(pump, &found, &continued).await;
    exhaust_leftovers(&mut plan, &mut ledger, layout, config)?;
    // The seed's maintenance, before any attempt: a run with nothing to start archives too.
    let mut archived = archive(layout, config.archive_after)?;
    loop {
        while jobs.running.len() < parallel.max(1) {
            let Some((thread, assignment)) = resumed.pop_front() else {
                break;
            };
            jobs.spawn(thread, assignment);
        }
        for (id, assignment) in plan.startable(&jobs.running, 1 + config.retries) {
            if jobs.running.len() >= parallel.max(1) {
                break;
            }
            if refused_at_start(&mut plan, &mut ledger, layout, &assignment.task)? {
                continue;
            }
            let summary = format!(
                "attempt {}: assigned to {}",
                assignment.attempt, config.worker
            );
            let line = Line::now(&id, Status::InProgress, summary);
            // Durable before the thread exists: every task thread has its line.
            ledger.append(line.clone())?;
            plan.record(&line);
            jobs.spawn(None, assignment);
        }
        let Some((id, attempt, outcome)) = jobs.next().await? else {
            break;
        };
        finish(
            &mut plan,
            &mut ledger,
            layout,
            config,
            &id,
            attempt,
            outcome,
        )?;
        archived.extend(archive(layout, config.archive_after)?);
    }
    Ok(Report {
        rows: plan.rows(),
        repaired: ledger.repair().cloned(),
        archived,
        started: jobs.started,
    })
}

/// Seed 004's atomic constraint, judged when a task first starts (files an earlier task created
/// count): a task that would modify too many existing files is `blocked` with the reason, and
/// never started. Returns whether it was.
fn refused_at_start(
    plan: &mut Plan,
    ledger: &mut Ledger,
    layout: &Layout,
    task: &Task,
) -> Result<bool, TasksError> {
    if plan.attempts(&task.id) > 0 {
        return Ok(false);
    }
    let Some(why) = task.not_atomic(layout.root()) else {
        return Ok(false);
    };
    let line = Line::now(&task.id, Status::Blocked, format!("never started: {why}"));
    ledger.append(line.clone())?;
    plan.record(&line);
    Ok(true)
}

/// The attempts under way, each a tokio task awaiting its thread.
struct Jobs {
    pump: PumpHandle,
    wall_clock_ms: u64,
    set: JoinSet<(String, u32, Outcome)>,
    running: BTreeSet<String>,
    started: usize,
}

impl Jobs {
    fn new(pump: &PumpHandle, wall_clock_ms: u64) -> Self {
        Self {
            pump: pump.clone(),
            wall_clock_ms,
            set: JoinSet::new(),
            running: BTreeSet::new(),
            started: 0,
        }
    }

    /// Works `assignment` in `thread` (continued) or a new thread.
    fn spawn(&mut self, thread: Option<ThreadId>, assignment: Assignment) {
        self.running.insert(assignment.task.id.clone());
        self.started += 1;
        let work = attempt::work(self.pump.clone(), thread, assignment, self.wall_clock_ms);
        self.set.spawn(work);
    }

    /// The next attempt to end; `None` when none is under way.
    async fn next(&mut self) -> Result<Option<(String, u32, Outcome)>, TasksError> {
        let Some(joined) = self.set.join_next().await else {
            return Ok(None);
        };
        let ended = joined.map_err(|e| TasksError::Pump(e.to_string()))?;
        self.running.remove(&ended.0);
        Ok(Some(ended))
    }
}

/// Appends the line an attempt's outcome earns, and what follows a last failure.
fn finish(
    plan: &mut Plan,
    ledger: &mut Ledger,
    layout: &Layout,
    config: &TasksConfig,
    id: &str,
    attempt: u32,
    outcome: Outcome,
) -> Result<(), TasksError> {
    let line = if outcome.completed {
        Line {
            delta: outcome.delta,
            ..Line::now(id, Status::Completed, outcome.summary)
        }
    } else {
        Line::now(
            id,
            Status::Failed,
            format!("attempt {attempt}: {}", outcome.summary),
        )
    };
    ledger.append(line.clone())?;
    plan.record(&line);
    if plan.is_exhausted(id, 1 + config.retries) {
        exhaust(plan, ledger, layout, config, id)?;
    }
    Ok(())
}

/// Failed tasks with no attempt left when the run started (a stop between the two lines).
fn exhaust_leftovers(
    plan: &mut Plan,
    ledger: &mut Ledger,
    layout: &Layout,
    config: &TasksConfig,
) -> Result<(), TasksError> {
    for id in plan.exhausted(1 + config.retries) {
        exhaust(plan, ledger, layout, config, &id)?;
    }
    Ok(())
}

/// A task that failed its last attempt becomes `blocked`; with `on_exhausted = "fix-task"` and
/// a fix generation left, a fix task is written first and the blocked line names it; without
/// one, the blocked line says why no fix task was written.
fn exhaust(
    plan: &mut Plan,
    ledger: &mut Ledger,
    layout: &Layout,
    config: &TasksConfig,
    id: &str,
) -> Result<(), TasksError> {
    let attempts = plan.attempts(id);
    let generation = super::fix_generation(id);
    let summary = match config.on_exhausted {
        Exhausted::Blocked => format!("failed {attempts} attempt(s); not retried"),
        Exhausted::FixTask if generation >= config.fix_generations => format!(
            "failed {attempts} attempt(s); not retried; no fix task written: {id} is of fix \
             generation {generation} and [tasks] fix_generations = {}",
            config.fix_generations
        ),
        Exhausted::FixTask => {
            // A fix task written before a crash cut this step short is the one: never a second.
            let fix = match plan.fix_of(id) {
                Some(fix) => fix,
                None => {
                    let fix = write_fix_task(plan, layout, id)?;
                    let fix_id = fix.id.clone();
                    plan.add(fix);
                    fix_id
                }
            };
            if plan.status(&fix).is_none() {
                let pending = Line::now(
                    &fix,
                    Status::Pending,
                    format!("fix task for {id}, created by the Orchestrator"),
                );
                ledger.append(pending.clone())?;
                plan.record(&pending);
            }
            format!("failed {attempts} attempt(s); fix task {fix} created")
        }
    };
    let line = Line::now(id, Status::Blocked, summary);
    ledger.append(line.clone())?;
    plan.record(&line);
    Ok(())
}

/// Writes `T-XXX-FIX-n.json` (the first free n) and returns it.
fn write_fix_task(plan: &Plan, layout: &Layout, id: &str) -> Result<Task, TasksError> {
    let original = plan
        .task(id)
        .cloned()
        .ok_or_else(|| TasksError::Pump(format!("no task {id} to write a fix task for")))?;
    let n = (1..)
        .find(|n| {
            let fix = format!("{id}-FIX-{n}");
            !plan.knows(&fix) && !layout.tasks_dir().join(format!("{fix}.json")).exists()
        })
        .expect("a free number");
    let fix = Task {
        id: format!("{id}-FIX-{n}"),
        title: format!("Fix: {}", original.title),
        description: format!(
            "{}\n\nEvery attempt at {id} failed; the last: {}",
            original.description,
            plan.summary(id)
        ),
        ..original
    };
    let path = layout.tasks_dir().join(format!("{}.json", fix.id));
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(&fix).expect("a task serializes");
    std::fs::write(&tmp, text + "\n")
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(TasksError::io(&path))?;
    Ok(fix)
}

/// The threads of recovered task attempts, by (task, attempt).
pub type Found = BTreeMap<(String, u32), ThreadId>;

/// An assignment's thread payload.
pub fn task_payload(a: &Assignment) -> String {
    super::wire::payload("task", &a.task.id, a)
}
