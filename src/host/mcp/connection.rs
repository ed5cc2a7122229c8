//! [`Connection`]: one MCP server, connected, listed and kept running: a server that exits or
//! whose transport closes is started again with backoff, and so is one that stopped answering
//! ([`RESTART_AFTER_TIMEOUTS`] calls in a row timed out); `notifications/tools/list_changed`
//! lists its tools again.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, RwLock, Weak};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, Implementation, MetaObject,
    RequestMetaObject,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use tokio::sync::{Notify, watch};

use super::config::{ServerConfig, Transport};
use super::error::McpError;

/// The first wait before starting a server again; each failed start doubles it.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait between two starts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Calls in a row that timed out (no answer between them) after which a server is taken as
/// hung and started again like one that crashed.
pub const RESTART_AFTER_TIMEOUTS: u32 = 3;

type Service = RunningService<RoleClient, Handler>;

/// Whether the server can take calls.
#[derive(Debug, Clone)]
enum State {
    /// Connected: calls go to this peer.
    Up(rmcp::Peer<RoleClient>),
    /// Not connected: `failures` failed starts since it went down, and why.
    Down {
        /// Starts that failed since the server went down.
        failures: u32,
        /// The last reason.
        why: String,
    },
}

/// Why a call got no answer from the server.
#[derive(Debug)]
pub enum CallFailure {
    /// The server answered with a JSON-RPC error: an answer for the caller.
    Rpc(rmcp::ErrorData),
    /// The server is down, crashed during the call or its transport failed.
    Upstream(String),
}

/// One MCP server: its configuration, its state and the tools it offers now.
#[derive(Debug)]
pub struct Connection {
    config: ServerConfig,
    state: watch::Sender<State>,
    tools: RwLock<BTreeMap<String, rmcp::model::Tool>>,
    /// Lists the tools again (a `list_changed` notification).
    relist: Arc<Notify>,
    /// Stops the supervisor and the server (the connection is dropped).
    stop: Arc<Notify>,
    /// Starts the server again: it stopped answering.
    restart: Arc<Notify>,
    /// Calls that timed out since the server last answered one.
    timeouts: AtomicU32,
}

impl Connection {
    /// Starts (or connects to) the server, lists its tools and keeps it running.
    ///
    /// # Errors
    ///
    /// The server cannot be started or reached, or does not list its tools.
    pub async fn start(config: ServerConfig) -> Result<Arc<Self>, McpError> {
        let relist = Arc::new(Notify::new());
        let service = connect(&config, &relist).await?;
        let tools = list(&config.name, service.peer()).await?;
        let (state, _) = watch::channel(State::Up(service.peer().clone()));
        let connection = Arc::new(Self {
            config,
            state,
            tools: RwLock::new(tools),
            relist,
            stop: Arc::new(Notify::new()),
            restart: Arc::new(Notify::new()),
            timeouts: AtomicU32::new(0),
        });
        tokio::spawn(supervise(Arc::downgrade(&connection), service));
        Ok(connection)
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// The configuration it was started with.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The tools the server offers now, by name.
    pub fn tools(&self) -> BTreeMap<String, rmcp::model::Tool> {
        self.tools.read().map(|t| t.clone()).unwrap_or_default()
    }

    /// The tool `name`, if the server offers it now.
    pub fn tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.tools.read().ok()?.get(name).cloned()
    }

    /// Calls `tool` with `arguments`. While the server is being started again, waits for it
    /// (the caller's timeout bounds the wait) unless a start fails meanwhile. A call given up
    /// by its caller at the server's timeout counts towards [`RESTART_AFTER_TIMEOUTS`]; an
    /// answer starts the count again.
    ///
    /// # Errors
    ///
    /// [`CallFailure::Rpc`] for the server's JSON-RPC error, [`CallFailure::Upstream`] when
    /// the server is down or failed during the call.
    pub async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallToolResult, CallFailure> {
        let peer = self.peer().await?;
        let mut params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        // The delivery's span, for a server that traces (MCP's `_meta.traceparent`, SEP-414:
        // the one channel a stdio server has).
        if let Some(traceparent) = crate::pump::remote::traceparent() {
            let mut meta = serde_json::Map::new();
            meta.insert("traceparent".into(), traceparent.into());
            params.meta = Some(RequestMetaObject(MetaObject(meta)));
        }
        let mut unanswered = Unanswered {
            connection: self,
            since: Instant::now(),
            answered: false,
        };
        let outcome = peer.call_tool(params).await;
        unanswered.answered = true;
        if matches!(outcome, Ok(_) | Err(ServiceError::McpError(_))) {
            self.timeouts.store(0, Ordering::Relaxed);
        }
        match outcome {
            Ok(result) => Ok(result),
            Err(ServiceError::McpError(e)) => Err(CallFailure::Rpc(e)),
            Err(e) => Err(CallFailure::Upstream(format!(
                "MCP server `{}` failed during the call: {e}; it is being started again",
                self.config.name
            ))),
        }
    }

