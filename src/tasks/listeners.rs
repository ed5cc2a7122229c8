//! The listeners of a task thread. The orchestrator registers the [`Coordinator`] and the
//! [`Verifier`]; the [`ShellWorker`] when the organism names no worker listener but a
//! `work_command`; the [`CommandTool`](crate::listeners::CommandTool), allowed only `sh` in the
//! task root, when the organism declares no `command` listener; the [`TaskIndexer`] (the seed's
//! `task-indexer` skill) unless the organism declares one.
//!
//! Each keeps no state between deliveries: what a step needs (the assignment, the delta, the
//! verification asked for) is read back from the thread's history.

mod coordinator;
mod indexer;
mod shell;
mod verifier;

pub use coordinator::Coordinator;
pub use indexer::{TASK_INDEXER, TaskIndexer};
pub use shell::ShellWorker;
pub use verifier::Verifier;

use crate::history::Record;

use super::wire::TASKS_NS;

/// The coordinator's registered name.
pub const COORDINATOR: &str = "tasks";
/// The verifier's registered name.
pub const VERIFIER: &str = "tasks-verify";
/// The command tool's name.
pub const COMMAND: &str = "command";

/// The payload of the last record in `records` whose root is `{tasks}local`.
fn last(records: &[Record], local: &str) -> Option<String> {
    records
        .iter()
        .rev()
        .find(|r| r.root.is(TASKS_NS, local))
        .map(|r| r.payload.to_string())
}

/// The goal's criterion ids for a task with `n` acceptance criteria: `ac-1` … `ac-n`, then
/// `verification`.
pub fn criterion_ids(n: usize) -> Vec<String> {
    (1..=n)
        .map(|i| format!("ac-{i}"))
        .chain(std::iter::once("verification".to_owned()))
        .collect()
}
