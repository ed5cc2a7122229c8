//! The pump's side: [`Hub`] holds the NATS connection and routes outcomes to the deliveries
//! waiting for them; `Remote` is the listener registered in place of a `remote = true` one.
//! It publishes the delivery to the listener's work subject and awaits the outcome; the pump
//! then applies the outputs exactly as a local handler's (the same `apply_done`: parsed again,
//! planned, governed, one commit), and acknowledges the work item only after that commit.

use std::sync::Arc;

use async_nats::jetstream;
use async_nats::{Client, HeaderMap};
use async_trait::async_trait;
use dashmap::DashMap;
use futures_util::StreamExt as _;
use tokio::sync::{OnceCell, Semaphore, oneshot};

use super::wire::{ACK_HEADER, Outcome, WorkItem};
use super::{ClusterSection, Names};
use crate::history::HistoryStore;
use crate::host::HostError;
use crate::thread::Partition;
use crate::{Context, Delivery, Listener, ListenerError, MessageId, Registration};

/// How often a delivery waiting for NATS looks at the connection.
const RECONNECT_POLL: std::time::Duration = std::time::Duration::from_millis(50);

/// An outcome, and the acknowledgement subject of the work item it answers.
type Arrival = (Outcome, Option<String>);

/// The pump's connection to the cluster.
pub struct Hub {
    client: Client,
    js: jetstream::Context,
    names: Names,
    url: String,
    window: usize,
    in_flight: usize,
    stream: OnceCell<()>,
    waiting: DashMap<MessageId, oneshot::Sender<Arrival>>,
    store: Arc<dyn HistoryStore>,
    /// The partition whose pump this hub serves, when the threads are partitioned.
    partition: Option<Partition>,
    /// The task routing outcomes, stopped with [`Hub::stop`].
    routing: std::sync::OnceLock<tokio::task::AbortHandle>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("url", &self.url)
            .field("names", &self.names)
            .field("waiting", &self.waiting.len())
            .finish_non_exhaustive()
    }
}

impl Hub {
    /// Connects (retrying in the background when the server is away) and starts routing
    /// outcomes — of `partition`'s deliveries only, when the threads are partitioned. `store`
    /// answers whether a stray outcome's delivery is already applied.
    ///
    /// # Errors
    ///
    /// As [`ClusterSection::connect`], or the outcome subject cannot be subscribed.
    pub async fn start(
        cluster: &ClusterSection,
        base: &std::path::Path,
        organism: &str,
        store: Arc<dyn HistoryStore>,
        partition: Option<Partition>,
    ) -> Result<Arc<Self>, HostError> {
        let client = cluster.connect(base, "agentpump pump").await?;
        let mut js = jetstream::new(client.clone());
        js.set_timeout(std::time::Duration::from_secs(3));
        let names = cluster.names(organism);
        let outcomes = client
            .subscribe(names.out(partition, "*"))
            .await
            .map_err(|e| HostError::Cluster(format!("cannot subscribe to outcomes: {e}")))?;
        let hub = Arc::new(Self {
            client,
            js,
            names,
            url: cluster.url.clone(),
            window: cluster.history_window.max(1),
            in_flight: cluster.in_flight.max(1),
            stream: OnceCell::new(),
            waiting: DashMap::new(),
            store,
            partition,
            routing: std::sync::OnceLock::new(),
        });
        let routing = tokio::spawn(Arc::clone(&hub).route(outcomes));
        let _ = hub.routing.set(routing.abort_handle());
        Ok(hub)
    }

    /// Stops routing outcomes (the partition's pump stopped here: whoever holds it next has a
    /// hub of its own). Deliveries still waiting give up as their handler calls time out.
    pub fn stop(&self) {
        if let Some(routing) = self.routing.get() {
            routing.abort();
        }
    }

    /// Whether the connection to NATS is up (for `/health`).
    pub fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `registration` served by workers: its listener replaced by a `Remote` proxy.
    pub fn remote(self: &Arc<Self>, mut registration: Registration) -> Registration {
        let name = Arc::clone(&registration.name);
        registration.listener = Arc::new(Remote {
            subject: self.names.work(&name),
            patience: registration.timeout / 2,
            hub: Arc::clone(self),
            name,
            slots: Semaphore::new(self.in_flight),
        });
        registration
    }

    /// Hands each outcome to the delivery waiting for it. An outcome nobody waits for is a
    /// redelivery's (or arrived after its delivery timed out): when history shows the delivery
    /// applied — recorded and no longer pending — its work item is acknowledged and the outputs
    /// dropped; otherwise it is left unacknowledged, and JetStream hands it out again.
    async fn route(self: Arc<Self>, mut outcomes: async_nats::Subscriber) {
        while let Some(message) = outcomes.next().await {
            let ack = message
                .headers
                .as_ref()
                .and_then(|h| h.get(ACK_HEADER))
                .map(|v| v.as_str().to_owned());
            let outcome: Outcome = match serde_json::from_slice(&message.payload) {
                Ok(outcome) => outcome,
                Err(error) => {
                    tracing::warn!(%error, subject = %message.subject, "unreadable outcome dropped");
                    continue;
                }
            };
            match self.waiting.remove(&outcome.delivery) {
                Some((_, waiter)) => {
                    let _ = waiter.send((outcome, ack));
                }
                None => {
                    let hub = Arc::clone(&self);
                    tokio::spawn(async move { hub.stray(outcome.delivery, ack).await });
                }
            }
        }
    }