    /// The peer to call: now, or once the server is back; a start that fails meanwhile is
    /// the caller's failure.
    async fn peer(&self) -> Result<rmcp::Peer<RoleClient>, CallFailure> {
        let mut rx = self.state.subscribe();
        let before = match &*rx.borrow() {
            State::Up(peer) if !peer.is_transport_closed() => return Ok(peer.clone()),
            State::Up(_) => 0,
            State::Down { failures, .. } => *failures,
        };
        let state = rx
            .wait_for(|s| match s {
                State::Up(peer) => !peer.is_transport_closed(),
                State::Down { failures, .. } => *failures > before,
            })
            .await
            .map_err(|_| self.down("it was stopped"))?;
        match &*state {
            State::Up(peer) => Ok(peer.clone()),
            State::Down { why, .. } => Err(self.down(why)),
        }
    }

    /// A call was given up at the server's timeout: the last of [`RESTART_AFTER_TIMEOUTS`]
    /// in a row starts the server again.
    fn timed_out(&self) {
        let count = self.timeouts.fetch_add(1, Ordering::Relaxed) + 1;
        tracing::warn!(server = %self.config.name, count, "a call of the MCP server timed out");
        if count >= RESTART_AFTER_TIMEOUTS {
            self.timeouts.store(0, Ordering::Relaxed);
            self.restart.notify_one();
        }
    }

    fn down(&self, why: &str) -> CallFailure {
        CallFailure::Upstream(format!("MCP server `{}` is down: {why}", self.config.name))
    }

    /// Lists the tools again, after a `list_changed` notification or a restart.
    async fn refresh(&self, peer: &rmcp::Peer<RoleClient>) {
        match list(&self.config.name, peer).await {
            Ok(tools) => {
                for name in tools.keys() {
                    if !self.tools.read().is_ok_and(|t| t.contains_key(name)) {
                        tracing::warn!(server = %self.config.name, tool = %name,
                            "the MCP server lists a new tool; it is registered at the next start of the host");
                    }
                }
                if let Ok(mut current) = self.tools.write() {
                    *current = tools;
                }
            }
            Err(e) => {
                tracing::warn!(server = %self.config.name, error = %e, "listing tools again failed")
            }
        }
    }
}

/// A call on its way: dropped before its answer (the pump gave up on the handler), it counts
/// as a timeout when it waited about the server's timeout (a tenth less, for the time the
/// pump's clock started before this one); a caller's shorter `timeout-ms` does not count.
struct Unanswered<'a> {
    connection: &'a Connection,
    since: Instant,
    /// The call came back (an answer or a failure): nothing to count.
    answered: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        let timeout = self.connection.config.timeout;
        if !self.answered && self.since.elapsed() + timeout / 10 >= timeout {
            self.connection.timed_out();
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.stop.notify_one();
    }
}

