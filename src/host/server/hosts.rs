//! [`AllowedHosts`]: the `Host` names `/mcp` answers (DNS-rebinding protection, as the MCP
//! specification asks of Streamable HTTP servers): the loopback names, the address the host is
//! bound to, and `[server] allowed_hosts`. A request naming another host is refused with a
//! problem naming the host and the key that would allow it.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::uri::Authority;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Problem;

/// The names every host answers on `/mcp`.
pub const LOOPBACK: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// The hosts `/mcp` answers: `name` (any port) or `name:port` each.
#[derive(Debug, Clone)]
pub struct AllowedHosts(Arc<[String]>);

impl Default for AllowedHosts {
    fn default() -> Self {
        Self::new(&[])
    }
}

impl AllowedHosts {
    /// The loopback names and `more`.
    pub fn new(more: &[String]) -> Self {
        let all: Vec<String> = LOOPBACK
            .iter()
            .map(|h| (*h).to_owned())
            .chain(more.iter().cloned())
            .collect();
        Self(all.into())
    }

    /// Whether `authority` (a `Host` header: `name` or `name:port`) is allowed.
    pub fn allows(&self, authority: &str) -> bool {
        let Some((host, port)) = split(authority) else {
            return false;
        };
        self.0
            .iter()
            .filter_map(|a| split(a))
            .any(|(h, p)| h == host && p.is_none_or(|p| Some(p) == port))
    }

    fn listed(&self) -> String {
        self.0.join(", ")
    }
}

/// A host's name (lowercase, without IPv6 brackets) and port; an IPv6 address may be written
/// without brackets.
fn split(authority: &str) -> Option<(String, Option<u16>)> {
    if let Ok(ip) = authority.parse::<std::net::Ipv6Addr>() {
        return Some((ip.to_string(), None));
    }
    let a = Authority::try_from(authority).ok()?;
    let host = a.host().trim_start_matches('[').trim_end_matches(']');
    Some((host.to_ascii_lowercase(), a.port_u16()))
}

/// Middleware on `/mcp`: refuses a request whose `Host` (or, without one, the URI's authority)
/// is not allowed, 403 `host-not-allowed`; one with neither, 400 `missing-host`; one whose
/// `Origin` names a host not allowed (or `null`), 403 `origin-not-allowed`.
pub(crate) async fn check(
    State(allowed): State<AllowedHosts>,
    request: Request,
    next: Next,
) -> Response {
    let named = request
        .headers()
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| request.uri().authority().map(ToString::to_string));
    let Some(host) = named else {
        let detail =
            "the request names no host (no Host header): /mcp answers only the hosts it is allowed";
        return Problem::new(StatusCode::BAD_REQUEST, "missing-host", detail).into_response();
    };
    if !allowed.allows(&host) {
        let detail = format!(
            "host `{host}` is not allowed on /mcp (DNS-rebinding protection); allowed: {}; add it to [server] allowed_hosts",
            allowed.listed()
        );
        return Problem::new(StatusCode::FORBIDDEN, "host-not-allowed", detail).into_response();
    }
    // A browser names the page that sends: its host must be allowed too (MCP 2025-11-25,
    // "servers MUST validate the Origin header"); clients that are not browsers send none.
    let origin = request
        .headers()
        .get(axum::http::header::ORIGIN)
        .map(|o| String::from_utf8_lossy(o.as_bytes()).into_owned());
    if let Some(origin) = origin {
        let authority = origin
            .split_once("://")
            .map(|(_, rest)| rest.trim_end_matches('/'));
        if !authority.is_some_and(|a| allowed.allows(a)) {
            let detail = format!(
                "origin `{origin}` is not allowed on /mcp (a page of another site); allowed hosts: {}; add its host to [server] allowed_hosts",
                allowed.listed()
            );
            return Problem::new(StatusCode::FORBIDDEN, "origin-not-allowed", detail)
                .into_response();
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_any_port_and_names_with_a_port_only_that_port() {
        let allowed = AllowedHosts::new(&[
            "Agents.Example.com".into(),
            "10.0.0.5:7878".into(),
            "fd00::5".into(),
        ]);
        for (host, ok) in [
            ("localhost:7878", true),
            ("[::1]:80", true),
            ("agents.example.com", true),
            ("AGENTS.example.com:443", true),
            ("10.0.0.5:7878", true),
            ("10.0.0.5:80", false),
            ("[fd00::5]:7878", true),
            ("evil.example", false),
            ("not a host", false),
        ] {
            assert_eq!(allowed.allows(host), ok, "{host}");
        }
    }
}
