//! [`Task`]: one task file of seed 004, read strictly (unknown fields are errors).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::TasksError;

/// One atomic unit of work (`docs/tasks/T-XXX.json`, `schemas/task.schema.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// `T-XXX`.
    pub id: String,
    /// A short title.
    pub title: String,
    /// The goal, in detail.
    pub description: String,
    /// Tasks that must be `completed` first.
    pub requires: Vec<String>,
    /// What the worker needs to know.
    pub context: TaskContext,
    /// What must hold when the task is done; the thread's goal criteria.
    pub acceptance_criteria: Vec<String>,
    /// The shell command whose exit code 0 makes the task `completed`.
    pub verification_command: String,
}

/// A task's `context`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskContext {
    /// Files the task touches (existing ones count against the atomic constraint).
    pub files: Vec<String>,
    /// Documents to read.
    pub docs: Vec<String>,
    /// Skills (tools) the worker may use.
    pub skills: Vec<String>,
}

/// The skills a task's `context.skills` may name: the tools the orchestrator gives every
/// worker (the seed's `task-indexer`, and `command`, which runs programs in the project).
pub const SKILLS: [&str; 2] = ["task-indexer", "command"];

/// Whether `id` has the seed's `T-XXX` form: `T-`, three or more digits, and for fix tasks
/// `-FIX-n` (n from 1).
pub fn is_task_id(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("T-") else {
        return false;
    };
    let mut parts = rest.split("-FIX-");
    let digits = parts.next().unwrap_or_default();
    if digits.len() < 3 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    parts.all(|n| !n.is_empty() && !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()))
}

/// How many generations of fix tasks stand between `id` and the planner's task: 0 for
/// `T-001`, 1 for `T-001-FIX-1`, 2 for `T-001-FIX-1-FIX-1`.
pub fn fix_generation(id: &str) -> u32 {
    u32::try_from(id.matches("-FIX-").count()).unwrap_or(u32::MAX)
}

/// A path of `context.files` or of a delta, relative to the project root, in one spelling
/// (`./a//b` is `a/b`); `None` for a path that is empty, absolute or climbs out with `..`.
pub fn project_path(path: &str) -> Option<String> {
    use std::path::Component;
    let mut parts = Vec::new();
    for c in Path::new(path).components() {
        match c {
            Component::Normal(p) => parts.push(p.to_str()?),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

impl Task {
    /// The distinct files of `context.files` that exist under `root` now (a directory is not a
    /// file; `a` and `./a` are one). Seed 004's atomic constraint counts them.
    pub fn existing_files(&self, root: &Path) -> Vec<String> {
        let mut found: Vec<String> = self
            .context
            .files
            .iter()
            .filter_map(|f| project_path(f))
            .filter(|f| root.join(f).is_file())
            .collect();
        found.sort();
        found.dedup();
        found
    }

    /// The seed's atomic constraint, judged now: why this task modifies too many existing files
    /// (naming them, the count and the limit), or `None`.
    pub fn not_atomic(&self, root: &Path) -> Option<String> {
        let existing = self.existing_files(root);
        (existing.len() > super::MAX_EXISTING_FILES).then(|| {
            format!(
                "{}: not atomic: modifies {} existing files ({}; at most {}): split it",
                self.id,
                existing.len(),
                existing.join(", "),
                super::MAX_EXISTING_FILES
            )
        })
    }

    /// What `schemas/task.schema.json` refuses in this task beyond its shape — a blank title,
    /// criterion or verification command, no criterion, a `requires` entry that is not an id or
    /// is there twice, an empty `context` entry — and what check adds: a `context.files` path
    /// outside the project (absolute or with `..`), a skill not in [`SKILLS`]. Each problem
    /// names the task and the field.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut say = |field: &str, what: String| out.push(format!("{}: {field}: {what}", self.id));
        let blank = |s: &str| s.trim().is_empty();
        if blank(&self.title) {
            say("title", "is blank".into());
        }
        if blank(&self.verification_command) {
            say(
                "verification_command",
                "is blank: nothing would verify the task".into(),
            );
        }
        if self.acceptance_criteria.is_empty() {
            say(
                "acceptance_criteria",
                "is empty: a task needs at least one".into(),
            );
        }
        for (i, c) in self.acceptance_criteria.iter().enumerate() {
            if blank(c) {
                say(
                    "acceptance_criteria",
                    format!("criterion {} is blank", i + 1),
                );
            }
        }
        for (i, r) in self.requires.iter().enumerate() {
            if !is_task_id(r) {
                say("requires", format!("`{r}` is not a task id"));
            } else if self.requires[..i].contains(r) {
                say("requires", format!("{r} is named twice"));
            }
        }
        let c = &self.context;
        for (field, list) in [("context.files", &c.files), ("context.docs", &c.docs)] {
            for entry in list {
                if project_path(entry).is_none() {
                    say(field, format!("`{entry}` is not a path inside the project"));
                }
            }
        }
        for skill in &c.skills {
            if !SKILLS.contains(&skill.as_str()) {
                say(
                    "context.skills",
                    format!("unknown skill `{skill}` (known: {})", SKILLS.join(", ")),
                );
            }
        }
        out
    }

    /// Reads one task file.
    ///
    /// # Errors
    ///
    /// The file cannot be read or is not a task (the error names the file and the field).
    pub fn load(path: &Path) -> Result<Self, TasksError> {
        let text = std::fs::read_to_string(path).map_err(TasksError::io(path))?;
        serde_json::from_str(&text).map_err(|e| TasksError::InvalidTask {
            path: path.to_owned(),
            message: e.to_string(),
        })
    }

    /// Every `*.json` task file in `dir`, sorted by file name, each with its path.
    ///
    /// # Errors
    ///
    /// The directory cannot be read; a file cannot be read or parsed.
    pub fn load_dir(dir: &Path) -> Result<Vec<(PathBuf, Task)>, TasksError> {
        Self::files(dir)?
            .into_iter()
            .map(|p| Task::load(&p).map(|t| (p, t)))
            .collect()
    }

    /// The paths of the `*.json` files in `dir`, sorted by file name.
    ///
    /// # Errors
    ///
    /// The directory cannot be read.
    pub fn files(dir: &Path) -> Result<Vec<PathBuf>, TasksError> {
        let entries = std::fs::read_dir(dir).map_err(TasksError::io(dir))?;
        let mut paths = Vec::new();
        for entry in entries {
            let path = entry.map_err(TasksError::io(dir))?.path();
            if path.extension().is_some_and(|e| e == "json") && path.is_file() {
                paths.push(path);
            }
        }
        paths.sort();
        Ok(paths)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids() {
        for ok in ["T-001", "T-1234", "T-003-FIX-1", "T-003-FIX-1-FIX-2"] {
            assert!(super::is_task_id(ok), "{ok}");
        }
        for bad in [
            "T-01",
            "t-001",
            "T-00a",
            "T-001-FIX-0",
            "T-001-FIX-",
            "X-001",
            "T-001 ",
        ] {
            assert!(!super::is_task_id(bad), "{bad}");
        }
    }
}
