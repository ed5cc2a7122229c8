//! `agentpump run organism.toml`: the pump, the organism's listeners and the HTTP API, until
//! SIGINT or SIGTERM; then the server stops taking requests and the pump shuts down gracefully.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::cluster::hub::Hub;
use super::mcp::server::{ListenerDoc, McpServer};
use super::organism::{OpenHistory, Organism};
use super::server;
use crate::PumpHandle;
use crate::host::HostError;

/// How long shutdown lets queued messages drain.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Runs the organism in `path` until a signal; returns a summary line.
///
/// # Errors
///
/// The organism file, the store, the token or the address is unusable — one line saying which.
///
/// `bind` (host:port) or `port` replace the organism's `[server] bind` (a port keeps its host).
/// `first`: with `[store] partitions`, the partitions this host takes at once (empty: every
/// one); it takes the others over only once they have had no writer for a lease's time.
pub fn run(
    path: &Path,
    bind: Option<String>,
    port: Option<u16>,
    first: &[u32],
) -> Result<String, HostError> {
    if !path.exists() {
        return Err(HostError::usage(format!(
            "{}: no such organism file; an organism.toml says which listeners to run (docs/organism.md, listeners/demo/organism.toml is one): `agentpump demo` runs the demo without one, `agentpump run --help` shows how to name the file",
            path.display()
        )));
    }
    let mut organism = Organism::load(path)?;
    organism.report_process_warnings();
    if let Some(bind) = bind {
        organism.server.bind = bind;
    } else if let Some(port) = port {
        let host = organism
            .server
            .bind
            .rsplit_once(':')
            .map_or("127.0.0.1", |(h, _)| h);
        organism.server.bind = format!("{host}:{port}");
    }
    let origin = path.display().to_string();
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(HostError::System)?;
    runtime.block_on(async move {
        let listener = std::net::TcpListener::bind(&organism.server.bind)
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|source| HostError::Listen {
                addr: organism.server.bind.clone(),
                source,
                remedy: "listen elsewhere with --port N (0 picks a free port) or --bind HOST:PORT, or set [server] bind = \"HOST:PORT\" in organism.toml; or stop what listens there",
            })?;
        let count = organism.partitions()?;
        super::partitions::check_first(first, count)?;
        if count > 1 {
            return super::partitions::run(&organism, &origin, &base, listener, first).await;
        }
        let store = open_history(&organism, &base, &listener).await?;
        let listener = tokio::net::TcpListener::from_std(listener).map_err(HostError::System)?;
        let outcome = serve(&organism, &origin, &base, store.clone(), listener).await;
        // Every exit path closes the store, so the history file alone holds the whole history.
        let closed = store.close().map_err(HostError::from);
        outcome.and_then(|text| closed.map(|()| text))
    })
}

/// The organism's history. A JetStream store with a lease waits for it as a standby: on the
/// bound `listener` meanwhile, every request is forwarded to the writer (`server/front.rs`);
/// this host's address goes into its lease, for the standbys once it writes.
async fn open_history(
    organism: &Organism,
    base: &Path,
    listener: &std::net::TcpListener,
) -> Result<OpenHistory, HostError> {
    let Some(mut options) = organism.jetstream_options()? else {
        return organism.open_history(base).await;
    };
    let Some(lease) = options.lease.as_mut() else {
        return Organism::open_stream(options).await;
    };
    let address = listener.local_addr().map_err(HostError::System)?;
    lease.address = Some(advertised(address));
    let (writer, known) = tokio::sync::watch::channel(None);
    lease.writer = Some(Arc::new(writer));
    let standby =
        tokio::net::TcpListener::from_std(listener.try_clone().map_err(HostError::System)?)
            .map_err(HostError::System)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let forwarding = tokio::spawn(server::front::serve_front(
        standby,
        vec![known],
        Vec::new(),
        server::front::FrontOptions {
            max_body: organism.server.max_body_bytes,
            shutdown_timeout: Duration::from_millis(organism.server.shutdown_timeout_ms),
            mcp: None,
        },
        async move {
            let _ = stopped.await;
        },
    ));
    let opened = Organism::open_stream(options);
    tokio::pin!(opened);
    let mut forwarding = forwarding;
    let opened = tokio::select! {
        opened = &mut opened => opened,
        // The standby server ended while the store waits: its requests would hang unanswered.
        ended = &mut forwarding => return Err(standby_ended(ended)),
    };
    let _ = stop.send(());
    if let ended @ (Ok(Err(_)) | Err(_)) = forwarding.await {
        // This host writes now; its own server takes the port over.
        tracing::warn!(error = %standby_ended(ended), "after the lease was taken");
    }
    opened
}

