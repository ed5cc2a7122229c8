//! `agentpump worker --organism FILE [--listeners a,b]`: runs an organism's remote listeners
//! for a pump elsewhere. Each listener's deliveries come from its durable JetStream consumer,
//! shared by every worker (each delivery to one of them); the worker runs the same `Listener`
//! with a `Context` on the history view sent along, publishes the outcome on the delivery's
//! outcome subject, and does not acknowledge: the pump does, after its commit.

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::{self, AckKind, consumer};
use async_nats::{Client, HeaderMap};
use futures_util::{FutureExt as _, StreamExt as _};

use super::wire::{ACK_HEADER, Outcome, WireError, WorkItem};
use super::{ClusterSection, Names};
use crate::host::HostError;
use crate::host::organism::Organism;
use crate::listener::Delivery;
use crate::{Context, Limits, Registration};

/// Deliveries one worker handles at once per listener unless told otherwise.
pub const DEFAULT_CONCURRENCY: usize = 4;

/// How long one pull request waits for work before asking again.
const PULL_EXPIRES: Duration = Duration::from_secs(2);

/// Runs the worker until SIGINT or SIGTERM; returns a summary line.
///
/// # Errors
///
/// The organism has no `[cluster]`, names no such listener, or NATS/JetStream is unusable.
pub fn run(
    path: &Path,
    listeners: Option<Vec<String>>,
    concurrency: usize,
) -> Result<String, HostError> {
    let organism = Organism::load(path)?;
    let origin = path.display().to_string();
    let cluster = organism.cluster.clone().ok_or_else(|| {
        HostError::Cluster(format!(
            "{origin} has no [cluster] section: a worker needs one"
        ))
    })?;
    let wanted = listeners.unwrap_or_else(|| organism.remote_names());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(HostError::System)?;
    // LLM agents served here see the `[[mcp]]` tools in their prompts like the pump's do.
    let all = runtime.block_on(organism.start_registrations(&origin, &[]))?;
    let mut serve = Vec::new();
    for name in &wanted {
        let found = all
            .iter()
            .find(|r| &*r.name == name.as_str())
            .ok_or_else(|| HostError::Cluster(format!("{origin} has no listener `{name}`")))?;
        serve.push(found.clone());
    }
    // The pump calls the MCP tools; a worker's agents needed only their docs.
    drop(all);
    if serve.is_empty() {
        return Err(HostError::Cluster(format!(
            "{origin} has no remote listener (`remote = true`) and --listeners names none"
        )));
    }
    let config = organism.config(&origin)?;
    let limits = config.limits;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    runtime.block_on(async move {
        // Spans of the work items, in the pump's traces (kept until the worker stops).
        let _telemetry = crate::pump::Telemetry::start(&config.telemetry)?;
        let client = cluster.connect(&base, "agentpump worker").await?;
        let js = jetstream::new(client.clone());
        let names = cluster.names(&organism.organism.name);
        let stream = loop {
            match names.stream(&js).await {
                Ok(stream) => break stream,
                Err(error) => {
                    tracing::warn!(%error, "waiting for JetStream");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        };
        let worker = format!("worker-{}", std::process::id());
        let shared = Arc::new(Shared {
            client,
            names,
            limits,
            worker,
            cluster: cluster.clone(),
        });
        for registration in serve {
            let consumer = consumer_for(&stream, &shared.names, &registration, &cluster).await?;
            for _ in 0..concurrency.max(1) {
                let (shared, consumer, r) =
                    (Arc::clone(&shared), consumer.clone(), registration.clone());
                tokio::spawn(async move { shared.pull(consumer, r).await });
            }
        }
        println!(
            "agentpump: worker serving {} on {}",
            wanted.join(", "),
            cluster.url
        );
        crate::host::run::signal().await;
        Ok("agentpump: worker stopped\n".to_owned())
    })
}

async fn consumer_for(
    stream: &jetstream::stream::Stream,
    names: &Names,
    registration: &Registration,
    cluster: &ClusterSection,
) -> Result<consumer::PullConsumer, HostError> {
    let name = names.consumer(&registration.name);
    // Created, or updated when it exists: an ack wait changed in the organism (or by a new
    // default) reaches the durable consumer the workers share.
    stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some(name.clone()),
            filter_subject: names.work(&registration.name),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: cluster.ack_wait(registration.delivery_timeout()),
            ..Default::default()
        })
        .await
        .map_err(|e| HostError::Cluster(format!("cannot create the consumer {name}: {e}")))
}

