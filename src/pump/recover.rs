//! Restart: rebuilding the thread registry, the governor's ledgers and the queues from what the
//! history store kept, so that every message accepted but never delivered is delivered, in order.

use std::collections::HashMap;
use std::sync::Arc;

use rust_decimal::Decimal;
use tokio::time::{Duration, Instant};

use super::Shared;
use super::builder::BuildError;
use super::evict::{Clocks, set_clock};
use super::notice::Recipient;
use super::spread::{Adoption, Outbox, Parcel};
use super::tx::Tx;
use crate::envelope::CLIENT_SENDER;
use crate::governor::budget::{Account, Amount, BudgetName};
use crate::governor::ledger::Ledger;
use crate::governor::{Budget, Decision, GovernorMessage};
use crate::history::{Record, RecordKind, Recovery};
use crate::system::{ErrorCode, Request, SystemMessage};
use crate::thread::registry::{Queued, ThreadEntry};
use crate::{Payload, ThreadId, ThreadState, todo};

/// What a restart brought back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Threads restored from the store.
    pub threads: usize,
    /// Accepted messages put back on their queues, in order.
    pub requeued: usize,
}

impl Shared {
    /// Rebuilds threads, ledgers and queues from `recovery`, then starts the runners.
    pub(crate) fn recover(
        self: &Arc<Self>,
        recovery: Recovery,
    ) -> Result<RecoveryReport, BuildError> {
        let report = self.restore(recovery, None)?;
        tracing::info!(
            threads = report.threads,
            requeued = report.requeued,
            "recovered from history"
        );
        Ok(report)
    }

