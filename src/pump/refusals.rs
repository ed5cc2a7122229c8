//! Refusals of outside input under a flood: the first [`RECORDED_IN_FULL`] identical refusals
//! in a thread within [`PumpConfig::refusal_window`](super::PumpConfig::refusal_window) are
//! recorded whole (the first is the sample); the ones after them in that window are answered
//! the same way but only counted, and the count is recorded as one `system-error code="refusals-repeated"`
//! in reply to the sample when the window closes. Every caller still gets its answer; history
//! keeps every kind of refusal and how many there were, without one write per refusal.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Shared;
use super::notice::Recipient;
use super::tx::Tx;
use crate::system::{ErrorCode, SystemMessage};
use crate::thread::registry::ThreadEntry;
use crate::{MessageId, ThreadId};

/// How many identical refusals a window records whole before it counts the rest.
pub const RECORDED_IN_FULL: u64 = 8;

/// The open windows, one per thread with a recent refusal, and whether the task that closes
/// them runs.
#[derive(Debug, Default)]
pub(crate) struct Refusals {
    open: Mutex<HashMap<ThreadId, Window>>,
    /// Set once the task that records closed windows runs.
    sweeper: std::sync::OnceLock<()>,
}

/// The last refusal recorded in a thread, and the identical ones counted since.
#[derive(Debug)]
struct Window {
    sample: SystemMessage,
    sample_id: MessageId,
    opened: Instant,
    last: Instant,
    /// Recorded whole in this window, the sample included.
    recorded: u64,
    /// Answered and only counted.
    repeated: u64,
}

/// What to do with a refusal about to be made.
pub(crate) enum Verdict {
    /// Record it (after the count of the previous kind, if any).
    Record(Option<Summary>),
    /// Counted: answer it as the sample, recorded as `MessageId`.
    Counted(MessageId),
}

/// A closed window's count, to record before anything else in its thread.
pub(crate) struct Summary {
    sample_id: MessageId,
    message: SystemMessage,
}

impl Refusals {
    /// Counts `answer` in `thread` if it repeats the window's sample within `window`; a zero
    /// window records everything.
    pub fn check(&self, thread: ThreadId, answer: &SystemMessage, window: Duration) -> Verdict {
        if window.is_zero() {
            return Verdict::Record(None);
        }
        let now = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        match open.get_mut(&thread) {
            Some(w) if w.sample == *answer && now < w.opened + window => {
                if w.recorded < RECORDED_IN_FULL {
                    return Verdict::Record(None);
                }
                w.repeated += 1;
                w.last = now;
                Verdict::Counted(w.sample_id)
            }
            Some(_) => Verdict::Record(open.remove(&thread).and_then(Window::summary)),
            None => Verdict::Record(None),
        }
    }

    /// Notes a refusal just recorded whole as `id`: one more in its thread's window, or the
    /// sample of a new one.
    pub fn recorded(&self, thread: ThreadId, answer: &SystemMessage, id: MessageId) {
        let now = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = open.get_mut(&thread)
            && w.sample == *answer
        {
            w.recorded += 1;
            return;
        }
        let window = Window {
            sample: answer.clone(),
            sample_id: id,
            opened: now,
            last: now,
            recorded: 1,
            repeated: 0,
        };
        open.insert(thread, window);
    }

    /// Closes every window opened `window` ago or earlier (all of them when `window` is
    /// zero), returning the counts to record.
    fn close_due(&self, window: Duration) -> Vec<(ThreadId, Summary)> {
        let now = Instant::now();
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let due: Vec<ThreadId> = open
            .iter()
            .filter(|(_, w)| window.is_zero() || now >= w.opened + window)
            .map(|(id, _)| *id)
            .collect();
        due.into_iter()
            .filter_map(|id| open.remove(&id).and_then(Window::summary).map(|s| (id, s)))
            .collect()
    }
}

impl Window {
    fn summary(self) -> Option<Summary> {
        (self.repeated > 0).then(|| {
            let span = self.last.saturating_duration_since(self.opened);
            let message = format!(
                "{} more refusal{} identical to {} ({}) came within {} ms; each was answered, \
                 none recorded one by one",
                self.repeated,
                if self.repeated == 1 { "" } else { "s" },
                self.sample_id,
                self.sample.element(),
                span.as_millis()
            );
            Summary {
                sample_id: self.sample_id,
                message: SystemMessage::Error {
                    code: ErrorCode::RefusalsRepeated,
                    message,
                },
            }
        })
    }
}

impl Shared {
    /// Records a closed window's count in `tx` (the caller holds the thread's lock).
    pub(crate) fn record_summary(
        &self,
        tx: &mut Tx,
        entry: &ThreadEntry,
        inner: &mut crate::thread::registry::ThreadInner,
        summary: Summary,
    ) {
        self.notice(
            tx,
            entry,
            inner,
            Recipient::Client,
            summary.message,
            Some(summary.sample_id),
        );
    }

    /// Records the counts of every window that is due (all of them when `all`), each in its
    /// own thread; called by the sweeper every window and by shutdown.
    pub(crate) async fn flush_refusals(self: &Arc<Self>, all: bool) {
        let window = if all {
            Duration::ZERO
        } else {
            self.config.refusal_window
        };
        for (thread, summary) in self.refusals.close_due(window) {
            let entry = if thread == self.system_thread.id {
                Arc::clone(&self.system_thread)
            } else if let Ok(Some(entry)) = self.load(thread).await {
                entry
            } else {
                continue;
            };
            let committed = {
                let mut inner = entry.lock();
                let mut tx = Tx::new();
                self.record_summary(&mut tx, &entry, &mut inner, summary);
                tx.commit(self, (&entry, &mut inner), None)
            };
            self.finish_commit(thread, committed).await;
        }
    }

    /// Starts the task that closes due windows, once per pump, at the first refusal recorded
    /// with a window; it ends with the pump.
    pub(crate) fn sweep_refusals(self: &Arc<Self>) {
        if self.refusals.sweeper.set(()).is_err() {
            return;
        }
        let weak = Arc::downgrade(self);
        let every = self.config.refusal_window;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(shared) = weak.upgrade() else { return };
                shared.flush_refusals(false).await;
            }
        });
    }
}
