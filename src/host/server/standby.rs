//! A standby host's HTTP API: while another host holds the history stream's lease (the
//! writer), every request is forwarded to the writer at the address it wrote in the lease, and
//! its answer comes back as it is — so a client, the CLI and the viewer can use any host. With
//! no writer known yet, `503 standby` (problem JSON, `Retry-After: 1`).

use std::future::Future;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::problem::Problem;

/// The header a forwarded answer carries: the writer it came from.
pub const FORWARDED_FROM: &str = "agentpump-forwarded-from";

/// Headers that belong to one connection, never forwarded either way.
const HOP_BY_HOP: [HeaderName; 5] = [
    header::CONNECTION,
    header::HOST,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::CONTENT_LENGTH,
];

#[derive(Clone)]
struct Standby {
    writer: watch::Receiver<Option<String>>,
    client: reqwest::Client,
    max_body: usize,
}

/// Serves the standby API on `listener` until `shutdown` completes (then lets requests in
/// flight finish): every request forwarded to the address in `writer`.
///
/// # Errors
///
/// The server fails.
pub async fn serve_standby(
    listener: TcpListener,
    writer: watch::Receiver<Option<String>>,
    max_body: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    crate::listeners::llm::install_tls_provider();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(std::io::Error::other)?;
    let state = Standby {
        writer,
        client,
        max_body,
    };
    let app = Router::new().fallback(forward).with_state(state);
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
}

async fn forward(State(standby): State<Standby>, request: Request) -> Response {
    let Some(writer) = standby.writer.borrow().clone() else {
        let problem = Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "standby",
            "this host is a standby and no writer of the history stream is known yet; try again",
        );
        let mut answer = problem.into_response();
        answer
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        return answer;
    };
    let (parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", axum::http::uri::PathAndQuery::as_str);
    let url = format!("{}{path}", writer.trim_end_matches('/'));
    let body = match axum::body::to_bytes(body, standby.max_body).await {
        Ok(body) => body,
        Err(_) => {
            let detail = format!(
                "the body is over this host's limit of {} bytes (max_body_bytes)",
                standby.max_body
            );
            return Problem::new(StatusCode::PAYLOAD_TOO_LARGE, "too-large", detail)
                .into_response();
        }
    };
    let sent = standby
        .client
        .request(parts.method, &url)
        .headers(end_to_end(&parts.headers))
        .body(body)
        .send()
        .await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(e) => {
            let detail = format!("the writer at {writer} did not answer: {e}");
            return Problem::new(StatusCode::BAD_GATEWAY, "writer-unreachable", detail)
                .into_response();
        }
    };
    let mut response = Response::builder().status(answer.status());
    if let Some(headers) = response.headers_mut() {
        headers.extend(end_to_end(answer.headers()));
        if let Ok(from) = HeaderValue::from_str(&writer) {
            headers.insert(FORWARDED_FROM, from);
        }
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap_or_else(|e| {
            Problem::new(StatusCode::BAD_GATEWAY, "writer-unreachable", e.to_string())
                .into_response()
        })
}

/// `headers` without those of one connection.
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let mut out = headers.clone();
    for name in &HOP_BY_HOP {
        out.remove(name);
    }
    out
}
