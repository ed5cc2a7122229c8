//! [`Layout`]: where a project keeps its task files and ledger; [`TasksConfig`]: the
//! orchestrator's settings, the organism's `[tasks]` section.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::TasksError;

/// The seed's default layout, relative to the project root.
pub const DEFAULT_TASKS_DIR: &str = "docs/tasks";
/// The seed's ledger path, relative to the project root.
pub const DEFAULT_LEDGER: &str = "docs/current/task-status.jsonl";
/// The most generations of fix tasks `[tasks] fix_generations` may allow.
pub const MAX_FIX_GENERATIONS: u32 = 8;

/// Where the task files, the ledger and the archive are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    root: PathBuf,
    tasks_dir: PathBuf,
    ledger: PathBuf,
}

impl Layout {
    /// The seed's layout under `root`: `docs/tasks/`, `docs/current/task-status.jsonl`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self::with(root, DEFAULT_TASKS_DIR, DEFAULT_LEDGER)
    }

    /// A layout with the task directory and ledger given relative to `root`.
    pub fn with(root: impl Into<PathBuf>, tasks_dir: &str, ledger: &str) -> Self {
        let root = root.into();
        Self {
            tasks_dir: root.join(tasks_dir),
            ledger: root.join(ledger),
            root,
        }
    }

    /// The project root: verification commands run here.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The directory of task files.
    pub fn tasks_dir(&self) -> &Path {
        &self.tasks_dir
    }

    /// The status ledger.
    pub fn ledger(&self) -> &Path {
        &self.ledger
    }

    /// Where archived task files go: `ARCHIVE.jsonl` in the task directory.
    pub fn archive(&self) -> PathBuf {
        self.tasks_dir.join("ARCHIVE.jsonl")
    }
}

/// What happens to a task that failed every attempt.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Exhausted {
    /// It becomes `blocked`; its dependents are not started.
    #[default]
    Blocked,
    /// It becomes `blocked` and a fix task `T-XXX-FIX-n` is written and run.
    FixTask,
}

/// The organism's `[tasks]` section. Every key has a default.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TasksConfig {
    /// Task files, relative to the project root (default `docs/tasks`).
    pub tasks_dir: String,
    /// The ledger, relative to the project root (default `docs/current/task-status.jsonl`).
    pub ledger: String,
    /// The listener that works the tasks (default `worker`).
    pub worker: String,
    /// The listener `tasks plan` asks for task files (default `planner`).
    pub planner: String,
    /// With no listener of that name in the organism: the shell command the built-in shell
    /// worker runs for a task (`$1` the task id, `$2` the attempt, `$3` the last failure).
    pub work_command: Option<String>,
    /// Tasks worked at once (default 2; `--parallel` wins).
    pub parallel: usize,
    /// Attempts after the first failure (default 2).
    pub retries: u32,
    /// After the last failed attempt: `blocked` (default) or `fix-task`.
    pub on_exhausted: Exhausted,
    /// With `on_exhausted = "fix-task"`: how many generations of fix tasks one task may get
    /// (default 1: `T-001-FIX-1` may be written, a fix of it not; at most
    /// [`MAX_FIX_GENERATIONS`]). A fix task of the last generation that fails is `blocked`.
    pub fix_generations: u32,
    /// Turns per task thread (default 100).
    pub turns: u64,
    /// Wall clock per task thread, in milliseconds (default 600000).
    pub wall_clock_ms: u64,
    /// More than this many completed task files are archived (default 10, the seed's).
    pub archive_after: usize,
}

impl Default for TasksConfig {
    fn default() -> Self {
        Self {
            tasks_dir: DEFAULT_TASKS_DIR.into(),
            ledger: DEFAULT_LEDGER.into(),
            worker: "worker".into(),
            planner: "planner".into(),
            work_command: None,
            parallel: 2,
            retries: 2,
            on_exhausted: Exhausted::Blocked,
            fix_generations: 1,
            turns: 100,
            wall_clock_ms: 600_000,
            archive_after: 10,
        }
    }
}

impl TasksConfig {
    /// Checks the settings that have limits.
    ///
    /// # Errors
    ///
    /// [`TasksError::Config`] naming the key, the value and the limit.
    pub fn check(&self) -> Result<(), TasksError> {
        if self.fix_generations > MAX_FIX_GENERATIONS {
            return Err(TasksError::Config(format!(
                "[tasks] fix_generations = {} is more than {MAX_FIX_GENERATIONS}: each generation \
                 adds `-FIX-n` to the task's file name",
                self.fix_generations
            )));
        }
        Ok(())
    }

    /// The layout under `root`.
    pub fn layout(&self, root: impl Into<PathBuf>) -> Layout {
        Layout::with(root, &self.tasks_dir, &self.ledger)
    }
}
