//! History stores for benchmarks: [`Forgetful`] keeps nothing (so what is measured is the pump,
//! not the history), and [`Counting`] wraps any store and lets a benchmark wait until a number
//! of egress records (replies to the outside sender) have been committed — without `settle`,
//! whose waiters are all woken whenever any runner ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agentpump::governor::HaltingReport;
use agentpump::history::{Batch, HistoryError, HistoryStore, Record, RecordKind, Ticket};
use agentpump::{MessageId, ThreadId, ThreadInfo, ThreadState};
use tokio::sync::Notify;

/// A store that forgets everything it is given.
#[derive(Debug, Default)]
pub struct Forgetful;

#[async_trait::async_trait]
impl HistoryStore for Forgetful {
    fn append(&self, _: Batch) -> Result<Ticket, HistoryError> {
        Ok(Ticket::ready())
    }
    async fn thread(&self, _: ThreadId, _: u64) -> Result<Vec<Record>, HistoryError> {
        Ok(Vec::new())
    }
    async fn record(&self, _: MessageId) -> Result<Option<Record>, HistoryError> {
        Ok(None)
    }
    async fn pending(&self) -> Result<Vec<Record>, HistoryError> {
        Ok(Vec::new())
    }
    async fn reports(&self, _: ThreadId) -> Result<Vec<HaltingReport>, HistoryError> {
        Ok(Vec::new())
    }
    async fn threads(&self, _: Option<ThreadState>) -> Result<Vec<ThreadInfo>, HistoryError> {
        Ok(Vec::new())
    }
    async fn verify(&self) -> Result<u64, HistoryError> {
        Ok(0)
    }
}

/// Wraps a store and counts the egress records appended through it.
#[derive(Debug)]
pub struct Counting {
    inner: Arc<dyn HistoryStore>,
    egress: AtomicU64,
    /// The count a waiter is waiting for (`u64::MAX` when nobody waits).
    target: AtomicU64,
    reached: Notify,
}

impl Counting {
    /// Counts what goes into `inner`.
    pub fn new(inner: Arc<dyn HistoryStore>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            egress: AtomicU64::new(0),
            target: AtomicU64::new(u64::MAX),
            reached: Notify::new(),
        })
    }

    /// Egress records appended so far.
    pub fn egress(&self) -> u64 {
        self.egress.load(Ordering::Acquire)
    }

    /// Waits until at least `count` egress records have been appended.
    pub async fn wait_egress(&self, count: u64) {
        self.target.store(count, Ordering::Release);
        while self.egress() < count {
            self.reached.notified().await;
        }
        self.target.store(u64::MAX, Ordering::Release);
    }
}

#[async_trait::async_trait]
impl HistoryStore for Counting {
    fn append(&self, batch: Batch) -> Result<Ticket, HistoryError> {
        let egress = batch
            .records
            .iter()
            .filter(|r| r.kind == RecordKind::Egress)
            .count() as u64;
        let ticket = self.inner.append(batch)?;
        if egress > 0 {
            let now = self.egress.fetch_add(egress, Ordering::AcqRel) + egress;
            if now >= self.target.load(Ordering::Acquire) {
                // Stores a permit when the waiter is between its check and its await.
                self.reached.notify_one();
            }
        }
        Ok(ticket)
    }
    async fn thread(&self, thread: ThreadId, since: u64) -> Result<Vec<Record>, HistoryError> {
        self.inner.thread(thread, since).await
    }
    async fn record(&self, id: MessageId) -> Result<Option<Record>, HistoryError> {
        self.inner.record(id).await
    }
    async fn pending(&self) -> Result<Vec<Record>, HistoryError> {
        self.inner.pending().await
    }
    async fn reports(&self, thread: ThreadId) -> Result<Vec<HaltingReport>, HistoryError> {
        self.inner.reports(thread).await
    }
    async fn threads(&self, state: Option<ThreadState>) -> Result<Vec<ThreadInfo>, HistoryError> {
        self.inner.threads(state).await
    }
    async fn verify(&self) -> Result<u64, HistoryError> {
        self.inner.verify().await
    }
    async fn reload(
        &self,
        thread: ThreadId,
    ) -> Result<Option<agentpump::history::Recovery>, HistoryError> {
        self.inner.reload(thread).await
    }
    fn reloads(&self) -> bool {
        self.inner.reloads()
    }
}
