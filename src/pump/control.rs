//! The handle's control of threads: `stop`, `resume`, `budget` and `reports`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::PumpHandle;
use super::tx::Tx;
use crate::governor::report::{BudgetLine, budget_lines};
use crate::governor::{Budget, Decision, HaltingReport, Verdict};
use crate::history::HistoryError;
use crate::thread::registry::ThreadEntry;
use crate::{ThreadId, ThreadState};

/// Why a thread cannot be stopped or resumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// No such thread.
    #[error("no thread {0}")]
    UnknownThread(ThreadId),
    /// The thread is not in a state that allows it.
    #[error("thread {thread} is {state}; {action} needs a {needed} thread")]
    WrongState {
        /// The thread.
        thread: ThreadId,
        /// Its state.
        state: ThreadState,
        /// `stop` or `resume`.
        action: &'static str,
        /// What it needs (`running or idle`, `halted`).
        needed: &'static str,
    },
    /// The thread is a child whose parent is on another pump: its budget is the grant that
    /// pump gave and settled, so it is not resumed here (resume the parent's tree there).
    #[error(
        "thread {thread} is a child of thread {parent} on another pump, run on the grant that pump gave it; it is not resumed here"
    )]
    SpawnedElsewhere {
        /// The thread.
        thread: ThreadId,
        /// Its parent, on another pump.
        parent: ThreadId,
    },
}

impl PumpHandle {
    /// The entry of a thread users may stop and resume: any but the system thread.
    /// An evicted thread is reloaded first; a store that cannot be read answers as for an
    /// unknown thread, and logs why.
    pub(super) async fn controllable(
        &self,
        thread: ThreadId,
    ) -> Result<Arc<ThreadEntry>, ControlError> {
        let loaded = self.shared.load(thread).await.unwrap_or_else(|e| {
            tracing::error!(thread = %thread, error = %e, "reloading an evicted thread");
            None
        });
        loaded
            .filter(|e| !e.is_system)
            .ok_or(ControlError::UnknownThread(thread))
    }

    /// Stops a thread: halts it with BACKPRESSURE (`stop-request`) — at once when it is idle,
    /// after the delivery in progress otherwise. Its descendants halt with it.
    ///
    /// # Errors
    ///
    /// [`ControlError`] for an unknown thread or one that is already done or halted.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// # use agentpump::ThreadState;
    /// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
    /// pump.settle(thread).await;
    /// pump.stop(thread).await?;
    /// assert_eq!(pump.thread(thread).expect("known").state, ThreadState::Halted);
    /// assert_eq!(pump.reports(thread).await?[0].stop_reason, "stop-request");
    /// assert!(pump.stop(thread).await.is_err()); // already halted
    /// # Ok(())
    /// # }
    /// ```
    pub async fn stop(&self, thread: ThreadId) -> Result<(), ControlError> {
        let shared = &self.shared;
        let entry = self.controllable(thread).await?;
        let committed = {
            let family = shared.registry.family(&entry);
            let (mut inner, mut parent_inner) = family.lock(&entry);
            if inner.state().is_closed() {
                let state = inner.state();
                return Err(ControlError::WrongState {
                    thread,
                    state,
                    action: "stop",
                    needed: "running or idle",
                });
            }
            if inner.running {
                inner.ledger.stop_requested = Some("stop-request");
                return Ok(());
            }
            let mut tx = Tx::new();
            let verdict = Verdict::backpressure("stop-request");
            let parent = family.pair(&mut parent_inner).map(|(e, i)| (&**e, i));
            shared.halt_locked(&mut tx, &entry, &mut inner, parent, verdict, None);
            let pair = family.pair(&mut parent_inner);
            tx.commit(shared, (&entry, &mut inner), pair)
        };
        shared.finish_commit(thread, committed).await;
        Ok(())
    }

    /// Resumes a halted thread with `extra` added to its budget (limits that were unlimited stay
    /// so; `wall_clock` extends the deadline from now). The decision is recorded; the thread
    /// continues with the message it was about to deliver when it halted. Its descendants stay
    /// halted.
    ///
    /// # Errors
    ///
    /// [`ControlError`] for an unknown thread or one that is not halted.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// # use agentpump::{ThreadState, governor::Budget};
    /// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
    /// pump.settle(thread).await;
    /// pump.stop(thread).await?;
    /// pump.resume(thread, &Budget { turns: Some(10), ..Budget::unlimited() }).await?;
    /// pump.settle(thread).await;
    /// assert_eq!(pump.thread(thread).expect("known").state, ThreadState::Idle); // takes messages again
    /// assert!(pump.post(Some(thread), None, r#"<say xmlns="urn:example:say:v1">more</say>"#).await.is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn resume(&self, thread: ThreadId, extra: &Budget) -> Result<(), ControlError> {
        let shared = &self.shared;
        let entry = self.controllable(thread).await?;
        let committed = {
            let family = shared.registry.family(&entry);
            let (mut inner, mut parent_inner) = family.lock(&entry);
            if inner.state() != ThreadState::Halted {
                let state = inner.state();
                return Err(ControlError::WrongState {
                    thread,
                    state,
                    action: "resume",
                    needed: "halted",
                });
            }
            if let Some(parent) = inner.ledger.remote_parent {
                return Err(ControlError::SpawnedElsewhere { thread, parent });
            }
            inner.ledger.resume(extra);
            inner.resume();
            if let Some(p) = parent_inner.as_deref_mut() {
                p.live_children += 1;
            }
            let mut tx = Tx::new();
            let decision = Decision::Resume {
                added: extra.clone(),
            };
            shared.decide(&mut tx, &entry, &mut inner, &decision);
            tx.snapshot(&entry, &inner);
            let committed = tx.commit(shared, (&entry, &mut inner), None);
            shared.wake(&entry, &mut inner);
            committed
        };
        shared.finish_commit(thread, committed).await;
        Ok(())
    }

    /// The governor's budget lines of a thread now, by budget name (`max-turns`, …): limit,
    /// spent (its descendants included), reserved for carved children and not yet spent by
    /// them, and what remains. `None` for an unknown thread. A halting report holds the same
    /// lines as they stood at the halt; this is the live ledger, for a thread still running.
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, Registration, QName, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let thread = pump.post(None, Some("echo"), r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
    /// pump.settle(thread).await;
    /// let turns = &pump.budget(thread).expect("a known thread")["max-turns"];
    /// assert_ne!(turns.spent, "0");
    /// # Ok(())
    /// # }
    /// ```
    pub fn budget(&self, thread: ThreadId) -> Option<BTreeMap<String, BudgetLine>> {
        let entry = self.shared.registry.get(thread)?;
        let inner = entry.lock();
        Some(budget_lines(&inner.ledger))
    }

    /// The halting reports of a thread, oldest first.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
    /// pump.settle(thread).await;
    /// assert!(pump.reports(thread).await?.is_empty()); // not halted
    /// pump.stop(thread).await?;
    /// let report = &pump.reports(thread).await?[0];
    /// assert_eq!((report.class.as_str(), report.stop_reason.as_str()), ("BACKPRESSURE", "stop-request"));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reports(&self, thread: ThreadId) -> Result<Vec<HaltingReport>, HistoryError> {
        self.shared.store.reports(thread).await
    }
}
