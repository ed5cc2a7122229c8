//! `GET /view/organism[?thread=ID]`: the organism as the page draws it — its listeners (name,
//! role, what it does, the roots it accepts, an example payload), the routes messages actually
//! took (from → to, counted over one thread's tree, or over the newest root threads), on a live
//! host the routes its listeners declare (their peers, drawn before any traffic) and the
//! listener that holds the thread's next delivery. Over a history file a listener's accepted
//! roots are the roots the history sent it.

use std::collections::{BTreeMap, BTreeSet};

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::Viewer;
use crate::history::{Record, RecordKind, ThreadFilter};
use crate::host::server::Problem;
use crate::host::server::params::Params;
use crate::{QName, ThreadId};

/// How many of the newest root threads the routes are counted over without `?thread=`.
const ROOTS: usize = 20;

/// Query of `GET /view/organism`.
#[derive(Debug, Deserialize)]
pub(crate) struct Which {
    thread: Option<ThreadId>,
}

/// One listener as the page lists it.
#[derive(Debug, Serialize, Deserialize)]
struct Listed {
    name: String,
    role: String,
    description: String,
    accepts: Vec<String>,
    /// The last payload of an accepted root this listener was sent in the history read, else
    /// the one its registration gives (a tool's call, a process's trigger), else a skeleton of
    /// its first root.
    example: String,
}

/// A route messages took, and how many did.
#[derive(Debug, Serialize, Deserialize)]
struct Route {
    from: String,
    to: String,
    count: u64,
}

/// A route a listener declares: it may address `to` (one of its peers).
#[derive(Debug, Serialize, Deserialize)]
struct Declared {
    from: String,
    to: String,
}

/// The answer.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Organism {
    /// Whether the page may send (a running host; not `agentpump view`).
    live: bool,
    /// The thread the routes were counted over, if one was asked for.
    thread: Option<ThreadId>,
    listeners: Vec<Listed>,
    routes: Vec<Route>,
    /// The routes the listeners declare (a live host; none over a history file).
    #[serde(default)]
    declared: Vec<Declared>,
    /// The listener holding the thread's next (or running) delivery, on a live host.
    current: Option<String>,
}

/// `GET /view/organism[?thread=ID]`.
pub(crate) async fn organism(
    State(viewer): State<Viewer>,
    Params(which): Params<Which>,
) -> Result<Response, Problem> {
    let records = match which.thread {
        Some(thread) => tree_records(&viewer, thread).await?,
        None => newest_records(&viewer).await?,
    };
    let mut routes: BTreeMap<(String, String), u64> = BTreeMap::new();
    for r in records.iter().filter(|r| r.kind != RecordKind::Decision) {
        let to = r.to.as_deref().unwrap_or("(any)").to_owned();
        *routes.entry((r.from.to_string(), to)).or_default() += 1;
    }
    let listeners = match &viewer.pump {
        Some(pump) => pump
            .listeners()
            .iter()
            .map(|l| Listed {
                name: l.name().to_owned(),
                role: l.listener_role().as_str().to_owned(),
                description: l.about().to_owned(),
                accepts: l.roots().iter().map(ToString::to_string).collect(),
                example: example(&records, l.name(), l.roots(), l.example_payload()),
            })
            .collect(),
        // Over a history file: the listeners the history names, without what only a running
        // host knows.
        None => {
            let named: BTreeSet<&str> = records.iter().filter_map(|r| r.to.as_deref()).collect();
            named
                .into_iter()
                .filter(|n| *n != "client")
                .map(|n| Listed {
                    name: n.to_owned(),
                    role: String::new(),
                    description: String::new(),
                    accepts: received(&records, n),
                    example: example(&records, n, &[], None),
                })
                .collect()
        }
    };
    let current = match (&viewer.pump, which.thread) {
        (Some(_), Some(thread)) => viewer
            .store
            .pending()
            .await?
            .into_iter()
            .find(|r| r.thread == thread)
            .and_then(|r| r.to.as_deref().map(str::to_owned)),
        _ => None,
    };
    let routes = routes
        .into_iter()
        .map(|((from, to), count)| Route { from, to, count })
        .collect();
    let mut declared = Vec::new();
    if let Some(pump) = &viewer.pump {
        for l in pump.listeners().iter() {
            declared.extend(l.declared_peers().map(|to| Declared {
                from: l.name().to_owned(),
                to: to.to_owned(),
            }));
        }
    }
    let answer = Organism {
        live: viewer.pump.is_some(),
        thread: which.thread,
        listeners,
        routes,
        declared,
        current,
    };
    Ok(Json(answer).into_response())
}

/// Every partition's `GET /view/organism` answer (without `?thread=`) as one: the routes
/// counted over each partition's newest root threads, summed; the listeners (and their
/// examples) as the first partition lists them: every host of an organism runs the same ones.
pub(crate) fn merged(answers: Vec<Organism>) -> Option<Organism> {
    let mut answers = answers.into_iter();
    let mut first = answers.next()?;
    let mut routes: BTreeMap<(String, String), u64> = first
        .routes
        .drain(..)
        .map(|r| ((r.from, r.to), r.count))
        .collect();
    for other in answers {
        for r in other.routes {
            *routes.entry((r.from, r.to)).or_default() += r.count;
        }
    }
    first.routes = routes
        .into_iter()
        .map(|((from, to), count)| Route { from, to, count })
        .collect();
    Some(first)
}

/// Every record of `thread`'s tree (the thread and everything below it); 404 for a thread
/// the viewer does not know.
async fn tree_records(viewer: &Viewer, thread: ThreadId) -> Result<Vec<Record>, Problem> {
    let tree = super::api::tree(viewer, thread).await?;
    let mut records = Vec::new();
    for info in tree {
        records.extend(viewer.store.thread(info.id, 0).await?);
    }
    Ok(records)
}

/// Every record of the trees of the newest root threads.
async fn newest_records(viewer: &Viewer) -> Result<Vec<Record>, Problem> {
    let filter = ThreadFilter {
        limit: ROOTS,
        ..ThreadFilter::default()
    };
    let mut records = Vec::new();
    for root in viewer.store.roots(&filter).await?.threads {
        records.extend(tree_records(viewer, root.info.id).await?);
    }
    Ok(records)
}

/// The roots of the messages the history sent `listener`, each once, in name order.
fn received(records: &[Record], listener: &str) -> Vec<String> {
    let roots: BTreeSet<String> = records
        .iter()
        .filter(|r| r.kind == RecordKind::Message && r.to.as_deref() == Some(listener))
        .map(|r| r.root.to_string())
        .collect();
    roots.into_iter().collect()
}

/// The newest payload sent to `listener` with one of `roots` (any root when none are known),
/// else `registered` (the listener's own example), else a skeleton of its first root.
fn example(
    records: &[Record],
    listener: &str,
    roots: &[QName],
    registered: Option<&str>,
) -> String {
    records
        .iter()
        .rev()
        .filter(|r| r.kind == RecordKind::Message && r.to.as_deref() == Some(listener))
        .find(|r| roots.is_empty() || roots.contains(&r.root))
        .map(|r| r.payload.to_string())
        .or_else(|| registered.map(str::to_owned))
        .or_else(|| {
            roots.first().map(|q| match q.namespace() {
                "" => format!("<{}/>", q.local()),
                ns => format!(r#"<{} xmlns="{ns}"/>"#, q.local()),
            })
        })
        .unwrap_or_default()
}
