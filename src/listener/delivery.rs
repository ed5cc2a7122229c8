//! [`Delivery`]: the message a handler receives.

use serde::de::DeserializeOwned;

use super::ListenerError;
use super::notices::{self, Huh, SystemError, ThreadResult, ThreadSpawned};
use crate::system::{SYSTEM_NS, SYSTEM_SENDER};
use crate::{Envelope, MessageId, Payload, QName, ThreadId};

/// One message delivered to one listener: what a handler reads.
///
/// - **What it says**: [`payload`](Self::payload) (the exact bytes of the payload) and its root
///   [`qname`](Self::qname) — one of the roots the listener registered to accept, or a notice
///   of the pump's own (`huh`, `system-error`, `thread-result`, `thread-spawned`);
///   [`decode`](Self::decode) reads the payload into your own serde type.
/// - **Who and where**: [`from`](Self::from) (a listener's name, `client` for outside input,
///   `system` for the pump), [`thread`](Self::thread) (the conversation it arrived on, the one
///   the handler's outputs go into), [`id`](Self::id) (this message's id), and
///   [`in_reply_to`](Self::in_reply_to) (the message this one answers, when there is one).
/// - **The pump's notices, read**: [`is_system`](Self::is_system), and one reader per notice,
///   each `None` unless the delivery is that notice: [`thread_result`](Self::thread_result),
///   [`system_error`](Self::system_error), [`huh`](Self::huh),
///   [`thread_spawned`](Self::thread_spawned).
/// - [`envelope`](Self::envelope): the whole envelope, for what the above does not cover.
///
/// # Example
///
/// A listener that answers outside input and ignores the pump's notices; the answer goes to the
/// sender (`client`) in the same thread, and names the message it answers.
///
/// ```
/// use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration, async_trait};
///
/// struct Greeter;
///
/// #[async_trait]
/// impl Listener for Greeter {
///     async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
///         if msg.is_system() {
///             return Ok(()); // a notice of the pump's: nothing to answer
///         }
///         assert_eq!(msg.from(), "client");
///         assert_eq!(msg.qname().local(), "hello");
///         assert!(msg.in_reply_to().is_none()); // a new message, answering none
///         cx.reply(r#"<greeting xmlns="urn:example:hello:v1">Hello!</greeting>"#);
///         Ok(())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let hello = QName::new("urn:example:hello:v1", "hello");
/// let pump = PumpBuilder::new().register(Registration::new("greeter", Greeter).accepts(hello)).build()?;
/// let receipt = pump.post(None, None, r#"<hello xmlns="urn:example:hello:v1"/>"#).await?;
/// pump.settle(receipt.thread()).await;
/// let history = pump.history(receipt.thread()).await?;
/// assert_eq!(history[1].in_reply_to, Some(receipt.ids()[0])); // the reply names the hello
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Delivery {
    envelope: Envelope,
}

impl Delivery {
    pub(crate) fn new(envelope: Envelope) -> Self {
        Self { envelope }
    }

    /// The whole envelope: the fields below, and its recipient ([`Envelope::to`]).
    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// This message's id, as recorded in history (what a reply to it names in `in_reply_to`).
    pub fn id(&self) -> MessageId {
        self.envelope.id()
    }

    /// Who sent it: a listener's name, `client` for input from outside the pump, or `system`
    /// for the pump's own notices.
    pub fn from(&self) -> &str {
        self.envelope.from()
    }

    /// The thread it arrived on: the conversation this delivery belongs to, and where the
    /// handler's outputs are recorded and routed.
    pub fn thread(&self) -> ThreadId {
        self.envelope.thread()
    }

    /// The message this one answers. `Some` for a listener's [`Context::reply`](crate::Context::reply)
    /// (the message it replied to), a pump notice (the delivery it is about), and outside
    /// input that named one; `None` for outside input that named none and for what a listener
    /// sent or emitted without replying.
    pub fn in_reply_to(&self) -> Option<MessageId> {
        self.envelope.in_reply_to()
    }

    /// The payload, with its exact bytes ([`Payload::as_str`]) as the sender wrote them.
    pub fn payload(&self) -> &Payload {
        self.envelope.payload()
    }

    /// The payload's root: namespace URI and local name (never the prefix). One of the roots
    /// the listener registered to accept, unless [`is_system`](Self::is_system).
    pub fn qname(&self) -> &QName {
        self.envelope.payload().qname()
    }

    /// True for a notice the pump sent (`huh`, `system-error`, `thread-result`,
    /// `thread-spawned`, …): sent by `system` in the pump's own namespace. Every listener may
    /// receive these whatever roots it accepts; a listener that has nothing to do with them
    /// returns `Ok(())`.
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

    /// A `system-error`, read: a message this listener sent could not be delivered or its
    /// handler failed, or a budget warning (code `budget-warning`). `None` for any other message.
    pub fn system_error(&self) -> Option<SystemError> {
        notices::system_error(self.system("system-error")?)
    }

    /// A `huh`, read: a payload this listener emitted was refused (malformed, unroutable, not
    /// allowed), with the code and the reason. `None` for any other message.
    pub fn huh(&self) -> Option<Huh> {
        notices::huh(self.system("huh")?)
    }

    /// A `thread-spawned`, read: the answer to this listener's `spawn-thread`, naming the child
    /// thread. `None` for any other message.
    pub fn thread_spawned(&self) -> Option<ThreadSpawned> {
        notices::thread_spawned(self.system("thread-spawned")?)
    }
}