    /// Rebuilds threads, ledgers and queues from what a store kept — all of it at a restart,
    /// one evicted tree at a reload (`pump/evict.rs`) — registers the threads and starts the
    /// runners of those with work. The one path by which a thread comes back from history.
    /// `clocks`, at a reload: the wall-clock starts and deadlines kept at eviction, set before
    /// any thread is reachable (at a restart the wall clock restarts).
    pub(crate) fn restore(
        self: &Arc<Self>,
        recovery: Recovery,
        clocks: Option<&Clocks>,
    ) -> Result<RecoveryReport, BuildError> {
        let Recovery {
            threads,
            counters,
            records,
            pending,
            governor,
            cleared,
            started,
            delivered,
        } = recovery;
        let clock = Clock::now();
        let start_of = |id: &ThreadId| started.get(id).map_or(clock.now, |&t| clock.at(t));
        // Carve-outs as granted: a child's account is reopened with exactly those limits.
        let granted: HashMap<ThreadId, Budget> = governor
            .iter()
            .filter_map(|r| match Decision::parse(&r.payload)? {
                Decision::Carve {
                    thread, granted, ..
                } => Some((thread, granted)),
                _ => None,
            })
            .collect();
        // A fork's budget, as its first record says.
        let forked: HashMap<ThreadId, Budget> = governor
            .iter()
            .filter_map(|r| match Decision::parse(&r.payload)? {
                Decision::Fork(fork) => Some((r.thread, fork.budget)),
                _ => None,
            })
            .collect();
        // Children adopted from pumps of other partitions, as their first record says.
        let adopted: HashMap<ThreadId, Adoption> = governor
            .iter()
            .filter_map(|r| match Decision::parse(&r.payload)? {
                Decision::Parcel { sent: false, json } => match serde_json::from_str(&json) {
                    Ok(Parcel::Adopt(a)) => Some((r.thread, a)),
                    _ => None,
                },
                _ => None,
            })
            .collect();
        let mut restored: HashMap<ThreadId, Arc<ThreadEntry>> = HashMap::new();
        for info in &threads {
            if info.id == self.system_thread.id {
                restored.insert(info.id, Arc::clone(&self.system_thread));
                continue;
            }
            let parent = info.parent.and_then(|p| restored.get(&p));
            let ledger = match parent {
                Some(parent) => {
                    let p = parent.lock();
                    let carve = granted.get(&info.id).cloned().unwrap_or_default();
                    let account = p.ledger.account.child_granted(&carve);
                    Ledger::child(&p.ledger, parent.depth, account, &carve, start_of(&info.id))
                }
                None if adopted.contains_key(&info.id) => {
                    self.adopted_ledger(&adopted[&info.id], start_of(&info.id))
                }
                None if &*info.path == "system" => {
                    Ledger::new(Account::root(&Budget::unlimited()), None, None)
                }
                None => {
                    let budget = forked.get(&info.id);
                    let budget = budget.unwrap_or(&self.config.governor.budget);
                    Ledger::root(budget, start_of(&info.id))
                }
            };
            let mut entry = ThreadEntry::restore(info, ledger);
            self.rewait(&mut entry.lock(), info.id);
            if let Some(parent) = parent {
                // One epoch per tree, as when the child was spawned (`settle`, eviction).
                entry.tree_epoch = Arc::clone(&parent.tree_epoch);
            }
            let entry = Arc::new(entry);
            if let Some(parent) = parent {
                let mut p = parent.lock();
                p.add_child(entry.id, Arc::clone(&entry.path));
                p.ledger
                    .account
                    .charge(Amount::of(BudgetName::Threads, Decimal::ONE));
                if !entry.lock().state().is_closed() {
                    p.live_children += 1;
                }
            }
            restored.insert(entry.id, entry);
        }
        for (id, c) in counters {
            let Some(entry) = restored.get(&id) else {
                continue;
            };
            let mut inner = entry.lock();
            // Notices that cost no turn were counted apart (`notices`), so turns are exact.
            inner.ledger.account.charge(c.spent());
            inner.counters = c;
        }
        for (id, n) in records {
            if let Some(entry) = restored.get(&id) {
                entry.lock().records += n; // the system thread already holds this run's boot
            }
        }
        // The last resume of each thread: the no-progress window starts after it.
        let mut resumed: HashMap<ThreadId, u64> = HashMap::new();
        let mut outbox = Outbox::default();
        for record in governor {
            let Some(entry) = restored.get(&record.thread) else {
                continue;
            };
            if self.replay(entry, &record, &clock, &mut outbox) {
                resumed.insert(record.thread, record.seq);
            }
        }
        for (record, position) in cleared {
            if let Some(entry) = restored.get(&record.thread) {
                let keep = keep_messages(&record, &self.config.limits);
                entry
                    .lock()
                    .clear_view(Arc::clone(&record.from), position, keep);
            }
        }
        for (id, last) in delivered {
            if let Some(entry) = restored.get(&id) {
                let after = resumed.get(&id).copied().unwrap_or(0);
                self.rewind(entry, last.iter().filter(|r| r.seq > after));
            }
        }
        for entry in restored.values() {
            let inner = entry.lock();
            if inner.state().is_closed() {
                inner.ledger.account.close();
            }
        }
        let mut requeued = 0;
        for record in pending {
            let Some(entry) = restored.get(&record.thread) else {
                tracing::error!(thread = %record.thread, message = %record.id, "pending message of an unknown thread");
                continue;
            };
            let target = record.to.as_deref().and_then(|to| self.routes.index_of(to));
            let envelope = record.to_envelope(&self.config.limits);
            match (target, envelope) {
                (Some(target), Ok(envelope)) => {
                    entry.lock().queue.push_back(Queued { envelope, target });
                    requeued += 1;
                }
                _ => self.drop_unroutable(entry, &record)?,
            }
        }
        let report = RecoveryReport {
            threads: restored.len(),
            requeued,
        };
        let wake: Vec<_> = restored
            .values()
            .filter(|e| !e.lock().queue.is_empty())
            .cloned()
            .collect();
        if let Some(clocks) = clocks {
            restored
                .values()
                .for_each(|e| set_clock(e, clocks.get(&e.id)));
        }
        self.resend(outbox, &restored);
        for entry in restored.into_values() {
            self.registry.insert(entry);
        }
        if !wake.is_empty() && tokio::runtime::Handle::try_current().is_err() {
            return Err(BuildError::Config(format!(
                "{requeued} recovered messages need a tokio runtime to be delivered: build the pump inside one"
            )));
        }
        for entry in wake {
            let mut inner = entry.lock();
            if inner.state() != ThreadState::Halted {
                self.wake(&entry, &mut inner);
            }
        }
        Ok(report)
    }

