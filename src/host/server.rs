//! The HTTP API (axum): start and post into threads, read threads, history, trees and reports,
//! stop and resume, and follow a thread's records as server-sent events. Every route needs the
//! bearer token (or the viewer's session cookie); the history viewer is served at `/`; request bodies are size-limited; errors are problem JSON (RFC 9457).

mod auth;
pub(crate) mod bodies;
mod events;
pub mod front;
pub mod hosts;
mod inbox;
mod inbox_events;
mod params;
mod parcel;
mod problem;
pub(crate) mod routes;
mod strict;
mod task_events;
mod thread_path;
pub mod viewer;

use std::future::Future;
use std::future::IntoFuture as _;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use tokio::net::TcpListener;
use tokio::sync::watch;

pub use auth::{TokenError, load_or_create_token};
pub use problem::{PROBLEM_TYPE, Problem};

use crate::PumpHandle;

/// What every handler shares.
#[derive(Debug, Clone)]
pub(crate) struct Api {
    pub pump: PumpHandle,
    pub token: Arc<str>,
    /// Turns `true` when the server begins to shut down; open event streams end then.
    pub stopping: watch::Receiver<bool>,
    /// Turns `true` when shutdown's time limit has passed: requests still running are answered
    /// 503 `shutting-down` then.
    pub cut_off: watch::Receiver<bool>,
    /// The task ledger `GET /tasks` reads (none: 404).
    pub tasks: Option<Arc<crate::tasks::Layout>>,
    /// The NATS connection of remote listeners, reported by `/health`.
    pub cluster: Option<Arc<crate::host::cluster::hub::Hub>>,
    /// The largest request body in bytes (`[server] max_body_bytes`), named when one is over it.
    pub max_body: usize,
    /// The organism's listeners, as `/mcp`'s `agentpump://listeners` resource shows them.
    pub listeners: Vec<crate::host::mcp::server::ListenerDoc>,
    /// The `Host` names `/mcp` answers.
    pub mcp_hosts: hosts::AllowedHosts,
}

/// The API's routes over `pump`, requiring `token`, refusing bodies over `max_body` bytes.
/// Event streams from this router end only when the client goes away; [`serve`] ends them at
/// shutdown.
pub fn router(pump: PumpHandle, token: &str, max_body: usize) -> Router {
    routes_for(Api {
        pump,
        token: Arc::from(token),
        stopping: watch::channel(false).1,
        cut_off: watch::channel(false).1,
        tasks: None,
        cluster: None,
        max_body,
        listeners: Vec::new(),
        mcp_hosts: hosts::AllowedHosts::default(),
    })
}

/// The API's routes as [`serve_with`] serves them, to call in the process (a host's front
/// answering for a partition it writes); open event streams end when `stopping` turns `true`.
pub fn router_with(
    pump: PumpHandle,
    token: &str,
    max_body: usize,
    extras: Extras,
    stopping: watch::Receiver<bool>,
) -> Router {
    routes_for(Api {
        pump,
        token: Arc::from(token),
        stopping,
        cut_off: watch::channel(false).1,
        tasks: extras.tasks.map(Arc::new),
        cluster: extras.cluster,
        max_body,
        listeners: extras.listeners,
        mcp_hosts: hosts::AllowedHosts::new(&extras.allowed_hosts),
    })
}

fn routes_for(api: Api) -> Router {
    Router::new()
        .route("/health", get(routes::health))
        .route("/threads", post(routes::start).get(routes::list))
        .route("/threads/{id}", get(routes::thread))
        .route("/threads/{id}/messages", post(routes::post_message))
        .route("/threads/{id}/history", get(routes::history))
        .route("/threads/{id}/answers", get(routes::answers))
        .route("/threads/{id}/tree", get(routes::tree))
        .route("/threads/{id}/report", get(routes::report))
        .route("/threads/{id}/reports", get(routes::reports))
        .route("/threads/{id}/budget", get(routes::budget))
        .route("/threads/{id}/settled", get(routes::settled))
        .route("/threads/{id}/stop", post(routes::stop))
        .route("/threads/{id}/resume", post(routes::resume))
        .route("/threads/{id}/fork", post(viewer::fork::fork))
        // Between the pumps of one organism: children on other partitions (`pump/spread.rs`).
        .route("/threads/{id}/parcel", post(parcel::take))
        .route("/threads/{id}/events", get(events::follow))
        .route("/history/prune", post(routes::prune))
        .route("/tasks", get(routes::tasks))
        .route("/tasks/events", get(task_events::follow))
        // A person in the loop (issue 31).
        .route("/inbox", get(inbox::list))
        .route("/inbox/events", get(inbox_events::follow))
        .route("/inbox/{id}", post(inbox::answer))
        .route_layer(axum::middleware::from_fn(strict::known_query_keys))
        // MCP's Streamable HTTP (issue 30), behind the same token as every route here, for
        // the allowed `Host` names only.
        .merge(Router::new().nest_service("/mcp", routes::mcp(&api)).layer(
            axum::middleware::from_fn_with_state(api.mcp_hosts.clone(), hosts::check),
        ))
        .fallback(routes::not_found)
        .method_not_allowed_fallback(routes::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&api.token),
            auth::require_token,
        ))
        .layer(DefaultBodyLimit::max(api.max_body))
        .with_state(api.clone())
        .merge(viewer::routes(viewer::Viewer {
            store: Arc::clone(api.pump.store()),
            pump: Some(api.pump.clone()),
            token: Arc::clone(&api.token),
            tasks: api.tasks.clone(),
        }))
        .layer(axum::middleware::from_fn_with_state(
            api.cut_off.clone(),
            strict::cut_off,
        ))
        .layer(axum::middleware::from_fn(strict::log_request))
}

