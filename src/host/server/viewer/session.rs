//! `POST /session`: the page hands over the token once and gets it back as a cookie the page's
//! script cannot read (HttpOnly) and no other site can make the browser send (SameSite=Strict).
//! `DELETE /session` clears it.

use axum::Json;
use axum::extract::State;
use axum::extract::rejection::JsonRejection;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::Viewer;
use super::auth::{COOKIE, constant_time_eq};
use crate::host::server::Problem;

/// Body of `POST /session`.
#[derive(Debug, Deserialize)]
pub(crate) struct Login {
    token: String,
}

/// `POST /session` with `{"token": "…"}`: 204 and the cookie, or 401 problem JSON.
pub(crate) async fn open(
    State(viewer): State<Viewer>,
    body: Result<Json<Login>, JsonRejection>,
) -> Result<Response, Problem> {
    let Json(login) = body.map_err(|e| Problem::new(e.status(), "bad-body", e.body_text()))?;
    let token = login.token.trim();
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
