//! Children on other pumps. With the organism's threads in partitions and `[store]
//! spread_children` on (docs/history.md, "Children on other pumps"), a child whose carve-out
//! bounds it in every dimension its parent's chain limits may be placed in another partition,
//! whose pump runs it. The two pumps exchange [`Parcel`]s, each recorded where it starts:
//!
//! - the parent's pump withdraws the child's whole grant from the parent's account, and records
//!   the carve decision and the `adopt` parcel in the parent's thread, in the transaction of the
//!   spawn; once that is durable a [`Courier`] carries the parcel to the child's partition, again
//!   until its pump has it durable (a second copy is a no-op: the child id names it);
//! - the child's pump opens the child as a root of its own partition whose account has exactly
//!   the grant, and records the parcel with the child's first message (so each stream alone
//!   shows what the child was given);
//! - when the child ends (done, idle or halted) its pump records a `result` parcel with what the
//!   child spent and carries it back; the parent's pump applies it once (keyed by the child id):
//!   the unspent grant goes back to the parent's account (exact decimals), a `returned` decision
//!   is recorded and the spawner gets its `thread-result`; the child's pump then records that
//!   the result was delivered;
//! - a parent that halts sends each open child a `stop`.
//!
//! A restart sends again what its records say is not done: the `adopt` of every child not
//! returned, the `stop` of a halted parent's open children, the `result` not yet delivered.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::Shared;
use super::tx::{Place, Tx};
use crate::envelope::local::local;
use crate::governor::budget::{Account, Amount, BudgetName, CarveRefused, SPENT};
use crate::governor::ledger::Ledger;
use crate::governor::{Budget, Decision, Verdict};
use crate::history::RecordKind;
use crate::system::ThreadStatus;
use crate::thread::Partition;
use crate::thread::registry::{ThreadEntry, ThreadInner};
use crate::{Envelope, Payload, PumpHandle, ThreadId};

/// Carries [`Parcel`]s to the pump that writes another partition. The host's courier posts
/// them to the organism's front (`POST /threads/ID/parcel`), which passes each to the writer of
/// its thread's partition, in the process or over HTTP.
pub trait Courier: Send + Sync + std::fmt::Debug {
    /// Hands `parcel` to the pump of the partition of [`Parcel::thread`]; `Ok` once that pump
    /// has it durable (or had it already).
    fn carry<'a>(&'a self, parcel: &'a Parcel) -> BoxFuture<'a, Result<(), Undelivered>>;
}

/// Why a parcel was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Undelivered {
    /// Not now (no writer of the partition yet, a store failing, the thread not there yet):
    /// the sender tries again.
    #[error("not taken yet: {0}")]
    Later(String),
    /// Never (a listener the receiving pump does not have, a thread it does not hold): the
    /// sender gives up and says so.
    #[error("refused: {0}")]
    Refused(String),
}

/// What one pump tells another about a child on another pump, as JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Parcel {
    /// Open this child: its parent's pump granted it this budget.
    Adopt(Adoption),
    /// This child ended: how, and what it spent.
    Result(ChildResult),
    /// This child's parent halted: halt the child.
    Stop(StopChild),
}

impl Parcel {
    /// The thread whose partition takes the parcel: the child for `adopt` and `stop`, the
    /// parent for `result`.
    pub fn thread(&self) -> ThreadId {
        match self {
            Self::Adopt(a) => a.child,
            Self::Result(r) => r.parent,
            Self::Stop(s) => s.child,
        }
    }

    fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a parcel serializes")
    }
}

/// A child handed to another pump.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Adoption {
    /// The child's id, in the receiving pump's partition.
    pub child: ThreadId,
    /// Its parent, on the sending pump.
    pub parent: ThreadId,
    /// Its display path (`1a2b3c4d.research`).
    pub path: String,
    /// The listener that spawned it: its result goes to that listener.
    pub spawner: String,
    /// Its spawn depth.
    pub depth: u32,
    /// The deepest depth it and its descendants may reach.
    pub max_depth: Option<u32>,
    /// Its budget: every spent dimension its parent's chain limits, and its wall clock.
    pub granted: Budget,
    /// The listeners its first message goes to.
    pub to: Vec<String>,
    /// Its first message's payload (XML).
    pub payload: String,
}

