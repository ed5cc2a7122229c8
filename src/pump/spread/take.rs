//! Taking parcels from the pump of another partition: a child to open (held to exactly its
//! grant), a child's result to apply once, a child to stop.

use std::sync::Arc;

use super::{Adoption, ChildResult, Parcel, StopChild, Undelivered};
use crate::envelope::local::local;
use crate::governor::budget::Account;
use crate::governor::ledger::Ledger;
use crate::governor::{Decision, Verdict};
use crate::history::RecordKind;
use crate::pump::Shared;
use crate::pump::tx::{Place, Tx};
use crate::system::ThreadStatus;
use crate::thread::registry::ThreadEntry;
use crate::{Envelope, Payload, PumpHandle, ThreadId};

impl Shared {
    /// Opens a child another pump handed over, unless it is open already.
    async fn adopt(self: &Arc<Self>, a: Adoption) -> Result<(), Undelivered> {
        if !self.config.partition.is_some_and(|p| p.holds(a.child)) {
            return Err(Undelivered::Refused(format!(
                "thread {} is not in this pump's partition",
                a.child
            )));
        }
        if self.spread.courier.is_none() {
            return Err(Undelivered::Refused(
                "this pump has no courier to send the child's result back with".into(),
            ));
        }
        let child = a.child;
        if self.entry(child).await?.is_some() {
            return Ok(()); // a copy sent again
        }
        let committed = self.open_adopted(a)?;
        let durable = self.await_commit(child, committed).await;
        if durable.is_err() {
            // Not recorded: the child must not answer a copy sent again as opened.
            self.registry.forget(child);
        }
        durable.map_err(|e| Undelivered::Later(e.to_string()))
    }

    /// Opens the adopted child `a` and commits its first records (its first message to each
    /// listener, then the received parcel).
    fn open_adopted(
        self: &Arc<Self>,
        a: Adoption,
    ) -> Result<Result<crate::history::Ticket, crate::history::HistoryError>, Undelivered> {
        let admitting = self.lifecycle.admitting();
        if admitting.is_none() {
            return Err(Undelivered::Later("the pump is shutting down".into()));
        }
        // One opening at a time: a copy sent again while the first is being taken finds it.
        let _opening = self.registry.adopting();
        if self.registry.get(a.child).is_some() {
            return Ok(Ok(crate::history::Ticket::ready()));
        }
        let mut targets = Vec::with_capacity(a.to.len());
        for name in &a.to {
            let target = self.routes.index_of(name).ok_or_else(|| {
                Undelivered::Refused(format!("no listener `{name}` is registered here"))
            })?;
            targets.push(target);
        }
        let payload = Payload::parse(&a.payload, &self.config.limits)
            .map_err(|e| Undelivered::Refused(format!("the first payload: {e}")))?;
        let json = Parcel::Adopt(a.clone()).to_json();
        let now = tokio::time::Instant::now();
        let entry = Arc::new(self.adopted_entry(&a, now));
        let committed = {
            let mut inner = entry.lock();
            inner.activate();
            let mut tx = Tx::new();
            let spawner: Arc<str> = Arc::from(a.spawner.as_str());
            for target in targets {
                let to = local(&self.routes[target].name);
                let env = Envelope::new(Arc::clone(&spawner), entry.id, payload.clone())
                    .with_to(Some(to));
                if a.halted {
                    tx.record(&mut inner, env, RecordKind::Message);
                } else {
                    tx.queue(&mut inner, Place::Here, env, target, RecordKind::Message);
                }
            }
            // After the first message, which stays the thread's first record (as in a child
            // spawned here: listeners read a child's start there).
            let received = Decision::Parcel { sent: false, json };
            self.decide(&mut tx, &entry, &mut inner, &received);
            if a.halted {
                // Its parent halted before it left: it opens halted, and its result goes back.
                let verdict = Verdict::backpressure("parent-halted");
                self.halt_locked(&mut tx, &entry, &mut inner, None, verdict, None);
            }
            tx.snapshot(&entry, &inner);
            let committed = tx.commit(self, (&entry, &mut inner), None);
            if committed.is_ok() {
                self.registry.insert(Arc::clone(&entry));
            }
            committed
        };
        drop(admitting);
        self.telemetry.spawned(entry.id);
        Ok(committed)
    }

    /// The ledger of an adopted child, as `a` describes it, its wall clock from `started`: a
    /// root account with exactly the grant.
    pub(crate) fn adopted_ledger(&self, a: &Adoption, started: tokio::time::Instant) -> Ledger {
        let deadline = a.granted.wall_clock.map(|w| started + w);
        let mut ledger =
            Ledger::new(Account::root(&a.granted), deadline, a.max_depth).started_at(started);
        ledger.remote_parent = Some(a.parent);
        ledger
    }

    /// The thread of an adopted child, as `a` describes it, its wall clock from `started`.
    fn adopted_entry(&self, a: &Adoption, started: tokio::time::Instant) -> ThreadEntry {
        let ledger = self.adopted_ledger(a, started);
        let mut entry = ThreadEntry::new(
            a.child,
            None,
            Some(Arc::from(a.spawner.as_str())),
            Arc::from(a.path.as_str()),
            crate::Dialect::default(),
            ledger,
        );
        entry.depth = a.depth;
        entry
    }

