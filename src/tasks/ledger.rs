//! [`Ledger`]: the status ledger's sole writer. An exclusive lock keeps a second orchestrator
//! out; every line is written whole and made durable before the next step; a line torn by a
//! crash is cut off on open and kept in a repairs file.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Repair, TasksError, now_rfc3339};

/// A task's status (`schemas/task-status.schema.json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// In the ledger, not started.
    Pending,
    /// Its worker was briefed.
    InProgress,
    /// Verified: the worker handed back a delta and the verification command exited 0.
    Completed,
    /// The last attempt failed.
    Failed,
    /// No more attempts; dependents are not started.
    Blocked,
}

impl Status {
    /// The wire word (`in-progress`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::InProgress => "in-progress",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Blocked => "blocked",
        }
    }
}

/// A worker's context delta: what it changed, and a summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Delta {
    /// Files created.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_added: Vec<String>,
    /// Files modified.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_changed: Vec<String>,
    /// Files deleted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files_removed: Vec<String>,
    /// What the worker says it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
}

/// One ledger line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Line {
    /// The task.
    pub id: String,
    /// Its status from now on.
    pub status: Status,
    /// When, RFC 3339 UTC.
    pub updated_at: String,
    /// Why, in a sentence.
    pub summary: String,
    /// The worker's delta (on `completed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<Delta>,
}

impl Line {
    /// A line stamped now.
    pub fn now(id: &str, status: Status, summary: impl Into<String>) -> Self {
        Self {
            id: id.to_owned(),
            status,
            updated_at: now_rfc3339(),
            summary: summary.into(),
            delta: None,
        }
    }
}

/// The open, locked ledger.
///
/// # Example
///
/// ```
/// use agentpump::tasks::{Ledger, Line, Status, TasksError, latest};
///
/// # fn main() -> Result<(), TasksError> {
/// let dir = std::env::temp_dir().join(format!("ledger-doc-{}", std::process::id()));
/// let path = dir.join("task-status.jsonl");
/// Ledger::init(&path)?; // the planner's bootstrap: an empty ledger
/// let mut ledger = Ledger::open(&path)?; // locked until dropped
/// assert!(matches!(Ledger::open(&path), Err(TasksError::Locked(_))));
/// ledger.append(Line::now("T-001", Status::Pending, "Task initialized by Orchestrator"))?;
/// ledger.append(Line::now("T-001", Status::InProgress, "attempt 1"))?;
/// let found = latest(&path, &["T-001".to_owned()])?; // read from the end
/// assert_eq!(found.lines["T-001"].status, Status::InProgress);
/// # drop(ledger);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Ledger {
    path: PathBuf,
    file: File,
    lines: Vec<Line>,
    repair: Option<Repair>,
    /// The file's length after the last line this ledger wrote (or read on open).
    len: u64,
}

impl Ledger {
    /// Creates an empty ledger (and its directory) if there is none; returns whether it did.
    ///
    /// # Errors
    ///
    /// The directory or file cannot be created.
    pub fn init(path: &Path) -> Result<bool, TasksError> {
        if path.exists() {
            return Ok(false);
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(TasksError::io(dir))?;
        }
        let file = File::create(path).map_err(TasksError::io(path))?;
        file.sync_all().map_err(TasksError::io(path))?;
        Ok(true)
    }

    /// Opens and locks the ledger, repairs a torn last line, and reads every line.
    ///
    /// # Errors
    ///
    /// [`TasksError::NoLedger`] when it does not exist, [`TasksError::Locked`] when another
    /// orchestrator holds it, [`TasksError::BadLine`] for a whole line that does not parse.
    pub fn open(path: &Path) -> Result<Self, TasksError> {
        if !path.is_file() {
            return Err(TasksError::NoLedger(path.to_owned()));
        }
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(path)
            .map_err(TasksError::io(path))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(TasksError::Locked(path.to_owned())),
            Err(TryLockError::Error(e)) => return Err(TasksError::io(path)(e)),
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(TasksError::io(path))?;
        let repair = super::repair::cut_torn_tail(path, &file, &bytes)?;
        let whole = super::repair::whole(&bytes);
        let lines = parse_lines(path, &bytes[..whole])?;
        Ok(Self {
            path: path.to_owned(),
            file,
            lines,
            repair,
            len: whole as u64,
        })
    }

    /// Every line, oldest first.
    pub fn lines(&self) -> &[Line] {
        &self.lines
    }

    /// The torn line cut off on open, if there was one.
    pub fn repair(&self) -> Option<&Repair> {
        self.repair.as_ref()
    }

    /// The ledger's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `line` whole and waits until it is durable (fsync) — after checking that the file
    /// is as long as this ledger left it.
    ///
    /// # Errors
    ///
    /// [`TasksError::Tampered`] when someone else wrote to the file since this ledger's last
    /// line (seed 004: the orchestrator is its sole writer); nothing is appended then. The
    /// write or the sync failed; the line may then be torn, which the next open repairs.
    pub fn append(&mut self, line: Line) -> Result<(), TasksError> {
        self.unchanged()?;
        let mut text = serde_json::to_string(&line).expect("a ledger line serializes");
        text.push('\n');
        self.file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.sync_data())
            .map_err(TasksError::io(&self.path))?;
        self.len += text.len() as u64;
        tracing::info!(task = %line.id, status = line.status.as_str(), "ledger");
        self.lines.push(line);
        Ok(())
    }
}

impl Ledger {
    /// Checks that the file's length is the one this ledger left.
    fn unchanged(&self) -> Result<(), TasksError> {
        let found = self
            .file
            .metadata()
            .map_err(TasksError::io(&self.path))?
            .len();
        if found == self.len {
            return Ok(());
        }
        Err(TasksError::Tampered {
            path: self.path.clone(),
            expected: self.len,
            found,
        })
    }
}

/// Every whole line of the ledger at `path`, read without the lock (a torn last line is not a
/// line yet); none when there is no ledger.
///
/// # Errors
///
/// The ledger cannot be read; a whole line does not parse ([`TasksError::BadLine`]).
pub(crate) fn read_lines(path: &Path) -> Result<Vec<Line>, TasksError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(TasksError::io(path)(e)),
    };
    parse_lines(path, &bytes[..super::repair::whole(&bytes)])
}

fn parse_lines(path: &Path, bytes: &[u8]) -> Result<Vec<Line>, TasksError> {
    bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.is_empty())
        .map(|(i, l)| {
            serde_json::from_slice(l).map_err(|e| TasksError::BadLine {
                path: path.to_owned(),
                line: i as u64 + 1,
                what: "a ledger line",
                message: e.to_string(),
            })
        })
        .collect()
}
