//! [`ThreadPath`]: the thread a URL names, in one spelling only. A UUID can be written many
//! ways (upper case, without hyphens, braced, `urn:uuid:`); a thread has one URL, with its id
//! as the API writes it (lower case, hyphenated), and every other spelling is refused naming
//! that one (docs/decisions/2026-11-26-canonical-thread-urls.md).

use axum::extract::{FromRequestParts, Path};
use axum::http::StatusCode;
use axum::http::request::Parts;

use super::Problem;
use crate::ThreadId;

/// The `{id}` of a route, read as a thread id written canonically.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ThreadPath(pub ThreadId);

impl<S: Send + Sync> FromRequestParts<S> for ThreadPath {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        let Path(text) = Path::<String>::from_request_parts(parts, state)
            .await
            .map_err(|e| {
                Problem::new(
                    StatusCode::BAD_REQUEST,
                    "malformed-thread-id",
                    format!("the thread in the URL cannot be read: {}", e.body_text()),
                )
            })?;
        canonical(&text, parts.uri.path()).map(Self)
    }
}

/// The thread id `text`, if it is one written canonically; `path` is the URL it was found in.
pub(crate) fn canonical(text: &str, path: &str) -> Result<ThreadId, Problem> {
    let id: ThreadId = text.parse().map_err(|_| {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "malformed-thread-id",
            format!("`{text}` is not a thread id (a UUID)"),
        )
    })?;
    let written = id.to_string();
    if written == text {
        return Ok(id);
    }
    let url = if path.contains(text) {
        format!(
            "; this thread's URL is `{}`",
            path.replacen(text, &written, 1)
        )
    } else {
        String::new()
    };
    Err(Problem::new(
        StatusCode::BAD_REQUEST,
        "non-canonical-thread-id",
        format!(
            "thread id `{text}` is not written as the API writes it: `{written}` (lower case, hyphenated){url}"
        ),
    ))
}
