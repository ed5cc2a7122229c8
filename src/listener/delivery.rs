//! [`Delivery`]: the message a handler receives.

use serde::de::DeserializeOwned;

use super::ListenerError;
use crate::system::{SYSTEM_NS, SYSTEM_SENDER};
use crate::{Envelope, MessageId, Payload, QName, ThreadId};

/// One message delivered to one listener.
#[derive(Debug, Clone)]
pub struct Delivery {
    envelope: Envelope,
}

impl Delivery {
    pub(crate) fn new(envelope: Envelope) -> Self {
        Self { envelope }
    }

    /// The whole envelope.
    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// The message id.
    pub fn id(&self) -> MessageId {
        self.envelope.id()
    }

    /// Who sent it: a listener name, `client` for outside senders, or `system` for the pump.
    pub fn from(&self) -> &str {
        self.envelope.from()
    }

    /// The thread it arrived on.
    pub fn thread(&self) -> ThreadId {
        self.envelope.thread()
    }

    /// The message it answers, if any.
    pub fn in_reply_to(&self) -> Option<MessageId> {
        self.envelope.in_reply_to()
    }

    /// The payload.
    pub fn payload(&self) -> &Payload {
        self.envelope.payload()
    }

    /// The payload's root name.
    pub fn qname(&self) -> &QName {
        self.envelope.payload().qname()
    }

    /// True for a message the pump emitted (`huh`, `system-error`, `thread-result`, …).
    pub fn is_system(&self) -> bool {
        self.envelope.from() == SYSTEM_SENDER && self.qname().namespace() == SYSTEM_NS
    }

    /// Deserializes the payload with serde (elements and `@attributes` matched by local name).
    ///
    /// # Errors
    ///
    /// [`ListenerError::InvalidPayload`] naming what does not fit.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, ListenerError> {
        quick_xml::de::from_str(self.payload().as_str())
            .map_err(|e| ListenerError::InvalidPayload(format!("<{}>: {e}", self.qname().local())))
    }
}
