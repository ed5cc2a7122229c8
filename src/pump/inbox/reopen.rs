//! Open requests read back from history, once per pump: after a restart (or for a store a
//! previous run wrote), every `<request>` without an `<answer>` is listed again, its thread
//! waits again, and its timeout is armed again.

use std::collections::HashSet;
use std::sync::Arc;

use super::record::{self, AnswerRecord, Request};
use super::{InboxError, OpenRequest};
use crate::history::{HistoryError, HistoryStore, Record};
use crate::pump::Shared;
use crate::{MessageId, ThreadId};

impl Shared {
    /// Reads the open requests back from history, the first time it is called.
    pub(crate) async fn reopen(self: &Arc<Self>) -> Result<(), InboxError> {
        self.inbox
            .reopened
            .get_or_try_init(|| self.read_back())
            .await?;
        Ok(())
    }

    async fn read_back(self: &Arc<Self>) -> Result<(), HistoryError> {
        let threads = self
            .store
            .threads_with_root(&record::root("request"))
            .await?;
        for thread in threads {
            self.read_back_thread(thread).await?;
        }
        Ok(())
    }

    async fn read_back_thread(self: &Arc<Self>, thread: ThreadId) -> Result<(), HistoryError> {
        let records = self.store.thread(thread, 0).await?;
        let asked = records
            .iter()
            .filter(|r| r.root == record::root("request"))
            .count();
        {
            let mut counts = self.inbox.asked.lock().unwrap_or_else(|p| p.into_inner());
            let n = counts.entry(thread).or_default();
            *n = (*n).max(u32::try_from(asked).unwrap_or(u32::MAX));
        }
        for open in unanswered(&records) {
            let (id, expires) = (open.id, open.request.expires_at_ms);
            self.inbox.open().entry(id).or_insert(open);
            if let Some(at) = expires {
                self.arm_timeout(id, at);
            }
        }
        if let Some(entry) = self.registry.get(thread) {
            self.rewait(&mut entry.lock(), thread);
        }
        Ok(())
    }

    /// Sets a thread's count of open requests from the inbox (a thread restored from history,
    /// at a restart or a reload after eviction).
    pub(crate) fn rewait(
        &self,
        inner: &mut crate::thread::registry::ThreadInner,
        thread: ThreadId,
    ) {
        let waiting = self.inbox.waiting_in(thread);
        if waiting > 0 {
            inner.ledger.began_waiting();
        }
        inner.set_waiting(waiting);
    }
}

/// The requests among `records` (one thread's history) that no answer among them replies to.
pub(crate) fn unanswered(records: &[Record]) -> Vec<OpenRequest> {
    let answered: HashSet<MessageId> = records
        .iter()
        .filter_map(|r| record::read::<AnswerRecord>("answer", r))
        .map(|a| a.request)
        .collect();
    records
        .iter()
        .filter(|r| !answered.contains(&r.id))
        .filter_map(|r| {
            let request = record::read::<Request>("request", r)?;
            Some(OpenRequest {
                id: r.id,
                thread: r.thread,
                asked_at_ms: r.time_us / 1000,
                request,
            })
        })
        .collect()
}

/// Every open request a history holds, oldest first: what a pump started on it would list
/// (`agentpump inbox --db`).
///
/// # Errors
///
/// The history cannot be read.
pub async fn open_requests(store: &dyn HistoryStore) -> Result<Vec<OpenRequest>, HistoryError> {
    let mut open = Vec::new();
    for thread in store.threads_with_root(&record::root("request")).await? {
        open.extend(unanswered(&store.thread(thread, 0).await?));
    }
    open.sort_by_key(|r| (r.asked_at_ms, r.id));
    Ok(open)
}
