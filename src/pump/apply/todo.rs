//! A delivery's plan applied: recorded as the thread's latest, and a `done` or `thread-done`
//! held back while its steps are open (the rule itself is `todo::refuses_done`).

use std::sync::Arc;

use super::Applying;
use crate::envelope::local::local;
use crate::history::RecordKind;
use crate::system::{ErrorCode, SystemMessage};
use crate::{Envelope, Payload, todo};

impl Applying<'_> {
    /// Records the listener's plan, to the governor (which holds the thread to it), as the
    /// thread's latest.
    pub fn take_plan(&mut self, payload: Payload) {
        let env = Envelope::new(Arc::clone(self.me_name()), self.entry.id, payload.clone())
            .with_to(Some(local(&self.shared.routes.names.governor)));
        self.tx.record(self.inner, env, RecordKind::Message);
        self.inner.plan = Some(payload);
    }

    /// Whether the thread's latest plan holds `signal` (`done`, `thread-done`) back; if so the
    /// listener is told which steps are open (`system-error code="plan-open"`), and takes its
    /// next turn on that notice.
    pub fn plan_holds(&mut self, signal: &str) -> bool {
        let Some(message) = todo::refuses_done(self.inner.plan.as_ref(), signal) else {
            return false;
        };
        self.tell_me(SystemMessage::Error {
            code: ErrorCode::PlanOpen,
            message,
        });
        true
    }
}