    /// Thread `id`, reloaded if it was evicted; a store that cannot be read is for later.
    async fn entry(
        self: &Arc<Self>,
        id: ThreadId,
    ) -> Result<Option<Arc<ThreadEntry>>, Undelivered> {
        self.load(id)
            .await
            .map_err(|e| Undelivered::Later(format!("thread {id}: {e}")))
    }

    /// Applies a child's result in its parent, once: the grant settled, `returned` recorded,
    /// the spawner told.
    pub(super) async fn take_result(self: &Arc<Self>, r: ChildResult) -> Result<(), Undelivered> {
        let entry = self.entry(r.parent).await?.ok_or_else(|| {
            Undelivered::Refused(format!("no thread {} here to return a child to", r.parent))
        })?;
        let status = match r.status.as_str() {
            "done" => ThreadStatus::Done,
            "idle" => ThreadStatus::Idle,
            _ => ThreadStatus::Halted,
        };
        let payload = r
            .payload
            .as_deref()
            .and_then(|p| Payload::parse(p, &self.config.limits).ok());
        let committed = {
            let mut inner = entry.lock();
            let Some(at) = inner
                .ledger
                .remote_children
                .iter()
                .position(|c| c.thread == r.child)
            else {
                return Ok(()); // returned already, durably
            };
            if inner.ledger.remote_children[at].returning.is_some() {
                // A copy while the first is being made durable: its answer decides.
                return Err(Undelivered::Later(format!(
                    "the result of thread {} is being recorded",
                    r.child
                )));
            }
            let mut tx = Tx::new();
            let returned = Decision::Returned {
                thread: r.child,
                spent: r.spent.clone(),
            };
            self.decide(&mut tx, &entry, &mut inner, &returned);
            let spawner = Arc::from(r.spawner.as_str());
            let told = (r.child, Some(&spawner), status, r.halt.clone(), payload);
            self.tell_result(&mut tx, (&entry, &mut inner), Place::Here, told);
            tx.snapshot(&entry, &inner);
            let committed = tx.commit(self, (&entry, &mut inner), None);
            if committed.is_ok() {
                let ledger = &mut inner.ledger;
                let spent = r.spent.spent_amount();
                let settled = ledger
                    .account
                    .settle(ledger.remote_children[at].held, spent);
                ledger.remote_children[at].returning = Some(settled);
                inner.live_children = inner.live_children.saturating_sub(1);
            }
            committed
        };
        let durable = self.await_commit(r.parent, committed).await;
        let mut inner = entry.lock();
        let ledger = &mut inner.ledger;
        if let Some(at) = ledger
            .remote_children
            .iter()
            .position(|c| c.thread == r.child)
            && let Some(settled) = ledger.remote_children[at].returning
        {
            if durable.is_ok() {
                ledger.remote_children.remove(at);
                // `settle` waits for it (the parent may get no delivery: a halted one).
                self.lifecycle.quiet_changed();
            } else {
                // Not recorded: as if it never came (the sender tries again).
                ledger.remote_children[at].returning = None;
                settled.undo(&ledger.account);
                inner.live_children += 1;
            }
        }
        durable.map_err(|e| Undelivered::Later(e.to_string()))
    }

    /// Halts a child whose parent on another pump halted.
    async fn stop_child(self: &Arc<Self>, s: &StopChild) -> Result<(), Undelivered> {
        // An evicted child (quiet: idle, or waiting for a person) is reloaded and halted all
        // the same; one not here yet may be on its way (its adopt).
        let entry = self
            .entry(s.child)
            .await?
            .ok_or_else(|| Undelivered::Later(format!("thread {} is not here yet", s.child)))?;
        let committed = {
            let mut inner = entry.lock();
            if inner.state().is_closed() {
                return Ok(());
            }
            if inner.running {
                inner.ledger.stop_requested = Some("parent-halted");
                return Ok(());
            }
            let mut tx = Tx::new();
            let verdict = Verdict::backpressure("parent-halted");
            self.halt_locked(&mut tx, &entry, &mut inner, None, verdict, None);
            tx.commit(self, (&entry, &mut inner), None)
        };
        self.await_commit(s.child, committed)
            .await
            .map_err(|e| Undelivered::Later(e.to_string()))
    }
}

impl PumpHandle {
    /// Takes a parcel from the pump of another partition (the HTTP API's
    /// `POST /threads/ID/parcel`): opens a child handed over, applies a child's result, or
    /// halts a child whose parent halted. Returns once the effect is durable; a parcel taken
    /// before is a no-op.
    ///
    /// # Errors
    ///
    /// [`Undelivered::Later`] when the sender should try again (shutting down, a store
    /// failing, a child not here yet), [`Undelivered::Refused`] when it never will be taken.
    pub async fn take_parcel(&self, parcel: Parcel) -> Result<(), Undelivered> {
        let shared = &self.shared;
        match parcel {
            Parcel::Adopt(a) => shared.adopt(a).await,
            Parcel::Result(r) => shared.take_result(r).await,
            Parcel::Stop(s) => shared.stop_child(&s).await,
        }
    }
}