    /// Replays one governor record into a thread's ledger: a message from a listener as the
    /// governor took it in (a loop signal into the same-control guard too), a plan as the
    /// thread's latest, a carve as the child and the listeners it serves (before any criterion
    /// naming it, in record order), a halt as the closing of the account, a resume as its extension at the
    /// time it was made — in record order, so a goal's tightening and a resume's addition
    /// compose as they did; a parcel to or from another partition's pump as the grant it holds
    /// and what is left to send (`outbox`). True for a resume.
    fn replay(
        &self,
        entry: &ThreadEntry,
        record: &Record,
        clock: &Clock,
        outbox: &mut Outbox,
    ) -> bool {
        let mut inner = entry.lock();
        if record.kind == RecordKind::Decision {
            let ledger = &mut inner.ledger;
            match Decision::parse(&record.payload) {
                Some(Decision::Halt { .. }) => ledger.account.close(),
                Some(Decision::Carve { thread, to, .. }) => ledger.spawned(thread, &to),
                Some(Decision::Resume { added }) => {
                    ledger.resume_at(&added, clock.at(record.time_us));
                    return true;
                }
                // Parcels to and from pumps of other partitions (`pump/spread/replay.rs`).
                Some(decision) => self.replay_parcel(entry, &mut inner, &decision, outbox),
                None => {}
            }
            return false;
        }
        if todo::is_plan_record(record) {
            // The thread's latest plan, as the delivery that wrote it left it.
            match Payload::parse(&record.payload, &self.config.limits) {
                Ok(plan) => inner.plan = Some(plan),
                Err(error) => {
                    tracing::warn!(thread = %record.thread, record = record.seq, %error, "a recorded plan no longer parses; the thread keeps the one before it");
                }
            }
            return false;
        }
        let ledger = &mut inner.ledger;
        let message = Payload::parse(&record.payload, &self.config.limits)
            .ok()
            .and_then(|p| GovernorMessage::parse(&p).ok());
        if let Some(message) = message {
            if matches!(message, GovernorMessage::Loop(_)) {
                let window = self.config.governor.no_progress_window;
                ledger.same_control(&record.payload, window);
            }
            ledger.absorb(message, &record.from, entry.depth);
        }
        false
    }

    /// Feeds a thread's last deliveries since its last resume into the no-progress guard, as
    /// the gate saw them (outside input is not part of a loop), so a cycle under way before
    /// the restart is caught as soon as it would have been.
    fn rewind<'r>(&self, entry: &ThreadEntry, deliveries: impl Iterator<Item = &'r Record>) {
        let policy = &self.config.governor;
        let ledger = &mut entry.lock().ledger;
        for r in deliveries.filter(|r| &*r.from != CLIENT_SENDER) {
            let to = r.to.as_deref().unwrap_or_default();
            let window = (policy.no_progress_window, policy.cycle_max_period);
            ledger.cycles(&r.from, to, &r.payload, window.0, window.1);
        }
    }

    /// A pending message whose listener is no longer registered: resolved with a recorded notice.
    fn drop_unroutable(&self, entry: &ThreadEntry, record: &Record) -> Result<(), BuildError> {
        let to = record.to.as_deref().unwrap_or("");
        let message = format!("`{to}` is not registered any more; the message was not delivered");
        let notice = SystemMessage::Error {
            code: ErrorCode::NoRoute,
            message,
        };
        let mut inner = entry.lock();
        let mut tx = Tx::delivering(record.thread, record.id);
        self.notice(
            &mut tx,
            entry,
            &mut inner,
            Recipient::RecordOnly(to),
            notice,
            Some(record.id),
        );
        self.store.append(tx.into_batch())?;
        Ok(())
    }
}

/// `keep-messages` of a recorded `clear-context` request (0 when it no longer parses).
fn keep_messages(record: &Record, limits: &crate::Limits) -> usize {
    let request = Payload::parse(&record.payload, limits)
        .ok()
        .and_then(|p| Request::parse(&p, limits).ok());
    match request {
        Some(Request::ClearContext { keep }) => keep,
        _ => 0,
    }
}

/// The restart's reading of both clocks, to place recorded times on the monotonic clock.
struct Clock {
    now: Instant,
    now_us: i64,
}

impl Clock {
    fn now() -> Self {
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        Self {
            now: Instant::now(),
            now_us,
        }
    }

    /// The instant of a record stamped `time_us` (now, for a stamp from the future or one
    /// further back than the monotonic clock reaches).
    fn at(&self, time_us: i64) -> Instant {
        let ago = u64::try_from(self.now_us.saturating_sub(time_us)).unwrap_or(0);
        self.now
            .checked_sub(Duration::from_micros(ago))
            .unwrap_or(self.now)
    }
}
