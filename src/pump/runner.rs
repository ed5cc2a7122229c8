//! The scheduler: a thread with queued messages has one runner task that delivers them one at a
//! time, yields to other threads after a small batch, and ends when the queue is empty — an idle
//! thread costs no task. A child thread that runs out of work ends and reports to its spawner.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt as _;
use std::sync::atomic::Ordering;

use super::Shared;
use super::stall::REVIVE_POLL;
use super::tx::Tx;
use crate::ThreadState;
use crate::history::{HistoryError, Ticket};
use crate::listener::RunStore;
use crate::system::{ErrorCode, SystemMessage, ThreadStatus};
use crate::thread::registry::{Queued, ThreadEntry, ThreadInner};

type Committed = Result<Ticket, HistoryError>;

impl Shared {
    /// Starts a runner for a thread that has queued work and none yet (caller holds its lock).
    pub(crate) fn wake(self: &Arc<Self>, entry: &Arc<ThreadEntry>, inner: &mut ThreadInner) {
        if inner.queue.is_empty() {
            return;
        }
        self.start_runner(entry, inner);
    }

    /// Starts a runner for a thread that has none, is not halted, and the pump is not stopped
    /// (caller holds its lock). With an empty queue the runner only ends the run (a child with
    /// nothing left reports `idle`): a parked thread revived (`pump/stall.rs`).
    pub(crate) fn start_runner(
        self: &Arc<Self>,
        entry: &Arc<ThreadEntry>,
        inner: &mut ThreadInner,
    ) {
        let halted = inner.state() == ThreadState::Halted;
        if halted || inner.running || self.lifecycle.is_stopped() {
            return;
        }
        inner.running = true;
        inner.ledger.woke();
        entry.tree_epoch.fetch_add(1, Ordering::SeqCst);
        inner.activate();
        self.lifecycle.runner_started();
        let shared = Arc::clone(self);
        let entry = Arc::clone(entry);
        tokio::spawn(async move { shared.run(entry).await });
    }

    async fn run(self: Arc<Self>, entry: Arc<ThreadEntry>) {
        let store: RunStore = Arc::new(Arc::clone(&self.store));
        loop {
            for _ in 0..self.config.batch {
                let next = {
                    let mut inner = entry.lock();
                    // A halted thread keeps its queue for a resume; control before data.
                    if self.lifecycle.is_stopped()
                        || inner.state() == ThreadState::Halted
                        || self.stall.is_stalled()
                    {
                        None
                    } else {
                        inner
                            .queue
                            .pop_front()
                            .map(|item| (item, inner.state().is_closed()))
                    }
                };
                match next {
                    Some((item, false)) => {
                        // Boxed: the runner future stays small, so a wake does not copy a
                        // delivery's whole state machine into its new task.
                        Box::pin(self.deliver_contained(&entry, item, &store)).await;
                        tokio::task::consume_budget().await;
                    }
                    Some((item, true)) => Box::pin(self.refuse_closed(&entry, item)).await,
                    None if self.finish_run(&entry).await => {
                        self.lifecycle.runner_ended();
                        return;
                    }
                    None => {}
                }
            }
            tokio::task::yield_now().await;
        }
    }

    /// Ends the run if there is no more work: a child with nothing left (and no live children)
    /// ends with `thread-result status="idle"`. Returns false when new work arrived meanwhile.
    async fn finish_run(self: &Arc<Self>, entry: &Arc<ThreadEntry>) -> bool {
        match self.try_finish(entry) {
            None => false,
            Some(None) => true,
            Some(Some(committed)) => {
                self.finish_commit(entry.id, committed).await;
                true
            }
        }
    }

