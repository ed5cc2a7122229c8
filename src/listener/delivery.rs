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
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// let to = msg.envelope().to().unwrap_or("nobody");
    /// cx.reply(format!(r#"<to xmlns="urn:example:v1">{to}</to>"#));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, Some("me"), r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<to xmlns="urn:example:v1">me</to>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn envelope(&self) -> &Envelope {
        &self.envelope
    }

    /// This message's id, as recorded in history (what a reply to it names in `in_reply_to`).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// cx.reply(format!(r#"<id xmlns="urn:example:v1">{}</id>"#, msg.id()));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let receipt = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?;
    /// # pump.settle(receipt.thread()).await;
    /// assert!(pump.history(receipt.thread()).await?[1].payload.contains(&receipt.ids()[0].to_string()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn id(&self) -> MessageId {
        self.envelope.id()
    }

    /// Who sent it: a listener's name, `client` for input from outside the pump, or `system`
    /// for the pump's own notices.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// cx.reply(format!(r#"<from xmlns="urn:example:v1">{}</from>"#, msg.from()));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<from xmlns="urn:example:v1">client</from>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn from(&self) -> &str {
        self.envelope.from()
    }

    /// The thread it arrived on: the conversation this delivery belongs to, and where the
    /// handler's outputs are recorded and routed.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// cx.reply(format!(r#"<on xmlns="urn:example:v1">{}</on>"#, msg.thread()));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// assert!(pump.history(thread).await?[1].payload.contains(&thread.to_string()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn thread(&self) -> ThreadId {
        self.envelope.thread()
    }

    /// The message this one answers. `Some` for a listener's [`Context::reply`](crate::Context::reply)
    /// (the message it replied to), a pump notice (the delivery it is about), and outside
    /// input that named one; `None` for outside input that named none and for what a listener
    /// sent or emitted without replying.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// let answers = msg.in_reply_to().map_or("nothing".to_owned(), |id| id.to_string());
    /// cx.reply(format!(r#"<answers xmlns="urn:example:v1">{answers}</answers>"#));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<answers xmlns="urn:example:v1">nothing</answers>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn in_reply_to(&self) -> Option<MessageId> {
        self.envelope.in_reply_to()
    }

    /// The payload, with its exact bytes ([`Payload::as_str`]) as the sender wrote them.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// let text = msg.payload().as_str().replace("ask", "answer"); // the exact bytes posted
    /// cx.reply(text);
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1" n="1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<answer xmlns="urn:example:v1" n="1"/>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn payload(&self) -> &Payload {
        self.envelope.payload()
    }

    /// The payload's root: namespace URI and local name (never the prefix). One of the roots
    /// the listener registered to accept, unless [`is_system`](Self::is_system).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// let root = msg.qname();
    /// cx.reply(format!(r#"<root xmlns="urn:example:v1">{}|{}</root>"#, root.namespace(), root.local()));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<e:ask xmlns:e="urn:example:v1"/>"#).await?.thread(); // any prefix
    /// # pump.settle(thread).await;
    /// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<root xmlns="urn:example:v1">urn:example:v1|ask</root>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn qname(&self) -> &QName {
        self.envelope.payload().qname()
    }

    /// True for a notice the pump sent (`huh`, `system-error`, `thread-result`,
    /// `thread-spawned`, …): sent by `system` in the pump's own namespace. Every listener may
    /// receive these whatever roots it accepts; a listener that has nothing to do with them
    /// returns `Ok(())`.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// if msg.is_system() {
    ///     cx.send("client", format!(r#"<notice xmlns="urn:example:v1">{}</notice>"#, msg.qname().local()));
    /// } else {
    ///     cx.emit("<oops"); // malformed: the pump answers with a `huh`
    /// }
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let last = pump.history(thread).await?.pop().expect("records");
    /// assert_eq!(&*last.payload, r#"<notice xmlns="urn:example:v1">huh</notice>"#);
    /// # Ok(())
    /// # }
    /// ```
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
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// if let Some(error) = msg.system_error() {
    ///     cx.send("client", format!(r#"<failed xmlns="urn:example:v1">{}</failed>"#, error.code()));
    /// } else if !msg.is_system() {
    ///     cx.send("nobody", r#"<ask xmlns="urn:example:v1"/>"#); // no such listener
    /// }
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let last = pump.history(thread).await?.pop().expect("records");
    /// assert_eq!(&*last.payload, r#"<failed xmlns="urn:example:v1">no-route</failed>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn system_error(&self) -> Option<SystemError> {
        notices::system_error(self.system("system-error")?)
    }

    /// A `huh`, read: a payload this listener emitted was refused (malformed, unroutable, not
    /// allowed), with the code and the reason. `None` for any other message.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// if let Some(huh) = msg.huh() {
    ///     cx.send("client", format!(r#"<refused xmlns="urn:example:v1">{}</refused>"#, huh.code()));
    /// } else if !msg.is_system() {
    ///     cx.emit(r#"<unknown xmlns="urn:example:v1"/>"#); // nobody accepts this root
    /// }
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let last = pump.history(thread).await?.pop().expect("records");
    /// assert_eq!(&*last.payload, r#"<refused xmlns="urn:example:v1">unknown-root</refused>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn huh(&self) -> Option<Huh> {
        notices::huh(self.system("huh")?)
    }

    /// A `thread-spawned`, read: the answer to this listener's `spawn-thread`, naming the child
    /// thread. `None` for any other message.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::Spawn;
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// if let Some(spawned) = msg.thread_spawned() {
    ///     cx.send("client", format!(r#"<child xmlns="urn:example:v1">{}</child>"#, spawned.path()));
    /// } else if msg.qname().local() == "ask" { // not the echo's answer in the child
    ///     cx.spawn(Spawn::new(r#"<say xmlns="urn:example:say:v1">hi</say>"#).sub_id("part1"));
    /// }
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new()
    /// #     .register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask")).peers(["echo"]))
    /// #     .register(Registration::new("echo", agentpump::listeners::Echo).accepts(QName::new("urn:example:say:v1", "say")))
    /// #     .build()?;
    /// let root = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(root).await;
    /// let history = pump.history(root).await?;
    /// assert!(history.iter().any(|r| r.payload.ends_with(r#".part1</child>"#)));
    /// # Ok(())
    /// # }
    /// ```
    pub fn thread_spawned(&self) -> Option<ThreadSpawned> {
        notices::thread_spawned(self.system("thread-spawned")?)
    }
}
