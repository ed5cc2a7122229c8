//! The history viewer: a page (plain HTML, CSS and JS embedded in the binary) and the read-only
//! JSON routes it reads, over any [`HistoryStore`]. `agentpump run` serves it at `/` beside the
//! API, with a live pump behind it (new records over the event stream, stop and resume);
//! `agentpump view --db FILE` serves it over a history file alone.
//!
//! Routes: `GET /`, `/viewer.css`, `/viewer.js`, `/dom.js`, `/panels.js`, `/process.js`,
//! `/tasks.js`, `/plan.js`, `/loop.js`, `/inbox.js`, `/fork.js`, `/totals.js`, `/timing.js`,
//! `/xml.js`, `/plot.js`, `/favicon.svg`
//! (no data, no token); `POST /session` exchanges
//! the token for an HttpOnly, SameSite=Strict cookie and `DELETE /session` drops it; and, with
//! the token (bearer or cookie), `GET /view/info`, `/view/threads`, `/view/threads/{id}` (with
//! its latest plan),
//! `/view/threads/{id}/records`, `/view/threads/{id}/process` (its process events, paged),
//! `/view/threads/{id}/report`, `/view/tasks` (the task ledger, each task with its threads),
//! `/view/threads/{id}/totals` (the thread's and its tree's usage), `/view/threads/{id}/timing`
//! (its tree's deliveries, timed, for the waterfall) and `/view/totals?by=&limit=`
//! (usage across threads by listener or by day), `/view/organism?thread=` (listeners, the routes
//! messages took, the listener holding a live thread's next delivery). Replay from a record is the API's
//! `POST /threads/{id}/fork` (`viewer/fork.rs`); read-only, 405.

mod api;
mod assets;
pub(super) mod fork;
pub(super) mod organism;
mod session;
mod tasks;
mod timing;
pub(super) mod totals;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};

use super::auth;
use crate::PumpHandle;
use crate::history::HistoryStore;

/// Largest body the viewer's own routes take (a token in `POST /session`).
const MAX_BODY: usize = 4 * 1024;

/// What the viewer's handlers share.
#[derive(Debug, Clone)]
pub(crate) struct Viewer {
    /// Where records, snapshots and reports are read.
    pub store: Arc<dyn HistoryStore>,
    /// The running pump, on `agentpump run`: live states, events, stop and resume.
    pub pump: Option<PumpHandle>,
    /// The token the cookie stands for.
    pub token: Arc<str>,
    /// The task ledger the tasks view reads, when the host has one.
    pub tasks: Option<Arc<crate::tasks::Layout>>,
}

/// The viewer's routes (to merge beside the API, or to serve alone).
pub(crate) fn routes(viewer: Viewer) -> Router {
    let protected = Router::new()
        .route("/view/info", get(api::info))
        .route("/view/threads", get(api::threads))
        .route("/view/threads/{id}", get(api::thread))
        .route("/view/threads/{id}/records", get(api::records))
        .route("/view/threads/{id}/process", get(api::process))
        .route("/view/threads/{id}/report", get(api::report))
        .route("/view/tasks", get(tasks::tasks))
        .route("/view/organism", get(organism::organism))
        .route("/view/threads/{id}/totals", get(totals::thread))
        .route("/view/threads/{id}/timing", get(timing::timing))
        .route("/view/totals", get(totals::across))
        .route_layer(axum::middleware::from_fn(super::strict::known_query_keys))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&viewer.token),
            auth::require_token,
        ));
    let files = assets::FILES
        .iter()
        .map(|(path, _, _)| *path)
        .chain(["/favicon.ico"])
        .fold(Router::new(), |router, path| {
            router.route(path, get(assets::file))
        });
    files
        .route("/session", post(session::open).delete(session::close))
        .merge(protected)
        .method_not_allowed_fallback(super::routes::method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(viewer)
}

/// The viewer alone over `store`, read-only (what `agentpump view` serves), requiring `token`;
/// with `tasks`, its tasks view reads that ledger.
pub fn read_only(
    store: Arc<dyn HistoryStore>,
    token: &str,
    tasks: Option<crate::tasks::Layout>,
) -> Router {
    routes(Viewer {
        store,
        pump: None,
        token: Arc::from(token),
        tasks: tasks.map(Arc::new),
    })
    .route("/threads/{id}/fork", post(fork::read_only))
    .fallback(super::routes::not_found)
}
