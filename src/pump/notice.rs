//! Pump notices: queuing or recording a system message for a listener, the outside sender, or
//! nobody; recording a governor decision; and telling a spawner how its child ended — in this
//! pump, or on another (`pump/spread.rs`).

use std::sync::Arc;

use super::Shared;
use super::spread::{ChildResult, Parcel, StopChild};
use super::tx::{Place, Tx};
use crate::envelope::local::local;
use crate::governor::{Budget, Decision};
use crate::history::RecordKind;
use crate::system::{CLIENT_SENDER, GOVERNOR_NS, SYSTEM_SENDER, SystemMessage, ThreadStatus};
use crate::thread::registry::{ThreadEntry, ThreadInner};
use crate::{Envelope, MessageId, Payload};

/// A child's ending, as its spawner is told: the child, its spawner, how it ended, the halt's
/// class and reason, its last payload.
pub(crate) type Told<'a> = (
    crate::ThreadId,
    Option<&'a Arc<str>>,
    ThreadStatus,
    Option<(String, String)>,
    Option<Payload>,
);

/// Who a pump notice goes to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Recipient<'a> {
    /// A listener in the thread: queued for it while the thread is open.
    Listener(usize),
    /// The outside sender: recorded as egress.
    Client,
    /// Nobody can take it (the pump itself sent the failed message): recorded, addressed to this name.
    RecordOnly(&'a str),
}

impl Shared {
    /// Queues (or records) a pump notice for `to` in this thread. A notice respects the queue's
    /// capacity like any message: when the thread's queue is full it is recorded, addressed to
    /// the listener, without being delivered (the listener sees it in its history).
    pub(crate) fn notice(
        &self,
        tx: &mut Tx,
        entry: &ThreadEntry,
        inner: &mut ThreadInner,
        to: Recipient<'_>,
        message: SystemMessage,
        in_reply_to: Option<MessageId>,
    ) {
        let system = local(&self.routes.names.system);
        let env =
            Envelope::new(system, entry.id, message.to_payload()).with_in_reply_to(in_reply_to);
        match to {
            Recipient::Listener(index)
                if !inner.state().is_closed()
                    && inner.queue.len() + tx.queued_here() < self.config.queue_capacity =>
            {
                let env = env.with_to(Some(local(&self.routes[index].name)));
                tx.queue(inner, Place::Here, env, index, RecordKind::System);
            }
            Recipient::Listener(index) => {
                let env = env.with_to(Some(local(&self.routes[index].name)));
                tx.record(inner, env, RecordKind::System);
            }
            Recipient::Client => tx.record(
                inner,
                env.with_to(Some(local(&self.routes.names.client))),
                RecordKind::System,
            ),
            Recipient::RecordOnly(name) => tx.record(
                inner,
                env.with_to(Some(Arc::from(name))),
                RecordKind::System,
            ),
        }
    }

    /// Where a notice about a message from `from` goes.
    pub(crate) fn recipient_of<'a>(&'a self, from: &'a str, me: usize) -> Recipient<'a> {
        match from {
            CLIENT_SENDER => Recipient::Client,
            SYSTEM_SENDER => Recipient::RecordOnly(&self.routes[me].name),
            name => self
                .routes
                .index_of(name)
                .map_or(Recipient::RecordOnly(name), Recipient::Listener),
        }
    }

    /// Tells how a thread ended (`ended`: its status, the halt's class and reason, its last
    /// payload) to its parent: here (`report_to_parent`), on another pump (`end_root` sends the
    /// result), or nobody (a root: `end_root` closes its account).
    pub(crate) fn tell_parent(
        &self,
        tx: &mut Tx,
        (entry, inner): (&ThreadEntry, &mut ThreadInner),
        parent: Option<(&ThreadEntry, &mut ThreadInner)>,
        (status, halt, payload): (ThreadStatus, Option<(String, String)>, Option<Payload>),
    ) {
        match parent {
            Some(parent) => {
                self.report_to_parent(tx, (entry, inner), parent, status, halt, payload)
            }
            None => self.end_root(tx, entry, inner, status, halt, payload),
        }
    }

    /// Delivers `thread-result` to the child's spawner in the parent thread (locked by the
    /// caller), and returns the child's unspent carve-out to the parent.
    fn report_to_parent(
        &self,
        tx: &mut Tx,
        child: (&ThreadEntry, &ThreadInner),
        parent: (&ThreadEntry, &mut ThreadInner),
        status: ThreadStatus,
        halt: Option<(String, String)>,
        payload: Option<Payload>,
    ) {
        let ((child, child_inner), (parent, parent_inner)) = (child, parent);
        child_inner.ledger.account.close();
        parent_inner.live_children = parent_inner.live_children.saturating_sub(1);
        let told = (child.id, child.spawner.as_ref(), status, halt, payload);
        self.tell_result(tx, (parent, parent_inner), Place::Parent, told);
    }

    /// Queues `thread-result` for a child's spawner in the parent (at `place` in `tx`), or
    /// records it when the parent is closed or the spawner gone.
    pub(crate) fn tell_result(
        &self,
        tx: &mut Tx,
        parent: (&ThreadEntry, &mut ThreadInner),
        place: Place,
        (child, spawner, status, halt, payload): Told<'_>,
    ) {
        let (parent, parent_inner) = parent;
        let result = SystemMessage::ThreadResult {
            thread: child,
            status,
            halt,
            payload,
        };
        let index = spawner.and_then(|s| self.routes.index_of(s));
        let env = Envelope::new(
            local(&self.routes.names.system),
            parent.id,
            result.to_payload(),
        );
        match index {
            Some(index) if !parent_inner.state().is_closed() => {
                let env = env.with_to(Some(local(&self.routes[index].name)));
                tx.queue(parent_inner, place, env, index, RecordKind::System);
            }
            _ => {
                let env = env.with_to(spawner.cloned());
                tx.record(parent_inner, env, RecordKind::System);
            }
        }
    }

    /// Records a governor decision in the thread.
    pub(crate) fn decide(
        &self,
        tx: &mut Tx,
        entry: &ThreadEntry,
        inner: &mut ThreadInner,
        decision: &Decision,
    ) {
        self.telemetry.decision(decision);
        let xml = decision.to_xml();
        let payload = Payload::from_trusted(crate::QName::new(GOVERNOR_NS, "decision"), xml, true);
        let env = Envelope::new(local(&self.routes.names.governor), entry.id, payload);
        tx.record(inner, env, RecordKind::Decision);
    }

    /// Ends a thread that has no parent in this pump: closes its account and, for a child
    /// adopted from another pump, records its result and sends it there once durable.
    fn end_root(
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
        // With children of its own still running, what they will spend is not known yet: the
        // whole grant counts as spent (a limit is never exceeded; the parent gets nothing back).
        let open = inner.live_children > 0;
        let spent = inner
            .ledger
            .account
            .snapshot()
            .map(|line| match line.limit {
                Some(limit) if open => Some(limit.max(line.spent)),
                _ => Some(line.spent),
            });
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
}
