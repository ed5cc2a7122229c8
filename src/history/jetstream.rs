//! [`JetStreamHistory`]: history kept in a NATS JetStream stream — replicated by the NATS
//! cluster — and read from an index in memory that is rebuilt from the stream when it opens.
//!
//! The appends waiting at once go as one stream message (a group, split in parts past the
//! server's largest message) on the store's subject, published with `Nats-Expected-Last-Sequence` (so a second writer on the
//! stream is refused, never interleaved) and `Nats-Msg-Id` (so a publish retried across a
//! leader change is kept once). The message carries the batch as the pump handed it, the time
//! it was accepted and the sequence number and digest the index gave each record: replaying the
//! stream rebuilds the same records, and a message whose records come out different (an
//! altered stream) stops the open, naming its stream sequence.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use async_nats::HeaderMap;
use async_nats::jetstream::{self, stream};
use async_trait::async_trait;
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::memory::now_us;
use super::{
    Batch, Delivered, HistoryError, HistoryStore, Mark, MemoryHistory, NewRecord, Record,
    RecordKind, Recovery, Ticket,
};
use crate::governor::HaltingReport;
use crate::{Envelope, Limits, MessageId, Payload, ThreadId, ThreadInfo, ThreadState};

mod lease;

use lease::Lease;
pub use lease::{LeaseOptions, host_name};

/// Where the stream is and how it is kept.
#[derive(Debug, Clone)]
pub struct JetStreamOptions {
    /// The NATS servers, comma-separated (`nats://127.0.0.1:4222,nats://127.0.0.1:4223`).
    pub url: String,
    /// The stream's name.
    pub stream: String,
    /// How many servers keep a copy (1, or 3 in a three-node cluster).
    pub replicas: usize,
    /// The limits the pump parses payloads with: a replayed payload is parsed again with them.
    pub limits: Limits,
    /// How long one publish may wait for its acknowledgement before it is retried, and how long
    /// retries may go on (a leader change in the cluster takes a few seconds) before the store
    /// stops taking writes.
    pub patience: Duration,
    /// The writer's lease, when several stores may open the stream (one writes, the others
    /// wait and take over when its lease lapses; see [`LeaseOptions`]). `None`: this store
    /// writes at once, fenced only by the stream's expected last sequence.
    pub lease: Option<LeaseOptions>,
}

impl JetStreamOptions {
    /// Options for `stream` on the servers at `url`: one replica, default limits, 10 s patience.
    pub fn new(url: impl Into<String>, stream: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            stream: stream.into(),
            replicas: 1,
            limits: Limits::default(),
            patience: Duration::from_secs(10),
            lease: None,
        }
    }

    /// The subject the store appends to: `agentpump.history.STREAM`.
    pub fn subject(&self) -> String {
        format!("agentpump.history.{}", self.stream)
    }
}

/// History in a JetStream stream; see the module's documentation.
///
/// Reads are answered from the index in memory; a write is durable once the stream (its
/// replicas) acknowledged it. After a publish fails for good the store takes no more writes
/// ([`HistoryStore::writable`] says why): the index may then hold records the stream does not,
/// and a new store opened on the stream (a restart) is the way back.
#[derive(Debug)]
pub struct JetStreamHistory {
    index: MemoryHistory,
    /// Held while an append is ordered and queued, so the stream receives batches in the order
    /// the index numbered them.
    order: Mutex<()>,
    queue: mpsc::UnboundedSender<Publish>,
    failed: Arc<OnceLock<String>>,
    /// The messages of appends the stream never acknowledged.
    refused: Arc<Mutex<HashSet<MessageId>>>,
    stream: String,
}

/// One append on its way to the stream: encoded by the writer, off the pump's append path.
struct Publish {
    wire: Wire,
    done: oneshot::Sender<Result<(), HistoryError>>,
}

/// One append as the stream holds it.
#[derive(Debug, Serialize, Deserialize)]
struct Wire {
    /// When the batch was accepted (every record of it carries this time).
    time_us: i64,
    records: Vec<WireRecord>,
    threads: Vec<ThreadInfo>,
    delivered: Option<Delivered>,
    reports: Vec<HaltingReport>,
    /// Each record's sequence number and digest (hex) as the index sealed it.
    sealed: Sealed,
}

#[derive(Debug, Serialize, Deserialize)]
struct WireRecord {
    id: MessageId,
    from: Arc<str>,
    to: Option<Arc<str>>,
    thread: ThreadId,
    in_reply_to: Option<MessageId>,
    kind: RecordKind,
    pending: bool,
    payload: Arc<str>,
}