/// Why the standby's server ended.
fn standby_ended(ended: Result<std::io::Result<()>, tokio::task::JoinError>) -> HostError {
    let why = match ended {
        Ok(Ok(())) => "it stopped".to_owned(),
        Ok(Err(e)) => e.to_string(),
        Err(e) => e.to_string(),
    };
    HostError::System(std::io::Error::other(format!(
        "the standby's HTTP server ended while this host waited for the history stream's lease: {why}"
    )))
}

/// The address other hosts reach this one at: the bound address, with the host's name in
/// place of an unspecified IP (`0.0.0.0`).
pub(super) fn advertised(address: std::net::SocketAddr) -> String {
    if address.ip().is_unspecified() {
        let host = crate::history::jetstream::host_name();
        format!("http://{host}:{}", address.port())
    } else {
        format!("http://{address}")
    }
}

/// Builds the pump on `store` and serves on `listener` until a signal or a server error; the
/// pump is shut down either way.
async fn serve(
    organism: &Organism,
    origin: &str,
    base: &Path,
    store: OpenHistory,
    listener: tokio::net::TcpListener,
) -> Result<String, HostError> {
    let store = store.shared();
    let (builder, hub, listeners) = builder(organism, origin, base, &store, None).await?;
    let pump = builder.history(store).build()?;
    let served = listen(organism, base, &pump, hub, listeners, listener).await;
    let report = pump.shutdown(SHUTDOWN_GRACE).await;
    served?;
    Ok(format!(
        "agentpump: stopped; {} message(s) left undelivered and recorded for the next start\n",
        report.undelivered
    ))
}

/// The organism's pump builder, with the tools of its started `[[mcp]]` servers; with remote
/// listeners, connected to its `[cluster]` and with each `remote = true` listener replaced by
/// the proxy that hands its deliveries to workers. Also the listeners as MCP clients see them.
/// `partition`: the one the pump holds, when the threads are partitioned.
pub(super) async fn builder(
    organism: &Organism,
    origin: &str,
    base: &Path,
    store: &Arc<dyn crate::history::HistoryStore>,
    partition: Option<crate::thread::Partition>,
) -> Result<(crate::PumpBuilder, Option<Arc<Hub>>, Vec<ListenerDoc>), HostError> {
    let remote = organism.remote_names();
    let mut registrations = organism.start_registrations(origin, &[]).await?;
    let mut connected = None;
    if let (Some(cluster), false) = (&organism.cluster, remote.is_empty()) {
        let hub = Hub::start(
            cluster,
            base,
            &organism.organism.name,
            store.clone(),
            partition,
        )
        .await?;
        registrations = registrations
            .into_iter()
            .map(|r| {
                if remote.iter().any(|n| n.as_str() == &*r.name) {
                    hub.remote(r)
                } else {
                    r
                }
            })
            .collect();
        connected = Some(hub);
    }
    let listeners = registrations.iter().map(ListenerDoc::of).collect();
    let mut config = organism.config(origin)?;
    config.partition = partition;
    let builder = registrations.into_iter().fold(
        crate::PumpBuilder::new().config(config),
        crate::PumpBuilder::register,
    );
    // An unknown peer is the file's error: said with its line, as the others are.
    if let Err(crate::pump::BuildError::Registration(
        crate::listener::RegistrationError::UnknownPeer { listener, peer },
    )) = builder.check()
    {
        return Err(organism.unknown_peer(origin, &listener, &peer));
    }
    Ok((builder, connected, listeners))
}