/// How a child on another pump ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ChildResult {
    /// The child.
    pub child: ThreadId,
    /// Its parent.
    pub parent: ThreadId,
    /// The listener that spawned it.
    pub spawner: String,
    /// `done`, `idle` or `halted`.
    pub status: String,
    /// The halt's class and reason, when halted.
    pub halt: Option<(String, String)>,
    /// Its last payload (XML), when it had one.
    pub payload: Option<String>,
    /// What it and its descendants spent, per spent dimension.
    pub spent: Budget,
}

/// A halted parent's open child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct StopChild {
    /// The child.
    pub child: ThreadId,
    /// Its parent, which halted.
    pub parent: ThreadId,
}

/// The pump's side of spreading children: the courier, and whose turn the next child is.
#[derive(Debug, Default)]
pub(crate) struct Spread {
    courier: Option<Arc<dyn Courier>>,
    turn: AtomicU32,
    /// One adoption at a time: a parcel sent again while the first copy is being taken must
    /// not open the child twice.
    adopting: tokio::sync::Mutex<()>,
}

impl Spread {
    pub fn new(courier: Option<Arc<dyn Courier>>) -> Self {
        Self {
            courier,
            ..Self::default()
        }
    }
}

/// The grant of a child placed on another pump: what it asks for in each dimension, at most
/// what its parent's chain has left (the spawner keeping `floor` turns). `Ok(None)` when the
/// spawn leaves open a dimension the chain limits: such a child stays with its parent, where
/// it draws on the parent's account as it goes.
///
/// # Errors
///
/// [`CarveRefused`] when a dimension asked for would be granted nothing.
fn remote_grant(
    account: &Arc<Account>,
    asked: &Budget,
    floor: u64,
) -> Result<Option<[Option<Decimal>; 5]>, CarveRefused> {
    let room = account.available();
    let want = asked.spent_limits();
    let mut grant = [None; 5];
    for (d, name) in SPENT.iter().enumerate() {
        grant[d] = match (want[d], room[d]) {
            (None, Some(_)) => return Ok(None),
            (None, None) => None,
            (Some(want), None) => Some(want),
            (Some(want), Some(room)) => {
                let keep = if *name == BudgetName::Turns {
                    Decimal::from(floor)
                } else {
                    Decimal::ZERO
                };
                let available = (room - keep).max(Decimal::ZERO);
                let given = want.min(available);
                if given.is_zero() && !want.is_zero() {
                    return Err(CarveRefused {
                        budget: *name,
                        asked: want,
                        available,
                        floor: keep,
                    });
                }
                Some(given)
            }
        };
    }
    Ok(Some(grant))
}

/// What a spawn on another pump needs from the spawning thread.
pub(crate) struct Placed {
    /// The grant: the spent dimensions, the wall clock left, the depth asked for.
    pub granted: Budget,
    /// The deepest depth the child and its descendants may reach.
    pub max_depth: Option<u32>,
    /// What the parent's account holds for it.
    pub held: Amount,
}

impl Shared {
    /// The partition the next spawned child goes to, when it is not this pump's: the
    /// partitions in turn, starting after this one. `None` when children are not spread.
    pub(crate) fn spread_to(&self) -> Option<Partition> {
        self.spread.courier.as_ref()?;
        let own = self.config.partition?;
        let count = own.count();
        if count < 2 {
            return None;
        }
        let turn = self.spread.turn.fetch_add(1, Ordering::Relaxed);
        let index = ((u64::from(own.index()) + 1 + u64::from(turn)) % u64::from(count)) as u32;
        (index != own.index())
            .then(|| Partition::new(index, count))
            .flatten()
    }

