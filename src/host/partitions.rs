//! `agentpump run` with `[store] partitions = N`: the organism's threads in N partitions, each
//! a history stream of its own written by whichever host holds its lease (docs/history.md,
//! "Partitions"; docs/decisions/2026-11-27-partitions.md).
//!
//! A host runs one pump per partition it holds, each with its own history store and its own
//! HTTP API on a port of its own; the lease of a partition names that port. The organism's
//! address (`[server] bind`) is the front (`server/front.rs`): it forwards each request to the
//! writer of the thread's partition, wherever that is. A host waits for every partition it does
//! not hold: when a holder dies its lease lapses and a waiting host takes the partition over,
//! rebuilding its threads from the stream; when a pump's lease is lost (a paused host), its pump
//! stops and the host waits for the partition again.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use tokio::sync::watch;

use super::courier::FrontCourier;
use super::organism::Organism;
use super::run::{SHUTDOWN_GRACE, advertised, builder, signal, token};
use super::server;
use crate::host::HostError;
use crate::thread::Partition;

/// How long after a failed open of a partition's stream the host tries again.
const REOPEN_PAUSE: Duration = Duration::from_secs(1);

/// How often a holding pump checks that its store still takes writes.
const LOST_CHECK: Duration = Duration::from_millis(200);

/// `--partition` names only partitions the organism has.
///
/// # Errors
///
/// The first that it does not have, naming how many it has.
pub(super) fn check_first(first: &[u32], count: u32) -> Result<(), HostError> {
    let Some(index) = first.iter().find(|&&i| i >= count) else {
        return Ok(());
    };
    Err(HostError::Usage(if count == 1 {
        format!("--partition {index}: the organism has one partition (0); set [store] partitions")
    } else {
        format!(
            "--partition {index}: the organism has {count} partitions (0 to {})",
            count - 1
        )
    }))
}

/// Serves the partitioned organism until a signal: the front on `front`, a pump for each
/// partition held. `first`: the partitions taken at once (empty: every one).
pub(super) async fn run(
    organism: &Organism,
    origin: &str,
    base: &Path,
    front: std::net::TcpListener,
    first: &[u32],
) -> Result<String, HostError> {
    let count = organism.partitions()?;
    let ttl = Duration::from_millis(organism.store.lease_ms.unwrap_or_default());
    let address = front.local_addr().map_err(HostError::System)?;
    let (stop, stopping) = watch::channel(false);
    // The listeners as the front's `/mcp` lists them: the pumps built here say them.
    let (docs, listeners) = watch::channel(Vec::new());
    let docs = Arc::new(docs);
    let mut writers = Vec::new();
    let mut locals = Vec::new();
    let mut holding = Vec::new();
    for index in 0..count {
        let partition = Partition::new(index, count).ok_or_else(|| {
            HostError::Usage(format!("partition {index} of {count} does not exist"))
        })?;
        let (writer, known) = watch::channel(None);
        writers.push(known);
        let (local, here) = watch::channel(None);
        locals.push(here);
        let defer = if first.is_empty() || first.contains(&index) {
            Duration::ZERO
        } else {
            ttl
        };
        let holder = Holder {
            organism,
            origin,
            base,
            ip: address.ip(),
            front_port: address.port(),
            partition,
            writer: Arc::new(writer),
            local: Arc::new(local),
            docs: Arc::clone(&docs),
            defer,
        };
        let (stop, stopping) = (&stop, stopping.clone());
        holding.push(async move {
            let held = holder.hold(stopping).await;
            // A partition that cannot be served stops the host: it must not go on half there.
            if held.is_err() {
                let _ = stop.send(true);
            }
            held
        });
    }
    let front = tokio::net::TcpListener::from_std(front).map_err(HostError::System)?;
    println!(
        "agentpump: listening on http://{address} ({count} partitions; every request goes to its thread's partition, wherever it is written)"
    );
    let mut front_stopping = stopping.clone();
    let front_token = token(organism, base)?.0;
    super::run::remember(address, &front_token);
    let mcp = server::front::FrontMcp {
        token: front_token.into(),
        allowed_hosts: organism.server.mcp_hosts(),
        listeners,
    };
    let serving = async {
        let served = server::front::serve_front(
            front,
            writers,
            locals,
            server::front::FrontOptions {
                max_body: organism.server.max_body_bytes,
                shutdown_timeout: Duration::from_millis(organism.server.shutdown_timeout_ms),
                mcp: Some(mcp),
            },
            async move {
                let _ = front_stopping.wait_for(|s| *s).await;
            },
        )
        .await;
        let _ = stop.send(true);
        served
    };
    let mut signalled = stopping.clone();
    let waiting = async {
        tokio::select! {
            () = signal() => {}
            _ = signalled.wait_for(|s| *s) => {}
        }
        let _ = stop.send(true);
    };
    let (held, served, ()) = tokio::join!(join_all(holding), serving, waiting);
    served.map_err(HostError::System)?;
    let mut undelivered = 0;
    for held in held {
        undelivered += held?;
    }
    Ok(format!(
        "agentpump: stopped; {undelivered} message(s) left undelivered and recorded for the next start\n"
    ))
}

