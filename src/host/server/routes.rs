//! The request handlers.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::bodies::{BudgetBody, PruneCut};
use super::params::Params;
use super::strict::json_body;
use super::thread_path::ThreadPath;
use super::{Api, Problem};
use crate::governor::Budget;
use crate::history::{HistoryError, export};
use crate::{ThreadId, ThreadState};

/// Query of `POST /threads` and `POST /threads/{id}/messages` for a bare payload.
#[derive(Debug, Deserialize)]
pub(crate) struct To {
    to: Option<String>,
}

/// Query of `GET /threads`.
#[derive(Debug, Deserialize)]
pub(crate) struct StateFilter {
    state: Option<String>,
}

/// Query of `GET /threads/{id}/history`.
#[derive(Debug, Deserialize)]
pub(crate) struct Format {
    format: Option<String>,
}

/// `GET /health`: 200 `{"status":"ok"}` while the pump accepts input; 503 problem JSON
/// (`history-unavailable` while the history cannot be written, `shutting-down`) when it does not. With remote
/// listeners, `"nats": {"url": …, "connected": …}` too: a pump away from NATS still accepts
/// input (remote deliveries fail with `upstream-failed` or time out until it is back).
pub(crate) async fn health(State(api): State<Api>) -> Result<Response, Problem> {
    api.pump.health().map_err(|e| Problem::from(*e))?;
    let r = api.pump.residency();
    let mut body = serde_json::json!({
        "status": "ok",
        "threads": { "resident": r.resident, "evicted": r.evicted, "reloaded": r.reloaded },
    });
    if let Some(hub) = &api.cluster {
        body["nats"] = serde_json::json!({ "url": hub.url(), "connected": hub.connected() });
    }
    Ok(Json(body).into_response())
}

/// The thread a path names, brought back into memory if it was evicted.
async fn known(api: &Api, ThreadPath(id): ThreadPath) -> Result<ThreadId, Problem> {
    if api.pump.load(id).await? {
        Ok(id)
    } else {
        Err(Problem::unknown_thread(&id.to_string()))
    }
}

/// The body, or the problem that refused it: 413 `too-large` naming the `limit` in bytes and the
/// `setting` that makes it, 400 `bad-body` when it cannot be read to its end.
pub(crate) fn body(
    body: Result<Bytes, BytesRejection>,
    limit: usize,
    setting: &str,
) -> Result<Bytes, Problem> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            return Problem::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too-large",
                format!("the body is over the limit of {limit} bytes ({setting})"),
            );
        }
        let mut cause: &dyn std::error::Error = &e;
        while let Some(next) = cause.source() {
            cause = next;
        }
        Problem::new(
            StatusCode::BAD_REQUEST,
            "bad-body",
            format!("the body cannot be read to its end: {cause}"),
        )
    })
}

/// The body of an API request (limited by `[server] max_body_bytes`).
fn api_body(api: &Api, b: Result<Bytes, BytesRejection>) -> Result<Bytes, Problem> {
    body(b, api.max_body, "`[server] max_body_bytes`")
}

/// The `201` answer; a post with a `traceparent` also leaves a span in its caller's trace.
fn accepted(receipt: &crate::Receipt, headers: &HeaderMap, route: &str) -> Response {
    let traceparent = headers.get("traceparent").and_then(|v| v.to_str().ok());
    crate::pump::remote::accepted(traceparent, route, receipt.thread());
    let body = serde_json::json!({ "thread": receipt.thread(), "ids": receipt.ids() });
    (StatusCode::CREATED, Json(body)).into_response()
}

/// `POST /threads`: an envelope (either dialect), or a bare payload routed by its root (or `?to=`).
pub(crate) async fn start(
    State(api): State<Api>,
    headers: HeaderMap,
    Params(q): Params<To>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let body = api_body(&api, body)?;
    let receipt = api
        .pump
        .receive(&body, None, q.to.as_deref())
        .await
        .map_err(|e| refused(&body, e))?;
    Ok(accepted(&receipt, &headers, "/threads"))
}

/// What a JSON body is told: the API takes XML, and what to post.
const TAKES_XML: &str = "; the API takes XML, not JSON: post a payload such as <say xmlns=\"urn:example:say:v1\">hello</say> with Content-Type: application/xml (its root and namespace route it; `?to=NAME` names a listener), or a whole envelope (docs/http-api.md)";