/// Each record's sequence number and digest (hex), as sealed.
type Sealed = Vec<(u64, String)>;

/// The header naming a message's part of a split append: `I/N`.
const PART: &str = "Agentpump-Part";

/// The header of a lease holder's fence: the lease's epoch.
const LEASE_EPOCH: &str = "Agentpump-Lease-Epoch";

impl Wire {
    fn of(batch: &Batch, time_us: i64) -> Self {
        let records = batch
            .records
            .iter()
            .map(|r| {
                let e = &r.envelope;
                WireRecord {
                    id: e.id(),
                    from: Arc::clone(e.from_shared()),
                    to: e.to_shared().cloned(),
                    thread: e.thread(),
                    in_reply_to: e.in_reply_to(),
                    kind: r.kind,
                    pending: r.pending,
                    payload: e.payload().to_shared(),
                }
            })
            .collect();
        Self {
            time_us,
            records,
            threads: batch.threads.clone(),
            delivered: batch.delivered.clone(),
            reports: batch.reports.clone(),
            sealed: Vec::new(),
        }
    }

    /// The batch again, its payloads parsed with `limits`.
    fn batch(self, limits: &Limits) -> Result<(Batch, i64, Sealed), String> {
        let records = self
            .records
            .into_iter()
            .map(|r| {
                let payload = Payload::parse(&r.payload, limits)
                    .map_err(|e| format!("record {} does not parse: {e}", r.id))?;
                let envelope = Envelope::new(r.from, r.thread, payload)
                    .with_id(r.id)
                    .with_to(r.to)
                    .with_in_reply_to(r.in_reply_to);
                Ok(NewRecord {
                    envelope,
                    kind: r.kind,
                    pending: r.pending,
                })
            })
            .collect::<Result<_, String>>()?;
        let batch = Batch {
            records,
            threads: self.threads,
            delivered: self.delivered,
            reports: self.reports,
        };
        Ok((batch, self.time_us, self.sealed))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn unavailable(what: impl Into<String>) -> HistoryError {
    HistoryError::unavailable(what)
}

/// The servers of a comma-separated URL list.
fn servers(url: &str) -> Result<Vec<async_nats::ServerAddr>, HistoryError> {
    url.split(',')
        .map(str::trim)
        .filter(|u| !u.is_empty())
        .map(|u| {
            u.parse()
                .map_err(|e| unavailable(format!("the NATS URL `{u}` is not usable: {e}")))
        })
        .collect()
}

impl JetStreamHistory {
    /// Connects to the servers, creates the stream when it does not exist (file storage,
    /// `replicas` copies, every message kept), and rebuilds the index from every message in it.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Unavailable`] when NATS cannot be reached or the stream cannot be made;
    /// [`HistoryError::Query`] when a message of the stream cannot be read back or does not
    /// rebuild the records it recorded (naming its stream sequence).
    pub async fn open(options: JetStreamOptions) -> Result<Self, HistoryError> {
        let client = async_nats::ConnectOptions::new()
            .name("agentpump history")
            .connection_timeout(Duration::from_secs(3))
            .max_reconnects(None)
            .connect(servers(&options.url)?)
            .await
            .map_err(|e| unavailable(format!("cannot connect to NATS at {}: {e}", options.url)))?;
        let mut js = jetstream::new(client.clone());
        js.set_timeout(options.patience.min(Duration::from_secs(5)));
        let subject = options.subject();
        let lease = match &options.lease {
            Some(lease) => Some(Lease::take(&js, &options.stream, lease, options.replicas).await?),
            None => None,
        };
        let stream = Self::open_stream(&js, &options, &subject).await?;
        let (mut index, last) = rebuild(&stream, &options).await?;
        let max = client
            .server_info()
            .max_payload
            .saturating_sub(4096)
            .max(4096);
        let failed = Arc::new(OnceLock::new());
        let refused = Arc::new(Mutex::new(HashSet::new()));
        let (queue, pending) = mpsc::unbounded_channel();
        let mut writer = Writer {
            js,
            subject,
            last,
            max,
            patience: options.patience,
            failed: Arc::clone(&failed),
            refused: Arc::clone(&refused),
            stream: options.stream.clone(),
        };
        if let Some(lease) = lease {
            // The fence: this holder's first message moves the stream on, so a store that lost
            // the lease without knowing yet is refused at its next append. A message appended
            // since the replay (by that store) means replaying again first.
            while !writer.fence(lease.epoch()).await.map_err(unavailable)? {
                (index, writer.last) = rebuild(&stream, &options).await?;
            }
            lease.keep(&failed);
        }
        tokio::spawn(writer.run(pending));
        Ok(Self {
            index,
            order: Mutex::new(()),
            queue,
            failed,
            refused,
            stream: options.stream,
        })
    }

    /// The stream, created when missing; retried while the cluster elects its leaders.
    async fn open_stream(
        js: &jetstream::Context,
        options: &JetStreamOptions,
        subject: &str,
    ) -> Result<stream::Stream, HistoryError> {
        let config = stream::Config {
            name: options.stream.clone(),
            subjects: vec![subject.to_owned()],
            storage: stream::StorageType::File,
            num_replicas: options.replicas.max(1),
            duplicate_window: Duration::from_secs(120),
            ..stream::Config::default()
        };
        let until = Instant::now() + options.patience;
        loop {
            match js.get_or_create_stream(config.clone()).await {
                Ok(stream) => return Ok(stream),
                Err(e) if Instant::now() < until => {
                    tracing::info!(error = %e, "the history stream is not ready; trying again");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => {
                    return Err(unavailable(format!(
                        "cannot open the history stream `{}` ({} replica(s)): {e}",
                        options.stream, config.num_replicas
                    )));
                }
            }
        }
    }

    /// The stream's name.
    pub fn stream(&self) -> &str {
        &self.stream
    }
}

/// Why a replay stopped: the stream could not be read (worth another try while the cluster
/// elects a leader), or a message of it is not what was written.
enum Stopped {
    Read(String),
    Bad(HistoryError),
}

fn read_error(e: impl std::fmt::Display) -> Stopped {
    Stopped::Read(format!("cannot read the history stream: {e}"))
}

/// The index rebuilt from every message of `stream`, and the stream's last sequence; a read
/// that fails is tried again from the start while patience lasts.
async fn rebuild(
    stream: &stream::Stream,
    options: &JetStreamOptions,
) -> Result<(MemoryHistory, u64), HistoryError> {
    let until = Instant::now() + options.patience;
    loop {
        let index = MemoryHistory::serial();
        match replay(stream, &index, options).await {
            Ok(last) => return Ok((index, last)),
            Err(Stopped::Bad(e)) => return Err(e),
            Err(Stopped::Read(e)) if Instant::now() < until => {
                tracing::info!(error = %e, "reading the history stream again");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(Stopped::Read(e)) => return Err(HistoryError::query(e)),
        }
    }
}

/// Applies every message of `stream` to `index`, in order; the stream's last sequence.
async fn replay(
    stream: &stream::Stream,
    index: &MemoryHistory,
    options: &JetStreamOptions,
) -> Result<u64, Stopped> {
    let mut stream = stream.clone();
    let info = stream.info().await.map_err(read_error)?;
    let last = info.state.last_sequence;
    if info.state.messages == 0 {
        return Ok(last);
    }
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::OrderedConfig {
            deliver_policy: jetstream::consumer::DeliverPolicy::All,
            ..Default::default()
        })
        .await
        .map_err(read_error)?;
    let mut messages = consumer.messages().await.map_err(read_error)?;
    let mut parts: Vec<u8> = Vec::new();
    let mut reached = 0;
    while let Some(message) = messages.next().await {
        let message = message.map_err(read_error)?;
        let seq = message.info().map_err(read_error)?.stream_sequence;
        let part = message
            .headers
            .as_ref()
            .and_then(|h| h.get(PART))
            .map(|v| v.as_str().to_owned());
        parts.extend_from_slice(&message.payload);
        let whole = part
            .as_deref()
            .and_then(|p| p.split_once('/'))
            .is_none_or(|(i, n)| i == n);
        if whole {
            apply(index, &std::mem::take(&mut parts), &options.limits).map_err(|e| {
                Stopped::Bad(HistoryError::query(format!(
                    "message {seq} of the history stream `{}`: {e}",
                    options.stream
                )))
            })?;
        }
        reached = seq;
        if seq >= last {
            break;
        }
    }
    if reached < last || !parts.is_empty() {
        return Err(read_error(format!(
            "it ended at message {reached}, before its last, {last}"
        )));
    }
    Ok(last)
}

/// Applies one append read back from the stream, checking it rebuilds what was recorded.
fn apply(index: &MemoryHistory, body: &[u8], limits: &Limits) -> Result<(), String> {
    let group: Vec<Wire> =
        serde_json::from_slice(body).map_err(|e| format!("not a group of appends: {e}"))?;
    for (i, wire) in group.into_iter().enumerate() {
        apply_one(index, wire, limits).map_err(|e| format!("append {} of it: {e}", i + 1))?;
    }
    Ok(())
}

/// Applies one append of a group.
fn apply_one(index: &MemoryHistory, wire: Wire, limits: &Limits) -> Result<(), String> {
    let (batch, time_us, recorded) = wire.batch(limits)?;
    let mut sealed = Vec::with_capacity(recorded.len());
    index.append_at(batch, time_us, Some(&mut sealed));
    let sealed: Sealed = sealed
        .into_iter()
        .map(|(seq, digest)| (seq, hex::encode(digest)))
        .collect();
    if sealed != recorded {
        let at = sealed
            .iter()
            .zip(&recorded)
            .position(|(a, b)| a != b)
            .unwrap_or(sealed.len().min(recorded.len()));
        return Err(format!(
            "its records do not rebuild as recorded (record {} of it: rebuilt {:?}, recorded {:?}): the stream was altered",
            at + 1,
            sealed.get(at),
            recorded.get(at)
        ));
    }
    Ok(())
}

/// The most appends one stream message carries.
const GROUP: usize = 256;

/// One stream message's body: the group's appends as a JSON array, in order.
fn body(group: &[Publish]) -> Result<Vec<u8>, String> {
    let wires: Vec<&Wire> = group.iter().map(|p| &p.wire).collect();
    serde_json::to_vec(&wires).map_err(|e| format!("an append does not encode: {e}"))
}

/// Publishes groups of appends in order, each acknowledged before the next.
struct Writer {
    js: jetstream::Context,
    subject: String,
    /// The stream's last sequence as this writer knows it.
    last: u64,
    /// The largest message part.
    max: usize,
    patience: Duration,
    failed: Arc<OnceLock<String>>,
    refused: Arc<Mutex<HashSet<MessageId>>>,
    stream: String,
}

impl Writer {
    /// Publishes what is queued as groups: every append waiting when the last group was
    /// acknowledged goes in the next one (a JSON array of appends, in order), up to
    /// [`GROUP`] appends — many deliveries wait for one acknowledgement, as SQLite's group
    /// commit has many wait for one transaction.
    async fn run(mut self, mut queue: mpsc::UnboundedReceiver<Publish>) {
        while let Some(first) = queue.recv().await {
            let mut group = vec![first];
            while group.len() < GROUP {
                match queue.try_recv() {
                    Ok(next) => group.push(next),
                    Err(_) => break,
                }
            }
            let outcome = match self.failed.get() {
                Some(reason) => Err(reason.clone()),
                None => match body(&group) {
                    Ok(body) => self.publish(&body).await,
                    Err(reason) => Err(reason),
                }
                .map_err(|reason| {
                    let reason = self.failed.get_or_init(|| reason).clone();
                    tracing::error!(%reason, "the history stream stopped taking writes");
                    reason
                }),
            };
            if outcome.is_err() {
                // Their messages were never acknowledged: a pump drops them from its queues.
                let ids = group
                    .iter()
                    .flat_map(|p| p.wire.records.iter().map(|r| r.id));
                lock(&self.refused).extend(ids);
            }
            for publish in group {
                let _ = publish.done.send(outcome.clone().map_err(unavailable));
            }
        }
    }

    /// Publishes one append (in parts if it is large), retrying a part whose acknowledgement
    /// does not come while patience lasts.
    async fn publish(&mut self, body: &[u8]) -> Result<(), String> {
        let chunks: Vec<&[u8]> = body.chunks(self.max).collect();
        let id = MessageId::new();
        for (i, chunk) in chunks.iter().enumerate() {
            let mut headers = HeaderMap::new();
            headers.insert("Nats-Msg-Id", format!("{id}.{i}").as_str());
            headers.insert(
                "Nats-Expected-Last-Sequence",
                self.last.to_string().as_str(),
            );
            if chunks.len() > 1 {
                headers.insert(PART, format!("{}/{}", i + 1, chunks.len()).as_str());
            }
            self.last = self.part(headers, chunk).await?;
        }
        Ok(())
    }

    /// Publishes the lease holder's fence: an empty group (nothing to replay) naming the
    /// lease's epoch, expecting the stream's last sequence to be the one replayed. False when
    /// the stream moved on since (another store appended): replay again, then fence.
    async fn fence(&mut self, epoch: u64) -> Result<bool, String> {
        let mut headers = HeaderMap::new();
        headers.insert(LEASE_EPOCH, epoch.to_string().as_str());
        headers.insert(
            "Nats-Expected-Last-Sequence",
            self.last.to_string().as_str(),
        );
        let sent = self
            .js
            .publish_with_headers(self.subject.clone(), headers, b"[]".to_vec().into())
            .await
            .map_err(|e| format!("cannot fence the history stream `{}`: {e}", self.stream))?;
        match sent.await {
            Ok(ack) => {
                self.last = ack.sequence;
                Ok(true)
            }
            Err(e) if e.kind() == jetstream::context::PublishErrorKind::WrongLastSequence => {
                Ok(false)
            }
            Err(e) => Err(format!(
                "cannot fence the history stream `{}`: {e}",
                self.stream
            )),
        }
    }

    async fn part(&self, headers: HeaderMap, chunk: &[u8]) -> Result<u64, String> {
        let until = Instant::now() + self.patience;
        let mut pause = Duration::from_millis(50);
        loop {
            let sent = self
                .js
                .publish_with_headers(self.subject.clone(), headers.clone(), chunk.to_vec().into())
                .await;
            let acked = match sent {
                Ok(ack) => ack.await.map_err(|e| {
                    (
                        e.kind() == jetstream::context::PublishErrorKind::WrongLastSequence,
                        e.to_string(),
                    )
                }),
                Err(e) => Err((false, e.to_string())),
            };
            match acked {
                Ok(ack) => return Ok(ack.sequence),
                Err((true, e)) => {
                    return Err(format!(
                        "another writer appended to the history stream `{}` (this store expected its last sequence to be {}): {e}; this store takes no more writes",
                        self.stream, self.last
                    ));
                }
                Err((false, e)) if Instant::now() < until => {
                    tracing::warn!(error = %e, "a history append was not acknowledged; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
                Err((false, e)) => {
                    return Err(format!(
                        "the history stream `{}` did not acknowledge an append within {:?}: {e}; this store takes no more writes",
                        self.stream, self.patience
                    ));
                }
            }
        }
    }
}

#[async_trait]
impl HistoryStore for JetStreamHistory {
    fn append(&self, batch: Batch) -> Result<Ticket, HistoryError> {
        self.writable()?;
        let order = lock(&self.order);
        let time_us = now_us();
        let mut wire = Wire::of(&batch, time_us);
        let mut sealed = Vec::with_capacity(wire.records.len());
        self.index.append_at(batch, time_us, Some(&mut sealed));
        wire.sealed = sealed
            .into_iter()
            .map(|(seq, digest)| (seq, hex::encode(digest)))
            .collect();
        let (done, outcome) = oneshot::channel();
        self.queue
            .send(Publish { wire, done })
            .map_err(|_| unavailable("the history stream's writer stopped"))?;
        drop(order);
        Ok(Ticket::pending(async move {
            outcome
                .await
                .unwrap_or_else(|_| Err(unavailable("the history stream's writer stopped")))
        }))
    }

    fn writable(&self) -> Result<(), HistoryError> {
        match self.failed.get() {
            Some(reason) => Err(unavailable(reason.clone())),
            None => Ok(()),
        }
    }

    fn was_refused(&self, id: MessageId) -> bool {
        self.failed.get().is_some() && lock(&self.refused).contains(&id)
    }

    async fn thread(&self, thread: ThreadId, since: u64) -> Result<Vec<Record>, HistoryError> {
        self.index.thread(thread, since).await
    }

    async fn record(&self, id: MessageId) -> Result<Option<Record>, HistoryError> {
        self.index.record(id).await
    }

    async fn marks(&self, thread: ThreadId) -> Result<Vec<Mark>, HistoryError> {
        self.index.marks(thread).await
    }

    async fn pending(&self) -> Result<Vec<Record>, HistoryError> {
        self.index.pending().await
    }

    async fn reports(&self, thread: ThreadId) -> Result<Vec<HaltingReport>, HistoryError> {
        self.index.reports(thread).await
    }

    async fn threads(&self, state: Option<ThreadState>) -> Result<Vec<ThreadInfo>, HistoryError> {
        self.index.threads(state).await
    }

    fn recovery(&self) -> Result<Recovery, HistoryError> {
        self.index.recovery()
    }

    async fn verify(&self) -> Result<u64, HistoryError> {
        self.index.verify().await
    }
}
