//! A delivery whose commit failed: its message goes back to the front of its thread's queue
//! and the pump stalls — runners stop taking work and their threads park — until the store
//! takes writes again. Then messages whose own records were refused (never acknowledged) are
//! dropped from the parked queues and the threads wake: the delivery is retried, not lost.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::Shared;
use crate::thread::registry::{Queued, ThreadEntry};

/// How often a stalled pump asks the store whether it takes writes again (the store keeps
/// its own, longer backoff between tries of the file).
pub(crate) const REVIVE_POLL: Duration = Duration::from_millis(50);

impl Shared {
    /// Puts back a message whose delivery failed to commit, and stalls the pump until the
    /// store recovers.
    pub(crate) fn stall(self: &Arc<Self>, entry: &Arc<ThreadEntry>, item: Queued) {
        entry.lock().queue.push_front(item);
        // Under the lock of the parked list, as `revive` clears it: one reviver at a time.
        let parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        if self.stalled.swap(true, Ordering::AcqRel) {
            return;
        }
        drop(parked);
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REVIVE_POLL).await;
                let Some(shared) = weak.upgrade() else { return };
                if shared.stopped.load(Ordering::Acquire) {
                    return;
                }
                if shared.store.writable().is_ok() {
                    shared.revive();
                    return;
                }
            }
        });
    }

    /// Whether runners must stop taking work (a commit failed, the store has not recovered).
    pub(crate) fn is_stalled(&self) -> bool {
        self.stalled.load(Ordering::Acquire)
    }

    /// Parks a thread whose runner stopped because the pump stalled (with work left, or an
    /// ending that would not commit); false if the pump revived meanwhile.
    pub(crate) fn park(&self, entry: &Arc<ThreadEntry>) -> bool {
        let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        let stalled = self.is_stalled();
        if stalled {
            parked.push(Arc::clone(entry));
        }
        stalled
    }

    /// The store takes writes again: drop what was never acknowledged from the parked queues
    /// and wake their threads.
    fn revive(self: &Arc<Self>) {
        let parked = {
            let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
            self.stalled.store(false, Ordering::Release);
            std::mem::take(&mut *parked)
        };
        tracing::info!(
            threads = parked.len(),
            "history writable again; parked threads resume"
        );
        for entry in parked {
            let mut inner = entry.lock();
            let store = &self.store;
            inner.queue.retain(|q| !store.was_refused(q.envelope.id()));
            // Also with an empty queue: a child's ending waits for this run.
            self.start_runner(&entry, &mut inner);
        }
        self.quiet_changed();
    }
}
