//! [`check`]: the task graph is sound before anything runs.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::{Layout, Task, TasksError, archive, is_task_id};

/// Tasks that passed [`check`].
#[derive(Debug, Clone)]
pub struct Checked {
    /// The tasks with their files, in a dependency order (every task after what it requires).
    pub tasks: Vec<(PathBuf, Task)>,
    /// Ids of archived tasks (completed; a `requires` may name them).
    pub archived: BTreeSet<String>,
}

/// More existing files than this in `context.files` break the seed's atomic constraint.
pub const MAX_EXISTING_FILES: usize = 3;

/// Checks the task files and the ledger of `layout`: every file a valid task named after its
/// id, ids unique and of the `T-XXX` form, every `requires` a task (or an archived one), no
/// dependency cycle, the archive readable, the ledger present; and for a task not started yet
/// (no `in-progress` line), at most [`MAX_EXISTING_FILES`] existing files — a task that ran is
/// not judged again on the files it created. A task file identical to its archived copy (a move a crash
/// cut short, which the next run finishes) counts as archived.
///
/// # Errors
///
/// [`TasksError::NoLedger`] when that is the only problem (the seed's fail-fast); else
/// [`TasksError::Check`] listing every problem of every file, each naming its file or task.
pub fn check(layout: &Layout) -> Result<Checked, TasksError> {
    let mut problems = Vec::new();
    let no_ledger = !layout.ledger().is_file();
    if no_ledger {
        problems.push(TasksError::NoLedger(layout.ledger().to_owned()).to_string());
    }
    let archived = archive::archived(layout).unwrap_or_else(|e| {
        problems.push(e.to_string());
        BTreeMap::new()
    });
    let started = started(layout).unwrap_or_else(|e| {
        problems.push(e.to_string());
        BTreeSet::new()
    });
    let mut tasks = Vec::new();
    for path in Task::files(layout.tasks_dir()).unwrap_or_else(|e| {
        problems.push(e.to_string());
        Vec::new()
    }) {
        match Task::load(&path) {
            Ok(task) if archived.get(&task.id) == Some(&task) => {}
            Ok(task) => tasks.push((path, task)),
            Err(e) => problems.push(e.to_string()),
        }
    }
    let archived: BTreeSet<String> = archived.into_keys().collect();
    let mut ids = BTreeMap::new();
    for (path, task) in &tasks {
        problems.extend(file_problems(path, task, &archived));
        problems.extend(task.problems());
        if !started.contains(&task.id) {
            problems.extend(task.not_atomic(layout.root()));
        }
        if let Some(first) = ids.insert(task.id.clone(), path.clone()) {
            problems.push(format!(
                "{}: duplicate id {} (also in {})",
                path.display(),
                task.id,
                first.display()
            ));
        }
    }
    for (_, task) in &tasks {
        for r in &task.requires {
            if !ids.contains_key(r) && !archived.contains(r) {
                problems.push(format!("{}: requires {r}, which is not a task", task.id));
            }
        }
    }
    let order = match order(&tasks) {
        Ok(order) => order,
        Err(cycle) => {
            problems.push(format!("dependency cycle: {}", cycle.join(" → ")));
            Vec::new()
        }
    };
    if no_ledger && problems.len() == 1 {
        return Err(TasksError::NoLedger(layout.ledger().to_owned()));
    }
    if !problems.is_empty() {
        return Err(TasksError::Check(problems));
    }
    let rank: BTreeMap<&str, usize> = order
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let ranks: Vec<usize> = tasks.iter().map(|(_, t)| rank[t.id.as_str()]).collect();
    let mut ranked: Vec<_> = ranks.into_iter().zip(tasks.drain(..)).collect();
    ranked.sort_by_key(|(r, _)| *r);
    Ok(Checked {
        tasks: ranked.into_iter().map(|(_, t)| t).collect(),
        archived,
    })
}

/// The ids with an `in-progress` line in the ledger: the atomic constraint was judged when they
/// started.
fn started(layout: &Layout) -> Result<BTreeSet<String>, TasksError> {
    Ok(super::ledger::read_lines(layout.ledger())?
        .into_iter()
        .filter(|l| l.status == super::Status::InProgress)
        .map(|l| l.id)
        .collect())
}

/// The problems of one task file on its own: its id's form, its file name, an archived id.
fn file_problems(path: &std::path::Path, task: &Task, archived: &BTreeSet<String>) -> Vec<String> {
    let mut problems = Vec::new();
    if !is_task_id(&task.id) {
        problems.push(format!(
            "{}: id `{}` is not of the form T-XXX (T- and three or more digits)",
            path.display(),
            task.id
        ));
    }
    if path.file_stem().and_then(|s| s.to_str()) != Some(task.id.as_str()) {
        problems.push(format!(
            "{}: holds task {}; the file must be named {}.json",
            path.display(),
            task.id,
            task.id
        ));
    }
    if archived.contains(&task.id) {
        problems.push(format!(
            "{}: {} is already archived, with other content: remove the file or give the task a new id",
            path.display(),
            task.id
        ));
    }
    problems
}

/// A dependency order of the task ids (depth first, file order), or the first cycle found,
/// closed (`[a, b, a]`).
fn order(tasks: &[(PathBuf, Task)]) -> Result<Vec<String>, Vec<String>> {
    let by_id: BTreeMap<&str, &Task> = tasks.iter().map(|(_, t)| (t.id.as_str(), t)).collect();
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for (_, task) in tasks {
        let mut path = Vec::new();
        visit(&task.id, &by_id, &mut path, &mut done, &mut out)?;
    }
    Ok(out)
}

fn visit<'a>(
    id: &'a str,
    by_id: &BTreeMap<&'a str, &'a Task>,
    path: &mut Vec<&'a str>,
    done: &mut BTreeSet<&'a str>,
    out: &mut Vec<String>,
) -> Result<(), Vec<String>> {
    if done.contains(id) {
        return Ok(());
    }
    if let Some(at) = path.iter().position(|p| *p == id) {
        let mut cycle: Vec<String> = path[at..].iter().map(|s| (*s).to_owned()).collect();
        cycle.push(id.to_owned());
        return Err(cycle);
    }
    let Some(task) = by_id.get(id) else {
        return Ok(()); // archived or missing: reported elsewhere
    };
    path.push(id);
    for r in &task.requires {
        visit(r, by_id, path, done, out)?;
    }
    path.pop();
    done.insert(id);
    out.push(id.to_owned());
    Ok(())
}
