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
    /// A ledger line (not the last) does not parse.
    #[error("{path}:{line}: not a ledger line: {message}")]
    BadLine {
        /// The ledger.
        path: PathBuf,
        /// The line number, from 1.
        line: u64,
        /// The parser's message.
        message: String,
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