    async fn stray(&self, delivery: MessageId, ack: Option<String>) {
        let recorded = matches!(self.store.record(delivery).await, Ok(Some(_)));
        let pending = match self.store.pending().await {
            Ok(pending) => pending.iter().any(|r| r.id == delivery),
            Err(_) => true,
        };
        if recorded && !pending {
            tracing::info!(%delivery, "outcome of an applied delivery: acknowledged, not applied again");
            if let Some(ack) = ack {
                self.acknowledge(ack);
            }
        } else {
            tracing::debug!(%delivery, "outcome nobody waits for yet: left to redelivery");
        }
    }

    fn acknowledge(&self, ack: String) {
        let client = self.client.clone();
        tokio::spawn(async move {
            if let Err(error) = client.publish(ack, "+ACK".into()).await {
                tracing::warn!(%error, "acknowledgement not sent; the work item will come back");
            }
        });
    }

    async fn publish(&self, subject: &str, item: &WorkItem) -> Result<(), String> {
        self.stream
            .get_or_try_init(|| async { self.names.stream(&self.js).await.map(|_| ()) })
            .await
            .map_err(|e| e.to_string())?;
        let mut headers = HeaderMap::new();
        // JetStream drops a second publish of one delivery (a restarted pump re-dispatching it)
        // within its duplicate window.
        headers.insert("Nats-Msg-Id", item.delivery.to_string().as_str());
        let body = serde_json::to_vec(item).map_err(|e| e.to_string())?;
        let ack = self
            .js
            .publish_with_headers(subject.to_owned(), headers, body.into())
            .await
            .map_err(|e| e.to_string())?;
        ack.await.map(|_| ()).map_err(|e| e.to_string())
    }
}

/// A listener served by workers: publishes each delivery and awaits its outcome.
struct Remote {
    hub: Arc<Hub>,
    /// How long a delivery waits for NATS to be reachable and take it: half the listener's
    /// timeout, so that an unreachable server gives `upstream-failed` naming it rather than a
    /// bare `handler-timeout`.
    patience: std::time::Duration,
    name: Arc<str>,
    subject: String,
    slots: Semaphore,
}

/// Takes a delivery off the waiting list when its handler call ends (a timeout drops it).
struct Waiting<'a>(&'a Hub, MessageId);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.remove(&self.1);
    }
}

#[async_trait]
impl Listener for Remote {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        // At most `in_flight` deliveries out at once; the next waits for a slot (within the
        // listener's timeout), and the thread's own bounded queue fills behind it.
        let _slot = self
            .slots
            .acquire()
            .await
            .map_err(|_| ListenerError::Failed("the hub is closed".into()))?;
        let hub = &*self.hub;
        let mut history = cx
            .history()
            .await
            .map_err(|e| ListenerError::Failed(format!("cannot read history: {e}")))?;
        let at = history.iter().rposition(|r| r.id == msg.id());
        let record = match at {
            Some(at) => history[at].clone(),
            None => hub
                .store
                .record(msg.id())
                .await
                .ok()
                .flatten()
                .ok_or_else(|| ListenerError::Failed("the delivery is not in history".into()))?,
        };
        let excess = history.len().saturating_sub(hub.window);
        history.drain(..excess);
        let item = WorkItem {
            delivery: msg.id(),
            thread: msg.thread(),
            listener: self.name.to_string(),
            record,
            history,
            budget: cx.remaining(),
            traceparent: crate::pump::remote::traceparent(),
            out: hub.partition.map(|p| hub.names.out(Some(p), msg.id())),
        };
        let (tx, rx) = oneshot::channel();
        hub.waiting.insert(item.delivery, tx);
        let _waiting = Waiting(hub, item.delivery);
        let published = tokio::time::timeout(self.patience, async {
            while !hub.connected() {
                tokio::time::sleep(RECONNECT_POLL).await;
            }
            hub.publish(&self.subject, &item).await
        })
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} ms", self.patience.as_millis())));
        published.map_err(|e| {
            let state = if hub.connected() {
                "connected"
            } else {
                "not connected"
            };
            ListenerError::Upstream(format!(
                "cannot hand the delivery to NATS at {} ({state}): {e}",
                hub.url
            ))
        })?;
        let (outcome, ack) = rx
            .await
            .map_err(|_| ListenerError::Failed("the hub stopped".into()))?;
        tracing::debug!(delivery = %outcome.delivery, worker = %outcome.worker, "outcome");
        if let Some(ack) = ack {
            let hub = Arc::clone(&self.hub);
            cx.on_commit(move || hub.acknowledge(ack));
        }
        apply(outcome, cx)
    }
}

/// Puts a worker's outputs into the context as a local handler would have.
fn apply(outcome: Outcome, cx: &mut Context) -> Result<(), ListenerError> {
    for (target, text) in outcome.outputs {
        match target.as_str() {
            "reply" => cx.reply(text),
            "route" => cx.emit(text),
            "text" => cx.emit_text(text),
            other => match other.strip_prefix("send:") {
                Some(to) => cx.send(to, text),
                // An output the pump cannot place: free text, so zero trust still applies.
                None => cx.emit_text(text),
            },
        }
    }
    let mut usage = outcome.usage;
    // What the worker withdrew was checked there against the budget as it was at dispatch; the
    // pump charges it now, with the reported usage, and a budget it overspent (the thread spent
    // elsewhere meanwhile, or the usage came in over the estimate) halts the thread.
    usage.add(&outcome.spent);
    cx.usage(usage);
    match outcome.error {
        None => Ok(()),
        Some(error) => match error.to_listener() {
            Some(error) => Err(error),
            None => std::panic::panic_any(error.message),
        },
    }
}
