//! A request listed once its record is durable, never before: the commit of the delivery that
//! held the call lists it (and arms its timeout); a commit that fails lists nothing and takes
//! back what the request counted (the thread's waiting, the question asked), so the delivery,
//! made again once the store recovers, asks once.

use std::sync::Arc;

use super::OpenRequest;
use super::changes::InboxChange;
use crate::history::Ticket;
use crate::pump::Shared;
use crate::thread::registry::{ThreadEntry, ThreadInner};

impl Shared {
    /// A ticket that resolves with `ticket` and then lists `opened` — or, when the commit
    /// failed, takes them back from `entry`.
    pub(crate) fn list_when_durable(
        self: &Arc<Self>,
        ticket: Ticket,
        entry: Arc<ThreadEntry>,
        opened: Vec<OpenRequest>,
    ) -> Ticket {
        let shared = Arc::clone(self);
        Ticket::pending(async move {
            let durable = ticket.wait().await;
            match &durable {
                Ok(()) => shared.list(opened),
                Err(_) => shared.unopen(&mut entry.lock(), &opened),
            }
            durable
        })
    }

    /// Lists requests whose records are durable and arms their timeouts.
    fn list(self: &Arc<Self>, opened: Vec<OpenRequest>) {
        for request in opened {
            let (id, expires) = (request.id, request.request.expires_at_ms);
            self.inbox.open().insert(id, request.clone());
            self.inbox.changed(InboxChange::Listed(request));
            if let Some(at) = expires {
                self.arm_timeout(id, at);
            }
        }
    }

    /// Takes back what requests whose records did not commit counted in their thread.
    pub(crate) fn unopen(&self, inner: &mut ThreadInner, opened: &[OpenRequest]) {
        for request in opened {
            self.inbox.uncount_question(request.thread);
        }
        let taken = u32::try_from(opened.len()).unwrap_or(u32::MAX);
        let waiting = inner.waiting.saturating_sub(taken);
        inner.set_waiting(waiting);
        if waiting == 0 {
            inner.ledger.ended_waiting(self.config.inbox.waiting_counts);
        }
    }
}
