//! [`archive`]: the seed's maintenance rule — when more than 10 task files are `completed`,
//! they move into `ARCHIVE.jsonl` (one task per line); the ledger keeps their history.

use std::collections::BTreeSet;
use std::fs::OpenOptions;
use std::io::Write as _;

use super::{Layout, Status, Task, TasksError, latest};

/// Moves every completed task file into the archive when more than `after` are completed;
/// returns the ids moved (none when `after` or fewer are completed).
///
/// Each task is appended to `ARCHIVE.jsonl` and made durable before its file is removed; a
/// task already in the archive (a crash between the two) is not appended again.
///
/// # Errors
///
/// A task file, the ledger or the archive cannot be read or written.
pub fn archive(layout: &Layout, after: usize) -> Result<Vec<String>, TasksError> {
    let tasks = Task::load_dir(layout.tasks_dir())?;
    let ids: Vec<String> = tasks.iter().map(|(_, t)| t.id.clone()).collect();
    let status = latest(layout.ledger(), &ids)?;
    let completed: Vec<_> = tasks
        .into_iter()
        .filter(|(_, t)| {
            status
                .lines
                .get(&t.id)
                .is_some_and(|l| l.status == Status::Completed)
        })
        .collect();
    if completed.len() <= after {
        return Ok(Vec::new());
    }
    let path = layout.archive();
    let already = archived_ids(layout)?;
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(TasksError::io(&path))?;
    let mut moved = Vec::new();
    for (task_path, task) in completed {
        if !already.contains(&task.id) {
            let line = serde_json::to_string(&task).expect("a task serializes");
            writeln!(file, "{line}")
                .and_then(|()| file.sync_data())
                .map_err(TasksError::io(&path))?;
        }
        std::fs::remove_file(&task_path).map_err(TasksError::io(&task_path))?;
        moved.push(task.id);
    }
    Ok(moved)
}

/// The ids in `ARCHIVE.jsonl` (none when it does not exist).
///
/// # Errors
///
/// The archive cannot be read, or a line is not a task.
pub fn archived_ids(layout: &Layout) -> Result<BTreeSet<String>, TasksError> {
    let path = layout.archive();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeSet::new()),
        Err(e) => return Err(TasksError::io(&path)(e)),
    };
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str::<Task>(l)
                .map(|t| t.id)
                .map_err(|e| TasksError::InvalidTask {
                    path: path.clone(),
                    message: e.to_string(),
                })
        })
        .collect()
}
