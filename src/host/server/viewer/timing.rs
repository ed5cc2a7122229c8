//! Time: each handled delivery of a thread and its descendants with the instants history keeps —
//! accepted (the record's stamp), handler started and ended (measured by the pump), committed
//! (measured by the store) — and how long the handler waited for a model, for the viewer's
//! waterfall. A delivery recorded before timings were
//! kept has `null` instants: "not recorded", never zero.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::Viewer;
use crate::host::server::Problem;
use crate::host::server::thread_path::ThreadPath;
use crate::{ThreadId, ThreadInfo};

/// One handled delivery on the waterfall; instants in microseconds since the Unix epoch.
#[derive(Debug, Serialize)]
pub(crate) struct Bar {
    thread: ThreadId,
    seq: u64,
    listener: Option<String>,
    accepted_us: i64,
    started_us: Option<i64>,
    handled_us: Option<i64>,
    committed_us: Option<i64>,
    /// Of the handler time, how long it waited for a model (`null` when not recorded).
    llm_us: Option<u64>,
}

/// One thread of the tree, parents before their children.
#[derive(Debug, Serialize)]
pub(crate) struct Lane {
    id: ThreadId,
    parent: Option<ThreadId>,
    depth: u32,
    path: String,
    deliveries: Vec<Bar>,
}

/// `GET /view/threads/{id}/timing`: the thread's and its descendants' deliveries, timed.
pub(crate) async fn timing(
    State(viewer): State<Viewer>,
    ThreadPath(id): ThreadPath,
) -> Result<Response, Problem> {
    let tree = super::api::tree(&viewer, id).await?;
    let base = tree.iter().find(|t| t.id == id).map_or(0, |t| t.depth);
    let mut lanes = Vec::with_capacity(tree.len());
    for info in in_spawn_order(tree, id) {
        let marks = viewer.store.marks(info.id).await?;
        let deliveries = marks
            .into_iter()
            .map(|m| Bar {
                thread: info.id,
                seq: m.seq,
                listener: m.listener.map(|l| l.to_string()),
                accepted_us: m.time_us,
                started_us: m.timing.map(|t| t.started_us),
                handled_us: m.timing.map(|t| t.handled_us),
                committed_us: m.committed_us,
                llm_us: m.timing.map(|_| m.usage.llm_us),
            })
            .collect();
        lanes.push(Lane {
            id: info.id,
            parent: info.parent,
            depth: info.depth.saturating_sub(base),
            path: info.path.to_string(),
            deliveries,
        });
    }
    Ok(Json(serde_json::json!({ "thread": id, "lanes": lanes })).into_response())
}

/// The tree depth first from `root`: each child right under its parent, siblings in the order
/// the tree lists them.
fn in_spawn_order(mut tree: Vec<ThreadInfo>, root: ThreadId) -> Vec<ThreadInfo> {
    let mut ordered = Vec::with_capacity(tree.len());
    let mut stack = vec![root];
    while let Some(id) = stack.pop() {
        let Some(at) = tree.iter().position(|t| t.id == id) else {
            continue;
        };
        let info = tree.swap_remove(at);
        let children: Vec<ThreadId> = tree
            .iter()
            .filter(|t| t.parent == Some(id))
            .map(|t| t.id)
            .collect();
        stack.extend(children.into_iter().rev());
        ordered.push(info);
    }
    ordered
}
