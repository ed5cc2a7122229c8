//! What every request goes through besides auth: query keys a route does not take are refused
//! by name (a misspelt `?stat=` must not read as "no filter"), a request still running when
//! shutdown's time limit passes is cut off, and each request is logged at info when it is
//! answered.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::Problem;

/// The query keys `method` on the route `path` takes.
fn query_keys(method: &Method, path: &str) -> &'static [&'static str] {
    match (path, method) {
        ("/threads", &Method::POST) | ("/threads/{id}/messages", _) => &["to"],
        ("/threads", _) => &["state"],
        ("/threads/{id}/history", _) => &["format"],
        ("/threads/{id}/events", _) => &["after"],
        ("/threads/{id}/settled", _) => &["wait_ms"],
        ("/inbox", _) => &["thread", "listener"],
        ("/view/threads", _) => &["state", "class", "q", "before", "limit"],
        ("/view/threads/{id}/records", _) => &["after", "before", "limit"],
        ("/view/threads/{id}/process", _) => &["after", "limit"],
        ("/view/totals", _) => &["by", "limit"],
        ("/view/organism", _) => &["thread"],
        // A pump alone is ready when it is healthy: `?ready` asks the same of it.
        ("/health", _) => &["ready"],
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

/// The problem for a key a route does not take; a key that is one of `allowed` spelt another
/// way is told its spelling.
pub(crate) fn unknown_key(key: &str, what: &str, route: &str, allowed: &[&str]) -> Problem {
    let takes = if allowed.is_empty() {
        "none".to_owned()
    } else {
        allowed.join(", ")
    };
    let detail = match spelled(key, allowed) {
        Some(right) => format!(
            "{what} `{key}` is spelled `{right}` in {route} (keys are snake_case); it takes: {takes}"
        ),
        None => format!("unknown {what} `{key}` for {route}; it takes: {takes}"),
    };
    Problem::new(StatusCode::BAD_REQUEST, "unknown-key", detail)
}

/// The key of `allowed` that `key` spells another way: in another case, with `-` for `_`, or
/// without its `_ms` unit (`tool-calls` → `tool_calls`, `wall-clock` → `wall_clock_ms`).
fn spelled<'a>(key: &str, allowed: &[&'a str]) -> Option<&'a str> {
    let plain = key.to_ascii_lowercase().replace('-', "_");
    allowed
        .iter()
        .copied()
        .find(|a| *a == plain || a.strip_suffix("_ms") == Some(plain.as_str()))
}

/// The JSON body of `route` as `T`: a JSON object whose keys are `T`'s fields (an unknown or
/// misspelt key is `unknown-key`, named), each value of its field's type; anything else is a
/// `code` problem naming the key. An empty body is `T::default()`.
pub(crate) fn json_body<T>(body: &[u8], route: &str, code: &str) -> Result<T, Problem>
where
    T: DeserializeOwned + Serialize + Default,
{
    if body.is_empty() {
        return Ok(T::default());
    }
    let defaults = serde_json::to_value(T::default()).expect("a body type serializes");
    let keys: Vec<&str> = defaults
        .as_object()
        .expect("a body type is a JSON object")
        .keys()
        .map(String::as_str)
        .collect();
    let bad = |detail: String| Problem::new(StatusCode::BAD_REQUEST, code, detail);
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| bad(format!("the body is not JSON: {e}")))?;
    let Some(object) = value.as_object() else {
        return Err(bad(format!(
            "{route} takes a JSON object with the keys {}; got {}",
            keys.join(", "),
            kind(&value)
        )));
    };
    if let Some(key) = object.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(unknown_key(key, "JSON key", route, &keys));
    }
    // Each key alone over the defaults, so that a wrong value is named by its key.
    for (key, v) in object {
        let mut one = defaults.clone();
        one[key] = v.clone();
        if let Err(e) = serde_json::from_value::<T>(one) {
            return Err(bad(format!("`{key}` in {route}: {e}")));
        }
    }
    serde_json::from_value(value).map_err(|e| bad(format!("{route}: {e}")))
}

/// What a JSON value is, in words.
fn kind(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
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
