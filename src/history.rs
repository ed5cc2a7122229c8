//! History: every accepted message, system message and governor decision as a [`Record`] in a
//! per-thread sha256 hash chain, behind the [`HistoryStore`] trait — in memory
//! ([`MemoryHistory`]) or durable in SQLite ([`SqliteHistory`], the
//! embedded default: WAL, one writer thread, group commit). [`audit`] re-derives a halt from the
//! records it was decided on.
//!
//! `digest = sha256(previous digest of the thread ‖ canonical record bytes)`; the first record of
//! a thread chains from 32 zero bytes, or, once [`HistoryStore::prune`] removed its older
//! records, from its [`Anchor`]. [`HistoryStore::verify`] recomputes every chain.

mod audit;
mod chain;
pub mod export;
#[cfg(feature = "nats")]
pub mod jetstream;
mod mark;
mod memory;
pub mod page;
mod prune;
mod record;
pub mod sqlite;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;

pub use audit::{AuditError, ForkBreak, audit, forked_from, is_carried, replay, verify_fork};
pub use chain::{ChainBreak, verify_chain};
#[cfg(feature = "nats")]
pub use jetstream::{JetStreamHistory, JetStreamOptions, LeaseOptions};
pub use mark::{Mark, Timing};
pub use memory::MemoryHistory;
pub(crate) use memory::now_us;
pub use page::{ThreadFilter, ThreadPage, ThreadSummary};
pub use prune::{Anchor, AnchorBreak, Archive, Pruned, verify_anchors};
pub use record::{NewRecord, Record, RecordKind};
pub use sqlite::{Durability, PRUNE_STEP, RETRY_MAX, RETRY_MIN, SqliteHistory, SqliteOptions};

use std::collections::HashMap;

use crate::governor::HaltingReport;
use crate::governor::Usage;
use crate::{Counters, MessageId, QName, ThreadId, ThreadInfo, ThreadState};

/// The error underneath a [`HistoryError`], kept as its `source()`: for [`SqliteHistory`] a
/// `rusqlite::Error` (downcast it to inspect the SQLite code). Shared, so that one failed commit
/// can fail every batch it held.
pub type Cause = Arc<dyn std::error::Error + Send + Sync>;

