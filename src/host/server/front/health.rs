//! `GET /health` through a partitioned host's front: each partition's writer and whether it
//! takes writes now, asked of every writer at once. `200` while at least one partition takes
//! writes (a new thread can start); with `?ready`, `200` only when every partition does — the
//! check to wait for after a cluster starts or fails over. Otherwise `503` problem JSON
//! (`not-ready`, `Retry-After: 1`) with the same list.

use axum::Json;
use axum::body::Bytes;
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::future::join_all;
use serde_json::{Value, json};

use super::{Front, Sent};
use crate::host::server::problem::Problem;

/// The host's health over every partition (`ready`: every partition must take writes).
pub(super) async fn every(front: &Front, sent: &Sent<'_>, ready: bool) -> Response {
    let ask = Sent {
        method: &Method::GET,
        path: "/health",
        headers: sent.headers,
        body: Bytes::new(),
    };
    let count = front.writers.len();
    let partitions: Vec<Value> = join_all((0..count).map(|p| one(front, p, &ask))).await;
    let taking = partitions.iter().filter(|p| p["status"] == "ok").count();
    let status = match taking {
        0 => "unavailable",
        n if n == count => "ok",
        _ => "degraded",
    };
    if taking == count || (taking > 0 && !ready) {
        return Json(json!({ "status": status, "partitions": partitions })).into_response();
    }
    let detail = if ready {
        format!("{taking} of {count} partitions take writes now; ready means every one does")
    } else {
        format!("no partition of {count} takes writes now")
    };
    let problem = Problem::new(StatusCode::SERVICE_UNAVAILABLE, "not-ready", detail);
    let mut body = serde_json::to_value(&problem).unwrap_or_default();
    body["partitions"] = Value::Array(partitions);
    let mut answer = (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    let headers = answer.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    answer
}

/// One partition: its writer as its lease says, and `ok` or why it does not take writes (its
/// problem's code, `no-writer`, or the HTTP status it answered).
async fn one(front: &Front, partition: usize, ask: &Sent<'_>) -> Value {
    let writer = front.writers[partition].borrow().clone();
    let Some(writer) = writer else {
        return json!({ "partition": partition, "writer": null, "status": "no-writer" });
    };
    let answer = front.exchange(partition, ask).await;
    let answer = answer.unwrap_or_else(std::convert::identity);
    if answer.status() == StatusCode::OK {
        return json!({ "partition": partition, "writer": writer, "status": "ok" });
    }
    let code = answer.status().as_u16();
    let body = axum::body::to_bytes(answer.into_body(), 1 << 16)
        .await
        .unwrap_or_default();
    let problem: Value = serde_json::from_slice(&body).unwrap_or_default();
    let status = problem["code"]
        .as_str()
        .map_or_else(|| format!("http-{code}"), str::to_owned);
    json!({
        "partition": partition,
        "writer": writer,
        "status": status,
        "detail": problem["detail"],
    })
}
