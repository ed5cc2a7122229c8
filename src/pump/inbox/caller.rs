//! A tool answer for the caller of a held call: queued for a listener, egress for a client.

use std::sync::Arc;

use crate::history::RecordKind;
use crate::pump::Shared;
use crate::pump::tx::{Place, Tx};
use crate::thread::registry::{ThreadEntry, ThreadInner};
use crate::tool::TOOL_NS;
use crate::{Envelope, MessageId, Payload};

impl Shared {
    /// Records `payload` from `from` for `caller`: queued when the caller is a listener here,
    /// recorded as egress for an outside caller.
    pub(crate) fn to_caller(
        &self,
        tx: &mut Tx,
        inner: &mut ThreadInner,
        (from, caller): (&str, &str),
        payload: Payload,
        in_reply_to: MessageId,
        thread: &ThreadEntry,
    ) {
        let env = Envelope::new(Arc::from(from), thread.id, payload)
            .with_to(Some(Arc::from(caller)))
            .with_in_reply_to(Some(in_reply_to));
        match self.routes.index_of(caller) {
            Some(index) if !inner.state().is_closed() => {
                tx.queue(inner, Place::Here, env, index, RecordKind::Message);
            }
            _ => tx.record(inner, env, RecordKind::Egress),
        }
    }
}

/// A tool answer written by the crate, as a payload (the crate's own form always parses).
pub(crate) fn tool_payload(xml: &str, shared: &Shared) -> Payload {
    Payload::parse(xml, &shared.config.limits).unwrap_or_else(|_| {
        Payload::from_trusted(crate::QName::new(TOOL_NS, "error"), xml.to_owned(), true)
    })
}
