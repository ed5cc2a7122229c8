//! What every request goes through besides auth: query keys a route does not take are refused
//! by name (a misspelt `?stat=` must not read as "no filter"), a request still running when
//! shutdown's time limit passes is cut off, and each request is logged at info when it is
//! answered.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;

use super::Problem;

/// The query keys `method` on the route `path` takes.
fn query_keys(method: &Method, path: &str) -> &'static [&'static str] {
    match (path, method) {
        ("/threads", &Method::POST) | ("/threads/{id}/messages", _) => &["to"],
        ("/threads", _) => &["state"],
        ("/threads/{id}/history", _) => &["format"],
        ("/threads/{id}/events", _) => &["after"],
        _ => &[],
    }
}

/// Refuses a request whose query names a key its route does not take (400 `unknown-key`).
pub(crate) async fn known_query_keys(request: Request, next: Next) -> Response {
    let path = request
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned())
        .unwrap_or_default();
    let allowed = query_keys(request.method(), &path);
    let unknown = request.uri().query().and_then(|q| {
        q.split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| pair.split_once('=').map_or(pair, |(k, _)| k))
            .find(|key| !allowed.contains(key))
            .map(str::to_owned)
    });
    match unknown {
        None => next.run(request).await,
        Some(key) => unknown_key(&key, "query key", &path, allowed).into_response(),
    }
}

/// The problem for a key a route does not take.
pub(crate) fn unknown_key(key: &str, what: &str, route: &str, allowed: &[&str]) -> Problem {
    let takes = if allowed.is_empty() {
        "none".to_owned()
    } else {
        allowed.join(", ")
    };
    Problem::new(
        StatusCode::BAD_REQUEST,
        "unknown-key",
        format!("unknown {what} `{key}` for {route}; it takes: {takes}"),
    )
}

/// Runs the request unless `cut_off` turns `true` first (shutdown's time limit passed): then
/// the handler is dropped — a slow upload with it — and the answer is 503 `shutting-down`.
pub(crate) async fn cut_off(
    State(mut cut_off): State<watch::Receiver<bool>>,
    request: Request,
    next: Next,
) -> Response {
    let limit = async {
        // A router served without a shutdown has no sender: never cut off.
        if cut_off.wait_for(|cut| *cut).await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    tokio::select! {
        response = next.run(request) => response,
        () = limit => Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting-down",
            "the host is shutting down and this request ran past the shutdown time limit",
        )
        .into_response(),
    }
}

/// Logs each request at info when it is answered: method, path, status, milliseconds.
pub(crate) async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    tracing::info!(
        %method,
        path = %path,
        status = response.status().as_u16(),
        ms = started.elapsed().as_millis() as u64,
        "request"
    );
    response
}
