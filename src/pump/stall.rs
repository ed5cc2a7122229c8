//! A delivery whose commit failed: its message goes back to the front of its thread's queue
//! and the pump stalls — runners stop taking work and their threads park — until the store
//! takes writes again. [`Stall`] is that state; the runner (`pump/runner.rs`) stalls, parks
//! and revives through it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::thread::registry::ThreadEntry;

/// How often a stalled pump asks the store whether it takes writes again (the store keeps
/// its own, longer backoff between tries of the file).
pub(crate) const REVIVE_POLL: Duration = Duration::from_millis(50);

/// Whether a failed commit holds the runners, and the threads parked meanwhile.
#[derive(Debug, Default)]
pub(crate) struct Stall {
    /// A delivery failed to commit and the store has not recovered: runners take no work.
    stalled: AtomicBool,
    /// Threads whose runners stopped with work left while the pump was stalled.
    parked: Mutex<Vec<Arc<ThreadEntry>>>,
}

impl Stall {
    /// Stalls; true if this call did (the caller then starts the task that revives), false if
    /// the pump was stalled already.
    pub(crate) fn begin(&self) -> bool {
        // Under the lock of the parked list, as `end` clears it: one reviver at a time.
        let _parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        !self.stalled.swap(true, Ordering::AcqRel)
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

    /// Ends the stall: the threads parked meanwhile, to wake.
    pub(crate) fn end(&self) -> Vec<Arc<ThreadEntry>> {
        let mut parked = self.parked.lock().unwrap_or_else(|p| p.into_inner());
        self.stalled.store(false, Ordering::Release);
        std::mem::take(&mut *parked)
    }
}