/// What every pull loop of one worker shares.
struct Shared {
    client: Client,
    names: Names,
    limits: Limits,
    worker: String,
    /// The `[cluster]` section: each listener's ack wait comes from it.
    cluster: ClusterSection,
}

impl Shared {
    /// Pulls one delivery at a time for `registration`, forever; NATS errors are logged and
    /// retried (the client reconnects by itself).
    async fn pull(self: Arc<Self>, consumer: consumer::PullConsumer, registration: Registration) {
        loop {
            let batch = consumer
                .fetch()
                .max_messages(1)
                .expires(PULL_EXPIRES)
                .messages()
                .await;
            let mut batch = match batch {
                Ok(batch) => batch,
                Err(error) => {
                    tracing::warn!(%error, listener = %registration.name, "pull failed; retrying");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            while let Some(message) = batch.next().await {
                match message {
                    Ok(message) => self.serve(&registration, message).await,
                    Err(error) => tracing::warn!(%error, "bad message from JetStream"),
                }
            }
        }
    }

    /// Handles one work item and publishes its outcome (with the item's ack subject).
    async fn serve(&self, registration: &Registration, message: jetstream::Message) {
        let item: WorkItem = match serde_json::from_slice(&message.payload) {
            Ok(item) => item,
            Err(error) => {
                tracing::warn!(%error, "unreadable work item terminated");
                let _ = message.ack_with(AckKind::Term).await;
                return;
            }
        };
        // The pump's partition's subject, when it is exactly one for this delivery.
        let asked = item.out.clone().filter(|s| {
            let ok = self.names.is_out(s, item.delivery);
            if !ok {
                tracing::warn!(subject = %s, delivery = %item.delivery, "a work item asked for its outcome on a subject that is not its partition's; sent on the unpartitioned one");
            }
            ok
        });
        let outcome = self.handle(registration, item, &message).await;
        let mut headers = HeaderMap::new();
        if let Some(reply) = &message.reply {
            headers.insert(ACK_HEADER, reply.as_str());
        }
        let subject = asked.unwrap_or_else(|| self.names.out(None, outcome.delivery));
        let body = serde_json::to_vec(&outcome).unwrap_or_default();
        if let Err(error) = self
            .client
            .publish_with_headers(subject, headers, body.into())
            .await
        {
            tracing::warn!(%error, "outcome not sent; the delivery will come back");
        }
        let _ = self.client.flush().await;
        tracing::info!(delivery = %outcome.delivery, worker = %self.worker, listener = %registration.name, "handled");
    }

    /// Runs the handler within its timeout, catching panics, telling JetStream it is still at
    /// work every third of the ack wait.
    async fn handle(
        &self,
        r: &Registration,
        item: WorkItem,
        message: &jetstream::Message,
    ) -> Outcome {
        let mut outcome = Outcome {
            delivery: item.delivery,
            worker: self.worker.clone(),
            outputs: Vec::new(),
            usage: Default::default(),
            spent: Default::default(),
            error: None,
        };
        let envelope = match item.record.to_envelope(&self.limits) {
            Ok(envelope) => envelope,
            Err(e) => {
                outcome.error = Some(WireError {
                    kind: "failed".into(),
                    message: format!("cannot rebuild the delivery: {e}"),
                });
                return outcome;
            }
        };
        let delivery = Delivery::new(envelope);
        let mut cx = Context::detached(
            item.thread,
            Arc::clone(&r.name),
            item.delivery,
            item.history,
            &item.budget,
        );
        let traced = crate::pump::remote::work(item.traceparent.as_deref(), r, delivery.envelope());
        let handling =
            AssertUnwindSafe(traced.run(r.listener.handle(&delivery, &mut cx))).catch_unwind();
        let handled = tokio::time::timeout(r.timeout, async {
            tokio::pin!(handling);
            let mut beat = tokio::time::interval(self.cluster.ack_wait(r.delivery_timeout()) / 3);
            beat.tick().await;
            loop {
                tokio::select! {
                    done = &mut handling => break done,
                    _ = beat.tick() => { let _ = message.ack_with(AckKind::Progress).await; }
                }
            }
        })
        .await;
        outcome.error = match handled {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(e))) => Some(WireError::from_listener(&e)),
            Ok(Err(panic)) => Some(WireError {
                kind: "panicked".into(),
                message: panic_text(&*panic),
            }),
            Err(_) => Some(WireError {
                kind: "timeout".into(),
                message: format!("did not finish within {} ms", r.timeout.as_millis()),
            }),
        };
        outcome.outputs = cx.output_texts();
        (outcome.usage, outcome.spent) = cx.usage_so_far();
        outcome
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic payload".to_owned())
}
