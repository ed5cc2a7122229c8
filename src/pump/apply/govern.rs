//! Applying what a delivery told the governor: taking in its governor messages, and deciding
//! by precedence whether the delivery halts the thread.

use std::sync::Arc;

use super::Applying;
use crate::envelope::local::local;
use crate::governor::ledger::Absorbed;
use crate::governor::{Control, Decision, GovernorMessage, HaltClass, Verdict};
use crate::history::RecordKind;
use crate::pump::notice::Recipient;
use crate::pump::route::Refusal;
use crate::pump::tx::Place;
use crate::system::{ErrorCode, HuhCode, SystemMessage};
use crate::{Envelope, Payload};

impl Applying<'_> {
    /// Takes in one governor message; a later goal that would loosen the declared one, and a
    /// criterion naming a thread this one did not spawn, are refused (`huh invalid-request`
    /// saying why) and not recorded.
    pub fn govern(&mut self, payload: Payload, message: GovernorMessage) {
        if let Some(why) = self.unacceptable(&message) {
            let refusal = Refusal::Huh(HuhCode::InvalidRequest, why);
            self.refuse(refusal.into_notice(payload.as_str().to_owned()), 1);
            return;
        }
        let env = Envelope::new(Arc::clone(self.me_name()), self.entry.id, payload.clone())
            .with_to(Some(local(&self.shared.routes.names.governor)));
        self.tx.record(self.inner, env, RecordKind::Message);
        let me = Arc::clone(&self.shared.routes[self.me].name);
        let window = self.shared.config.governor.no_progress_window;
        match self.inner.ledger.absorb(message, &me, self.entry.depth) {
            Absorbed::Goal {
                criteria,
                budget,
                need_info,
            } => {
                let decision = Decision::Goal { criteria, budget };
                self.shared
                    .decide(&mut self.tx, self.entry, self.inner, &decision);
                if let Some(reason) = need_info {
                    // phuc-loop §2.4: "NULL_CHECK → EXIT_NEED_INFO: if null_detected"; §3.2:
                    // "If `halting_certificates_applicable` is missing or empty:
                    // `EXIT_NEED_INFO` immediately."
                    let verdict = Verdict::new(HaltClass::NeedInfo, reason);
                    self.signals.halt.get_or_insert(verdict);
                }
            }
            Absorbed::Loop(signal) => {
                if self.inner.ledger.same_control(payload.as_str(), window) {
                    self.signals.stuck = true;
                }
                if signal.control == Control::Continue {
                    self.signals.continued = Some(payload);
                }
                self.signals.control(signal.control, signal.reason);
            }
            Absorbed::Residual => self.signals.residual = true,
            Absorbed::Noted => {}
        }
    }

    /// Why the ledger cannot take `message` in, if it cannot: a goal that would loosen the
    /// declared one, or a criterion naming a thread that is not a child of this one (its
    /// evidence could be credited to no listener).
    fn unacceptable(&self, message: &GovernorMessage) -> Option<String> {
        let ledger = &self.inner.ledger;
        match message {
            GovernorMessage::Goal(goal) => {
                let declared = ledger.goal()?;
                let why = declared.loosened_by(goal, self.shared.r_p(ledger))?;
                Some(why.to_string())
            }
            GovernorMessage::Criterion {
                id,
                thread: Some(thread),
                ..
            } if !ledger.is_child(*thread) => Some(format!(
                "<criterion id=\"{id}\"> names thread {thread}, which is not a child of this \
                 thread: only a child's listener can confirm a criterion here"
            )),
            _ => None,
        }
    }

    /// A lone `continue` — nothing else queued in the thread by this delivery — gives its
    /// listener its next turn: the `loop` payload comes back to it as a self-message (one
    /// iteration, so only with loop permission), through the gate's budgets and the
    /// no-progress guard like any other.
    fn next_turn(&mut self, payload: Payload) {
        if self.tx.queued_here() > 0 {
            return;
        }
        let me = Arc::clone(&self.shared.routes[self.me].name);
        if !self.shared.routes[self.me].loops() {
            let message = format!(
                "`{me}` said continue but may not take another turn: it is registered without loop permission"
            );
            let refusal = Refusal::Error(ErrorCode::LoopNotPermitted, message);
            return self.tell_me(refusal.into_notice(payload.as_str().to_owned()));
        }
        self.inner.ledger.iterate(&me);
        let env = Envelope::new(Arc::clone(&me), self.entry.id, payload).with_to(Some(me));
        self.tx
            .queue(self.inner, Place::Here, env, self.me, RecordKind::Message);
    }

    /// Decides, by precedence, whether this delivery halts the thread. `refused` counts the
    /// delivery's outputs that were refused: a `done` beside a refused output does not stand
    /// (see [`Applying::set_done_aside`]).
    pub fn conclude(&mut self, refused: usize) {
        if !self.shared.config.governor.enabled || self.inner.state().is_closed() {
            return;
        }
        if refused > 0 && self.signals.control == Some(Control::Done) {
            self.set_done_aside(refused);
        }
        // Seed 003's explicit termination: not while the thread's latest plan has open steps.
        if self.signals.control == Some(Control::Done)
            && self.signals.halt.is_none()
            && self.plan_holds("done")
        {
            self.signals.control = None;
        }
        if let Some(reason) = self.inner.ledger.stop_requested {
            self.signals
                .halt
                .get_or_insert(Verdict::backpressure(reason));
        }
        let r_p = self.shared.r_p(&self.inner.ledger);
        let window = self.shared.config.governor.divergence_window;
        let me = &self.shared.routes[self.me].name;
        let mut signals = std::mem::take(&mut self.signals);
        let continued = signals.next_turn();
        let Some(verdict) = signals.resolve(self.inner.ledger.progress.as_deref(), r_p, window, me)
        else {
            if let Some(payload) = continued {
                self.next_turn(payload);
            }
            return;
        };
        let to = Arc::clone(me);
        let parent = self.parent.as_mut().map(|(e, i)| (&***e, &mut **i));
        self.shared.halt_locked(
            &mut self.tx,
            self.entry,
            self.inner,
            parent,
            verdict,
            Some(&to),
        );
    }

    /// Sets aside a `done` signalled beside refused outputs, and records why (a notice kept in
    /// history, not delivered: the refusals themselves are the listener's next turn). Ask-Loop
    /// v2 lets the host "decide the next action" from the signals, and the design says errors
    /// go back to the listener "so an LLM can correct itself": a listener whose answer never left (a bare `<answer>`
    /// where its prompt taught `<reply>`) would otherwise end its thread in the same turn, never
    /// see the refusal, and leave its caller unanswered. It takes another turn instead, within
    /// its budgets; a listener that repeats the same `done` is stopped by the no-progress guard.
    fn set_done_aside(&mut self, refused: usize) {
        self.signals.control = None;
        let outputs = if refused == 1 {
            "output was"
        } else {
            "outputs were"
        };
        let message = format!(
            "`done` does not stand: {refused} of this turn's {outputs} refused (the notices \
             before this one say why)"
        );
        let notice = SystemMessage::Error {
            code: ErrorCode::DoneSetAside,
            message,
        };
        let me = &self.shared.routes[self.me].name;
        let id = Some(self.delivery.id());
        let to = Recipient::RecordOnly(me);
        self.shared
            .notice(&mut self.tx, self.entry, self.inner, to, notice, id);
    }
}
