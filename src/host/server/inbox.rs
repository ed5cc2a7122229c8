//! `GET /inbox` and `POST /inbox/{id}`: a person's open requests (questions and approvals),
//! oldest first, and the answer to one. A second answer is 409 `already-answered` naming who
//! answered and when; an answer after the request expired (its default applied) is 410
//! `expired`; an answer that does not fit the request is 422 `invalid-answer`
//! (docs/decisions/2026-11-26-inbox-http-cli.md).

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::params::Params;
use super::strict::json_body;
use super::thread_path::canonical;
use super::{Api, Problem};
use crate::history::Record;
use crate::pump::InboxError;
use crate::pump::inbox::record;
use crate::pump::inbox::{AnswerRecord, Decision, Request};
use crate::{InboxFilter, MessageId, Reply};

/// Query of `GET /inbox`.
#[derive(Debug, Deserialize)]
pub(crate) struct Filter {
    thread: Option<String>,
    listener: Option<String>,
}

/// Body of `POST /inbox/{id}`: `decision` (`approve`, `deny`, `edit`, `answer`) with what it
/// takes (`reason`, `arguments`, `value`), and `by`, who answers (default `api`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerBody {
    /// `approve`, `deny`, `edit` or `answer`.
    pub decision: Option<String>,
    /// Why (`deny`).
    pub reason: Option<String>,
    /// The arguments the tool gets instead (`edit`): a JSON object.
    pub arguments: Option<serde_json::Value>,
    /// The answer (`answer`): a string as it is, any other JSON value as its JSON text.
    pub value: Option<serde_json::Value>,
    /// Who answers, as recorded.
    pub by: Option<String>,
}

const ROUTE: &str = "POST /inbox/{id}";

impl AnswerBody {
    /// The decision this body states, or 400 `bad-answer` naming what is missing or extra.
    fn decision(self) -> Result<Decision, String> {
        let name = self.decision.as_deref().ok_or(
            "give `decision`: approve, deny (with `reason`), edit (with `arguments`) or answer (with `value`)",
        )?;
        let extra = |key: &str, given: bool| -> Result<(), String> {
            if given {
                return Err(format!("`{key}` does not go with decision `{name}`"));
            }
            Ok(())
        };
        let decision = match name {
            "approve" => Decision::Approve,
            "deny" => Decision::Deny {
                reason: self.reason.clone().unwrap_or_default(),
            },
            "edit" => match self.arguments.clone() {
                Some(arguments @ serde_json::Value::Object(_)) => Decision::Edit { arguments },
                Some(_) => return Err("`arguments` of an edit is a JSON object".to_owned()),
                None => return Err("decision `edit` needs `arguments` (a JSON object)".to_owned()),
            },
            "answer" => match self.value.clone() {
                Some(serde_json::Value::String(value)) => Decision::Answer { value },
                Some(other) => Decision::Answer {
                    value: other.to_string(),
                },
                None => return Err("decision `answer` needs `value`".to_owned()),
            },
            other => {
                return Err(format!(
                    "unknown decision `{other}`: approve, deny, edit or answer"
                ));
            }
        };
        extra("reason", name != "deny" && self.reason.is_some())?;
        extra("arguments", name != "edit" && self.arguments.is_some())?;
        extra("value", name != "answer" && self.value.is_some())?;
        Ok(decision)
    }
}

/// `GET /inbox[?thread=…&listener=…]`: the open requests, oldest first.
pub(crate) async fn list(
    State(api): State<Api>,
    Params(q): Params<Filter>,
) -> Result<Response, Problem> {
    let thread = match q.thread.as_deref() {
        Some(text) => Some(canonical(text, "/inbox")?),
        None => None,
    };
    let filter = InboxFilter {
        thread,
        listener: q.listener,
    };
    let open = api.pump.inbox(&filter).await.map_err(problem)?;
    Ok(Json(open).into_response())
}

/// `POST /inbox/{id}` with an [`AnswerBody`]: 200 with the answer recorded.
pub(crate) async fn answer(
    State(api): State<Api>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let id: MessageId = id.parse().map_err(|_| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "malformed-request-id",
            format!("`{id}` is not an inbox request id (a UUID)"),
        )
    })?;
    let body = super::routes::body(body, api.max_body, "`[server] max_body_bytes`")?;
    let body: AnswerBody = json_body(&body, ROUTE, "bad-answer")?;
    let by = body.by.clone().unwrap_or_else(|| "api".to_owned());
    let decision = body
        .decision()
        .map_err(|why| Problem::new(StatusCode::BAD_REQUEST, "bad-answer", why))?;
    let recorded = api
        .pump
        .answer(id, Reply { decision, by })
        .await
        .map_err(problem)?;
    Ok(Json(recorded).into_response())
}

/// The problem for an inbox error: 404, 409 (naming who and when), 410, 422, or 503.
pub(super) fn problem(e: InboxError) -> Problem {
    let detail = e.to_string();
    match e {
        InboxError::NotFound(_) => Problem::new(StatusCode::NOT_FOUND, "unknown-request", detail),
        InboxError::AlreadyAnswered {
            id,
            decision: "timeout",
            at_ms,
            ..
        } => Problem::new(
            StatusCode::GONE,
            "expired",
            format!(
                "inbox request {id} expired at {}; its default applied",
                crate::pump::inbox::utc(at_ms)
            ),
        ),
        InboxError::AlreadyAnswered { .. } => {
            Problem::new(StatusCode::CONFLICT, "already-answered", detail)
        }
        InboxError::Expired { .. } => Problem::new(StatusCode::GONE, "expired", detail),
        InboxError::Invalid { .. } => {
            Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid-answer", detail)
        }
        InboxError::History(e) => Problem::from(e),
    }
}

/// The data of the `inbox` event that follows a request or answer record on a thread's event
/// stream: `{"event": "request", "id", "thread", "request": {…}}` or `{"event": "answer",
/// "thread", "answer": {…}}`; `None` for any other record.
pub(crate) fn event(record: &Record) -> Option<serde_json::Value> {
    if let Some(request) = record::read::<Request>("request", record) {
        return Some(serde_json::json!({
            "event": "request", "id": record.id, "thread": record.thread, "request": request,
        }));
    }
    let answer = record::read::<AnswerRecord>("answer", record)?;
    Some(serde_json::json!({ "event": "answer", "thread": record.thread, "answer": answer }))
}
