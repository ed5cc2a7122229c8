//! One attempt at a task: its thread, from the `<task>` posted to the coordinator to the
//! `<outcome>` it sends the client — or the halt that ended it first.

use std::collections::BTreeSet;
use std::time::Duration;

use super::Found;
use crate::ThreadState;
use crate::tasks::TasksError;
use crate::tasks::listeners::COORDINATOR;
use crate::tasks::wire::{Assignment, Outcome, TASKS_NS, decode};
use crate::{PumpHandle, ThreadId};

/// Extra wait beyond a task's wall-clock budget before an unsettled thread counts as failed.
const GRACE: Duration = Duration::from_secs(30);

/// Works one attempt: in `thread` when it exists (continued after a restart), else in a new
/// thread. Returns the task, the attempt and how it ended. Never fails: a failure of the pump is
/// the attempt's failure.
pub(super) async fn work(
    pump: PumpHandle,
    thread: Option<ThreadId>,
    a: Assignment,
    wall_clock_ms: u64,
) -> (String, u32, Outcome) {
    let (id, attempt) = (a.task.id.clone(), a.attempt);
    let outcome = match run(&pump, thread, &a, wall_clock_ms).await {
        Ok(o) => o,
        Err(why) => Outcome {
            task: id.clone(),
            completed: false,
            summary: why,
            delta: None,
        },
    };
    (id, attempt, outcome)
}

async fn run(
    pump: &PumpHandle,
    thread: Option<ThreadId>,
    a: &Assignment,
    wall_clock_ms: u64,
) -> Result<Outcome, String> {
    let thread = match thread {
        Some(t) => t,
        None => {
            let payload = super::task_payload(a);
            let receipt = pump
                .post(None, Some(COORDINATOR), &payload)
                .await
                .map_err(|e| format!("the pump refused the task: {e}"))?;
            receipt.thread()
        }
    };
    let patience = Duration::from_millis(wall_clock_ms) + GRACE;
    if tokio::time::timeout(patience, pump.settle(thread))
        .await
        .is_err()
    {
        let _ = pump.stop(thread).await;
        // Never two attempts at once: a delivery still running (a command under way) ends by
        // its delivery timeout, which kills the command's process group, before a retry starts.
        pump.settle_here(thread).await;
        return Err(format!("thread {thread} did not settle in time; stopped"));
    }
    outcome(pump, thread).await
}

/// How thread `thread` ended: its `<outcome>`, else its halt, else that it went idle.
async fn outcome(pump: &PumpHandle, thread: ThreadId) -> Result<Outcome, String> {
    let records = pump.history(thread).await.map_err(|e| e.to_string())?;
    if let Some(r) = records
        .iter()
        .rev()
        .find(|r| r.root.is(TASKS_NS, "outcome"))
    {
        return decode(&r.payload).map_err(|e| e.to_string());
    }
    let reports = pump.reports(thread).await.map_err(|e| e.to_string())?;
    match reports.last() {
        Some(r) => Err(format!(
            "thread {} halted {} ({}), report {}",
            r.path, r.class, r.stop_reason, r.halt_id
        )),
        None => Err(format!(
            "thread {thread} went idle without an outcome (the worker handed back no delta)"
        )),
    }
}

/// The task threads in the recovered pump, by (task, attempt): their first record is the
/// `<task>` posted to the coordinator.
pub(super) async fn recovered(pump: &PumpHandle) -> Result<Found, TasksError> {
    let mut found = Found::new();
    for info in pump.threads() {
        if info.parent.is_some() || info.id == pump.system_thread() {
            continue;
        }
        let records = pump
            .history(info.id)
            .await
            .map_err(|e| TasksError::Pump(e.to_string()))?;
        let Some(first) = records.first() else {
            continue;
        };
        if first.root.is(TASKS_NS, "task")
            && let Ok(a) = decode::<Assignment>(&first.payload)
        {
            found.insert((a.task.id, a.attempt), info.id);
        }
    }
    Ok(found)
}

/// Stops recovered task threads that no in-progress attempt continues and that are still live
/// (an attempt superseded before the restart must not work on).
pub(super) async fn stop_orphans(pump: &PumpHandle, found: &Found, continued: &BTreeSet<ThreadId>) {
    for thread in found.values() {
        if continued.contains(thread) {
            continue;
        }
        let live = pump.thread(*thread).is_some_and(|i| {
            matches!(
                i.state,
                ThreadState::Active | ThreadState::Idle | ThreadState::Waiting
            )
        });
        if live {
            tracing::warn!(%thread, "stopping a task thread no attempt continues");
            let _ = pump.stop(*thread).await;
        }
    }
}
