//! Typed views of the system messages a listener receives ([`Delivery::thread_result`] and
//! friends), so a listener reads a `thread-result` or a `system-error` without parsing XML.
//!
//! [`Delivery::thread_result`]: super::Delivery::thread_result

use serde::Deserialize;

use crate::system::ThreadStatus;
use crate::{Limits, Payload, ThreadId};

/// A child thread ended: what its spawner receives in the parent thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadResult {
    thread: ThreadId,
    status: ThreadStatus,
    halt: Option<(String, String)>,
    payload: Option<Payload>,
}

impl ThreadResult {
    /// The child thread.
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
    /// if let Some(result) = msg.thread_result() {
    ///     cx.send("client", format!(r#"<child xmlns="urn:example:v1">{}</child>"#, result.thread()));
    /// } else if msg.qname().local() == "ask" {
    ///     cx.spawn(Spawn::new(r#"<say xmlns="urn:example:say:v1">hi</say>"#));
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
    /// let child = pump.tree(root)[1].id;
    /// assert!(pump.history(root).await?.iter().any(|r| r.payload.contains(&child.to_string())));
    /// # Ok(())
    /// # }
    /// ```
    pub fn thread(&self) -> ThreadId {
        self.thread
    }

    /// How it ended: done, idle (ran out of work) or halted.
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
    /// if let Some(result) = msg.thread_result() {
    ///     cx.send("client", format!(r#"<ended xmlns="urn:example:v1">{}</ended>"#, result.status().as_str()));
    /// } else if msg.qname().local() == "ask" {
    ///     cx.spawn(Spawn::new(r#"<say xmlns="urn:example:say:v1">hi</say>"#));
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
    /// let last = pump.history(root).await?.pop().expect("records");
    /// assert_eq!(&*last.payload, r#"<ended xmlns="urn:example:v1">idle</ended>"#); // it ran out of work
    /// # Ok(())
    /// # }
    /// ```
    pub fn status(&self) -> ThreadStatus {
        self.status
    }

    /// For a halted child: the halt class (`TIMEOUT`, …) and reason (`max-turns`, …).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Spawn, governor::Budget};
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// if let Some(result) = msg.thread_result() {
    ///     let (class, reason) = result.halt().unwrap_or(("-", "-"));
    ///     cx.send("client", format!(r#"<halted xmlns="urn:example:v1">{class} {reason}</halted>"#));
    /// } else if msg.qname().local() == "ask" {
    ///     let one_turn = Budget { turns: Some(1), ..Budget::unlimited() }; // the echo's answer is a second
    ///     cx.spawn(Spawn::new(r#"<say xmlns="urn:example:say:v1">hi</say>"#).budget(one_turn));
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
    /// let last = pump.history(root).await?.pop().expect("records");
    /// assert_eq!(&*last.payload, r#"<halted xmlns="urn:example:v1">TIMEOUT max-turns</halted>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn halt(&self) -> Option<(&str, &str)> {
        self.halt.as_ref().map(|(c, r)| (c.as_str(), r.as_str()))
    }

    /// The child's final payload (its `thread-done` payload, or its last one), if any.
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
    /// if let Some(result) = msg.thread_result() {
    ///     if let Some(last) = result.payload() {
    ///         cx.send("client", last.as_str()); // the echo's answer, the child's last payload
    ///     }
    /// } else if msg.qname().local() == "ask" {
    ///     cx.spawn(Spawn::new(r#"<say xmlns="urn:example:say:v1">hi</say>"#));
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
    /// let last = pump.history(root).await?.pop().expect("records");
    /// assert_eq!(&*last.payload, r#"<say xmlns="urn:example:say:v1">hi</say>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn payload(&self) -> Option<&Payload> {
        self.payload.as_ref()
    }
}

/// A delivery failed (`system-error`): the code, what happened, and whether to try again.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SystemError {
    code: String,
    message: String,
    #[serde(rename = "retry-allowed")]
    retry_allowed: bool,
}

impl SystemError {
    /// The code (`handler-failed`, `no-route`, `budget-warning`, …).
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
    pub fn code(&self) -> &str {
        &self.code
    }

    /// What exactly happened.
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
    ///     cx.send("client", format!(r#"<failed xmlns="urn:example:v1">{}</failed>"#, error.message()));
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
    /// assert!(last.payload.starts_with(r#"<failed xmlns="urn:example:v1">"#) && last.payload.contains("nobody"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether sending the same message again may succeed.
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
    ///     cx.send("client", format!(r#"<retry xmlns="urn:example:v1">{}</retry>"#, error.retry_allowed()));
    /// } else if !msg.is_system() {
    ///     cx.send("nobody", r#"<ask xmlns="urn:example:v1"/>"#); // no such listener: sending again cannot help
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
    /// assert_eq!(&*last.payload, r#"<retry xmlns="urn:example:v1">false</retry>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn retry_allowed(&self) -> bool {
        self.retry_allowed
    }
}