/// One partition, as this host holds it or waits for it.
struct Holder<'a> {
    organism: &'a Organism,
    origin: &'a str,
    base: &'a Path,
    /// The IP the front listens on: each pump's API listens there too.
    ip: std::net::IpAddr,
    /// The front's port: the courier of children for other partitions posts there.
    front_port: u16,
    partition: Partition,
    /// The partition's writer, for the front.
    writer: Arc<watch::Sender<Option<String>>>,
    /// The partition's API in this process while this host writes it, for the front.
    local: Arc<watch::Sender<Option<axum::Router>>>,
    /// The listeners for the front's `/mcp`, told once a pump is built here.
    docs: Arc<watch::Sender<Vec<crate::host::mcp::server::ListenerDoc>>>,
    /// How long the lease must have been free before this host takes it.
    defer: Duration,
}

impl Holder<'_> {
    /// Waits for the partition's lease and writes it, again after each loss, until `stopping`;
    /// returns the messages left undelivered at the stops.
    async fn hold(self, mut stopping: watch::Receiver<bool>) -> Result<usize, HostError> {
        let mut undelivered = 0;
        loop {
            let listener = std::net::TcpListener::bind((self.ip, 0))
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(HostError::System)?;
            let address = advertised(listener.local_addr().map_err(HostError::System)?);
            let mut options = self
                .organism
                .partition_options(Some(self.partition))?
                .ok_or_else(|| {
                    HostError::Usage("[store] partitions needs kind = \"jetstream\"".into())
                })?;
            let Some(lease) = options.lease.as_mut() else {
                return Err(HostError::Usage("[store] partitions needs lease_ms".into()));
            };
            lease.address = Some(address.clone());
            lease.writer = Some(Arc::clone(&self.writer));
            lease.defer = self.defer;
            let opened = tokio::select! {
                opened = Organism::open_stream(options) => opened,
                _ = stopping.wait_for(|s| *s) => return Ok(undelivered),
            };
            let opened = match opened {
                Ok(opened) => opened,
                // A cluster still electing its leaders, a server restarting: try again.
                Err(e) => {
                    tracing::warn!(partition = %self.partition, error = %e, "cannot open the partition's stream; trying again");
                    tokio::select! {
                        () = tokio::time::sleep(REOPEN_PAUSE) => continue,
                        _ = stopping.wait_for(|s| *s) => return Ok(undelivered),
                    }
                }
            };
            let store = opened.shared();
            let (builder, hub, listeners) = builder(
                self.organism,
                self.origin,
                self.base,
                &store,
                Some(self.partition),
            )
            .await?;
            self.docs.send_replace(listeners.clone());
            let (token, _) = token(self.organism, self.base)?;
            let mut builder = builder.history(Arc::clone(&store));
            if self.organism.store.spread_children {
                // Children for other partitions go through this host's own front, which finds
                // their writer wherever the lease is.
                let ip = if self.ip.is_unspecified() {
                    std::net::IpAddr::from([127, 0, 0, 1])
                } else {
                    self.ip
                };
                let front = format!("http://{}", std::net::SocketAddr::new(ip, self.front_port));
                builder = builder.courier(Arc::new(FrontCourier::new(front, token.clone())?));
            }
            let pump = builder.build()?;
            let recovered = pump.recovered();
            println!(
                "agentpump: {}: writing it at {address} ({} thread(s) recovered)",
                self.partition, recovered.threads
            );
            let listener =
                tokio::net::TcpListener::from_std(listener).map_err(HostError::System)?;
            let extras = || server::Extras {
                shutdown_timeout: Duration::from_millis(self.organism.server.shutdown_timeout_ms),
                listeners: listeners.clone(),
                allowed_hosts: self.organism.server.mcp_hosts(),
                ..server::Extras::default()
            };
            // This host's front answers for the partition in the process; other hosts' fronts
            // reach it on its own port.
            let (ending, ended) = watch::channel(false);
            let max_body = self.organism.server.max_body_bytes;
            self.local.send_replace(Some(server::router_with(
                pump.clone(),
                &token,
                max_body,
                extras(),
                ended,
            )));
            self.writer.send_replace(Some(address.clone()));
            let mut stop = stopping.clone();
            let watched = Arc::clone(&store);
            let (local, writer) = (Arc::clone(&self.local), Arc::clone(&self.writer));
            let served = server::serve_with(
                listener,
                pump.clone(),
                &token,
                max_body,
                extras(),
                async move {
                    tokio::select! {
                        _ = stop.wait_for(|s| *s) => {}
                        () = lost(&*watched) => {
                            // Another host writes it now, or will: the front stops answering
                            // for it here at once, and learns the new writer from the lease.
                            local.send_replace(None);
                            writer.send_replace(None);
                        }
                    }
                },
            )
            .await;
            self.local.send_replace(None);
            ending.send_replace(true);
            // A store that took its last write: nothing queued is delivered here any more (the
            // next writer delivers it from the stream).
            let grace = if store.writable().is_ok() {
                SHUTDOWN_GRACE
            } else {
                Duration::ZERO
            };
            undelivered += pump.shutdown(grace).await.undelivered;
            drop(pump);
            // Outcomes of this partition's remote deliveries are the next holder's to hear.
            if let Some(hub) = hub {
                hub.stop();
            }
            served.map_err(HostError::System)?;
            if *stopping.borrow() {
                return Ok(undelivered);
            }
            if let Err(e) = store.writable() {
                tracing::warn!(partition = %self.partition, error = %e, "stopped writing the partition; waiting for its lease again");
                println!("agentpump: {}: no longer written here: {e}", self.partition);
            }
        }
    }
}

/// Resolves once `store` takes no more writes (its lease was lost).
async fn lost(store: &dyn crate::history::HistoryStore) {
    while store.writable().is_ok() {
        tokio::time::sleep(LOST_CHECK).await;
    }
}