/// Prints where it listens and serves the HTTP API on `listener` until a signal.
async fn listen(
    organism: &Organism,
    base: &Path,
    pump: &PumpHandle,
    hub: Option<Arc<Hub>>,
    listeners: Vec<ListenerDoc>,
    listener: tokio::net::TcpListener,
) -> Result<(), HostError> {
    let (token, token_file) = token(organism, base)?;
    let address = listener.local_addr().map_err(HostError::System)?;
    let recovered = pump.recovered();
    remember(address, &token);
    println!(
        "agentpump: listening on http://{address} (token in {}); the history viewer is at http://{address}/",
        token_file.display()
    );
    // A person at a terminal gets the viewer's URL with the token to click; the token stays out
    // of logs when stdout is a file or a pipe.
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        println!("agentpump: open the history viewer at http://{address}/?token={token}");
    }
    tracing::info!(%address, threads = recovered.threads, requeued = recovered.requeued, "serving");
    // `GET /tasks` when the organism's folder has a task ledger (`[tasks]`, docs/tasks.md).
    let tasks = organism.tasks.layout(base);
    let tasks = tasks.ledger().is_file().then_some(tasks);
    server::serve_with(
        listener,
        pump.clone(),
        &token,
        organism.server.max_body_bytes,
        server::Extras {
            tasks,
            cluster: hub,
            shutdown_timeout: Duration::from_millis(organism.server.shutdown_timeout_ms),
            listeners,
            allowed_hosts: organism.server.mcp_hosts(),
        },
        signal(),
    )
    .await
    .map_err(HostError::System)
}

/// Records `token` for the CLI's commands run from any folder ([`super::known_hosts`]); a
/// host that cannot record it says so in the log and goes on (the token file still works).
pub(super) fn remember(address: std::net::SocketAddr, token: &str) {
    match super::known_hosts::record(address, token) {
        Ok(file) => tracing::debug!(file = %file.display(), "recorded the token for the CLI"),
        Err(e) => {
            tracing::warn!("cannot record the token for the CLI (commands need --token-file): {e}")
        }
    }
}

/// The organism's API token and the file it is kept in (made on first use).
pub(super) fn token(organism: &Organism, base: &Path) -> Result<(String, PathBuf), HostError> {
    let token_file = organism
        .server
        .token_file
        .clone()
        .map_or_else(|| base.join("agentpump.token"), |f| base.join(f));
    let token = server::load_or_create_token(organism.server.token_env.as_deref(), &token_file)?;
    Ok((token, token_file))
}

/// `agentpump mcp --organism FILE`: runs the organism and serves it as an MCP server on
/// standard input and output until the client closes them (or a signal); then the pump shuts
/// down gracefully. Nothing but MCP is written to standard output.
///
/// # Errors
///
/// As [`run`], or the MCP session fails.
pub fn serve_mcp(path: &Path) -> Result<(), HostError> {
    let organism = Organism::load(path)?;
    let origin = path.display().to_string();
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(HostError::System)?;
    // Standard input is read on a blocking thread that never returns once the client is gone;
    // the runtime is let go of without waiting for it.
    let served = runtime.block_on(async move {
        let store = organism.open_history(&base).await?;
        let outcome = async {
            let shared = store.shared();
            let (builder, _hub, listeners) =
                builder(&organism, &origin, &base, &shared, None).await?;
            let pump = builder.history(shared).build()?;
            let server = McpServer::new(pump.clone(), listeners);
            let served = tokio::select! {
                served = super::mcp::server::serve_stdio(server) => served.map_err(HostError::from),
                () = signal() => Ok(()),
            };
            pump.shutdown(SHUTDOWN_GRACE).await;
            served
        }
        .await;
        let closed = store.close().map_err(HostError::from);
        outcome.and(closed)
    });
    runtime.shutdown_background();
    served
}

/// `agentpump mcp-units`: serves agentpump's own `units` MCP server on standard input and
/// output until the client closes them (the demo organism's `[[mcp]]` server).
///
/// # Errors
///
/// The MCP session fails.
pub fn serve_units() -> Result<(), HostError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(HostError::System)?;
    let served = runtime.block_on(super::mcp::units::serve_stdio());
    // Standard input is read on a blocking thread that never returns once the client is gone.
    runtime.shutdown_background();
    Ok(served?)
}

/// Resolves on SIGINT or SIGTERM.
pub(crate) async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    tracing::info!("signal received, shutting down");
    // Command runs are in process groups of their own: the terminal's signal did not reach them.
    crate::listeners::command::kill_all();
}

/// The default organism file name.
pub fn default_organism() -> PathBuf {
    PathBuf::from("organism.toml")
}
