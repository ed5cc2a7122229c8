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

mod replay;
mod send;
mod take;

pub(crate) use replay::Outbox;

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use futures_util::future::BoxFuture;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::Shared;
use crate::ThreadId;
use crate::governor::Budget;
use crate::governor::budget::{Amount, BudgetName, CarveRefused, Chosen, SPENT};
use crate::history::Ticket;
use crate::thread::Partition;
use crate::thread::registry::ThreadInner;

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

    pub(crate) fn to_json(&self) -> String {
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
    /// Its parent halted before it left (a restart found it so): it is opened halted,
    /// `parent-halted`, its first message recorded and not delivered.
    #[serde(default)]
    pub halted: bool,
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

/// The pump's side of spreading children: the courier, whose turn the next child is, and the
/// parcels durable and waiting for the sender (`spread/send.rs`).
#[derive(Debug)]
pub(crate) struct Spread {
    courier: Option<Arc<dyn Courier>>,
    turn: AtomicU32,
    outgoing: mpsc::UnboundedSender<Parcel>,
    /// Taken by the sender when it starts.
    waiting: std::sync::Mutex<Option<mpsc::UnboundedReceiver<Parcel>>>,
}

impl Default for Spread {
    fn default() -> Self {
        Self::new(None)
    }
}

impl Spread {
    pub fn new(courier: Option<Arc<dyn Courier>>) -> Self {
        let (outgoing, waiting) = mpsc::unbounded_channel();
        Self {
            courier,
            turn: AtomicU32::new(0),
            outgoing,
            waiting: std::sync::Mutex::new(Some(waiting)),
        }
    }

    /// `ticket`, which hands `parcels` to the sender once it resolves durable: nothing is sent
    /// that is not recorded.
    pub fn when_durable(&self, ticket: Ticket, parcels: Vec<Parcel>) -> Ticket {
        let outgoing = self.outgoing.clone();
        Ticket::pending(async move {
            let durable = ticket.wait().await;
            if durable.is_ok() {
                for parcel in parcels {
                    let _ = outgoing.send(parcel);
                }
            }
            durable
        })
    }

    /// Hands `parcel`, durable already (a restart found it), to the sender.
    pub fn send_again(&self, parcel: Parcel) {
        let _ = self.outgoing.send(parcel);
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
    room: [Option<Decimal>; 5],
    asked: &Budget,
    floor: u64,
) -> Result<Option<[Option<Decimal>; 5]>, CarveRefused> {
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

/// What a spawn on another pump takes from its parent's account: the grant `held`, and the one
/// thread the spawn itself is.
pub(crate) fn with_the_thread(held: Amount) -> Amount {
    let mut withdrawn = held;
    withdrawn.add(BudgetName::Threads, Decimal::ONE);
    withdrawn
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
        // The grant is chosen and withdrawn (with the one thread) under one lock of the chain.
        let chosen = inner
            .ledger
            .account
            .withdraw_chosen(|room| -> Result<_, CarveRefused> {
                let grant: Option<_> = remote_grant(room, asked, floor)?;
                Ok(grant.map(|grant| {
                    let held = Amount(grant.map(Option::unwrap_or_default));
                    ((grant, held), with_the_thread(held))
                }))
            });
        let (grant, held) = match chosen {
            Ok(Some(chosen)) => chosen,
            Ok(None) => return Ok(None),
            Err(Chosen::Refused(refused)) => return Err((refused.to_string(), None)),
            Err(Chosen::Exhausted(e)) => {
                let message = format!("spawn refused: the {} budget is spent", e.budget);
                return Err((message, Some(e.budget)));
            }
        };
        let now = tokio::time::Instant::now();
        // As a child here would have them: the deadline as a wall clock from now.
        let (deadline, max_depth) = inner.ledger.child_limits(depth - 1, asked, now);
        let wall_clock = deadline.map(|d| d.saturating_duration_since(now));
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
}