/// Why the history store failed.
///
/// The message (`what`) names the file and the problem, and already includes the cause's own
/// text: these messages travel as strings (system notices, HTTP problem bodies, logs) where
/// nobody walks the `source()` chain. The `source` is there for programs that inspect it.
/// Two errors are equal when they are the same variant saying the same thing; sources are not
/// compared.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HistoryError {
    /// The store cannot accept writes (disk full, read-only, closed), or cannot be opened.
    #[error("history store unavailable: {what}")]
    Unavailable {
        /// The file and the problem (`history.db: database is locked by another process`).
        what: String,
        /// The storage error underneath, when there is one.
        #[source]
        source: Option<Cause>,
    },
    /// A read failed.
    #[error("history query failed: {what}")]
    Query {
        /// The file or record, and the problem.
        what: String,
        /// The storage error underneath, when there is one.
        #[source]
        source: Option<Cause>,
    },
    /// A hash chain does not verify.
    #[error(transparent)]
    Chain(#[from] ChainBreak),
    /// The chain of prune anchors does not verify.
    #[error(transparent)]
    Anchor(#[from] AnchorBreak),
    /// The store does not do this (a [`MemoryHistory`] does not prune).
    #[error("this history store does not {0}")]
    Unsupported(&'static str),
}

impl HistoryError {
    /// A store that cannot take writes, for `what` reason (a [`HistoryStore`] of your own uses
    /// this when its disk is full or it is closed).
    pub fn unavailable(what: impl Into<String>) -> Self {
        Self::Unavailable {
            what: what.into(),
            source: None,
        }
    }

    /// A read that failed, for `what` reason.
    pub fn query(what: impl Into<String>) -> Self {
        Self::Query {
            what: what.into(),
            source: None,
        }
    }

    /// This error with `source` kept as its cause (`Chain`, `Anchor` and `Unsupported` are
    /// returned as they are).
    #[must_use]
    pub fn because(self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.because_shared(Arc::new(source))
    }

    /// As [`HistoryError::because`], with a cause already shared.
    #[must_use]
    pub fn because_shared(self, cause: Cause) -> Self {
        match self {
            Self::Unavailable { what, .. } => Self::Unavailable {
                what,
                source: Some(cause),
            },
            Self::Query { what, .. } => Self::Query {
                what,
                source: Some(cause),
            },
            other @ (Self::Chain(_) | Self::Anchor(_) | Self::Unsupported(_)) => other,
        }
    }
}

impl PartialEq for HistoryError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Unavailable { what: a, .. }, Self::Unavailable { what: b, .. })
            | (Self::Query { what: a, .. }, Self::Query { what: b, .. }) => a == b,
            (Self::Chain(a), Self::Chain(b)) => a == b,
            (Self::Anchor(a), Self::Anchor(b)) => a == b,
            (Self::Unsupported(a), Self::Unsupported(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for HistoryError {}

/// One atomic write: records in order, thread snapshots, and the delivery they complete.
#[derive(Debug, Default)]
pub struct Batch {
    /// New records, in the order they were accepted.
    pub records: Vec<NewRecord>,
    /// Thread snapshots to save (new threads, state changes).
    pub threads: Vec<ThreadInfo>,
    /// The delivery whose outputs these are: marked delivered in the same commit.
    pub delivered: Option<Delivered>,
    /// Halting reports written by this batch's halts.
    pub reports: Vec<HaltingReport>,
}

/// The future inside a pending [`Ticket`].
type Commit = Pin<Box<dyn Future<Output = Result<(), HistoryError>> + Send>>;

/// A queued message leaving its queue, committed with what came of it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Delivered {
    /// The thread the message is in.
    pub thread: ThreadId,
    /// The message.
    pub id: MessageId,
    /// Whether a handler ran for it (false when it was refused, e.g. its thread had closed).
    pub handled: bool,
    /// What the handler reported spending (tokens, cost, tool calls).
    pub usage: Usage,
    /// A notice the governor sent on its own initiative (a budget warning): handled, but it
    /// cost no turn. Counted in [`Counters::notices`](crate::Counters::notices), not in
    /// `deliveries`.
    pub free: bool,
    /// The handler failed (an error, a panic, a timeout, an upstream failure): counted in
    /// [`Counters::failures`](crate::Counters::failures), so a restart restores the count.
    pub failed: bool,
    /// When its handler ran (none for a delivery without a handler call, such as a refusal).
    pub timing: Option<Timing>,
}

/// What a store knows about threads that lived before this process: what a restarted pump
/// needs to rebuild its registry, its governor ledgers and its queues.
#[derive(Debug, Default)]
pub struct Recovery {
    /// Every saved thread snapshot (children are rebuilt from parent links).
    pub threads: Vec<ThreadInfo>,
    /// Per thread: deliveries handled and usage reported, summed from the delivered marks.
    pub counters: HashMap<ThreadId, Counters>,
    /// Per thread: how many records it has.
    pub records: HashMap<ThreadId, u64>,
    /// Accepted messages never delivered, in sequence order (acceptance order within each
    /// thread).
    pub pending: Vec<Record>,
    /// Messages listeners addressed to the governor (goals, residuals, criteria, …) and the
    /// governor's own decisions (carve-outs, resumes, halts), in order: replayed, they give
    /// every ledger exactly the budget it had.
    pub governor: Vec<Record>,
    /// Every accepted `clear-context` request, in order, with its position in its thread (how
    /// many of the thread's records precede it): replayed, they give each listener the view of
    /// the thread it had.
    pub cleared: Vec<(Record, u64)>,
    /// Per thread that is not done: when its first record was accepted (microseconds since the
    /// Unix epoch), so that its wall clock runs from when it started, not from the restart.
    pub started: HashMap<ThreadId, i64>,
    /// Per open (active or idle) thread: its last deliveries that cost a turn, oldest first, at
    /// most [`RECENT_DELIVERIES`]: the no-progress guard's window, rebuilt.
    pub delivered: HashMap<ThreadId, Vec<Record>>,
}

/// Whether `record` is an accepted `clear-context` request (a refused one is not recorded as a
/// message).
pub(crate) fn is_clear_context(record: &Record) -> bool {
    record.kind == RecordKind::Message && record.root.is(crate::envelope::SYSTEM_NS, CLEAR_CONTEXT)
}

/// The local name of the `clear-context` request.
const CLEAR_CONTEXT: &str = "clear-context";

/// How many of an open thread's last deliveries [`Recovery::delivered`] holds: the no-progress
/// guard's window after a restart covers at most this many (its default is 3 rounds of up to 8).
pub const RECENT_DELIVERIES: usize = 64;

/// Resolves when an appended batch is durable.
pub struct Ticket(Option<Commit>);

impl Ticket {
    /// A ticket for a batch that is already as durable as the store gets.
    pub fn ready() -> Self {
        Self(None)
    }

    /// A ticket that resolves with `future`.
    pub fn pending(
        future: impl Future<Output = Result<(), HistoryError>> + Send + 'static,
    ) -> Self {
        Self(Some(Box::pin(future)))
    }

    /// Waits until the batch is durable.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Unavailable`] when the commit failed.
    pub async fn wait(self) -> Result<(), HistoryError> {
        match self.0 {
            None => Ok(()),
            Some(future) => future.await,
        }
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "Ticket(pending)"
        } else {
            "Ticket(ready)"
        })
    }
}

