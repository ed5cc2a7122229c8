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
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use super::memory::{Sealing, now_us};
use super::prune::archive_all;
use super::{
    Anchor, Archive, Batch, Delivered, HistoryError, HistoryStore, Mark, MemoryHistory, NewRecord,
    Pruned, Record, RecordKind, Recovery, Ticket,
};
use crate::governor::HaltingReport;
use crate::{Envelope, Limits, MessageId, Payload, ThreadId, ThreadInfo, ThreadState};

mod lease;
mod replay;
mod retention;

use lease::Lease;
pub use lease::{LeaseOptions, host_name};
use replay::rebuild;
use retention::{Kept, PruneMark};

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
#[derive(Debug, Default, Serialize, Deserialize)]
struct Wire {
    /// When the batch was accepted (every record of it carries this time).
    time_us: i64,
    records: Vec<WireRecord>,
    threads: Vec<ThreadInfo>,
    delivered: Option<Delivered>,
    reports: Vec<HaltingReport>,
    /// Each record's sequence number and digest (hex) as the index sealed it.
    sealed: Sealed,
    /// A prune (then nothing else is in this append): see `jetstream/retention.rs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    prune: Option<PruneMark>,
    /// The seq of the record the delivered mark names, as the index found it (not stored:
    /// found again at a replay).
    #[serde(skip)]
    marked: Option<u64>,
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
            ..Self::default()
        }
    }

    /// A prune mark, accepted at `time_us`.
    fn prune(mark: PruneMark, time_us: i64) -> Self {
        Self {
            time_us,
            prune: Some(mark),
            ..Self::default()
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
        let (mut index, mut found) = rebuild(&stream, &options).await?;
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
            last: found.last,
            kept: std::mem::take(&mut found.kept),
            deleting: retention::start_deleting(stream.clone()),
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
                (index, found) = rebuild(&stream, &options).await?;
                (writer.last, writer.kept) = (found.last, std::mem::take(&mut found.kept));
            }
            lease.keep(&failed);
        }
        // Messages a prune left unneeded and a deletion missed (the writer stopped first).
        if !found.gone.is_empty() {
            let _ = writer.deleting.send(found.gone);
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
    /// What the stream's messages hold, for the prunes (`jetstream/retention.rs`).
    kept: Kept,
    /// Where the sequences of messages a prune left unneeded go to be deleted.
    deleting: mpsc::UnboundedSender<Vec<u64>>,
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
        // A prune mark goes in a message of its own: what it leaves unneeded is decided just
        // before it is published, after every message before it.
        let mut held: Option<Publish> = None;
        loop {
            let first = match held.take() {
                Some(first) => first,
                None => match queue.recv().await {
                    Some(first) => first,
                    None => break,
                },
            };
            let mut group = vec![first];
            while group.len() < GROUP && group[0].wire.prune.is_none() {
                match queue.try_recv() {
                    Ok(next) if next.wire.prune.is_some() => {
                        held = Some(next);
                        break;
                    }
                    Ok(next) => group.push(next),
                    Err(_) => break,
                }
            }
            if let Some(mark) = group[0].wire.prune.as_mut() {
                mark.deleted = self.kept.unneeded(mark);
            }
            let outcome = match self.failed.get() {
                Some(reason) => Err(reason.clone()),
                None => match body(&group) {
                    Ok(body) => self
                        .publish(&body)
                        .await
                        .map(|parts| self.note(parts, &group)),
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

    /// Notes what a published group holds (its parts' sequences given): a group of appends is
    /// kept in mind until a prune leaves it unneeded; a prune mark is placed, and the messages
    /// it lists are sent to be deleted.
    fn note(&mut self, parts: Vec<u64>, group: &[Publish]) {
        let last = parts.last().copied().unwrap_or(self.last);
        if let Some(mark) = group[0].wire.prune.as_ref() {
            self.kept.placed(last, mark);
            if !mark.deleted.is_empty() {
                let _ = self.deleting.send(mark.deleted.clone());
            }
            return;
        }
        let names = group.iter().flat_map(|p| retention::names(&p.wire));
        self.kept.message(parts, names);
    }

    /// Publishes one append (in parts if it is large), retrying a part whose acknowledgement
    /// does not come while patience lasts; the parts' stream sequences.
    async fn publish(&mut self, body: &[u8]) -> Result<Vec<u64>, String> {
        let chunks: Vec<&[u8]> = body.chunks(self.max).collect();
        let mut parts = Vec::with_capacity(chunks.len());
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
            parts.push(self.last);
        }
        Ok(parts)
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
                // Noted as a replay notes it: a message naming nothing.
                self.kept.message(vec![ack.sequence], []);
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
        let mut sealing = Sealing::default();
        self.index.append_at(batch, time_us, Some(&mut sealing));
        wire.sealed = sealing
            .records
            .into_iter()
            .map(|(seq, digest)| (seq, hex::encode(digest)))
            .collect();
        wire.marked = sealing.marked;
        let outcome = self.enqueue(wire)?;
        drop(order);
        Ok(Ticket::pending(outcome))
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

    async fn anchors(&self) -> Result<Vec<Anchor>, HistoryError> {
        self.index.anchors().await
    }

    /// Chooses, checks and archives what goes under the lock that orders appends, applies it
    /// to the index and appends a prune mark (`jetstream/retention.rs`) in the appends' order;
    /// durable once the stream acknowledged the mark. The stream messages left unneeded are
    /// deleted after, off the writer's path.
    async fn prune(
        &self,
        before_us: i64,
        archive: Option<Box<dyn Archive>>,
    ) -> Result<Pruned, HistoryError> {
        self.writable()?;
        let pruned_us = now_us();
        let mut pruned = Pruned {
            before_us,
            ..Pruned::default()
        };
        let outcome = {
            let order = lock(&self.order);
            let doomed = self.index.doomed(before_us);
            if doomed.is_empty() {
                return Ok(pruned);
            }
            let anchors = self.index.anchors_for(&doomed, before_us, pruned_us)?;
            if let Some(archive) = archive {
                archive_all(archive, &doomed).map_err(|e| unavailable(format!("archive: {e}")))?;
            }
            let threads: Vec<ThreadId> = anchors.iter().map(|a| a.thread).collect();
            let carried = self.index.carried(&threads);
            self.index.remove(&anchors, &carried).map_err(|e| {
                // The index is pruned in part and the stream knows nothing of it.
                let reason = format!("a prune could not be applied to the index: {e}");
                let _ = self.failed.set(reason.clone());
                unavailable(reason)
            })?;
            pruned.records = anchors.iter().map(|a| a.records).sum();
            pruned.anchors = anchors.clone();
            let mark = PruneMark {
                anchors,
                carried,
                numbered: self.index.last_number(),
                deleted: Vec::new(),
            };
            let outcome = self.enqueue(Wire::prune(mark, pruned_us))?;
            drop(order);
            outcome
        };
        outcome.await?;
        Ok(pruned)
    }
}

impl JetStreamHistory {
    /// Queues `wire` for the writer (the order lock held); resolves once the stream
    /// acknowledged it.
    fn enqueue(
        &self,
        wire: Wire,
    ) -> Result<impl Future<Output = Result<(), HistoryError>> + Send + 'static, HistoryError> {
        let (done, outcome) = oneshot::channel();
        self.queue
            .send(Publish { wire, done })
            .map_err(|_| unavailable("the history stream's writer stopped"))?;
        Ok(async move {
            outcome
                .await
                .unwrap_or_else(|_| Err(unavailable("the history stream's writer stopped")))
        })
    }
}