/// The problem of a body the pump refused; a body that looks like JSON (it opens with `{` or
/// `[`) and does not parse is told the API takes XML, with an example.
fn refused(body: &[u8], e: crate::pump::IngressError) -> Problem {
    let json = body
        .iter()
        .find(|b| !b.is_ascii_whitespace())
        .is_some_and(|b| matches!(b, b'{' | b'['));
    let mut problem = Problem::from(e);
    if json && problem.status_code == StatusCode::BAD_REQUEST.as_u16() {
        problem.detail.push_str(TAKES_XML);
    }
    problem
}

/// `POST /threads/{id}/messages`: a payload (or an envelope's payload) into an existing thread.
pub(crate) async fn post_message(
    State(api): State<Api>,
    headers: HeaderMap,
    id: ThreadPath,
    Params(q): Params<To>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let ThreadPath(thread) = id;
    let body = api_body(&api, body)?;
    // One door: the pump parses the bytes once, with its own limits; the URL's thread wins.
    let receipt = api
        .pump
        .receive(&body, Some(thread), q.to.as_deref())
        .await
        .map_err(|e| refused(&body, e))?;
    Ok(accepted(&receipt, &headers, "/threads/{id}/messages"))
}

/// `GET /threads[?state=…]`: the threads in memory with their live state, and, once the pump
/// has evicted any, the others as the store has them (an evicted open thread is `idle`).
pub(crate) async fn list(
    State(api): State<Api>,
    Params(q): Params<StateFilter>,
) -> Result<Response, Problem> {
    let state = match q.state.as_deref() {
        None => None,
        Some(s) => Some(
            s.parse::<ThreadState>()
                .map_err(|e| Problem::new(StatusCode::BAD_REQUEST, "bad-state", e.to_string()))?,
        ),
    };
    let mut threads = every_thread(&api.pump).await?;
    threads.retain(|t| state.is_none_or(|s| t.state == s));
    Ok(Json(threads).into_response())
}

/// The threads in memory with their live state, and, once the pump has evicted any, the
/// others as the store has them (sorted by path then), as `GET /threads` and MCP list them.
pub(crate) async fn every_thread(
    pump: &crate::PumpHandle,
) -> Result<Vec<crate::ThreadInfo>, HistoryError> {
    let mut threads = pump.threads();
    if pump.residency().evicted > 0 {
        let resident: std::collections::HashSet<_> = threads.iter().map(|t| t.id).collect();
        let stored = pump.store().threads(None).await?;
        threads.extend(stored.into_iter().filter(|t| !resident.contains(&t.id)));
        threads.sort_by(|a, b| a.path.cmp(&b.path));
    }
    Ok(threads)
}

/// `GET /threads/{id}`.
pub(crate) async fn thread(State(api): State<Api>, id: ThreadPath) -> Result<Response, Problem> {
    let id = known(&api, id).await?;
    Ok(Json(api.pump.thread(id)).into_response())
}

/// `GET /threads/{id}/history[?format=json|jsonl|xml]`: a JSON array, JSON lines, or XML.
pub(crate) async fn history(
    State(api): State<Api>,
    id: ThreadPath,
    Params(q): Params<Format>,
) -> Result<Response, Problem> {
    let id = known(&api, id).await?;
    let records = api.pump.history(id).await?;
    match q.format.as_deref().unwrap_or("json") {
        "json" => Ok(Json(records).into_response()),
        "jsonl" => Ok((
            [(header::CONTENT_TYPE, "application/jsonl")],
            export::to_jsonl(&records),
        )
            .into_response()),
        "xml" => Ok((
            [(header::CONTENT_TYPE, "application/xml")],
            export::to_xml(&records),
        )
            .into_response()),
        other => Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "bad-format",
            format!("format `{other}`: use json, jsonl or xml"),
        )),
    }
}

/// Query of `GET /threads/{id}/settled`.
#[derive(Debug, Deserialize)]
pub(crate) struct Wait {
    wait_ms: Option<u64>,
}

