//! `agentpump view --db FILE`: the history viewer over a history file, read-only, with no pump.
//! The token is `AGENTPUMP_TOKEN` when set, else generated for this run and never stored: the
//! printed URL carries it once, and the page trades it for a session cookie.

use std::path::Path;
use std::sync::Arc;

use super::server::viewer;
use crate::history::SqliteHistory;
use crate::host::HostError;

/// Where `view` listens unless told otherwise (beside `run`'s 7878).
pub const DEFAULT_ADDR: &str = "127.0.0.1:7879";

/// Serves the viewer over `db` on `addr` until SIGINT or SIGTERM; prints the URL to open first.
/// With `tasks` (a task project's root), the tasks view reads its ledger.
///
/// # Errors
///
/// The file is not a readable agentpump history, the project's organism file does not load, or
/// the address cannot be listened on.
pub fn run(db: &Path, addr: &str, tasks: Option<&Path>) -> Result<String, HostError> {
    let store = SqliteHistory::open_read_only(db)?;
    let tasks = tasks.map(super::tasks::layout).transpose()?;
    let token = std::env::var("AGENTPUMP_TOKEN")
        .ok()
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(HostError::System)?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| HostError::Listen {
                addr: addr.to_owned(),
                source,
                remedy: "listen elsewhere with --addr HOST:PORT (port 0 picks a free one), or stop what listens there",
            })?;
        let address = listener.local_addr().map_err(HostError::System)?;
        if !address.ip().is_loopback() {
            tracing::warn!(%address, "the viewer listens beyond loopback: anyone who can reach it and has the token reads the history");
        }
        println!(
            "agentpump: viewing {} read-only at http://{address}/?token={token}",
            db.display()
        );
        let app = viewer::read_only(Arc::new(store), &token, tasks);
        axum::serve(listener, app)
            .with_graceful_shutdown(super::run::signal())
            .await
            .map_err(HostError::System)?;
        Ok("agentpump: viewer stopped\n".to_owned())
    })
}
