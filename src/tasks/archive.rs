//! [`archive`]: the seed's maintenance rule — when more than 10 task files are `completed`,
//! they move into `ARCHIVE.jsonl` (one task per line); the ledger keeps their history. And
//! [`recover`]: what a crash in the middle of a move leaves, finished before a run starts.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::{Read as _, Write as _};
use std::path::PathBuf;

use super::{Layout, Ledger, Repair, Status, Task, TasksError, latest};

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
    let already = archived(layout)?;
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(TasksError::io(&path))?;
    let mut moved = Vec::new();
    for (task_path, task) in completed {
        if !already.contains_key(&task.id) {
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

/// The tasks in `ARCHIVE.jsonl` by id (none when it does not exist). A torn last line (a crash
/// in the middle of an append, which [`recover`] cuts off) is not a task yet.
///
/// # Errors
///
/// The archive cannot be read; a whole line is not a task ([`TasksError::BadLine`], naming
/// the file's line).
pub fn archived(layout: &Layout) -> Result<BTreeMap<String, Task>, TasksError> {
    let path = layout.archive();
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(TasksError::io(&path)(e)),
    };
    let whole = &bytes[..super::repair::whole(&bytes)];
    let mut tasks = BTreeMap::new();
    for (i, line) in whole.split(|b| *b == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let task: Task = serde_json::from_slice(line).map_err(|e| TasksError::BadLine {
            path: path.clone(),
            line: i as u64 + 1,
            what: "an archived task",
            message: e.to_string(),
        })?;
        tasks.insert(task.id.clone(), task);
    }
    Ok(tasks)
}

/// What [`recover`] found and finished.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// The archive's torn last line, cut off.
    pub repair: Option<Repair>,
    /// Task files removed because the archive holds them already (a move cut by a crash).
    pub archived: Vec<String>,
    /// Fix task files half written (`*.json.tmp`), removed.
    pub removed: Vec<PathBuf>,
}

/// Finishes what a crash (kill -9 at any point) left of the orchestrator's file writes, under
/// the lock of `_ledger`: cuts a torn last line off the archive; removes a task file whose task
/// the archive already holds, identical (the move was cut between the append and the removal);
/// removes a fix task's temporary file whose rename never happened. A task file that differs
/// from its archived namesake is left for [`check`](super::check) to report.
///
/// # Errors
///
/// A file cannot be read, written or removed; a whole archive line is not a task.
pub fn recover(layout: &Layout, _ledger: &Ledger) -> Result<Recovery, TasksError> {
    let mut recovery = Recovery {
        repair: repair_archive(layout)?,
        ..Recovery::default()
    };
    let archived = archived(layout)?;
    let dir = layout.tasks_dir();
    let mut paths = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(TasksError::io(dir))? {
        paths.push(entry.map_err(TasksError::io(dir))?.path());
    }
    paths.sort();
    for path in paths {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.ends_with(".json.tmp") {
            std::fs::remove_file(&path).map_err(TasksError::io(&path))?;
            recovery.removed.push(path);
            continue;
        }
        if !name.ends_with(".json") {
            continue;
        }
        let Ok(task) = Task::load(&path) else {
            continue; // check reports it
        };
        if archived.get(&task.id) == Some(&task) {
            std::fs::remove_file(&path).map_err(TasksError::io(&path))?;
            recovery.archived.push(task.id);
        }
    }
    Ok(recovery)
}

/// Cuts a torn last line off the archive, if it has one.
fn repair_archive(layout: &Layout) -> Result<Option<Repair>, TasksError> {
    let path = layout.archive();
    let mut file = match OpenOptions::new().read(true).write(true).open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(TasksError::io(&path)(e)),
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(TasksError::io(&path))?;
    super::repair::cut_torn_tail(&path, &file, &bytes)
}