/// Serves the API on `listener` until `shutdown` resolves, then stops accepting connections,
/// ends open event streams and lets requests in flight finish — for at most
/// [`DEFAULT_SHUTDOWN_TIMEOUT`], after which their connections are closed.
///
/// # Errors
///
/// The listener fails.
pub async fn serve(
    listener: TcpListener,
    pump: PumpHandle,
    token: &str,
    max_body: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, pump, token, max_body, Extras::default(), shutdown).await
}

/// How long requests still running at shutdown may take unless told otherwise.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// What a host may serve besides the pump: `GET /tasks` over a task ledger, and the NATS
/// connection of remote listeners reported by `/health`; and how long shutdown waits for slow
/// requests.
#[derive(Debug)]
pub struct Extras {
    /// The task ledger `GET /tasks` reads (none: 404).
    pub tasks: Option<crate::tasks::Layout>,
    /// The NATS connection of remote listeners.
    pub cluster: Option<Arc<crate::host::cluster::hub::Hub>>,
    /// Once shutdown begins, requests still running after this long have their connections
    /// closed, so a slow or stalled client cannot keep the process alive (default
    /// [`DEFAULT_SHUTDOWN_TIMEOUT`]).
    pub shutdown_timeout: Duration,
    /// The organism's listeners, for `/mcp`'s `agentpump://listeners` resource.
    pub listeners: Vec<crate::host::mcp::server::ListenerDoc>,
    /// The `Host` names `/mcp` answers besides the loopback ones ([`hosts::LOOPBACK`]):
    /// `name` (any port) or `name:port` each.
    pub allowed_hosts: Vec<String>,
}

impl Default for Extras {
    fn default() -> Self {
        Self {
            tasks: None,
            cluster: None,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            listeners: Vec::new(),
            allowed_hosts: Vec::new(),
        }
    }
}

/// As [`serve`], with the [`Extras`] of this host.
///
/// # Errors
///
/// The listener fails.
pub async fn serve_with(
    listener: TcpListener,
    pump: PumpHandle,
    token: &str,
    max_body: usize,
    extras: Extras,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop, stopping) = watch::channel(false);
    let began = stop.subscribe();
    let (cut_off, cutting) = watch::channel(false);
    let api = Api {
        pump,
        token: Arc::from(token),
        stopping,
        cut_off: cutting,
        tasks: extras.tasks.map(Arc::new),
        cluster: extras.cluster,
        max_body,
        listeners: extras.listeners,
        mcp_hosts: hosts::AllowedHosts::new(&extras.allowed_hosts),
    };
    let server = axum::serve(listener, routes_for(api)).with_graceful_shutdown(async move {
        shutdown.await;
        stop.send_replace(true);
    });
    within_limit(
        server.into_future(),
        began,
        extras.shutdown_timeout,
        &cut_off,
    )
    .await
}

/// Runs `server` until it returns, or, once its graceful shutdown began (`began` turned
/// `true`), for `limit` more: then requests still running are told to stop (`cut_off`, answered
/// 503 `shutting-down` where the routes watch it) and get [`CUT_OFF_GRACE`] to finish before
/// the server is let go of with what it still holds.
pub(super) async fn within_limit(
    server: impl Future<Output = std::io::Result<()>>,
    mut began: watch::Receiver<bool>,
    limit: Duration,
    cut_off: &watch::Sender<bool>,
) -> std::io::Result<()> {
    tokio::pin!(server);
    tokio::select! {
        served = &mut server => return served,
        () = async {
            // The sender lives in the server's shutdown future: it is gone only when the
            // server has returned, and then this branch is not polled again.
            if began.wait_for(|stopping| *stopping).await.is_err() {
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(limit).await;
        } => {}
    }
    // Decide, tell, wait: requests still running are answered 503 `shutting-down` …
    tracing::warn!(
        limit_ms = limit.as_millis() as u64,
        "requests still running at the shutdown limit are cut off"
    );
    cut_off.send_replace(true);
    // … and a connection that still holds on (a client stalled mid-headers) is dropped.
    match tokio::time::timeout(CUT_OFF_GRACE, server).await {
        Ok(served) => served,
        Err(_) => {
            tracing::warn!("connections still open after the cut-off are closed");
            Ok(())
        }
    }
}

/// How long cut-off requests get to send their answer before the server stops waiting.
const CUT_OFF_GRACE: Duration = Duration::from_secs(1);