/// `GET /threads/{id}/settled[?wait_ms=N]`: waits up to `N` ms (0 without it, at most
/// [`MAX_WAIT_MS`](crate::host::mcp::server::MAX_WAIT_MS)) for the thread to settle — idle or
/// closed, with nothing left to deliver here or on another pump — then
/// `{"thread": …, "settled": true|false, "state": …}` (`false` at once when the server begins
/// to shut down). 400 `bad-wait` over the limit.
pub(crate) async fn settled(
    State(api): State<Api>,
    id: ThreadPath,
    Params(q): Params<Wait>,
) -> Result<Response, Problem> {
    let id = known(&api, id).await?;
    let wait = q.wait_ms.unwrap_or(0);
    let most = crate::host::mcp::server::MAX_WAIT_MS;
    if wait > most {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "bad-wait",
            format!("`wait_ms` {wait} is over the limit of {most}"),
        ));
    }
    let settle = tokio::time::timeout(std::time::Duration::from_millis(wait), api.pump.settle(id));
    // A shutdown answers at once, unsettled: a child on another pump may never come back here.
    let mut stopping = api.stopping.clone();
    let settled = tokio::select! {
        waited = settle => waited.is_ok(),
        Ok(_) = stopping.wait_for(|s| *s) => false,
    };
    let state = api.pump.thread(id).map(|t| t.state);
    Ok(
        Json(serde_json::json!({ "thread": id, "settled": settled, "state": state }))
            .into_response(),
    )
}

/// `GET /threads/{id}/answers`: what went out to the outside sender, as a JSON array of
/// envelopes in the dialect that started the thread (AgentServer clients get theirs).
pub(crate) async fn answers(State(api): State<Api>, id: ThreadPath) -> Result<Response, Problem> {
    let id = known(&api, id).await?;
    Ok(Json(api.pump.answers(id).await?).into_response())
}

/// `GET /threads/{id}/tree`.
pub(crate) async fn tree(State(api): State<Api>, id: ThreadPath) -> Result<Response, Problem> {
    let id = known(&api, id).await?;
    Ok(Json(api.pump.tree(id)).into_response())
}

/// `GET /threads/{id}/report`: the latest halting report.
pub(crate) async fn report(State(api): State<Api>, id: ThreadPath) -> Result<Response, Problem> {
    let id = known(&api, id).await?;
    let mut reports = api.pump.reports(id).await?;
    match reports.pop() {
        Some(report) => Ok(Json(report).into_response()),
        None => Err(Problem::new(
            StatusCode::NOT_FOUND,
            "no-report",
            format!("thread {id} has not halted"),
        )),
    }
}

/// `GET /threads/{id}/budget`: the governor's live budget lines of the thread, by budget name
/// (`{"max-turns": {"limit": "40", "spent": "3", "reserved": "0", "remaining": "37"}, …}`).
pub(crate) async fn budget(State(api): State<Api>, id: ThreadPath) -> Result<Response, Problem> {
    let id = known(&api, id).await?;
    let lines = api
        .pump
        .budget(id)
        .ok_or_else(|| Problem::unknown_thread(&id.to_string()))?;
    Ok(Json(lines).into_response())
}

/// `GET /threads/{id}/reports`: every halting report, oldest first (`[]` if it never halted).
pub(crate) async fn reports(State(api): State<Api>, id: ThreadPath) -> Result<Response, Problem> {
    let id = known(&api, id).await?;
    Ok(Json(api.pump.reports(id).await?).into_response())
}

/// `POST /threads/{id}/stop`.
pub(crate) async fn stop(State(api): State<Api>, id: ThreadPath) -> Result<Response, Problem> {
    let id = known(&api, id).await?;
    api.pump
        .stop(id)
        .await
        .map_err(|e| Problem::new(StatusCode::CONFLICT, "wrong-state", e.to_string()))?;
    Ok(StatusCode::ACCEPTED.into_response())
}

/// `POST /threads/{id}/resume` with a JSON budget to add (`{"turns": 10}`; keys as in
/// `[governor.budget]`: `tool_calls`, `wall_clock_ms`).
pub(crate) async fn resume(
    State(api): State<Api>,
    id: ThreadPath,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let id = known(&api, id).await?;
    let body = api_body(&api, body)?;
    let extra: BudgetBody = json_body(&body, "POST /threads/{id}/resume", "bad-budget")?;
    api.pump
        .resume(id, &Budget::from(extra))
        .await
        .map_err(|e| Problem::new(StatusCode::CONFLICT, "wrong-state", e.to_string()))?;
    Ok(StatusCode::ACCEPTED.into_response())
}

