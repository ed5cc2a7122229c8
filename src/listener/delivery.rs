//! [`Delivery`]: the message a handler receives.

use serde::de::DeserializeOwned;

use super::ListenerError;
use super::notices::{self, Huh, SystemError, ThreadResult, ThreadSpawned};
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

    /// Deserializes the payload with serde, quick-xml's conventions: a field named `@name` reads
    /// the attribute `name`, `$text` the element's text, any other name a child element (all
    /// by local name; unknown ones are ignored).
    ///
    /// # Errors
    ///
    /// [`ListenerError::InvalidPayload`] naming what does not fit.
    ///
    /// # Example
    ///
    /// A listener that receives `<greet xmlns="urn:example:v1" lang="fr">Ada</greet>`:
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, ListenerError};
    /// #[derive(serde::Deserialize)]
    /// struct Greet {
    ///     #[serde(rename = "@lang")]
    ///     lang: String,
    ///     #[serde(rename = "$text")]
    ///     name: String,
    /// }
    ///
    /// fn handle(msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    ///     let greet: Greet = msg.decode()?;
    ///     let hello = if greet.lang == "fr" { "Bonjour" } else { "Hello" };
    ///     cx.reply(format!(r#"<greeting xmlns="urn:example:v1">{hello}, {}!</greeting>"#, greet.name));
    ///     Ok(())
    /// }
    /// ```
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, ListenerError> {
        quick_xml::de::from_str(self.payload().as_str())
            .map_err(|e| ListenerError::InvalidPayload(format!("<{}>: {e}", self.qname().local())))
    }

    /// The pump's system message `local`, if this delivery is one.
    fn system(&self, local: &str) -> Option<&str> {
        (self.is_system() && self.qname().local() == local).then(|| self.payload().as_str())
    }

    /// A `thread-result` (a child thread this listener spawned ended), read: the child, how it
    /// ended, its final payload. `None` for any other message.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, ListenerError};
    /// fn handle(msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    ///     if let Some(result) = msg.thread_result() {
    ///         if let Some(answer) = result.payload() {
    ///             cx.send("client", answer.as_str());
    ///         }
    ///     }
    ///     Ok(())
    /// }
    /// ```
    pub fn thread_result(&self) -> Option<ThreadResult> {
        notices::thread_result(self.system("thread-result")?)
    }

    /// A `system-error` (a delivery of this listener's failed, or a budget warning), read.
    pub fn system_error(&self) -> Option<SystemError> {
        notices::system_error(self.system("system-error")?)
    }

    /// A `huh` (a payload this listener emitted was refused), read.
    pub fn huh(&self) -> Option<Huh> {
        notices::huh(self.system("huh")?)
    }

    /// A `thread-spawned` (the answer to this listener's `spawn-thread`), read.
    pub fn thread_spawned(&self) -> Option<ThreadSpawned> {
        notices::thread_spawned(self.system("thread-spawned")?)
    }
}
