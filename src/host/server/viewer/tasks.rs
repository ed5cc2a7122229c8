//! `GET /view/tasks`: the task ledger's latest line per task, each task with the threads of its
//! attempts. A task's thread is found in the history, not in the ledger: the first record of
//! every task thread is the `<task>` the orchestrator posted (`urn:agentpump:tasks:v1`), which
//! names the task and the attempt — what the orchestrator itself reads to continue an attempt
//! after a restart. The ledger's lines keep the seed's fields.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::Viewer;
use crate::ThreadId;
use crate::history::HistoryStore;
use crate::host::server::Problem;
use crate::tasks::wire::{Assignment, TASKS_NS, decode};
use crate::tasks::{Layout, Line, Task};

/// One task as the page lists it.
#[derive(Debug, Serialize)]
pub(crate) struct TaskRow {
    id: String,
    /// From its task file (none once archived).
    title: Option<String>,
    /// Its latest ledger line (none: the orchestrator has not seen it yet).
    line: Option<Line>,
    /// The thread of each attempt, first attempt first.
    attempts: Vec<Attempt>,
}

/// One attempt's thread.
#[derive(Debug, Serialize)]
pub(crate) struct Attempt {
    attempt: u32,
    thread: ThreadId,
}

/// The answer: the ledger, or why there is none.
#[derive(Debug, Serialize)]
pub(crate) struct Tasks {
    /// The ledger's path, when this host serves one.
    ledger: Option<String>,
    /// Why there is nothing to show, for the page to say.
    note: Option<String>,
    tasks: Vec<TaskRow>,
}

/// `GET /view/tasks`.
pub(crate) async fn tasks(State(viewer): State<Viewer>) -> Result<Response, Problem> {
    let Some(layout) = viewer.tasks.clone() else {
        return Ok(Json(Tasks {
            ledger: None,
            note: Some(
                "This host has no task ledger. `agentpump run` shows one when the organism's folder holds it (its [tasks] section, docs/current/task-status.jsonl by default) as the host starts; `agentpump view` when given --tasks ROOT."
                    .into(),
            ),
            tasks: Vec::new(),
        })
        .into_response());
    };
    let ledger = layout.ledger().display().to_string();
    let read = {
        let layout = std::sync::Arc::clone(&layout);
        tokio::task::spawn_blocking(move || read(&layout))
    }
    .await
    .map_err(|e| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "tasks", e.to_string()))?;
    let (titles, lines) = match read {
        Ok(read) => read,
        Err(why) => {
            return Ok(Json(Tasks {
                ledger: Some(ledger),
                note: Some(why),
                tasks: Vec::new(),
            })
            .into_response());
        }
    };
    let mut threads = attempts(&*viewer.store).await?;
    let mut ids: Vec<String> = titles.keys().chain(lines.keys()).cloned().collect();
    ids.sort();
    ids.dedup();
    let tasks = ids
        .into_iter()
        .map(|id| TaskRow {
            title: titles.get(&id).cloned(),
            line: lines.get(&id).cloned(),
            attempts: threads.remove(&id).unwrap_or_default(),
            id,
        })
        .collect();
    Ok(Json(Tasks {
        ledger: Some(ledger),
        note: None,
        tasks,
    })
    .into_response())
}

type Titles = BTreeMap<String, String>;
type Lines = BTreeMap<String, Line>;

/// The task files' titles and the latest ledger line of every task in the ledger; a missing
/// ledger is a note to show, not an error.
fn read(layout: &Layout) -> Result<(Titles, Lines), String> {
    let titles = Task::load_dir(layout.tasks_dir())
        .map(|tasks| tasks.into_iter().map(|(_, t)| (t.id, t.title)).collect())
        .unwrap_or_default();
    match crate::tasks::latest(layout.ledger(), &[]) {
        Ok(latest) => Ok((titles, latest.lines)),
        Err(crate::tasks::TasksError::NoLedger(path)) => Err(format!(
            "No ledger at {} yet: `agentpump tasks init` creates it, `agentpump tasks run` fills it.",
            path.display()
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// The task threads in the history, by task: each thread whose first record is a `<task>`.
async fn attempts(
    store: &dyn HistoryStore,
) -> Result<BTreeMap<String, Vec<Attempt>>, crate::history::HistoryError> {
    let root = crate::QName::new(TASKS_NS, "task");
    let mut found: BTreeMap<String, BTreeMap<u32, (u64, ThreadId)>> = BTreeMap::new();
    for thread in store.threads_with_root(&root).await? {
        let Some(first) = store.records_after(thread, 0, 1).await?.pop() else {
            continue;
        };
        if first.root != root {
            continue;
        }
        let Ok(a) = decode::<Assignment>(&first.payload) else {
            continue;
        };
        // Two threads for one attempt (a superseded start): the later one is the attempt's.
        let slot = found.entry(a.task.id).or_default().entry(a.attempt);
        let later = (first.seq, thread);
        slot.and_modify(|t| {
            if later.0 > t.0 {
                *t = later;
            }
        })
        .or_insert(later);
    }
    Ok(found
        .into_iter()
        .map(|(task, by_attempt)| {
            let list = by_attempt
                .into_iter()
                .map(|(attempt, (_, thread))| Attempt { attempt, thread })
                .collect();
            (task, list)
        })
        .collect())
}
