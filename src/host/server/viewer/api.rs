//! The viewer's JSON: a page of root threads, one thread's tree with halts, carve-outs and
//! integrity, its records a page at a time, and its latest halting report.

use std::collections::{BTreeMap, HashMap};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::Viewer;
use crate::governor::HaltingReport;
use crate::governor::report::BudgetLine;
use crate::history::page::MAX_PAGE;
use crate::history::{HistoryError, Record, ThreadFilter};
use crate::host::server::Problem;
use crate::host::server::params::Params;
use crate::host::server::thread_path::ThreadPath;
use crate::{ThreadId, ThreadInfo, ThreadState};

/// Query of `GET /view/threads`.
#[derive(Debug, Deserialize)]
pub(crate) struct ListQuery {
    state: Option<String>,
    class: Option<String>,
    q: Option<String>,
    before: Option<u64>,
    limit: Option<usize>,
}

/// Query of `GET /view/threads/{id}/records`: the records after `after`, or the last ones
/// before `before` (`before` wins when both are given; a huge `before` reads the end).
#[derive(Debug, Deserialize)]
pub(crate) struct Window {
    after: Option<u64>,
    before: Option<u64>,
    limit: Option<usize>,
}

/// One thread of a tree as the page shows it.
#[derive(Debug, Serialize)]
pub(crate) struct Node {
    #[serde(flatten)]
    info: ThreadInfo,
    /// Its latest halting report.
    report: Option<HaltingReport>,
    /// The `<budget>` carved out for it at its spawner, as the governor's decision wrote it.
    carve_out: Option<String>,
}

/// The hash chain of one thread: verified, or the first record that does not match.
#[derive(Debug, Serialize)]
pub(crate) struct Integrity {
    verified: bool,
    records: u64,
    broken_at: Option<u64>,
    detail: Option<String>,
}

/// `GET /view/threads/{id}`.
#[derive(Debug, Serialize)]
pub(crate) struct Detail {
    tree: Vec<Node>,
    integrity: Integrity,
    live: bool,
    /// The governor's budget lines of the thread now, on a running host.
    budget: Option<BTreeMap<String, BudgetLine>>,
    /// The thread's latest plan (`<todo-until>`), the record as kept.
    plan: Option<Record>,
    /// The carve-outs of children that are not in `tree` (they run on another partition's
    /// pump): by child id, for the front that adds those children (`front/tree.rs`).
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    carved_elsewhere: HashMap<ThreadId, String>,
}

/// `GET /view/info`: whether a pump runs behind the page.
pub(crate) async fn info(State(viewer): State<Viewer>) -> Response {
    Json(serde_json::json!({ "live": viewer.pump.is_some() })).into_response()
}

/// `GET /view/threads?state=&class=&q=&before=&limit=`: a page of root threads, newest first.
pub(crate) async fn threads(
    State(viewer): State<Viewer>,
    Params(q): Params<ListQuery>,
) -> Result<Response, Problem> {
    let state = match q.state.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(
            s.parse::<ThreadState>()
                .map_err(|e| Problem::new(StatusCode::BAD_REQUEST, "bad-state", e.to_string()))?,
        ),
    };
    let filter = ThreadFilter {
        state,
        class: q.class.filter(|c| !c.is_empty()),
        text: q.q.filter(|t| !t.trim().is_empty()),
        before: q.before,
        limit: q.limit.unwrap_or(0),
    };
    let mut page = viewer.store.roots(&filter).await?;
    if let Some(pump) = &viewer.pump {
        for t in &mut page.threads {
            if let Some(live) = pump.thread(t.info.id) {
                t.info.state = live.state;
                t.info.counters = live.counters;
            }
        }
    }
    Ok(Json(page).into_response())
}

pub(super) async fn tree(viewer: &Viewer, id: ThreadId) -> Result<Vec<ThreadInfo>, Problem> {
    let tree = match &viewer.pump {
        Some(pump) => pump.tree(id),
        None => viewer.store.subtree(id).await?,
    };
    if tree.is_empty() {
        return Err(Problem::unknown_thread(&id.to_string()));
    }
    Ok(tree)
}

/// `GET /view/threads/{id}`: the thread and everything below it, with the chain checked.
pub(crate) async fn thread(
    State(viewer): State<Viewer>,
    ThreadPath(id): ThreadPath,
) -> Result<Response, Problem> {
    let tree = tree(&viewer, id).await?;
    let mut spawns: HashMap<ThreadId, String> = HashMap::new();
    for t in tree.iter().filter(|t| !t.children.is_empty()) {
        let records = viewer.store.thread(t.id, 0).await?;
        spawns.extend(carve_outs(&records));
    }
    let mut nodes = Vec::with_capacity(tree.len());
    for info in tree {
        let report = viewer.store.reports(info.id).await?.pop();
        let carve_out = spawns.remove(&info.id);
        nodes.push(Node {
            info,
            report,
            carve_out,
        });
    }
    let integrity = match viewer.store.verify_thread(id).await {
        Ok(records) => Integrity {
            verified: true,
            records,
            broken_at: None,
            detail: None,
        },
        Err(HistoryError::Chain(b)) => Integrity {
            verified: false,
            records: 0,
            broken_at: Some(b.seq),
            detail: Some(b.to_string()),
        },
        // A forged or edited prune anchor: the thread's records cannot be vouched for.
        Err(HistoryError::Anchor(b)) => Integrity {
            verified: false,
            records: 0,
            broken_at: None,
            detail: Some(b.to_string()),
        },
        Err(e) => return Err(e.into()),
    };
    Ok(Json(Detail {
        tree: nodes,
        integrity,
        live: viewer.pump.is_some(),
        budget: viewer.pump.as_ref().and_then(|p| p.budget(id)),
        plan: latest_plan(&viewer, id).await?,
        carved_elsewhere: spawns,
    })
    .into_response())
}

