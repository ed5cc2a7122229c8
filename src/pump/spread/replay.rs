//! What a restart does with the parcels its records name: the grant of every child sent and
//! not returned held again, and what was not done sent again.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Adoption, ChildResult, Parcel, StopChild, with_the_thread};
use crate::ThreadId;
use crate::governor::Decision;
use crate::pump::Shared;
use crate::thread::registry::{ThreadEntry, ThreadInner};

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
                    let held = a.granted.spent_amount();
                    inner.ledger.account.charge(with_the_thread(held));
                    inner
                        .ledger
                        .remote_children
                        .push(crate::governor::ledger::RemoteChild {
                            thread: a.child,
                            held,
                            returning: None,
                        });
                    inner.live_children += 1;
                    inner.add_child(a.child, Arc::from(a.path.as_str()));
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
                    ledger.account.settle(child.held, spent.spent_amount());
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
            let Some(parent) = restored.get(&a.parent) else {
                continue;
            };
            // The child may never have been opened: its adopt again, and — for a parent that
            // halted (not one that is done: its children run on) — its stop.
            let halted = parent.lock().state() == crate::ThreadState::Halted;
            let stop = StopChild {
                child: a.child,
                parent: a.parent,
            };
            // A halted parent's child opens halted if it was never opened, and is stopped if
            // it was: whichever comes first, it ends `parent-halted`.
            self.spread
                .send_again(Parcel::Adopt(Adoption { halted, ..a }));
            if halted {
                self.spread.send_again(Parcel::Stop(stop));
            }
        }
        for r in outbox.results.into_values() {
            self.spread.send_again(Parcel::Result(r));
        }
    }
}