/// `POST /history/prune` with `{"before": "2026-10-01"}` or `{"keep_days": 30}`: removes
/// finished threads' records older than the cut, as `agentpump history prune` does, while the
/// pump runs (the store runs it between two group commits). 200 with what was removed and the
/// anchors left; 400 `bad-cut` (`unknown-key` for a key it does not take); 409 `chain-broken` when what would go does not verify; 501
/// `unsupported` on a pump whose store does not prune (in memory).
pub(crate) async fn prune(
    State(api): State<Api>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let body = api_body(&api, body)?;
    let bad = |detail: String| Problem::new(StatusCode::BAD_REQUEST, "bad-cut", detail);
    let cut: PruneCut = json_body(&body, "POST /history/prune", "bad-cut")?;
    let before_us = match (cut.before, cut.keep_days) {
        (Some(before), None) => export::parse_rfc3339(&before).map_err(|e| bad(e.to_string()))?,
        (None, Some(days)) => {
            crate::host::retention::keep_days(crate::host::retention::now_us(), days)
        }
        _ => {
            return Err(bad(
                "give exactly one of `before` (a UTC date or time) and `keep_days`".to_owned(),
            ));
        }
    };
    let pruned = api
        .pump
        .store()
        .prune(before_us, None)
        .await
        .map_err(|e| match e {
            HistoryError::Chain(_) | HistoryError::Anchor(_) => {
                Problem::new(StatusCode::CONFLICT, "chain-broken", e.to_string())
            }
            HistoryError::Unsupported(_) => {
                Problem::new(StatusCode::NOT_IMPLEMENTED, "unsupported", e.to_string())
            }
            other => Problem::from(other),
        })?;
    Ok(Json(pruned).into_response())
}

/// Anything else.
pub(crate) async fn method_not_allowed() -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method-not-allowed",
        "this route does not take that method; see docs/http-api.md",
    )
}

pub(crate) async fn not_found(uri: axum::http::Uri) -> Problem {
    Problem::new(
        StatusCode::NOT_FOUND,
        "unknown-url",
        format!(
            "no such URL `{}`; the routes are in docs/http-api.md",
            uri.path()
        ),
    )
}

/// `/mcp`: the host as an MCP server over Streamable HTTP (`docs/tools.md`).
pub(crate) fn mcp(
    api: &Api,
) -> rmcp::transport::StreamableHttpService<
    crate::host::mcp::server::McpServer,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    let server = crate::host::mcp::server::McpServer::new(api.pump.clone(), api.listeners.clone());
    // Sessions hold an event stream open (rmcp's GET /mcp): they end when the server begins
    // to shut down, not at its time limit. A router served without a shutdown has no sender.
    let sessions = tokio_util::sync::CancellationToken::new();
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        let (mut stopping, ending) = (api.stopping.clone(), sessions.clone());
        runtime.spawn(async move {
            if stopping.wait_for(|s| *s).await.is_ok() {
                ending.cancel();
            }
        });
    }
    crate::host::mcp::server::http_service(server, api.max_body, sessions)
}

/// `GET /tasks`: the latest ledger line of each task (seed 004), read from the ledger's end.
pub(crate) async fn tasks(State(api): State<Api>) -> Result<Response, Problem> {
    let Some(layout) = api.tasks.clone() else {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "no-tasks",
            "this organism has no task ledger".to_owned(),
        ));
    };
    let read = tokio::task::spawn_blocking(move || {
        let ids: Vec<String> = crate::tasks::Task::load_dir(layout.tasks_dir())
            .map(|tasks| tasks.into_iter().map(|(_, t)| t.id).collect())
            .unwrap_or_default();
        crate::tasks::latest(layout.ledger(), &ids)
    })
    .await
    .map_err(|e| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "tasks", e.to_string()))?
    .map_err(|e| Problem::new(StatusCode::INTERNAL_SERVER_ERROR, "tasks", e.to_string()))?;
    let lines: Vec<_> = read.lines.into_values().collect();
    Ok(Json(lines).into_response())
}