/// The last plan record of thread `id` (only plans are in their namespace), read a page at a
/// time: a thread writes few.
async fn latest_plan(viewer: &Viewer, id: ThreadId) -> Result<Option<Record>, HistoryError> {
    let mut latest = None;
    loop {
        let after = latest.as_ref().map_or(0, |r: &Record| r.seq);
        let mut page = viewer
            .store
            .records_in(id, crate::todo::TODO_NS, after, MAX_PAGE)
            .await?;
        let full = page.len() == MAX_PAGE;
        if let Some(last) = page.pop() {
            latest = Some(last);
        }
        if !full {
            return Ok(latest);
        }
    }
}

/// Per child: the `<budget>` the governor reserved for it, from its `carve` decision (the
/// spawner's request, clamped to what the spawner had left).
fn carve_outs(records: &[Record]) -> HashMap<ThreadId, String> {
    records
        .iter()
        .filter(|r| r.root.local() == "decision" && r.payload.contains(r#" action="carve""#))
        .filter_map(|r| {
            let child = attribute(&r.payload, "thread")?.parse().ok()?;
            Some((child, element(&r.payload, "budget")?.to_owned()))
        })
        .collect()
}

/// The value of the first `name="…"` in `xml`.
fn attribute<'a>(xml: &'a str, name: &str) -> Option<&'a str> {
    let start = xml.find(&format!(" {name}=\""))? + name.len() + 3;
    xml[start..].split('"').next()
}

/// The first element named `local` (any prefix) in `xml`, as written.
fn element<'a>(xml: &'a str, local: &str) -> Option<&'a str> {
    let at = xml.match_indices(local).map(|(i, _)| i).find(|&i| {
        let before = &xml[..i];
        before.ends_with('<') || (before.ends_with(':') && before.rfind('<') > before.rfind('>'))
    })?;
    let start = xml[..at].rfind('<')?;
    let open_end = start + xml[start..].find('>')?;
    if xml[..open_end].ends_with('/') {
        return Some(&xml[start..=open_end]);
    }
    let close = format!("{local}>");
    let end = open_end + xml[open_end..].find(&close)? + close.len();
    Some(&xml[start..end])
}

/// `GET /view/threads/{id}/records?after=SEQ&limit=N`: the next records of a thread;
/// `?before=SEQ`: the last ones before it (a transcript read from its end).
pub(crate) async fn records(
    State(viewer): State<Viewer>,
    ThreadPath(id): ThreadPath,
    Params(q): Params<Window>,
) -> Result<Response, Problem> {
    let limit = q.limit.unwrap_or(200);
    let records = match q.before {
        Some(before) => viewer.store.records_before(id, before, limit).await?,
        None => {
            viewer
                .store
                .records_after(id, q.after.unwrap_or(0), limit)
                .await?
        }
    };
    Ok(Json(records).into_response())
}

/// Query of `GET /view/threads/{id}/process`.
#[derive(Debug, Deserialize)]
pub(crate) struct After {
    after: Option<u64>,
    limit: Option<usize>,
}

/// `GET /view/threads/{id}/process?after=SEQ&limit=N`: the thread's process events
/// (`urn:agentpump:process:v1`) after `after`, in order — the timeline of the whole thread,
/// however long, a page at a time.
pub(crate) async fn process(
    State(viewer): State<Viewer>,
    ThreadPath(id): ThreadPath,
    Params(q): Params<After>,
) -> Result<Response, Problem> {
    let records = viewer
        .store
        .records_in(
            id,
            crate::envelope::PROCESS_NS,
            q.after.unwrap_or(0),
            q.limit.unwrap_or(MAX_PAGE),
        )
        .await?;
    Ok(Json(records).into_response())
}

/// `GET /view/threads/{id}/report`: the latest halting report.
pub(crate) async fn report(
    State(viewer): State<Viewer>,
    ThreadPath(id): ThreadPath,
) -> Result<Response, Problem> {
    match viewer.store.reports(id).await?.pop() {
        Some(report) => Ok(Json(report).into_response()),
        None => Err(Problem::new(
            StatusCode::NOT_FOUND,
            "no-report",
            format!("thread {id} has no halting report"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{attribute, element};

    #[test]
    fn finds_the_budget_of_a_spawn_request() {
        let spawn = r#"<sys:spawn-thread xmlns:sys="urn:agentpump:system:v1" suggested-sub-id="part1"><sys:budget turns="6"/><sys:initial-payload><task xmlns="urn:d">budget</task></sys:initial-payload></sys:spawn-thread>"#;
        assert_eq!(element(spawn, "budget"), Some(r#"<sys:budget turns="6"/>"#));
        let open = r#"<spawn-thread><budget><turns>3</turns></budget></spawn-thread>"#;
        assert_eq!(
            element(open, "budget"),
            Some("<budget><turns>3</turns></budget>")
        );
        assert_eq!(element("<spawn-thread/>", "budget"), None);
        assert_eq!(
            attribute(r#"<a assigned-id="x1" b="2"/>"#, "assigned-id"),
            Some("x1")
        );
    }
}