/// A payload was refused (`huh`): the code and the parser's or router's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Huh {
    code: String,
    message: String,
}

impl Huh {
    /// The code (`malformed-xml`, `unknown-root`, …).
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
    ///     cx.emit("<oops"); // not well-formed
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
    /// assert_eq!(&*last.payload, r#"<refused xmlns="urn:example:v1">malformed-xml</refused>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn code(&self) -> &str {
        &self.code
    }

    /// What exactly was wrong, and where.
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
    ///     cx.send("client", format!(r#"<refused xmlns="urn:example:v1">{}</refused>"#, huh.message()));
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
    /// assert_eq!(&*last.payload, r#"<refused xmlns="urn:example:v1">no listener accepts {urn:example:v1}unknown; listeners accept {urn:example:v1}ask (by me)</refused>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The answer to a `spawn-thread`: the child exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadSpawned {
    assigned: ThreadId,
    parent: ThreadId,
    path: String,
}

impl ThreadSpawned {
    /// The child's id.
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
    ///     cx.send("client", format!(r#"<spawned xmlns="urn:example:v1">{}</spawned>"#, spawned.child() != spawned.parent()));
    /// } else if msg.qname().local() == "ask" {
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
    /// assert!(history.iter().any(|r| &*r.payload == r#"<spawned xmlns="urn:example:v1">true</spawned>"#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn child(&self) -> ThreadId {
        self.assigned
    }

    /// The spawning thread.
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
    ///     cx.send("client", format!(r#"<spawned xmlns="urn:example:v1">{}</spawned>"#, spawned.parent() == msg.thread()));
    /// } else if msg.qname().local() == "ask" {
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
    /// assert!(history.iter().any(|r| &*r.payload == r#"<spawned xmlns="urn:example:v1">true</spawned>"#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn parent(&self) -> ThreadId {
        self.parent
    }

    /// The child's display path (`46a2acab.part1`).
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
    ///     cx.send("client", format!(r#"<spawned xmlns="urn:example:v1">{}</spawned>"#, spawned.path()));
    /// } else if msg.qname().local() == "ask" {
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
    /// assert!(history.iter().any(|r| r.payload.ends_with(r#".part1</spawned>"#))); // `1a2b3c4d.part1`
    /// # Ok(())
    /// # }
    /// ```
    pub fn path(&self) -> &str {
        &self.path
    }
}

#[derive(Deserialize)]
struct ResultAttrs {
    #[serde(rename = "@thread")]
    thread: String,
    #[serde(rename = "@status")]
    status: String,
    #[serde(rename = "@class")]
    class: Option<String>,
    #[serde(rename = "@reason")]
    reason: Option<String>,
}

#[derive(Deserialize)]
struct SpawnedAttrs {
    #[serde(rename = "@assigned-id")]
    assigned: String,
    #[serde(rename = "@parent-id")]
    parent: String,
    #[serde(rename = "@path")]
    path: String,
}

#[derive(Deserialize)]
struct HuhXml {
    error: HuhError,
}

#[derive(Deserialize)]
struct HuhError {
    #[serde(rename = "@code")]
    code: String,
    #[serde(rename = "$text", default)]
    message: String,
}

/// `text`, a `thread-result` the pump rendered, read back.
pub(crate) fn thread_result(text: &str) -> Option<ThreadResult> {
    let attrs: ResultAttrs = quick_xml::de::from_str(text).ok()?;
    let status = match attrs.status.as_str() {
        "done" => ThreadStatus::Done,
        "idle" => ThreadStatus::Idle,
        "halted" => ThreadStatus::Halted,
        _ => return None,
    };
    Some(ThreadResult {
        thread: attrs.thread.parse().ok()?,
        status,
        halt: attrs.class.zip(attrs.reason),
        payload: inner_payload(text),
    })
}

/// The one element inside the root element of `text` (the pump escapes `>` in attributes).
fn inner_payload(text: &str) -> Option<Payload> {
    let open_end = text.find('>')?;
    if text[..open_end].ends_with('/') {
        return None;
    }
    let inner = &text[open_end + 1..text.rfind("</")?];
    if inner.trim().is_empty() {
        return None;
    }
    Payload::parse(inner, &Limits::default()).ok()
}

pub(crate) fn system_error(text: &str) -> Option<SystemError> {
    quick_xml::de::from_str(text).ok()
}

pub(crate) fn huh(text: &str) -> Option<Huh> {
    let huh: HuhXml = quick_xml::de::from_str(text).ok()?;
    Some(Huh {
        code: huh.error.code,
        message: huh.error.message,
    })
}

pub(crate) fn thread_spawned(text: &str) -> Option<ThreadSpawned> {
    let attrs: SpawnedAttrs = quick_xml::de::from_str(text).ok()?;
    Some(ThreadSpawned {
        assigned: attrs.assigned.parse().ok()?,
        parent: attrs.parent.parse().ok()?,
        path: attrs.path,
    })
}
