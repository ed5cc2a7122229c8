//! Applying a delivery's planned steps to its thread, with the thread (and its parent) locked:
//! deliveries, egress, refusals, spawns, context views, thread-done, governor messages and plans.

mod ask;
mod failure;
mod govern;
mod spawn;
mod spawn_elsewhere;
mod todo;

pub(crate) use failure::{Failure, FailureCode};

use std::sync::Arc;

use smallvec::SmallVec;

use super::Shared;
use super::notice::Recipient;
use super::plan::Step;
use super::route::Targets;
use super::tx::{Place, Tx};
use crate::envelope::local::local;
use crate::governor::{Signals, Verdict};
use crate::history::RecordKind;
use crate::listener::{Delivery, Usage};
use crate::system::{ErrorCode, SystemMessage, ThreadStatus};
use crate::thread::registry::{ThreadEntry, ThreadInner};
use crate::{Envelope, Payload};

/// One delivery's effects being applied.
pub(crate) struct Applying<'a> {
    pub shared: &'a Arc<Shared>,
    pub tx: Tx,
    pub entry: &'a Arc<ThreadEntry>,
    pub inner: &'a mut ThreadInner,
    pub parent: Option<(&'a Arc<ThreadEntry>, &'a mut ThreadInner)>,
    pub me: usize,
    /// The listener's name: this worker's copy (`envelope/local.rs`), for the envelopes it
    /// makes.
    pub name: Arc<str>,
    pub delivery: &'a Delivery,
    pub signals: Signals,
    /// The refusals of this delivery's outputs, one per kind (element and code) with how many
    /// outputs it stands for: a flood of the same mistake is one notice, not one per output.
    pub refusals: SmallVec<[(SystemMessage, usize); 1]>,
}

