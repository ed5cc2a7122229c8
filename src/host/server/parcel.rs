//! `POST /threads/{id}/parcel`: a parcel from the pump of another partition of the organism
//! (`pump/spread.rs`): a child to open, a child's result, a child to stop. Behind the same
//! token as every route: only hosts of the organism send it.

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::thread_path::ThreadPath;
use super::{Api, Problem};
use crate::pump::spread::{Parcel, Undelivered};

/// Takes the parcel in the body (JSON) for thread `id`: `204` once its effect is durable (or
/// was already); `400 bad-parcel` for a body that is not a parcel for `id`; `422
/// parcel-refused` for one this pump will never take; `503 parcel-later` for one to send again.
pub(crate) async fn take(
    State(api): State<Api>,
    ThreadPath(id): ThreadPath,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let body = super::routes::body(body, api.max_body, "`[server] max_body_bytes`")?;
    let bad = |detail: String| Problem::new(StatusCode::BAD_REQUEST, "bad-parcel", detail);
    let parcel: Parcel =
        serde_json::from_slice(&body).map_err(|e| bad(format!("the body is not a parcel: {e}")))?;
    if parcel.thread() != id {
        return Err(bad(format!(
            "the parcel is for thread {}, not {id}",
            parcel.thread()
        )));
    }
    match api.pump.take_parcel(parcel).await {
        Ok(()) => Ok(StatusCode::NO_CONTENT.into_response()),
        Err(Undelivered::Refused(why)) => Err(Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "parcel-refused",
            why,
        )),
        Err(Undelivered::Later(why)) => Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "parcel-later",
            why,
        )),
    }
}
