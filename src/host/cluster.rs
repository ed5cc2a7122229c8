//! Remote listeners over NATS JetStream (issue 18): the `[cluster]` section, the names of the
//! stream, subjects and consumers, and the connection. The pump's side is in `cluster/hub.rs`
//! (a remote listener is a proxy that publishes the delivery and awaits the outputs), the
//! worker's in `cluster/worker.rs`, the messages between them in `cluster/wire.rs`.
//! `docs/decisions/2026-11-26-remote-listeners.md` gives the design and its guarantees.

pub mod hub;
pub mod wire;
pub mod worker;

use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream;
use serde::Deserialize;

use crate::host::HostError;
use crate::thread::Partition;

/// `[cluster]`: the NATS server remote listeners are reached through.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterSection {
    /// The server (default `nats://127.0.0.1:4222`).
    #[serde(default = "ClusterSection::default_url")]
    pub url: String,
    /// The subject and stream name of this organism (default: `[organism] name`, else
    /// `agentpump`): `agentpump.<name>.work.<listener>`, stream `AGENTPUMP_<NAME>`.
    pub name: Option<String>,
    /// A NATS credentials file (JWT and NKey seed), relative to the organism file.
    pub creds_file: Option<PathBuf>,
    /// An environment variable holding a NATS token.
    pub token_env: Option<String>,
    /// Require TLS (default false).
    #[serde(default)]
    pub tls: bool,
    /// A CA certificate (PEM) for the server's TLS certificate, relative to the organism file.
    pub ca_file: Option<PathBuf>,
    /// How many of the thread's records a delivery carries to the worker (default 50; the
    /// delivery's own record always goes).
    #[serde(default = "ClusterSection::default_window")]
    pub history_window: usize,
    /// How long a worker may hold a delivery without sign of life before JetStream hands it
    /// to another worker, in ms; a working worker extends it. Default: a third of each remote
    /// listener's timeout, so that a delivery a dead worker held comes back while the pump
    /// still waits for it. Set, it must be at most half of every remote listener's timeout
    /// ([`ClusterSection::check_ack_wait`]).
    pub ack_wait_ms: Option<u64>,
    /// Deliveries in flight to the workers of one remote listener at most (default 64); past
    /// it a delivery fails with `backpressure`.
    #[serde(default = "ClusterSection::default_in_flight")]
    pub in_flight: usize,
}

impl ClusterSection {
    fn default_url() -> String {
        "nats://127.0.0.1:4222".to_owned()
    }
    fn default_window() -> usize {
        50
    }
    fn default_in_flight() -> usize {
        64
    }

    /// The subjects and stream of organism `organism` (its `[organism] name`).
    pub fn names(&self, organism: &str) -> Names {
        let raw = self
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .or_else(|| Some(organism.to_owned()).filter(|n| !n.is_empty()))
            .unwrap_or_else(|| "agentpump".to_owned());
        let name = token(&raw);
        Names {
            stream: format!("AGENTPUMP_{}", name.to_uppercase()),
            prefix: format!("agentpump.{name}"),
        }
    }

    /// How long a worker may hold a delivery of a listener whose timeout is `timeout` without
    /// sign of life: `ack_wait_ms`, else a third of `timeout`; at least 100 ms.
    pub fn ack_wait(&self, timeout: Duration) -> Duration {
        self.ack_wait_ms
            .map_or(timeout / 3, Duration::from_millis)
            .max(MIN_ACK_WAIT)
    }

    /// Refuses an `ack_wait_ms` over half of the timeout of remote listener `listener`: a
    /// delivery held by a worker that died would come back to another worker too late to be
    /// answered before the pump gives up on it (`handler-timeout`).
    ///
    /// # Errors
    ///
    /// What is wrong and what to write instead.
    pub fn check_ack_wait(&self, listener: &str, timeout: Duration) -> Result<(), String> {
        let Some(ms) = self.ack_wait_ms else {
            return Ok(());
        };
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        if ms <= timeout_ms / 2 {
            return Ok(());
        }
        Err(format!(
            "[cluster] ack_wait_ms = {ms} is over half of remote listener `{listener}`'s timeout \
             ({timeout_ms} ms): a delivery held by a worker that died would reach another worker \
             only after {ms} ms, too late to be answered before the pump gives up on it; set \
             ack_wait_ms to at most {}, or leave it out (a third of each listener's timeout)",
            timeout_ms / 2
        ))
    }