    /// Withdraws a grant for a child on another pump from `inner`'s account (one thread more
    /// for the spawn itself). `Ok(None)`: the child stays here (see [`remote_grant`]).
    ///
    /// # Errors
    ///
    /// The refusal's message; `Some(budget)` with it when the withdrawal found the budget
    /// spent (the tree has spawned all it may: a halt, as for a child here).
    pub(crate) fn place_remote(
        inner: &ThreadInner,
        depth: u32,
        asked: &Budget,
    ) -> Result<Option<Placed>, (String, Option<BudgetName>)> {
        let floor = 2 * (inner.live_children as u64 + 1);
        let account = &inner.ledger.account;
        let grant = match remote_grant(account, asked, floor) {
            Ok(Some(grant)) => grant,
            Ok(None) => return Ok(None),
            Err(refused) => return Err((refused.to_string(), None)),
        };
        let held = Amount(grant.map(Option::unwrap_or_default));
        let mut withdrawn = held;
        withdrawn.add(BudgetName::Threads, Decimal::ONE);
        if let Err(e) = account.withdraw(withdrawn) {
            let message = format!("spawn refused: the {} budget is spent", e.budget);
            return Err((message, Some(e.budget)));
        }
        let now = tokio::time::Instant::now();
        let left = inner
            .ledger
            .deadline
            .map(|d| d.saturating_duration_since(now));
        let wall_clock = match (left, asked.wall_clock) {
            (Some(l), Some(w)) => Some(l.min(w)),
            (l, w) => l.or(w),
        };
        let max_depth = match (inner.ledger.max_depth, asked.depth) {
            (Some(m), Some(d)) => Some(m.min(depth + d)),
            (m, d) => m.or(d.map(|d| depth + d)),
        };
        let granted = Budget {
            wall_clock,
            depth: asked.depth,
            ..Budget::from_spent(grant)
        };
        Ok(Some(Placed {
            granted,
            max_depth,
            held,
        }))
    }

    /// Ends a thread that has no parent in this pump: closes its account and, for a child
    /// adopted from another pump, records its result and sends it there once durable.
    pub(crate) fn end_root(
        &self,
        tx: &mut Tx,
        entry: &ThreadEntry,
        inner: &mut ThreadInner,
        status: ThreadStatus,
        halt: Option<(String, String)>,
        payload: Option<Payload>,
    ) {
        inner.ledger.account.close();
        let Some(parent) = inner.ledger.remote_parent else {
            return;
        };
        let spent = inner.ledger.account.snapshot().map(|line| Some(line.spent));
        let result = Parcel::Result(ChildResult {
            child: entry.id,
            parent,
            spawner: entry.spawner.as_deref().unwrap_or_default().to_owned(),
            status: status.as_str().to_owned(),
            halt,
            payload: payload.map(|p| p.as_str().to_owned()),
            spent: Budget::from_spent(spent),
        });
        let json = result.to_json();
        self.decide(tx, entry, inner, &Decision::Parcel { sent: true, json });
        tx.ship(result);
    }

    /// Sends every open child on another pump of a halting thread a `stop`.
    pub(crate) fn stop_remote_children(
        &self,
        tx: &mut Tx,
        entry: &ThreadEntry,
        inner: &ThreadInner,
    ) {
        for child in &inner.ledger.remote_children {
            tx.ship(Parcel::Stop(StopChild {
                child: child.thread,
                parent: entry.id,
            }));
        }
    }

    /// `ticket`, which sends `parcels` once it resolves durable.
    pub(crate) fn ship_when_durable(
        self: &Arc<Self>,
        ticket: crate::history::Ticket,
        parcels: Vec<Parcel>,
    ) -> crate::history::Ticket {
        let shared = Arc::clone(self);
        crate::history::Ticket::pending(async move {
            let durable = ticket.wait().await;
            if durable.is_ok() {
                for parcel in parcels {
                    shared.ship(parcel);
                }
            }
            durable
        })
    }

    /// Sends `parcel` (durable already) with the courier, again and again until it is taken or
    /// refused, or the pump is gone (its next start sends it again).
    pub(crate) fn ship(self: &Arc<Self>, parcel: Parcel) {
        let Some(courier) = self.spread.courier.clone() else {
            tracing::error!(thread = %parcel.thread(), "a parcel for another pump, and no courier to carry it");
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let pump = Arc::downgrade(self);
        runtime.spawn(async move {
            let mut pause = Duration::from_millis(100);
            loop {
                let carried = courier.carry(&parcel).await;
                let Some(shared) = pump.upgrade() else { return };
                match carried {
                    Ok(()) => return shared.shipped(&parcel).await,
                    Err(Undelivered::Refused(why)) => return shared.refused(&parcel, &why).await,
                    Err(Undelivered::Later(why)) => {
                        tracing::debug!(thread = %parcel.thread(), %why, "parcel not taken yet; trying again");
                    }
                }
                if shared.lifecycle.is_stopped() {
                    return;
                }
                drop(shared);
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(2));
            }
        });
    }