/// A place to keep history. Implementations: [`MemoryHistory`] (tests and ephemeral runs) and,
/// with the durable-history work, SQLite.
///
/// `append` fixes the order of the batch (sequence numbers, digests) before it returns, so the
/// pump can hold a thread's lock across it and queue order equals history order; durability is
/// awaited separately through the [`Ticket`], which lets a store commit many batches as a group.
#[async_trait]
pub trait HistoryStore: Send + Sync + fmt::Debug + 'static {
    /// Orders and appends a batch atomically; returns a ticket that resolves when it is durable.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Unavailable`] when the store cannot take writes; nothing of the batch is kept.
    fn append(&self, batch: Batch) -> Result<Ticket, HistoryError>;

    /// Whether the store takes writes now.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Unavailable`] saying why, once a commit failed (a full or failing disk):
    /// the store then refuses every later write until it finds the disk writable again
    /// ([`SqliteHistory`] tries again on a call to this after a backoff).
    fn writable(&self) -> Result<(), HistoryError> {
        Ok(())
    }

    /// Whether the record of queued message `id` was appended but its commit failed (since the
    /// last failure began): the message was never acknowledged, and a pump drops it from its
    /// queue instead of delivering it.
    fn was_refused(&self, id: MessageId) -> bool {
        let _ = id;
        false
    }

    /// The records of one thread with `seq >= since`, in order.
    async fn thread(&self, thread: ThreadId, since: u64) -> Result<Vec<Record>, HistoryError>;

    /// One record by message id.
    async fn record(&self, id: MessageId) -> Result<Option<Record>, HistoryError>;

    /// The handled deliveries of one thread, in record order: what each handler reported
    /// spending (what the viewer's totals sum).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Unsupported`] from a store that keeps no per-delivery marks.
    async fn marks(&self, thread: ThreadId) -> Result<Vec<Mark>, HistoryError> {
        let _ = thread;
        Err(HistoryError::Unsupported("keep per-delivery marks"))
    }

    /// Records accepted for delivery and not yet delivered, in order (what a restart re-queues).
    async fn pending(&self) -> Result<Vec<Record>, HistoryError>;

    /// The halting reports of a thread, oldest first (a resumed thread can halt again).
    async fn reports(&self, thread: ThreadId) -> Result<Vec<HaltingReport>, HistoryError>;

    /// Saved thread snapshots, optionally only those in one state.
    async fn threads(&self, state: Option<ThreadState>) -> Result<Vec<ThreadInfo>, HistoryError>;

    /// The snapshots of `root` and every thread below it, parents before children.
    async fn subtree(&self, root: ThreadId) -> Result<Vec<ThreadInfo>, HistoryError> {
        let all = self.threads(None).await?;
        let mut out: Vec<ThreadInfo> = all.iter().filter(|t| t.id == root).cloned().collect();
        let mut i = 0;
        while i < out.len() {
            let parent = out[i].id;
            out.extend(all.iter().filter(|t| t.parent == Some(parent)).cloned());
            i += 1;
        }
        Ok(out)
    }

    /// What a restarting pump needs (see [`Recovery`]). Synchronous: the pump calls it while
    /// building, before any runtime work starts.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
    fn recovery(&self) -> Result<Recovery, HistoryError> {
        Ok(Recovery::default())
    }

    /// What a pump needs to bring back the tree of threads that `thread` belongs to after it
    /// let the tree go from memory (eviction): the part of [`recovery`](Self::recovery) about
    /// that tree alone — its snapshots (parents first), counters, record counts, pending
    /// messages and governor records — read after every append made before the call is
    /// committed. `Ok(None)` when the store does not know the thread, and always for a store
    /// that cannot reload a tree without reading everything (the default, and
    /// [`MemoryHistory`]): a pump keeps every thread in memory then.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
    async fn reload(&self, thread: ThreadId) -> Result<Option<Recovery>, HistoryError> {
        let _ = thread;
        Ok(None)
    }

    /// Whether [`reload`](Self::reload) can bring a tree back, so that a pump may evict.
    fn reloads(&self) -> bool {
        false
    }

    /// Recomputes every thread's chain; returns how many records were checked.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Chain`] naming the first record that does not match.
    async fn verify(&self) -> Result<u64, HistoryError>;

    /// A page of root threads, newest first, that pass `filter` (see [`ThreadFilter`]).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
    async fn roots(&self, filter: &ThreadFilter) -> Result<ThreadPage, HistoryError> {
        page::roots_by_scan(self, filter).await
    }

    /// Up to `limit` records of one thread with `seq > after`, in order (at most
    /// [`page::MAX_PAGE`]).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
    async fn records_after(
        &self,
        thread: ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Record>, HistoryError> {
        page::records_by_scan(self, thread, after, limit).await
    }

    /// Up to `limit` records of one thread with `seq < before`, the last ones before it, in
    /// order (at most [`page::MAX_PAGE`]): a transcript read from its end, a page at a time.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
    async fn records_before(
        &self,
        thread: ThreadId,
        before: u64,
        limit: usize,
    ) -> Result<Vec<Record>, HistoryError> {
        page::records_before_by_scan(self, thread, before, limit).await
    }

    /// Up to `limit` records of one thread with `seq > after` whose payload root is in
    /// `namespace`, in order (at most [`page::MAX_PAGE`]): a process thread's events without its
    /// other records.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
    async fn records_in(
        &self,
        thread: ThreadId,
        namespace: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Record>, HistoryError> {
        page::records_in_by_scan(self, thread, namespace, after, limit).await
    }

    /// The threads with a record whose payload root is `root` (in no particular order): the task
    /// threads of a ledger, found by their `<task>`.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
    async fn threads_with_root(&self, root: &QName) -> Result<Vec<ThreadId>, HistoryError> {
        let mut out = Vec::new();
        for info in self.threads(None).await? {
            if self
                .thread(info.id, 0)
                .await?
                .iter()
                .any(|r| r.root == *root)
            {
                out.push(info.id);
            }
        }
        Ok(out)
    }

    /// Recomputes one thread's chain (from its prune anchor, if it has one, after checking the
    /// anchor chain); returns how many records were checked.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Chain`] naming the first record that does not match,
    /// [`HistoryError::Anchor`] when the anchor chain does not verify, or
    /// [`HistoryError::Query`] when the store cannot be read.
    async fn verify_thread(&self, thread: ThreadId) -> Result<u64, HistoryError> {
        let records = self.thread(thread, 0).await?;
        let anchors = self.anchors().await?;
        // The thread's anchor is only as good as the anchor chain it sits in.
        verify_anchors(&anchors)?;
        let start = anchors
            .into_iter()
            .filter(|a| a.thread == thread)
            .map(|a| (thread, a.last_digest))
            .collect();
        Ok(chain::verify_chain_from(&records, start)?)
    }

    /// Removes the records older than `before_us` (microseconds since the Unix epoch) of every
    /// thread whose whole tree is done or halted with nothing pending, leaving an [`Anchor`] per
    /// thread that lost records; with `archive`, the removed records are written there first.
    /// Each thread's removed records are checked against its chain before they go, so a prune
    /// never hides a break. Running it twice with the same cut removes nothing the second time.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Unsupported`] when the store does not prune (the default: only
    /// [`SqliteHistory`] and, with the `nats` feature, `JetStreamHistory` do); [`HistoryError::Unavailable`] when it cannot be written or the
    /// archive fails — nothing is removed then; [`HistoryError::Chain`] naming a break in what
    /// would be removed.
    async fn prune(
        &self,
        before_us: i64,
        archive: Option<Box<dyn Archive>>,
    ) -> Result<Pruned, HistoryError> {
        let _ = (before_us, archive);
        Err(HistoryError::Unsupported("prune"))
    }

    /// Every prune anchor, in chain order (none for a store that was never pruned).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
    async fn anchors(&self) -> Result<Vec<Anchor>, HistoryError> {
        Ok(Vec::new())
    }
}