/// Keeps the server running while the connection lives: serves `list_changed`, and when the
/// server goes away, starts it again after a backoff that doubles with each failed start.
async fn supervise(connection: Weak<Connection>, mut service: Service) {
    let Some((name, relist, stop, restart)) = connection.upgrade().map(|c| {
        (
            c.config.name.clone(),
            Arc::clone(&c.relist),
            Arc::clone(&c.stop),
            Arc::clone(&c.restart),
        )
    }) else {
        return;
    };
    loop {
        let peer = service.peer().clone();
        let cancel = service.cancellation_token();
        let waiting = service.waiting();
        tokio::pin!(waiting);
        let why = loop {
            tokio::select! {
                quit = &mut waiting => break format!("{quit:?}"),
                () = relist.notified() => {
                    let Some(c) = connection.upgrade() else { return };
                    c.refresh(&peer).await;
                }
                () = restart.notified() => {
                    // The old server is closed and killed in the background.
                    cancel.cancel();
                    break format!("it stopped answering: {RESTART_AFTER_TIMEOUTS} calls in a row timed out");
                }
                () = stop.notified() => return,
            }
        };
        tracing::warn!(server = %name, reason = %why, "MCP server went away; starting it again");
        let mut failures = 0u32;
        service = loop {
            let Some(c) = connection.upgrade() else {
                return;
            };
            c.state.send_replace(State::Down {
                failures,
                why: format!("it went away ({why}); starting it again"),
            });
            let wait = backoff(failures);
            drop(c);
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = stop.notified() => return,
            }
            let Some(c) = connection.upgrade() else {
                return;
            };
            match connect(&c.config, &relist).await {
                Ok(service) => {
                    c.refresh(service.peer()).await;
                    c.state.send_replace(State::Up(service.peer().clone()));
                    tracing::info!(server = %name, failures, "MCP server started again");
                    break service;
                }
                Err(e) => {
                    failures += 1;
                    tracing::warn!(server = %name, failures, error = %e, "starting the MCP server again failed");
                    c.state.send_replace(State::Down {
                        failures,
                        why: e.to_string(),
                    });
                }
            }
        };
    }
}

/// The wait before start number `failures + 1`: [`FIRST_BACKOFF`] doubled per failure, at
/// most [`MAX_BACKOFF`].
pub fn backoff(failures: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1u32 << failures.min(16))
        .min(MAX_BACKOFF)
}

/// The client side of one connection: tells the supervisor when the tool list changed.
#[derive(Debug, Clone)]
struct Handler {
    relist: Arc<Notify>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _cx: NotificationContext<RoleClient>) {
        self.relist.notify_one();
    }

    /// Offers the newest protocol version that has the `initialize` handshake this client
    /// performs (2025-11-25), not rmcp's newest (2026-07-28 has no handshake: a server
    /// answering `initialize` can never name it).
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("agentpump", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// Starts or reaches the server and does the MCP handshake.
async fn connect(config: &ServerConfig, relist: &Arc<Notify>) -> Result<Service, McpError> {
    let handler = Handler {
        relist: Arc::clone(relist),
    };
    let name = &config.name;
    let failed = |what: String| McpError::Connect {
        server: name.clone(),
        what,
    };
    match &config.transport {
        Transport::Stdio {
            program,
            args,
            env,
            cwd,
        } => {
            let path = std::env::var_os("PATH");
            let located = crate::listeners::command::locate(program, cwd, path.as_deref())
                .map_err(|e| failed(format!("cannot start `{program}`: {e}")))?;
            let mut command = tokio::process::Command::new(&located);
            command
                .args(args)
                .env_clear()
                .envs(env.iter().map(|(k, v)| (k, v)))
                .current_dir(cwd)
                .kill_on_drop(true);
            let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(command)
                .stderr(std::process::Stdio::piped())
                .spawn()
                .map_err(|e| failed(format!("cannot start `{}`: {e}", located.display())))?;
            if let Some(stderr) = stderr {
                tokio::spawn(log_stderr(name.clone(), stderr));
            }
            handler.serve(transport).await.map_err(|e| {
                failed(format!(
                    "`{program}` did not complete the MCP handshake: {e}"
                ))
            })
        }
        Transport::Http {
            url,
            headers,
            token,
        } => {
            let transport =
                super::http::client_transport(url, headers, token.as_deref()).map_err(&failed)?;
            handler
                .serve(transport)
                .await
                .map_err(|e| failed(format!("{url} did not complete the MCP handshake: {e}")))
        }
    }
}

/// The server's tools, by name.
async fn list(
    server: &str,
    peer: &rmcp::Peer<RoleClient>,
) -> Result<BTreeMap<String, rmcp::model::Tool>, McpError> {
    let tools = peer.list_all_tools().await.map_err(|e| McpError::Connect {
        server: server.to_owned(),
        what: format!("cannot list its tools: {e}"),
    })?;
    Ok(tools.into_iter().map(|t| (t.name.to_string(), t)).collect())
}

/// A stdio server's standard error, line by line, in the host's log.
async fn log_stderr(server: String, stderr: tokio::process::ChildStderr) {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(server = %server, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_up_to_its_cap() {
        let waits: Vec<u128> = (0..9).map(|n| backoff(n).as_millis()).collect();
        assert_eq!(
            waits,
            [100, 200, 400, 800, 1600, 3200, 6400, 10_000, 10_000]
        );
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }
}
