//! [`Lifecycle`]: where the pump is in its life — taking input, closing (refusing new input
//! while queues drain), stopped (no new deliveries) — and who waits for it: the runner tasks
//! alive and the tasks waiting in `settle` or shutdown for threads to go quiet.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use crossbeam_utils::CachePadded;
use tokio::sync::Notify;

/// The ingress gate as one read-write lock per slot, each on its own cache line: an admission
/// locks its OS thread's slot for reading (a write to a line only that worker uses), closing
/// locks every slot for writing, in order.
#[derive(Debug)]
struct IngressGate {
    slots: Box<[CachePadded<RwLock<()>>]>,
}

impl Default for IngressGate {
    fn default() -> Self {
        Self {
            slots: (0..Self::SLOTS).map(|_| CachePadded::default()).collect(),
        }
    }
}

impl IngressGate {
    /// Slots: more than the cores of most machines; OS threads past it share.
    const SLOTS: usize = 32;

    fn read(&self) -> RwLockReadGuard<'_, ()> {
        thread_local! {
            static SLOT: usize = {
                static NEXT: AtomicUsize = AtomicUsize::new(0);
                NEXT.fetch_add(1, Ordering::Relaxed)
            };
        }
        let slot = SLOT.try_with(|s| *s).unwrap_or(0) % Self::SLOTS;
        self.slots[slot].read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> Vec<RwLockWriteGuard<'_, ()>> {
        self.slots
            .iter()
            .map(|slot| slot.write().unwrap_or_else(|p| p.into_inner()))
            .collect()
    }
}

/// The pump's life and its waiters. Every method is a few atomics; none blocks except
/// [`Lifecycle::close`], which waits for input being admitted.
#[derive(Debug, Default)]
pub(crate) struct Lifecycle {
    /// No new outside input.
    closing: AtomicBool,
    /// Outside input holds one of its locks for reading while it is admitted; closing takes
    /// every one for writing, so no admitted message can miss the drain.
    ingress_gate: IngressGate,
    /// No new deliveries.
    stopped: AtomicBool,
    /// Runner tasks alive.
    runners: AtomicUsize,
    /// Tasks waiting in [`Lifecycle::wait_until`].
    waiters: AtomicUsize,
    /// Notified when a runner ends or parked threads wake.
    quiet: Notify,
    /// What the last restart brought back.
    pub(crate) recovered: std::sync::OnceLock<super::RecoveryReport>,
}

impl Lifecycle {
    /// Admits one piece of outside input: a guard to hold until it is registered, or `None`
    /// once the pump is closing.
    pub(crate) fn admitting(&self) -> Option<RwLockReadGuard<'_, ()>> {
        let gate = self.ingress_gate.read();
        (!self.is_closing()).then_some(gate)
    }

    /// Whether new outside input is refused.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing.load(Ordering::Acquire)
    }

    /// Refuses new outside input from now on, after the input being admitted is registered.
    pub(crate) fn close(&self) {
        let _gate = self.ingress_gate.write();
        self.closing.store(true, Ordering::Release);
    }

    /// Starts no more deliveries.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
    }

    /// Whether deliveries have stopped.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    /// A runner task starts.
    pub(crate) fn runner_started(&self) {
        self.runners.fetch_add(1, Ordering::AcqRel);
    }

    /// A runner task ends; waiters check again.
    pub(crate) fn runner_ended(&self) {
        self.runners.fetch_sub(1, Ordering::AcqRel);
        self.quiet_changed();
    }

    /// Whether no runner task is alive.
    pub(crate) fn no_runners(&self) -> bool {
        self.runners.load(Ordering::Acquire) == 0
    }

    /// Wakes everyone waiting for threads to settle (only if someone waits).
    pub(crate) fn quiet_changed(&self) {
        if self.waiters.load(Ordering::Acquire) > 0 {
            self.quiet.notify_waiters();
        }
    }

    /// Waits until `done()` holds, checking again whenever a runner ends.
    pub(crate) async fn wait_until(&self, mut done: impl FnMut() -> bool) {
        /// Counts a waiter for as long as it lives, even when its future is dropped.
        struct Waiting<'a>(&'a AtomicUsize);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::AcqRel);
            }
        }
        self.waiters.fetch_add(1, Ordering::AcqRel);
        let _waiting = Waiting(&self.waiters);
        loop {
            let notified = self.quiet.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if done() {
                return;
            }
            notified.await;
        }
    }
}
