//! Open requests read back from history, once per pump: after a restart (or for a store a
//! previous run wrote), every `<request>` without an `<answer>` is listed again, its thread
//! waits again, and its timeout is armed again.

use std::collections::HashSet;
use std::sync::Arc;

use super::record::{self, AnswerRecord, Request};
use super::{InboxError, OpenRequest};
use crate::history::HistoryError;
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
        let answered: HashSet<MessageId> = records
            .iter()
            .filter_map(|r| record::read::<AnswerRecord>("answer", r))
            .map(|a| a.request)
            .collect();
        let requests: Vec<_> = records
            .iter()
            .filter_map(|r| record::read::<Request>("request", r).map(|q| (r, q)))
            .collect();
        {
            let mut asked = self.inbox.asked.lock().unwrap_or_else(|p| p.into_inner());
            let n = asked.entry(thread).or_default();
            *n = (*n).max(u32::try_from(requests.len()).unwrap_or(u32::MAX));
        }
        for (r, request) in requests
            .into_iter()
            .filter(|(r, _)| !answered.contains(&r.id))
        {
            let expires = request.expires_at_ms;
            let open = OpenRequest {
                id: r.id,
                thread,
                asked_at_ms: r.time_us / 1000,
                request,
            };
            self.inbox.open().entry(r.id).or_insert(open);
            if let Some(at) = expires {
                self.arm_timeout(r.id, at);
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
