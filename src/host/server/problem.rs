//! [`Problem`]: error answers as `application/problem+json`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::IngressError;
use crate::history::HistoryError;

/// What every problem `type` URI starts with; the rest is the problem's `code`
/// (`urn:agentpump:problem:unknown-thread`). The URIs are names, stable across versions, not
/// addresses to fetch: docs/http-api.md lists them.
pub const PROBLEM_TYPE: &str = "urn:agentpump:problem:";

/// An error answer (RFC 9457 problem details), with agentpump's wire code. Serialized with
/// its `type`: [`PROBLEM_TYPE`] followed by the code.
#[derive(Debug, Clone)]
pub struct Problem {
    status: StatusCode,
    /// A short summary of the problem type.
    pub title: String,
    /// The HTTP status.
    pub status_code: u16,
    /// What exactly went wrong.
    pub detail: String,
    /// agentpump's code (`malformed-xml`, `unknown-thread`, `unauthorized`, …).
    pub code: String,
    /// The pump's answer as an envelope, when the pump recorded one.
    pub answer: Option<String>,
}

impl Serialize for Problem {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut s = serializer.serialize_struct("Problem", 6)?;
        s.serialize_field("type", &format!("{PROBLEM_TYPE}{}", self.code))?;
        s.serialize_field("title", &self.title)?;
        s.serialize_field("status", &self.status_code)?;
        s.serialize_field("detail", &self.detail)?;
        s.serialize_field("code", &self.code)?;
        if let Some(answer) = &self.answer {
            s.serialize_field("answer", answer)?;
        }
        s.end()
    }
}

impl Problem {
    /// A problem with `status`, `code` and `detail`.
    pub fn new(status: StatusCode, code: &str, detail: impl Into<String>) -> Self {
        Self {
            status,
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status_code: status.as_u16(),
            detail: detail.into(),
            code: code.to_owned(),
            answer: None,
        }
    }

    /// 404 for a thread that does not exist.
    pub fn unknown_thread(id: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown-thread",
            format!("no thread {id}"),
        )
    }
}

impl From<IngressError> for Problem {
    fn from(e: IngressError) -> Self {
        let status = match e.code() {
            "unknown-thread" => StatusCode::NOT_FOUND,
            "thread-closed" => StatusCode::CONFLICT,
            "queue-full" | "shutting-down" | "history-unavailable" => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            "peer-not-allowed" | "no-route" | "unknown-root" | "reserved-namespace" => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            _ => StatusCode::BAD_REQUEST,
        };
        let mut problem = Self::new(status, e.code(), e.to_string());
        problem.answer = e.recorded_in().map(|_| e.to_xml());
        problem
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = serde_json::to_string(&self).expect("a problem serializes");
        let mut response = (self.status, body).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        // A host that knows no writer yet is worth asking again shortly (docs/http-api.md).
        if self.code == "standby" {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        response
    }
}

impl From<HistoryError> for Problem {
    /// The history store cannot be read: 503 `history-unavailable`; a store that does not do
    /// what was asked (keep per-delivery marks): 501 `unsupported`.
    fn from(e: HistoryError) -> Self {
        let (status, code) = match e {
            HistoryError::Unsupported(_) => (StatusCode::NOT_IMPLEMENTED, "unsupported"),
            _ => (StatusCode::SERVICE_UNAVAILABLE, "history-unavailable"),
        };
        Self::new(status, code, e.to_string())
    }
}