    /// A parcel was taken: a result's delivery is recorded in the child.
    async fn shipped(self: &Arc<Self>, parcel: &Parcel) {
        let Parcel::Result(result) = parcel else {
            return;
        };
        let Some(entry) = self.registry.get(result.child) else {
            return;
        };
        let committed = {
            let mut inner = entry.lock();
            let mut tx = Tx::new();
            let delivered = Decision::Delivered {
                thread: result.parent,
            };
            self.decide(&mut tx, &entry, &mut inner, &delivered);
            tx.commit(self, (&entry, &mut inner), None)
        };
        self.finish_commit(entry.id, committed).await;
    }

    /// A parcel was refused for good: a child that could not be opened returns at once,
    /// having spent nothing; anything else is logged.
    async fn refused(self: &Arc<Self>, parcel: &Parcel, why: &str) {
        tracing::error!(thread = %parcel.thread(), %why, "another pump refused a parcel");
        if let Parcel::Adopt(a) = parcel {
            let result = ChildResult {
                child: a.child,
                parent: a.parent,
                spawner: a.spawner.clone(),
                status: ThreadStatus::Halted.as_str().to_owned(),
                halt: Some((
                    "aborted".to_owned(),
                    format!("the child's pump refused it: {why}"),
                )),
                payload: None,
                spent: Budget::from_spent([Some(Decimal::ZERO); 5]),
            };
            if let Err(e) = self.take_result(result).await {
                tracing::error!(thread = %a.parent, error = %e, "a refused child could not be returned");
            }
        }
    }

    /// Opens a child another pump handed over, unless it is open already.
    async fn adopt(self: &Arc<Self>, a: Adoption) -> Result<(), Undelivered> {
        if !self.config.partition.is_some_and(|p| p.holds(a.child)) {
            return Err(Undelivered::Refused(format!(
                "thread {} is not in this pump's partition",
                a.child
            )));
        }
        let _one = self.spread.adopting.lock().await;
        let child = a.child;
        if self.registry.get(a.child).is_some() || self.reload(a.child).await {
            return Ok(()); // a copy sent again
        }
        let committed = self.open_adopted(a)?;
        self.await_commit(child, committed)
            .await
            .map_err(|e| Undelivered::Later(e.to_string()))
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
                tx.queue(&mut inner, Place::Here, env, target, RecordKind::Message);
            }
            // After the first message, which stays the thread's first record (as in a child
            // spawned here: listeners read a child's start there).
            let received = Decision::Parcel { sent: false, json };
            self.decide(&mut tx, &entry, &mut inner, &received);
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

    /// Whether thread `id`, not in memory, was evicted and is back now.
    async fn reload(self: &Arc<Self>, id: ThreadId) -> bool {
        matches!(self.load(id).await, Ok(Some(_)))
    }

