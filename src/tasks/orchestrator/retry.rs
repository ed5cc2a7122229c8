//! [`retry`]: a blocked task given fresh attempts, at the user's request — a `pending` line the
//! orchestrator writes, so the ledger keeps one writer.

use crate::tasks::{Exhausted, Layout, Ledger, Line, Status, TasksConfig, TasksError};

/// Appends a `pending` line for the blocked task `id`: the next `tasks run` gives it
/// `1 + retries` fresh attempts, then applies `[tasks] on_exhausted` as configured then (a
/// changed setting counts). Returns the line.
///
/// # Errors
///
/// [`TasksError::NotRetryable`] when `id` has no task file or its latest line is not
/// `blocked`; the ledger cannot be written.
pub fn retry(
    ledger: &mut Ledger,
    layout: &Layout,
    config: &TasksConfig,
    id: &str,
) -> Result<Line, TasksError> {
    let latest = ledger.lines().iter().rev().find(|l| l.id == id);
    let refuse = |why: String| TasksError::NotRetryable {
        id: id.to_owned(),
        why,
    };
    match latest.map(|l| l.status) {
        Some(Status::Blocked) => {}
        Some(other) => {
            return Err(refuse(format!(
                "its latest ledger line is {}, and only a blocked task is retried (a failed one \
                 is retried by `tasks run` while it has attempts left)",
                other.as_str()
            )));
        }
        None => return Err(refuse("it has no line in the ledger".into())),
    }
    let file = layout.tasks_dir().join(format!("{id}.json"));
    if !file.is_file() {
        return Err(refuse(format!("its task file {} is gone", file.display())));
    }
    let then = match config.on_exhausted {
        Exhausted::Blocked => "blocked",
        Exhausted::FixTask => "fix-task",
    };
    let line = Line::now(
        id,
        Status::Pending,
        format!(
            "retry requested by the user: {} more attempt(s), then [tasks] on_exhausted = {then}",
            1 + config.retries
        ),
    );
    ledger.append(line.clone())?;
    Ok(line)
}