    /// Connects, retrying in the background when the server is not there yet (the pump starts
    /// without NATS and remote deliveries fail until it is back).
    ///
    /// # Errors
    ///
    /// The credentials file cannot be read, the token variable is unset, or the URL is unusable.
    pub async fn connect(
        &self,
        base: &std::path::Path,
        who: &str,
    ) -> Result<async_nats::Client, HostError> {
        let mut options = async_nats::ConnectOptions::new()
            .name(who)
            .retry_on_initial_connect()
            .connection_timeout(Duration::from_secs(2))
            .max_reconnects(None)
            .event_callback(|event| async move {
                // Disconnections and reconnections are logged; the client reconnects by itself.
                match event {
                    async_nats::Event::Connected => tracing::info!(%event, "nats"),
                    _ => tracing::warn!(%event, "nats"),
                }
            });
        if let Some(file) = &self.creds_file {
            let path = base.join(file);
            options = options
                .credentials_file(&path)
                .await
                .map_err(|e| HostError::io(&path, e))?;
        }
        if let Some(var) = &self.token_env {
            let token = std::env::var(var).map_err(|_| {
                HostError::Cluster(format!(
                    "[cluster] token_env names `{var}`, which is not set"
                ))
            })?;
            options = options.token(token);
        }
        if self.tls {
            options = options.require_tls(true);
        }
        if let Some(ca) = &self.ca_file {
            options = options.add_root_certificates(base.join(ca));
        }
        options
            .connect(self.url.as_str())
            .await
            .map_err(|e| HostError::Cluster(format!("cannot connect to NATS at {}: {e}", self.url)))
    }
}

/// The shortest ack wait: JetStream redelivering sooner would hand a delivery to a second worker
/// while the first is still starting on it.
const MIN_ACK_WAIT: Duration = Duration::from_millis(100);

/// The stream and subjects of one organism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The JetStream work-queue stream.
    pub stream: String,
    /// `agentpump.<name>`.
    pub prefix: String,
}

impl Names {
    /// Where deliveries to `listener` are published.
    pub fn work(&self, listener: &str) -> String {
        format!("{}.work.{}", self.prefix, token(listener))
    }

    /// Where the outputs of delivery `id` come back: per partition when the threads are
    /// partitioned (each partition's pump, on whichever host, hears its own).
    pub fn out(&self, partition: Option<Partition>, id: impl std::fmt::Display) -> String {
        match partition {
            Some(p) => format!("{}.out.p{}.{id}", self.prefix, p.index()),
            None => format!("{}.out.{id}", self.prefix),
        }
    }

    /// Whether `subject` is exactly the outcome subject of `delivery` in some partition
    /// (`<prefix>.out.p<N>.<delivery>`): where a work item may ask its outcome to go.
    pub fn is_out(&self, subject: &str, delivery: impl std::fmt::Display) -> bool {
        let delivery = delivery.to_string();
        subject
            .strip_prefix(&self.prefix)
            .and_then(|rest| rest.strip_prefix(".out.p"))
            .and_then(|rest| rest.strip_suffix(delivery.as_str()))
            .and_then(|rest| rest.strip_suffix('.'))
            .is_some_and(|n| {
                !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit())
            })
    }

    /// The durable consumer shared by every worker of `listener`.
    pub fn consumer(&self, listener: &str) -> String {
        token(listener)
    }

    /// Creates the stream when it does not exist yet (the pump and every worker call this).
    ///
    /// # Errors
    ///
    /// JetStream is not enabled or the server cannot be reached.
    pub async fn stream(
        &self,
        js: &jetstream::Context,
    ) -> Result<jetstream::stream::Stream, HostError> {
        js.get_or_create_stream(jetstream::stream::Config {
            name: self.stream.clone(),
            subjects: vec![format!("{}.work.>", self.prefix)],
            retention: jetstream::stream::RetentionPolicy::WorkQueue,
            storage: jetstream::stream::StorageType::File,
            ..Default::default()
        })
        .await
        .map_err(|e| {
            HostError::Cluster(format!(
                "cannot create the JetStream stream {} (is the server started with -js?): {e}",
                self.stream
            ))
        })
    }
}

/// A subject token (and stream or consumer name) from a name: `.`, `*`, `>` and white space
/// become `_`.
fn token(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c == '.' || c == '*' || c == '>' || c.is_whitespace() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_work_item_may_name_only_its_own_partition_outcome_subject() {
        let cluster: ClusterSection = toml::from_str("url = \"nats://127.0.0.1:4222\"").unwrap();
        let names = cluster.names("far");
        let delivery = crate::MessageId::new();
        let p1 = Partition::new(1, 3).unwrap();
        assert!(names.is_out(&names.out(Some(p1), delivery), delivery));
        let forged = [
            names.out(None, delivery),
            names.out(Some(p1), crate::MessageId::new()),
            format!("{}.out.p.{delivery}", names.prefix),
            format!("{}.out.p1x.{delivery}", names.prefix),
            format!("{}.out.p1.{delivery}\r\nPUB x 1", names.prefix),
            format!("{}.out.p1..{delivery}", names.prefix),
            format!("elsewhere.out.p1.{delivery}"),
        ];
        for subject in forged {
            assert!(!names.is_out(&subject, delivery), "{subject:?}");
        }
    }
}