    /// Applies a child's result in its parent, once: the grant settled, `returned` recorded,
    /// the spawner told.
    async fn take_result(self: &Arc<Self>, r: ChildResult) -> Result<(), Undelivered> {
        let entry = match self.registry.get(r.parent) {
            Some(entry) => entry,
            None if self.reload(r.parent).await => {
                self.registry.get(r.parent).ok_or_else(|| {
                    Undelivered::Later(format!("thread {} is being reloaded", r.parent))
                })?
            }
            None => {
                return Err(Undelivered::Refused(format!(
                    "no thread {} here to return a child to",
                    r.parent
                )));
            }
        };
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
                return Ok(()); // returned already
            };
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
                let child = inner.ledger.remote_children.remove(at);
                settle(&inner.ledger.account, child.held, &r.spent);
                inner.live_children = inner.live_children.saturating_sub(1);
            }
            committed
        };
        self.await_commit(r.parent, committed)
            .await
            .map_err(|e| Undelivered::Later(e.to_string()))
    }

    /// Halts a child whose parent on another pump halted.
    async fn stop_child(self: &Arc<Self>, s: &StopChild) -> Result<(), Undelivered> {
        let entry = match self.registry.get(s.child) {
            Some(entry) => entry,
            None if self.reload(s.child).await => return Ok(()), // evicted: it had ended
            None => {
                return Err(Undelivered::Later(format!(
                    "thread {} is not here yet",
                    s.child
                )));
            }
        };
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

/// Settles a returned child's grant in its parent's account: what it did not spend goes back,
/// what it spent past its grant (a model's tokens counted after the call) is charged.
pub(crate) fn settle(account: &Arc<Account>, held: Amount, spent: &Budget) {
    let spent = spent.spent_limits().map(Option::unwrap_or_default);
    let (mut back, mut more) = (Amount::default(), Amount::default());
    for (d, (held, spent)) in held.0.iter().zip(spent).enumerate() {
        let diff = held - spent;
        if diff.is_sign_positive() {
            back.0[d] = diff;
        } else {
            more.0[d] = -diff;
        }
    }
    account.refund(back);
    account.charge(more);
}

/// What a restart found of children on other pumps, to send again.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    /// Adopt parcels sent, by child.
    adopts: HashMap<ThreadId, Adoption>,
    /// Result parcels recorded and not yet delivered, by child.
    results: HashMap<ThreadId, ChildResult>,
}

impl Shared {
    /// Replays a parcel decision of `entry` at a restart: a child sent holds its grant and
    /// counts as open until it returns; a result is pending until delivered.
    pub(crate) fn replay_parcel(
        &self,
        entry: &ThreadEntry,
        inner: &mut ThreadInner,
        decision: &Decision,
        outbox: &mut Outbox,
    ) {
        match decision {
            Decision::Parcel { sent: true, json } => match serde_json::from_str(json) {
                Ok(Parcel::Adopt(a)) => {
                    let held = Amount(a.granted.spent_limits().map(Option::unwrap_or_default));
                    let mut charged = held;
                    charged.add(BudgetName::Threads, Decimal::ONE);
                    inner.ledger.account.charge(charged);
                    inner
                        .ledger
                        .remote_children
                        .push(crate::governor::ledger::RemoteChild {
                            thread: a.child,
                            held,
                            path: Arc::from(a.path.as_str()),
                        });
                    inner.live_children += 1;
                    if !inner.children.contains(&a.child) {
                        inner.children.push(a.child);
                    }
                    outbox.adopts.insert(a.child, a);
                }
                Ok(Parcel::Result(r)) => {
                    outbox.results.insert(entry.id, r);
                }
                Ok(Parcel::Stop(_)) => {}
                Err(error) => {
                    tracing::error!(thread = %entry.id, %error, "a recorded parcel does not read back");
                }
            },
            Decision::Returned { thread, spent } => {
                let ledger = &mut inner.ledger;
                if let Some(at) = ledger
                    .remote_children
                    .iter()
                    .position(|c| c.thread == *thread)
                {
                    let child = ledger.remote_children.remove(at);
                    settle(&ledger.account, child.held, spent);
                    inner.live_children = inner.live_children.saturating_sub(1);
                }
                outbox.adopts.remove(thread);
            }
            Decision::Delivered { .. } => {
                outbox.results.remove(&entry.id);
            }
            _ => {}
        }
    }

    /// Sends again, after a restart, what the records say is not done.
    pub(crate) fn resend(
        self: &Arc<Self>,
        outbox: Outbox,
        restored: &HashMap<ThreadId, Arc<ThreadEntry>>,
    ) {
        for a in outbox.adopts.into_values() {
            let parent = restored
                .get(&a.parent)
                .map(|p| p.lock().state().is_closed());
            match parent {
                Some(true) => self.ship(Parcel::Stop(StopChild {
                    child: a.child,
                    parent: a.parent,
                })),
                Some(false) => self.ship(Parcel::Adopt(a)),
                None => {}
            }
        }
        for r in outbox.results.into_values() {
            self.ship(Parcel::Result(r));
        }
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
