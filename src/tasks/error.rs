//! [`TasksError`]: what went wrong with task files, the graph or the ledger.

use std::path::PathBuf;

/// Why a task command failed. Messages name the file or task.
#[derive(Debug, thiserror::Error)]
pub enum TasksError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A task file is not a valid task.
    #[error("{path}: {message}")]
    InvalidTask {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The graph checks found problems, one per line.
    #[error("{} problem(s):\n{}", .0.len(), .0.join("\n"))]
    Check(Vec<String>),
    /// The ledger does not exist (seed 004: the orchestrator fails fast).
    #[error(
        "ledger {0} does not exist; the planner creates it empty first (`agentpump tasks init`)"
    )]
    NoLedger(PathBuf),
    /// Another orchestrator holds the ledger's lock.
    #[error("ledger {0} is locked by another orchestrator; only one may write it")]
    Locked(PathBuf),
    /// A whole line of the ledger or the archive does not parse.
    #[error("{path}:{line}: not {what}: {message}")]
    BadLine {
        /// The file.
        path: PathBuf,
        /// The line number, from 1.
        line: u64,
        /// What a line of this file is (`a ledger line`, `an archived task`).
        what: &'static str,
        /// The parser's message.
        message: String,
    },
    /// The ledger changed behind its sole writer's back.
    #[error(
        "ledger {path} was written behind the orchestrator's back: it was {expected} bytes after \
         the orchestrator's last line and is {found} bytes now; only the orchestrator may write \
         it (seed 004). Look at the bytes from offset {expected} on, restore the file to its first \
         {expected} bytes, and run again"
    )]
    Tampered {
        /// The ledger.
        path: PathBuf,
        /// Its length after the orchestrator's last line.
        expected: u64,
        /// Its length now.
        found: u64,
    },
    /// `tasks retry` of a task that cannot be retried.
    #[error("cannot retry {id}: {why}")]
    NotRetryable {
        /// The task asked for.
        id: String,
        /// Why not.
        why: String,
    },
    /// A `[tasks]` setting is out of its range, or the organism conflicts with the orchestrator.
    #[error("{0}")]
    Config(String),
    /// The orchestrator's pump failed.
    #[error("pump: {0}")]
    Pump(String),
}

impl TasksError {
    /// An [`TasksError::Io`] for `path`.
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { path, source }
    }
}
