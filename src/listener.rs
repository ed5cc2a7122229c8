//! Listeners: the [`Listener`] trait, the [`Delivery`] a handler receives, the [`Context`] it
//! records its intents in, the [`Registration`] that names it, and the [`Typed`] helper for
//! listeners that read and write serde types.
//!
//! A handler's outputs leave only when it returns, as text: the pump parses each one again and
//! routes it with the same checks as outside input (zero trust), injecting `from` and `thread`.

mod context;
mod delivery;
pub(crate) mod notices;
pub(crate) mod registration;
mod typed;

use async_trait::async_trait;

pub use crate::governor::Usage;
pub use context::{BudgetExhausted, Context};
pub(crate) use context::{Output, Outputs, RunStore, Target};
pub use delivery::Delivery;
pub use notices::{Huh, SystemError, ThreadResult, ThreadSpawned};
pub use registration::{Registration, RegistrationError, Role};
pub use typed::{Typed, TypedListener, to_xml};

/// A participant of the pump: Rust code, an LLM agent or a workflow script.
///
/// `handle` takes `&self` only: per-thread state lives in the thread's history, not the listener.
///
/// Every `impl Listener` needs the `#[async_trait]` attribute (re-exported as
/// `agentpump::async_trait`, so no dependency of your own is needed): the trait has an async
/// method, and without the attribute the compiler reports a lifetime mismatch on `handle`.
///
/// # Handlers must not block
///
/// A handler runs on the pump's async runtime, among every other thread's deliveries. Await
/// I/O; never call blocking code (`std::thread::sleep`, synchronous HTTP or file reads, a long
/// computation) directly: it holds an OS thread the runtime needs, and the delivery timeout
/// cannot interrupt it. A handler that comes back after its timeout anyway has its outputs
/// refused and `system-error code="handler-timeout"` recorded. For handlers that must block,
/// register with [`Registration::blocking`]: they run on tokio's blocking pool, other threads
/// keep being served, and the timeout is enforced the moment it passes.
///
/// # Example
///
/// ```
/// use agentpump::{Context, Delivery, Listener, ListenerError, async_trait};
///
/// struct Echo;
///
/// #[async_trait]
/// impl Listener for Echo {
///     async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
///         cx.reply(msg.payload().as_str());
///         Ok(())
///     }
/// }
/// ```
#[async_trait]
pub trait Listener: Send + Sync + 'static {
    /// Handles one delivery. Record outputs in `cx`; they are routed when this returns `Ok`.
    ///
    /// # Errors
    ///
    /// [`ListenerError::Failed`] sends `system-error code="handler-failed"` to the sender;
    /// [`ListenerError::InvalidPayload`] sends `huh code="invalid-payload"`;
    /// [`ListenerError::Backpressure`] halts the thread with BACKPRESSURE. Outputs of a failed
    /// delivery are dropped (and the failure is in history).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// struct Strict; // answers `ok`, or fails on an empty payload
    /// #[agentpump::async_trait]
    /// impl Listener for Strict {
    ///     async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    ///         if msg.is_system() { return Ok(()); }
    ///         if msg.payload().as_str().ends_with("/>") {
    ///             return Err(ListenerError::failed("empty request"));
    ///         }
    ///         cx.reply(r#"<ok xmlns="urn:example:v1"/>"#);
    ///         Ok(())
    ///     }
    /// }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pump = PumpBuilder::new().register(Registration::new("strict", Strict).accepts(QName::new("urn:example:v1", "do"))).build()?;
    /// let thread = pump.post(None, None, r#"<do xmlns="urn:example:v1"/>"#).await?.thread();
    /// pump.settle(thread).await;
    /// let failure = pump.history(thread).await?.pop().expect("the failure");
    /// assert!(failure.payload.contains("<code>handler-failed</code>") && failure.payload.contains("empty request"));
    /// # Ok(())
    /// # }
    /// ```
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError>;

    /// Whether this listener answers a tool call's `timeout-ms` itself, with a `timeout` tool
    /// error (a tool registered with [`tool::register`](crate::tool::register) does). When it
    /// does not, the pump holds the handling of a call that asks a `timeout-ms` to that time
    /// (or the registration's timeout, if shorter): past it, the caller gets
    /// `system-error code="handler-timeout"`.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Listener, listeners::Echo};
    /// assert!(!Echo.answers_call_timeouts()); // the pump holds a call's `timeout-ms` for it
    /// ```
    fn answers_call_timeouts(&self) -> bool {
        false
    }
}

/// Why a handler failed. Return it from [`Listener::handle`]; the pump turns it into a notice
/// to the sender or a halt, as each variant says, and records it.
///
/// # Example
///
/// ```
/// use agentpump::{Context, Delivery, ListenerError};
///
/// fn handle(msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
///     let text = msg.payload().as_str();
///     if text.len() > 10_000 {
///         return Err(ListenerError::InvalidPayload("over 10 000 bytes".into())); // `huh` to the sender
///     }
///     let answer = std::str::from_utf8(text.as_bytes()).map_err(ListenerError::failed)?; // `system-error`
///     cx.reply(answer);
///     Ok(())
/// }
/// assert_eq!(ListenerError::failed("no disk").to_string(), "no disk");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListenerError {
    /// The handler could not do its work.
    #[error("{0}")]
    Failed(String),
    /// The payload does not fit what the listener reads.
    #[error("payload does not fit: {0}")]
    InvalidPayload(String),
    /// Something upstream asked to stop (a rate limit that retries did not clear): the governor
    /// halts the thread with BACKPRESSURE.
    #[error("upstream backpressure: {0}")]
    Backpressure(String),
    /// An upstream service failed after its retries: `system-error code="upstream-failed"`.
    #[error("upstream failed: {0}")]
    Upstream(String),
    /// The next spend would exceed this budget: the governor halts the thread with TIMEOUT
    /// naming it, instead of the spend happening.
    #[error("the {0} budget has no room for the next call")]
    OverBudget(crate::governor::BudgetName),
}

impl ListenerError {
    /// A [`ListenerError::Failed`] with the given message.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::ListenerError;
    /// let err = ListenerError::failed(format!("cannot open {}", "data.csv"));
    /// assert_eq!(err, ListenerError::Failed("cannot open data.csv".into()));
    /// ```
    pub fn failed(message: impl std::fmt::Display) -> Self {
        Self::Failed(message.to_string())
    }
}