    /// The locked part of [`Shared::finish_run`]: `None` if work remains (and the pump is not
    /// stalled: then the thread parks, its ending left for the revived run), else the commit
    /// of an idle child's ending, if there was one.
    fn try_finish(self: &Arc<Self>, entry: &Arc<ThreadEntry>) -> Option<Option<Committed>> {
        let family = self.registry.family(entry);
        let (mut inner, mut parent_inner) = family.lock(entry);
        let stopped = self.lifecycle.is_stopped();
        let halted = inner.state() == ThreadState::Halted;
        // Stalled on a failed commit: park, with work left or a child's ending to commit.
        let parked = !stopped && !halted && self.stall.is_stalled() && self.stall.park(entry);
        if !inner.queue.is_empty() && !stopped && !halted && !parked {
            return None;
        }
        let mut committed = None;
        let ends = !stopped
            && !parked
            && !inner.state().is_closed()
            && inner.live_children == 0
            && inner.waiting == 0;
        let mut pair = family.pair(&mut parent_inner);
        // A child ends idle, whether its parent is here or on another pump; a root stays.
        if ends && (pair.is_some() || inner.ledger.remote_parent.is_some()) {
            let mut tx = Tx::new();
            inner.finish();
            tx.snapshot(entry, &inner);
            let ended = (ThreadStatus::Idle, None, inner.last_payload.clone());
            let parent = pair.as_mut().map(|(p, pi)| (&***p, &mut **pi));
            self.tell_parent(&mut tx, (entry, &mut inner), parent, ended);
            committed = Some(tx.commit(self, (entry, &mut inner), pair));
        }
        inner.running = false;
        inner.ledger.went_idle();
        // An idle thread keeps no queue buffer: a million idle threads would hold ~600 MB.
        inner.queue.shrink_to_fit();
        inner.go_idle();
        Some(committed)
    }

    /// Delivers, containing a panic of the pump's own code (handler panics are caught earlier):
    /// the delivery is resolved with a recorded notice and the thread keeps running.
    async fn deliver_contained(
        self: &Arc<Self>,
        entry: &Arc<ThreadEntry>,
        item: Queued,
        store: &RunStore,
    ) {
        let (id, from, target) = (
            item.envelope.id(),
            Arc::clone(item.envelope.from_shared()),
            item.target,
        );
        let delivering = AssertUnwindSafe(self.deliver(entry, item, store)).catch_unwind();
        if delivering.await.is_ok() {
            return;
        }
        tracing::error!(thread = %entry.id, message = %id, "internal error while delivering");
        let committed: Committed = {
            let mut inner = entry.lock();
            let mut tx = Tx::delivering(entry.id, id);
            let listener = &self.routes[target].name;
            let message =
                format!("internal error while delivering to `{listener}`; its outputs are dropped");
            let notice = SystemMessage::Error {
                code: ErrorCode::HandlerPanicked,
                message,
            };
            let to = self.recipient_of(&from, target);
            self.notice(&mut tx, entry, &mut inner, to, notice, Some(id));
            tx.commit(self, (entry, &mut inner), None)
        };
        self.finish_commit(entry.id, committed).await;
    }

    /// A message queued before its thread closed: recorded as not delivered, never dropped silently.
    async fn refuse_closed(self: &Arc<Self>, entry: &Arc<ThreadEntry>, item: Queued) {
        let committed: Committed = {
            let mut inner = entry.lock();
            let mut tx = Tx::delivering(entry.id, item.envelope.id());
            let message = format!(
                "thread {} is {}; the message to `{}` was not delivered",
                entry.id,
                inner.state(),
                self.routes[item.target].name
            );
            let notice = SystemMessage::Error {
                code: ErrorCode::ThreadClosed,
                message,
            };
            let to = self.recipient_of(item.envelope.from(), item.target);
            self.notice(
                &mut tx,
                entry,
                &mut inner,
                to,
                notice,
                Some(item.envelope.id()),
            );
            tx.commit(self, (entry, &mut inner), None)
        };
        self.finish_commit(entry.id, committed).await;
    }

    /// Puts back a message whose delivery failed to commit, and stalls the pump until the
    /// store recovers (`pump/stall.rs`).
    pub(crate) fn stall(self: &Arc<Self>, entry: &Arc<ThreadEntry>, item: Queued) {
        entry.lock().queue.push_front(item);
        if !self.stall.begin() {
            return;
        }
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(REVIVE_POLL).await;
                let Some(shared) = weak.upgrade() else { return };
                if shared.lifecycle.is_stopped() {
                    return;
                }
                if shared.store.writable().is_ok() {
                    shared.revive();
                    return;
                }
            }
        });
    }

    /// The store takes writes again: drop what was never acknowledged from the parked queues
    /// and wake their threads.
    fn revive(self: &Arc<Self>) {
        let parked = self.stall.end();
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
        self.lifecycle.quiet_changed();
    }
}
