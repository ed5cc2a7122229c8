//! The bearer token: loaded from an environment variable or a file, generated on first start
//! (readable only by its owner), and required on every request.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::Problem;

/// Why no token could be had.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TokenError(String);

/// The token from `env` (if set and non-empty), else from `file`, creating the file with a fresh
/// random token (mode 0600) when it does not exist.
///
/// # Errors
///
/// The file cannot be read or written, or holds no token.
pub fn load_or_create_token(env: Option<&str>, file: &Path) -> Result<String, TokenError> {
    if let Some(token) = env
        .and_then(|name| std::env::var(name).ok())
        .filter(|t| !t.trim().is_empty())
    {
        return Ok(token.trim().to_owned());
    }
    match std::fs::read_to_string(file) {
        Ok(text) if !text.trim().is_empty() => return Ok(text.trim().to_owned()),
        Ok(_) => {
            return Err(TokenError(format!(
                "{}: the token file is empty",
                file.display()
            )));
        }
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(TokenError(format!("{}: {e}", file.display())));
        }
        Err(_) => {}
    }
    let token = format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    );
    // Written in full under a private name, then linked into place: a host starting at the same
    // moment either wins the link or reads the winner's complete token, never half a file.
    let staged = file.with_extension(format!("tmp-{}", uuid::Uuid::new_v4().simple()));
    let placed = write_private(&staged, &token).and_then(|()| std::fs::hard_link(&staged, file));
    let _ = std::fs::remove_file(&staged);
    match placed {
        Ok(()) => {
            tracing::info!(file = %file.display(), "generated a bearer token");
            Ok(token)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => load_or_create_token(None, file),
        Err(e) => Err(TokenError(format!("{}: {e}", file.display()))),
    }
}

#[cfg(unix)]
fn write_private(file: &Path, token: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(file)?;
    writeln!(f, "{token}")?;
    f.sync_all()
}

#[cfg(not(unix))]
fn write_private(file: &Path, token: &str) -> std::io::Result<()> {
    std::fs::write(file, format!("{token}\n"))
}

/// The cookie the viewer page exchanges the token for (see `POST /session`).
pub(crate) const COOKIE: &str = "agentpump_token";

/// Refuses a request that carries neither `Authorization: Bearer <token>` (the scheme in any
/// case) nor the viewer's session cookie holding it — before anything is read or recorded —
/// with `WWW-Authenticate: Bearer` (RFC 9110 §11.6.1, RFC 6750 §3). `/.well-known/` is
/// public, as discovery needs: no route answers there, so an OAuth client's discovery
/// (`/.well-known/oauth-protected-resource`, RFC 9728) gets `404`, not an auth error.
pub(crate) async fn require_token(
    State(token): State<Arc<str>>,
    request: Request,
    next: Next,
) -> Response {
    if request.uri().path().starts_with("/.well-known/") {
        return next.run(request).await;
    }
    let sent = request.headers().contains_key(header::AUTHORIZATION);
    match check(request.headers(), &token) {
        Ok(()) => next.run(request).await,
        Err(problem) => challenged(problem, sent),
    }
}

/// A 401 with the scheme the client should use (`error="invalid_token"` when it `sent` one).
fn challenged(problem: Problem, sent: bool) -> Response {
    let challenge = if sent {
        HeaderValue::from_static(r#"Bearer realm="agentpump", error="invalid_token""#)
    } else {
        HeaderValue::from_static(r#"Bearer realm="agentpump""#)
    };
    let mut answer = problem.into_response();
    answer
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, challenge);
    answer
}

/// Whether `headers` carry `token` as a bearer token or in the session cookie.
pub(crate) fn check(headers: &HeaderMap, token: &str) -> Result<(), Problem> {
    let authorization = headers.get(header::AUTHORIZATION);
    let bearer = authorization.and_then(|v| bearer(v.as_bytes()));
    let given = bearer.or_else(|| cookie(headers));
    let refuse = |detail: String| {
        Err(Problem::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            detail,
        ))
    };
    match given {
        Some(given) if constant_time_eq(given.as_bytes(), token.as_bytes()) => Ok(()),
        Some(_) if bearer.is_some() => refuse("wrong bearer token".to_owned()),
        Some(_) => refuse("the session cookie holds a wrong token: sign in again".to_owned()),
        None => match authorization {
            Some(value) => refuse(format!(
                "the Authorization header `{}` is not `Bearer <token>`; send Authorization: Bearer <token>",
                scheme(value.as_bytes())
            )),
            None => refuse("send Authorization: Bearer <token>".to_owned()),
        },
    }
}

/// The token of an `Authorization` value `Bearer <token>`: the scheme in any case (auth schemes
/// are case-insensitive, RFC 9110 §11.1), one or more spaces before a non-empty token.
fn bearer(value: &[u8]) -> Option<&str> {
    let value = std::str::from_utf8(value).ok()?;
    let (scheme, rest) = value.split_once(' ')?;
    let token = rest.trim_start_matches(' ');
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// What a refused `Authorization` value starts with, for the answer: its scheme and no more
/// (never the credentials), or why it cannot be read.
fn scheme(value: &[u8]) -> String {
    match std::str::from_utf8(value) {
        Ok(text) => match text.split_once(' ') {
            Some((scheme, _)) => format!("{} …", scheme.chars().take(32).collect::<String>()),
            None if text.eq_ignore_ascii_case("bearer") => format!("{text} (no token)"),
            None => "(one word, no scheme)".to_owned(),
        },
        Err(_) => "(not UTF-8)".to_owned(),
    }
}

/// The value of the session cookie, if the request has one.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value)
}

/// Compares without an early exit, so timing tells nothing about how much of a guess is right.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::load_or_create_token;

    #[test]
    fn hosts_starting_together_agree_on_one_complete_token() {
        let dir = std::env::temp_dir().join(format!("agentpump-token-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("agentpump.token");
        let tokens: Vec<String> = std::thread::scope(|s| {
            let starts: Vec<_> = (0..8)
                .map(|_| s.spawn(|| load_or_create_token(None, &file).unwrap()))
                .collect();
            starts.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(tokens[0].len(), 64);
        assert!(tokens.iter().all(|t| t == &tokens[0]), "{tokens:?}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "no staged files are left behind");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
