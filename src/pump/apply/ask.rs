//! Applying a held call (`pump/inbox/hold.rs`): its request recorded in the delivery's commit
//! (and listed once that commit is durable) and the thread marked waiting — or, when it may not ask (the questions budget is spent, the
//! question is malformed), its caller answered with the tool's error and nobody asked.

use std::sync::Arc;

use super::Applying;
use crate::Envelope;
use crate::history::RecordKind;
use crate::pump::inbox::OpenRequest;
use crate::pump::inbox::caller::tool_payload;
use crate::pump::inbox::hold::{Held, INBOX_SENDER, PERSON, held_error};
use crate::pump::inbox::record::{self, now_ms};
use crate::tool::{ErrorType, ToolError};

impl Applying<'_> {
    /// Records the request of a held call (or answers its caller when it may not ask), and
    /// marks the thread waiting.
    pub fn ask(&mut self, held: Held) {
        let shared = Arc::clone(self.shared);
        let thread = self.entry.id;
        let request = match held {
            Ok(request) => request,
            Err(error) => return self.refuse_held(&error),
        };
        let limit = shared.config.inbox.questions;
        if !shared.inbox.count_question(thread, limit) {
            let message = format!(
                "the questions budget of this thread ({}) is spent; nobody was asked",
                limit.unwrap_or_default()
            );
            let error = held_error(self.delivery, ErrorType::NotAllowed, message);
            return self.refuse_held(&error);
        }
        let payload = record::to_payload("request", &request, &shared.config.limits);
        let env = Envelope::new(Arc::from(INBOX_SENDER), thread, payload)
            .with_to(Some(Arc::from(PERSON)))
            .with_in_reply_to(Some(self.delivery.id()));
        let id = env.id();
        self.tx.record(self.inner, env, RecordKind::System);
        let waiting = self.inner.waiting + 1;
        self.inner.set_waiting(waiting);
        self.inner.ledger.began_waiting();
        self.tx.open(OpenRequest {
            id,
            thread,
            asked_at_ms: now_ms(),
            request,
        });
    }
}

impl Applying<'_> {
    /// Answers the held call's caller with `error` from the tool; nobody is asked.
    fn refuse_held(&mut self, error: &ToolError) {
        let shared = Arc::clone(self.shared);
        let tool = Arc::clone(&shared.routes[self.me].name);
        let payload = tool_payload(&error.to_xml(), &shared);
        let ends = (&*tool, self.delivery.from());
        let id = self.delivery.id();
        shared.to_caller(&mut self.tx, self.inner, ends, payload, id, self.entry);
    }
}
