//! [`Plan`]: every task's state as the ledger tells it — its last status, attempts so far, last
//! summary — and which tasks may start.

use std::collections::{BTreeMap, BTreeSet};

use crate::tasks::wire::Assignment;
use crate::tasks::{Checked, Line, Status, Task};

/// One row of the summary table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The task.
    pub id: String,
    /// Its latest status.
    pub status: Status,
    /// Attempts started (`in-progress` lines).
    pub attempts: u32,
    /// Its latest summary.
    pub summary: String,
}

#[derive(Debug)]
struct Entry {
    task: Task,
    status: Option<Status>,
    attempts: u32,
    /// Attempts started before the task's latest `pending` line (a retry the user asked for
    /// starts a fresh count).
    base: u32,
    summary: String,
    last_failure: Option<String>,
}

/// The tasks in dependency order with their ledger state.
#[derive(Debug)]
pub(super) struct Plan {
    order: Vec<String>,
    entries: BTreeMap<String, Entry>,
    archived: BTreeSet<String>,
}

impl Plan {
    /// The checked tasks, with the ledger's `lines` applied.
    pub(super) fn new(checked: &Checked, lines: &[Line]) -> Self {
        let mut plan = Self {
            order: Vec::new(),
            entries: BTreeMap::new(),
            archived: checked.archived.clone(),
        };
        for (_, task) in &checked.tasks {
            plan.add(task.clone());
        }
        for line in lines {
            plan.record(line);
        }
        plan
    }

    /// Adds a task (a fix task) at the end of the order.
    pub(super) fn add(&mut self, task: Task) {
        self.order.push(task.id.clone());
        self.entries.insert(
            task.id.clone(),
            Entry {
                task,
                status: None,
                attempts: 0,
                base: 0,
                summary: String::new(),
                last_failure: None,
            },
        );
    }

    /// Applies one ledger line (lines of tasks without a file are ignored).
    pub(super) fn record(&mut self, line: &Line) {
        let Some(e) = self.entries.get_mut(&line.id) else {
            return;
        };
        e.status = Some(line.status);
        e.summary.clone_from(&line.summary);
        match line.status {
            Status::InProgress => e.attempts += 1,
            Status::Pending => e.base = e.attempts,
            Status::Failed => e.last_failure = Some(line.summary.clone()),
            _ => {}
        }
    }

    /// Tasks with no line yet, in order.
    pub(super) fn unlisted(&self) -> Vec<String> {
        self.ids(|e| e.status.is_none())
    }

    /// Tasks whose last line is `in-progress`, with the attempt's number and assignment.
    pub(super) fn in_progress(&self) -> Vec<(String, u32, Assignment)> {
        self.ids(|e| e.status == Some(Status::InProgress))
            .into_iter()
            .map(|id| {
                let e = &self.entries[&id];
                let a = Assignment {
                    task: e.task.clone(),
                    attempt: e.attempts,
                    feedback: e.last_failure.clone(),
                };
                (id, e.attempts, a)
            })
            .collect()
    }

    /// Tasks that may start now: pending, or failed with attempts left; not running; every
    /// `requires` completed (or archived). Each with its next attempt's assignment.
    pub(super) fn startable(
        &self,
        running: &BTreeSet<String>,
        max_attempts: u32,
    ) -> Vec<(String, Assignment)> {
        self.ids(|e| match e.status {
            Some(Status::Pending) => true,
            Some(Status::Failed) => e.attempts - e.base < max_attempts,
            _ => false,
        })
        .into_iter()
        .filter(|id| !running.contains(id))
        .filter(|id| self.entries[id].task.requires.iter().all(|r| self.met(r)))
        .map(|id| {
            let e = &self.entries[&id];
            let a = Assignment {
                task: e.task.clone(),
                attempt: e.attempts + 1,
                feedback: e.last_failure.clone(),
            };
            (id, a)
        })
        .collect()
    }

    /// Whether a requirement is met: `r` is completed (or archived), or `r` is blocked and one of
    /// its fix tasks (`r-FIX-n`) is completed — the fix task stands in for it.
    fn met(&self, r: &str) -> bool {
        let completed = |id: &str| {
            self.archived.contains(id)
                || self.entries.get(id).and_then(|e| e.status) == Some(Status::Completed)
        };
        if completed(r) {
            return true;
        }
        let prefix = format!("{r}-FIX-");
        // An archived fix task was completed: it stands in as it did before it was archived.
        self.entries.get(r).and_then(|e| e.status) == Some(Status::Blocked)
            && self.entries.keys().chain(&self.archived).any(|id| {
                id.strip_prefix(&prefix).is_some_and(|n| !n.contains('-')) && self.met(id)
            })
    }

    /// Failed tasks with no attempt left.
    pub(super) fn exhausted(&self, max_attempts: u32) -> Vec<String> {
        self.ids(|e| e.status == Some(Status::Failed) && e.attempts - e.base >= max_attempts)
    }

    /// Whether `id` failed and has spent `max_attempts` since its latest `pending` line.
    pub(super) fn is_exhausted(&self, id: &str, max_attempts: u32) -> bool {
        self.entries.get(id).is_some_and(|e| {
            e.status == Some(Status::Failed) && e.attempts - e.base >= max_attempts
        })
    }

    /// A fix task of `id` (`id-FIX-n`) in the plan never started (written before a crash cut
    /// the step short), if any; a fix task that ran does not serve a second time.
    pub(super) fn fix_of(&self, id: &str) -> Option<String> {
        let prefix = format!("{id}-FIX-");
        self.order
            .iter()
            .find(|f| {
                f.strip_prefix(&prefix).is_some_and(|n| !n.contains('-')) && self.attempts(f) == 0
            })
            .cloned()
    }

    /// The latest status of `id`; `None` before its first line.
    pub(super) fn status(&self, id: &str) -> Option<Status> {
        self.entries.get(id).and_then(|e| e.status)
    }

    /// Attempts started for `id`.
    pub(super) fn attempts(&self, id: &str) -> u32 {
        self.entries.get(id).map_or(0, |e| e.attempts)
    }

    /// The task file of `id`.
    pub(super) fn task(&self, id: &str) -> Option<&Task> {
        self.entries.get(id).map(|e| &e.task)
    }

    /// Whether `id` is a task of this plan or an archived one.
    pub(super) fn knows(&self, id: &str) -> bool {
        self.entries.contains_key(id) || self.archived.contains(id)
    }

    /// The latest summary of `id`.
    pub(super) fn summary(&self, id: &str) -> String {
        self.entries
            .get(id)
            .map(|e| e.summary.clone())
            .unwrap_or_default()
    }

    /// The summary table's rows, in order.
    pub(super) fn rows(&self) -> Vec<Row> {
        self.order
            .iter()
            .map(|id| {
                let e = &self.entries[id];
                Row {
                    id: id.clone(),
                    status: e.status.unwrap_or(Status::Pending),
                    attempts: e.attempts,
                    summary: e.summary.clone(),
                }
            })
            .collect()
    }

    fn ids(&self, keep: impl Fn(&Entry) -> bool) -> Vec<String> {
        self.order
            .iter()
            .filter(|id| keep(&self.entries[*id]))
            .cloned()
            .collect()
    }
}
