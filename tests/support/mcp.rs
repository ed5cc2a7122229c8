//! The pinned MCP test programs (the MCP project's reference server
//! `@modelcontextprotocol/server-everything`, the Python SDK), found where `.ci/run` installs
//! them under `AGENTPUMP_CI_CACHE`.

use std::path::{Path, PathBuf};

/// The version of the reference server `.ci/run` installs.
pub const EVERYTHING: &str = "server-everything-2026.8.31";

/// A tool the test needs: the path in `var`, else where `.ci/run` caches it; `None` (the
/// test skips, saying so) when it is not installed, unless `AGENTPUMP_TESTS_NEED_MCP=1`.
pub fn installed(var: &str, cached: &str) -> Option<PathBuf> {
    let path = std::env::var_os(var).map(PathBuf::from).or_else(|| {
        let cache = std::env::var_os("AGENTPUMP_CI_CACHE")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/agentpump-ci"))
            })?;
        Some(cache.join(cached))
    })?;
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("AGENTPUMP_TESTS_NEED_MCP").is_none(),
        "{} is not installed (set {var} or run .ci/run)",
        path.display()
    );
    println!(
        "skipped: {} is not installed (.ci/run installs it)",
        path.display()
    );
    None
}

/// The reference server's stdio command.
pub fn everything() -> Option<PathBuf> {
    installed(
        "AGENTPUMP_MCP_EVERYTHING",
        &format!("{EVERYTHING}/node_modules/.bin/mcp-server-everything"),
    )
}

/// `/mcp` at `url` refuses a wrong bearer token with the API's own `401` problem, before MCP
/// reads the body.
pub async fn refuses_a_wrong_token(url: &str) {
    let refused = super::http_client()
        .post(url)
        .bearer_auth("wrong")
        .body("{}")
        .send()
        .await
        .unwrap();
    let (status, problem) = super::problem(refused).await;
    assert_eq!(status, reqwest::StatusCode::UNAUTHORIZED);
    assert_eq!(problem["detail"], "wrong bearer token");
}
