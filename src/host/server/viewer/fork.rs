//! `POST /threads/{id}/fork`: replay from a record (issue 33). The body names the record
//! (`at`, its seq), the `mode` (`context`, the default, or `first-message`) and optionally
//! another `listener` and a `budget` (keys as in `[governor.budget]`); the answer is 201 with
//! the new thread. With `payload`, the message delivered again is that text instead of the
//! record's (an edit, checked like a post: 400 `invalid-payload` naming what is wrong, 422
//! `refused` for a root the listener does not take); the fork decision names its SHA-256. The viewer's "Replay from here" form posts it with its cookie; a read-only
//! viewer (`agentpump view`) refuses it with 405 `read-only`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::super::bodies::BudgetBody;
use super::super::strict::json_body;
use super::super::thread_path::ThreadPath;
use super::super::{Api, Problem};
use crate::governor::{Budget, ForkMode};
use crate::pump::{ForkError, ForkOptions};

const ROUTE: &str = "POST /threads/{id}/fork";

/// Body of `POST /threads/{id}/fork`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForkBody {
    /// The seq of the message record to replay from.
    at: Option<u64>,
    /// `context` (default) or `first-message`.
    mode: Option<ForkMode>,
    /// The listener to deliver to (default: the record's).
    listener: Option<String>,
    /// The fork's limits (unset ones: the policy's).
    budget: Option<BudgetBody>,
    /// The message to deliver instead of the record's (edited).
    payload: Option<String>,
}

/// `POST /threads/{id}/fork`: 201 `{"thread": NEW, "forked_from": ID, "at": SEQ}`.
pub(crate) async fn fork(
    State(api): State<Api>,
    ThreadPath(id): ThreadPath,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let body = super::super::routes::body(body, api.max_body, "`[server] max_body_bytes`")?;
    let asked: ForkBody = json_body(&body, ROUTE, "bad-fork")?;
    let at = asked.at.ok_or_else(|| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "bad-fork",
            "give `at`, the seq of the message record to replay from",
        )
    })?;
    let options = ForkOptions {
        mode: asked.mode.unwrap_or_default(),
        listener: asked.listener,
        budget: asked.budget.map(Budget::from),
        payload: asked.payload,
    };
    let thread = api.pump.fork(id, at, options).await.map_err(problem)?;
    let answer = serde_json::json!({ "thread": thread, "forked_from": id, "at": at });
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// The problem a [`ForkError`] is.
fn problem(e: ForkError) -> Problem {
    let e = match e {
        ForkError::History(h) => return Problem::from(h),
        e => e,
    };
    let (status, code) = match &e {
        ForkError::UnknownThread(id) => return Problem::unknown_thread(&id.to_string()),
        ForkError::UnknownSeq { .. } => (StatusCode::NOT_FOUND, "unknown-record"),
        ForkError::NotRedeliverable { .. } => {
            (StatusCode::UNPROCESSABLE_ENTITY, "not-redeliverable")
        }
        ForkError::InvalidPayload(_) => (StatusCode::BAD_REQUEST, "invalid-payload"),
        ForkError::UnknownListener(_) => (StatusCode::UNPROCESSABLE_ENTITY, "unknown-listener"),
        ForkError::Refused { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "refused"),
        ForkError::ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, "shutting-down"),
        ForkError::History(_) => unreachable!("answered above"),
    };
    Problem::new(status, code, e.to_string())
}

/// `POST /threads/{id}/fork` on a read-only viewer: 405 `read-only`.
pub(crate) async fn read_only() -> Problem {
    Problem::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "read-only",
        "this viewer reads a history file (agentpump view) and starts no thread; replay from a record on the running host (agentpump run)",
    )
}
