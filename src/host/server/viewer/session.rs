//! `POST /session`: the page hands over the token once and gets it back as a cookie the page's
//! script cannot read (HttpOnly) and no other site can make the browser send (SameSite=Strict).
//! `DELETE /session` clears it.

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::Viewer;
use super::auth::{COOKIE, constant_time_eq};
use crate::host::server::Problem;
use crate::host::server::routes;
use crate::host::server::strict::json_body;

/// Body of `POST /session`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Login {
    token: String,
}

/// `POST /session` with `{"token": "…"}`: 204 and the cookie, or 401 problem JSON.
pub(crate) async fn open(
    State(viewer): State<Viewer>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Problem> {
    let body = routes::body(body, super::MAX_BODY, "the sign-in's limit")?;
    let login: Login = json_body(&body, "POST /session", "bad-body")?;
    let token = login.token.trim();
    if token.is_empty() {
        return Err(Problem::new(
            StatusCode::BAD_REQUEST,
            "bad-body",
            "POST /session takes {\"token\": \"…\"}: no token given",
        ));
    }
    if !constant_time_eq(token.as_bytes(), viewer.token.as_bytes()) {
        tracing::warn!("viewer sign-in with a wrong token");
        return Err(Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "wrong token",
        ));
    }
    let value = cookie_safe(token).ok_or_else(|| {
        Problem::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "token-not-cookie-safe",
            "the token has characters a cookie cannot hold (space, `;`, `,`, quotes, non-ASCII); use the bearer header",
        )
    })?;
    let cookie = format!("{COOKIE}={value}; HttpOnly; SameSite=Strict; Path=/");
    Ok(with_cookie(&cookie))
}

/// `DELETE /session`: expires the cookie.
pub(crate) async fn close() -> Response {
    with_cookie(&format!(
        "{COOKIE}=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0"
    ))
}

fn with_cookie(cookie: &str) -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let value = HeaderValue::from_str(cookie).expect("cookie-safe characters only");
    response.headers_mut().insert(header::SET_COOKIE, value);
    response
}

/// `token` if every character may stand in a cookie value (RFC 6265 cookie-octet).
fn cookie_safe(token: &str) -> Option<&str> {
    token
        .bytes()
        .all(|b| b.is_ascii_graphic() && !matches!(b, b'"' | b',' | b';' | b'\\'))
        .then_some(token)
}