impl Applying<'_> {
    fn me_name(&self) -> &Arc<str> {
        &self.name
    }

    /// A notice to the listener being delivered (or recorded, if the thread closed).
    pub fn tell_me(&mut self, message: SystemMessage) {
        let id = Some(self.delivery.id());
        self.shared.notice(
            &mut self.tx,
            self.entry,
            self.inner,
            Recipient::Listener(self.me),
            message,
            id,
        );
    }

    /// Notes a refusal of `count` of the delivery's outputs.
    pub fn refuse(&mut self, notice: SystemMessage, count: usize) {
        match self.refusals.iter_mut().find(|(n, _)| n.same_kind(&notice)) {
            Some((_, n)) => *n += count,
            None => self.refusals.push((notice, count)),
        }
    }

    /// Tells the listener about its refused outputs: one notice per kind of refusal, the
    /// first of its kind, counting the others. Returns how many outputs were refused.
    pub fn tell_refusals(&mut self) -> usize {
        if self.refusals.is_empty() {
            return 0; // the usual case: nothing to take out
        }
        let refused = self.refusals.iter().map(|(_, count)| count).sum();
        for (notice, count) in std::mem::take(&mut self.refusals) {
            let notice = if count > 1 {
                notice.summarizing(count)
            } else {
                notice
            };
            self.tell_me(notice);
        }
        refused
    }

    /// Counts the delivery (as a turn, or as a free notice) and charges the usage it
    /// reported; a budget spent *past* its limit — any of them, every one named — becomes a
    /// halt signal, which outranks the delivery's `done`.
    /// `usage` is charged now; `spent` was withdrawn during the handler and is only counted.
    pub fn count(&mut self, usage: &Usage, spent: &Usage, free: bool) {
        let c = &mut self.inner.counters;
        if free {
            c.notices += 1;
        } else {
            c.deliveries += 1;
        }
        c.add_usage(usage);
        c.add_usage(spent);
        let breaches = self.inner.ledger.account.charge(usage.amount());
        if let Some(verdict) = Verdict::breach(&breaches) {
            self.signals.halt.get_or_insert(verdict);
        }
    }

    /// A self-iteration — the listener's own message delivered back to it — is held to the
    /// per-iteration limits: its peak is kept for the report, and going past a limit becomes a
    /// halt signal (after a whole-budget breach, which is named first). Called only when the
    /// policy sets a per-iteration limit (the report shows the peak only then).
    pub fn check_iteration(&mut self, tool_calls: u64, took: std::time::Duration) {
        if self.delivery.from() != &**self.me_name() {
            return;
        }
        let peak = &mut self.inner.ledger.iteration_peak;
        *peak = (peak.0.max(tool_calls), peak.1.max(took));
        let limits = &self.shared.config.governor.iteration;
        if let Some(verdict) = Verdict::iteration_breach(&limits.breached(tool_calls, took)) {
            self.signals.halt.get_or_insert(verdict);
        }
    }

    /// Keeps `payload` as what a child thread would report to its parent (`thread-result`);
    /// a root thread reports to nobody and keeps nothing.
    fn remember_result(&mut self, payload: &Payload) {
        if self.entry.parent.is_some() {
            self.inner.last_payload = Some(payload.clone());
        }
    }

    /// Applies one step.
    pub fn step(&mut self, step: Step) {
        if self.inner.state().is_closed() {
            let message = format!(
                "thread {} is {}; output not delivered",
                self.entry.id,
                self.inner.state()
            );
            let notice = SystemMessage::Error {
                code: ErrorCode::ThreadClosed,
                message,
            };
            let to = Recipient::RecordOnly(&self.shared.routes[self.me].name);
            self.shared.notice(
                &mut self.tx,
                self.entry,
                self.inner,
                to,
                notice,
                Some(self.delivery.id()),
            );
            return;
        }
        match step {
            Step::Deliver {
                payload,
                targets,
                reply,
            } => self.deliver(payload, targets, reply),
            Step::Egress { payload } => {
                self.remember_result(&payload);
                let env = self
                    .envelope(payload)
                    .with_to(Some(local(&self.shared.routes.names.client)))
                    .with_in_reply_to(Some(self.delivery.id()));
                self.tx.record(self.inner, env, RecordKind::Egress);
            }
            Step::Refused {
                refusal,
                original,
                count,
            } => self.refuse(refusal.into_notice(original), count),
            Step::Spawn {
                request,
                sub_id,
                initial,
                targets,
                budget,
            } => self.spawn(request, sub_id.as_deref(), initial, targets, &budget),
            Step::ClearContext { request, keep } => {
                let cleared_at = self.inner.records;
                let env = self.envelope(request);
                self.tx.record(self.inner, env, RecordKind::Message);
                let me = Arc::clone(self.me_name());
                let kept = self.inner.clear_view(me, cleared_at, keep);
                self.tell_me(SystemMessage::ContextCleared { kept });
            }
            Step::Done { request, payload } => {
                if self.plan_holds("thread-done") {
                    return;
                }
                let env = self.envelope(request);
                self.tx.record(self.inner, env, RecordKind::Message);
                self.inner.finish();
                self.tx.snapshot(self.entry, self.inner);
                let parent = self.parent.as_mut().map(|(p, pi)| (&***p, &mut **pi));
                let ended = (ThreadStatus::Done, None, payload);
                self.shared
                    .tell_parent(&mut self.tx, (self.entry, self.inner), parent, ended);
            }
            Step::Govern { payload, message } => self.govern(payload, message),
            Step::Ask { held } => self.ask(*held),
            Step::Note { payload } => {
                let env = self.envelope(payload);
                self.tx.record(self.inner, env, RecordKind::Message);
            }
            Step::Plan { payload } => self.take_plan(payload),
        }
    }

    fn envelope(&self, payload: Payload) -> Envelope {
        Envelope::new(Arc::clone(self.me_name()), self.entry.id, payload)
    }

    fn deliver(&mut self, payload: Payload, targets: Targets, reply: bool) {
        let capacity = self.shared.config.queue_capacity;
        let room = capacity.saturating_sub(self.inner.queue.len() + self.tx.queued_here());
        if targets.len() > room {
            let message = format!(
                "queue of thread {} is full ({capacity} messages); payload not accepted",
                self.entry.id
            );
            self.refuse(
                SystemMessage::Error {
                    code: ErrorCode::QueueFull,
                    message,
                },
                1,
            );
            let ledger = &mut self.inner.ledger;
            ledger.queue_full_streak += 1;
            if ledger.queue_full_streak >= self.shared.config.governor.queue_full_limit {
                self.signals
                    .halt
                    .get_or_insert(Verdict::backpressure("queue-full"));
            }
            return;
        }
        self.inner.ledger.queue_full_streak = 0;
        if targets.contains(&self.me) {
            let me = &self.shared.routes[self.me].name;
            self.inner.ledger.iterate(me);
        }
        self.remember_result(&payload);
        let in_reply_to = reply.then(|| self.delivery.id());
        for target in targets {
            let to = if target == self.me {
                Arc::clone(self.me_name())
            } else {
                local(&self.shared.routes[target].name)
            };
            let env = self
                .envelope(payload.clone())
                .with_to(Some(to))
                .with_in_reply_to(in_reply_to);
            self.tx
                .queue(self.inner, Place::Here, env, target, RecordKind::Message);
        }
    }
}
