//! [`Context`]: what a handler may do — reply, send, emit, spawn, finish the thread, clear its
//! context, report usage — and its read access to the thread's history.

use smallvec::SmallVec;
use std::fmt;
use std::sync::Arc;

use rust_decimal::Decimal;

use crate::history::{HistoryError, HistoryStore, Record, RecordKind};
use quick_xml::escape::escape;

use crate::governor::budget::Account;
use crate::governor::{BudgetName, Goal, Lane, Signal, Usage};
use crate::system::{GOVERNOR_NS, SYSTEM_NS, Spawn};
use crate::{MessageId, Payload, ThreadId};

/// A [`Context::spend`] that did not fit the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the {budget} budget has no room for this spend")]
pub struct BudgetExhausted {
    /// The budget without room.
    pub budget: BudgetName,
}

/// Where an output goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Target {
    /// Route by the payload's root (own root = self-message = one iteration).
    Route,
    /// Back to the sender of the delivery being handled.
    Reply,
    /// To one named listener.
    Listener(String),
}

impl From<crate::extract::Address> for Target {
    fn from(address: crate::extract::Address) -> Self {
        match address {
            crate::extract::Address::Route => Self::Route,
            crate::extract::Address::Reply => Self::Reply,
            crate::extract::Address::To(name) => Self::Listener(name),
        }
    }
}

/// One output of a handler, as text: it is parsed again by the pump (zero trust).
#[derive(Debug, Clone)]
pub(crate) enum Output {
    /// One payload.
    Payload(Target, String),
    /// A tool call or answer the crate wrote from typed values, with its reading: reading its
    /// text gives those values back (`tool::wire::written`), so the pump checks only its limits.
    Read(Target, Payload),
    /// Free text (model output) from which payloads are extracted.
    Text(String),
}

/// What one delivery emitted, in order (most emit one or two: kept inline).
pub(crate) type Outputs = SmallVec<[Output; 2]>;

impl Output {
    /// The output as the listener wrote it.
    pub(crate) fn text(&self) -> &str {
        match self {
            Self::Payload(_, text) | Self::Text(text) => text,
            Self::Read(_, payload) => payload.as_str(),
        }
    }
}

/// The handler's side of one delivery. Intents are recorded here and leave when the handler
/// returns `Ok`.
///
/// # Example: one iteration
///
/// A listener that emits its own root is delivered that payload again as its next turn — one
/// iteration. This one counts to three, telling the governor how far it is from done; a
/// residual below r-p (here zero) ends it with a CONVERGED certificate. (EXACT would also need
/// declared criteria, met with evidence by another listener; signalling `done` in that last
/// turn would end it `done-uncertified`: by precedence `done` outranks the residual.)
///
/// ```
/// use agentpump::governor::{CertificateType, Goal};
/// use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration, Role};
/// use rust_decimal::Decimal;
///
/// struct Counter;
///
/// #[agentpump::async_trait]
/// impl Listener for Counter {
///     async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
///         if msg.is_system() {
///             return Ok(()); // notices: nothing to do here
///         }
///         let n: u32 = msg.payload().as_str().split(['>', '<']).nth(2).unwrap_or("0").parse().unwrap_or(0);
///         if n == 0 {
///             cx.goal(&Goal { text: "count to 3".into(), certificates: vec![CertificateType::Converged], ..Goal::default() });
///         }
///         cx.residual(Decimal::from(3 - n)); // 0 on the last turn: below r-p, CONVERGED
///         if n < 3 {
///             cx.emit(format!(r#"<n xmlns="urn:example:count:v1">{}</n>"#, n + 1)); // the next iteration
///         }
///         Ok(())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let n = QName::new("urn:example:count:v1", "n");
/// let pump = PumpBuilder::new().register(Registration::new("counter", Counter).accepts(n).role(Role::Agent)).build()?;
/// let thread = pump.post(None, None, r#"<n xmlns="urn:example:count:v1">0</n>"#).await?.thread();
/// pump.settle(thread).await;
/// let report = &pump.reports(thread).await?[0];
/// assert_eq!((report.class.as_str(), report.stop_reason.as_str()), ("CONVERGED", "residual-below-r-p"));
/// assert_eq!(report.self_iterations["counter"], 3);
/// # Ok(())
/// # }
/// ```
pub struct Context {
    thread: ThreadId,
    me: Arc<str>,
    delivery: MessageId,
    outputs: Outputs,
    usage: Usage,
    spent: Usage,
    store: Source,
    view: Option<(u64, usize)>,
    account: Arc<Account>,
    on_commit: std::sync::Mutex<Option<OnCommit>>,
}

/// What runs once a delivery's outputs are committed (see [`Context::on_commit`]).
pub(crate) type OnCommit = Box<dyn FnOnce() + Send + 'static>;

/// A runner's own handle on the pump's store, made once per run and cloned per delivery: its
/// reference count is written only by the worker running the thread, where a clone of the
/// store itself would write the one count every worker shares.
pub(crate) type RunStore = Arc<Arc<dyn HistoryStore>>;

/// Where [`Context::history`] reads from.
#[derive(Clone)]
enum Source {
    /// The pump's history store.
    Store(RunStore),
    /// Records sent along with the delivery (a remote worker's bounded view).
    #[cfg_attr(not(feature = "nats"), allow(dead_code))]
    Given(Arc<[Record]>),
}

impl Source {
    async fn thread(&self, thread: ThreadId) -> Result<Vec<Record>, HistoryError> {
        match self {
            Self::Store(store) => store.thread(thread, 0).await,
            Self::Given(records) => Ok(records.to_vec()),
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("thread", &self.thread)
            .field("me", &self.me)
            .field("outputs", &self.outputs.len())
            .finish_non_exhaustive()
    }
}

impl Context {
    pub(crate) fn new(
        thread: ThreadId,
        me: Arc<str>,
        delivery: MessageId,
        store: RunStore,
        view: Option<(u64, usize)>,
        account: Arc<Account>,
    ) -> Self {
        Self {
            thread,
            me,
            delivery,
            outputs: Outputs::new(),
            usage: Usage::default(),
            spent: Usage::default(),
            store: Source::Store(store),
            view,
            account,
            on_commit: std::sync::Mutex::new(None),
        }
    }

    /// A context for a delivery handled away from the pump (a remote worker): its history is
    /// `records`, the view the pump sent along; its budget is `remaining`, what was left of the
    /// thread's limited budgets when the pump handed the delivery out ([`Context::remaining`]
    /// there), so that `spend`, `can_spend` and `remaining` answer as they would have in the
    /// pump. What the handler spends is charged by the pump when the outputs come back.
    #[cfg_attr(not(feature = "nats"), allow(dead_code))]
    pub(crate) fn detached(
        thread: ThreadId,
        me: Arc<str>,
        delivery: MessageId,
        records: Vec<Record>,
        remaining: &[(BudgetName, Decimal)],
    ) -> Self {
        use rust_decimal::prelude::ToPrimitive as _;
        let mut budget = crate::governor::Budget::unlimited();
        for &(name, left) in remaining {
            // Only what a spend withdraws; a budget already overspent has no room at all.
            let whole = left.floor().to_u64().unwrap_or(0);
            match name {
                BudgetName::Tokens => budget.tokens = Some(whole),
                BudgetName::Cost => budget.cost = Some(left.max(Decimal::ZERO)),
                BudgetName::ToolCalls => budget.tool_calls = Some(whole),
                _ => {}
            }
        }
        Self {
            thread,
            me,
            delivery,
            outputs: Outputs::new(),
            usage: Usage::default(),
            spent: Usage::default(),
            store: Source::Given(records.into()),
            view: None,
            account: Account::root(&budget),
            on_commit: std::sync::Mutex::new(None),
        }
    }

    /// A context for the same delivery with nothing recorded yet, for a handler that runs on
    /// another OS thread (its outputs come back as the returned context).
    pub(crate) fn fork(&self) -> Self {
        Self {
            thread: self.thread,
            me: Arc::clone(&self.me),
            delivery: self.delivery,
            outputs: Outputs::new(),
            usage: Usage::default(),
            spent: Usage::default(),
            store: self.store.clone(),
            view: self.view,
            account: Arc::clone(&self.account),
            on_commit: std::sync::Mutex::new(None),
        }
    }

    /// The thread being handled.
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
    /// cx.reply(format!(r#"<in xmlns="urn:example:v1">{}</in>"#, cx.thread()));
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
        self.thread
    }

    /// This listener's registered name.
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
    /// cx.reply(format!(r#"<name xmlns="urn:example:v1">{}</name>"#, cx.me()));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<name xmlns="urn:example:v1">me</name>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn me(&self) -> &str {
        &self.me
    }

    /// The id of the delivery being handled.
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
    /// cx.reply(format!(r#"<id xmlns="urn:example:v1">{}</id>"#, cx.delivery_id()));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let receipt = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?;
    /// # pump.settle(receipt.thread()).await;
    /// let answer = &pump.history(receipt.thread()).await?[1];
    /// assert!(answer.payload.contains(&receipt.ids()[0].to_string()));
    /// # Ok(())
    /// # }
    /// ```
    pub fn delivery_id(&self) -> MessageId {
        self.delivery
    }

    /// Answers the sender of this delivery (always allowed, whatever the sender's roots).
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
    /// cx.reply(r#"<answer xmlns="urn:example:v1">42</answer>"#);
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let receipt = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?;
    /// # pump.settle(receipt.thread()).await;
    /// let answer = &pump.history(receipt.thread()).await?[1];
    /// assert_eq!((&*answer.from, answer.to.as_deref()), ("me", Some("client")));
    /// assert_eq!(answer.in_reply_to, Some(receipt.ids()[0]));
    /// # Ok(())
    /// # }
    /// ```
    pub fn reply(&mut self, payload: impl Into<String>) {
        self.outputs
            .push(Output::Payload(Target::Reply, payload.into()));
    }

    /// [`Context::reply`] with a payload the crate wrote and read (`tool::wire::written`).
    pub(crate) fn reply_read(&mut self, payload: Payload) {
        self.outputs.push(Output::Read(Target::Reply, payload));
    }

    /// [`Context::send`] with a payload the crate wrote and read (`tool::wire::written`).
    pub(crate) fn send_read(&mut self, to: impl Into<String>, payload: Payload) {
        self.outputs
            .push(Output::Read(Target::Listener(to.into()), payload));
    }

    /// Sends a payload to one listener, which must be this one, its caller or a peer, and accept
    /// the payload's root. `send("client", …)` answers the outside sender of the thread (egress).
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
    /// cx.send("echo", r#"<say xmlns="urn:example:say:v1">hi</say>"#); // a peer
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new()
    /// #     .register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask")).peers(["echo"]))
    /// #     .register(Registration::new("echo", agentpump::listeners::Echo).accepts(QName::new("urn:example:say:v1", "say")))
    /// #     .build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let sent = &pump.history(thread).await?[1];
    /// assert_eq!((&*sent.from, sent.to.as_deref()), ("me", Some("echo")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn send(&mut self, to: impl Into<String>, payload: impl Into<String>) {
        self.outputs
            .push(Output::Payload(Target::Listener(to.into()), payload.into()));
    }

    /// Emits a payload routed by its root: to every listener of that root this one may address,
    /// in registration order. A payload of this listener's own root is a self-message: one iteration.
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
    /// cx.emit(r#"<say xmlns="urn:example:say:v1">hi</say>"#); // routed by its root, to the echo
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new()
    /// #     .register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask")).peers(["echo"]))
    /// #     .register(Registration::new("echo", agentpump::listeners::Echo).accepts(QName::new("urn:example:say:v1", "say")))
    /// #     .build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let emitted = &pump.history(thread).await?[1];
    /// assert_eq!((&*emitted.from, emitted.to.as_deref()), ("me", Some("echo")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn emit(&mut self, payload: impl Into<String>) {
        self.outputs
            .push(Output::Payload(Target::Route, payload.into()));
    }

    /// Emits every payload found in free text (prose, code fences, several elements), as
    /// [`addressed`](crate::extract::addressed) finds them: a payload inside `<reply>…</reply>`
    /// goes to the sender of this delivery (as [`Context::reply`]), one inside
    /// `<send to="NAME">…</send>` to `NAME` (as [`Context::send`]), any other is routed by its
    /// root (as [`Context::emit`]). Text without any payload gets `huh code="no-payload"`.
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
    /// cx.emit_text(r#"Sure! <reply><answer xmlns="urn:example:v1">42</answer></reply> Anything else?"#);
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let answer = &pump.history(thread).await?[1];
    /// assert_eq!((&*answer.payload, answer.to.as_deref()), (r#"<answer xmlns="urn:example:v1">42</answer>"#, Some("client")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn emit_text(&mut self, text: impl Into<String>) {
        self.outputs.push(Output::Text(text.into()));
    }

    /// Spawns a child thread; the answer is `thread-spawned`, and the child's end arrives as
    /// `thread-result`.
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
    /// # if msg.is_system() { return Ok(()); }
    /// if msg.qname().local() == "ask" { // not the echo's answer, which comes back to me in the child
    ///     cx.spawn(Spawn::new(r#"<say xmlns="urn:example:say:v1">hi</say>"#).sub_id("greeting"));
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
    /// let tree = pump.tree(root);
    /// assert_eq!(tree.len(), 2); // the root and its child
    /// assert!(tree[1].path.ends_with(".greeting"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn spawn(&mut self, spawn: Spawn) {
        self.emit(spawn.to_xml());
    }

    /// Finishes this thread; `payload` (may be empty) goes to the spawner as `thread-result`.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::ThreadState;
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// cx.done(r#"<answer xmlns="urn:example:v1">42</answer>"#);
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// assert_eq!(pump.thread(thread).expect("known").state, ThreadState::Done);
    /// assert!(pump.post(Some(thread), None, r#"<ask xmlns="urn:example:v1"/>"#).await.is_err()); // closed
    /// # Ok(())
    /// # }
    /// ```
    pub fn done(&mut self, payload: impl AsRef<str>) {
        self.emit(format!(
            "<sys:thread-done xmlns:sys=\"{SYSTEM_NS}\">{}</sys:thread-done>",
            payload.as_ref()
        ));
    }

    /// Shrinks this listener's history view to the last `keep` messages before this request.
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
    /// cx.clear_context(0); // forget everything before this request
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let history = pump.history(thread).await?;
    /// assert!(history.iter().any(|r| r.root.local() == "context-cleared" && r.to.as_deref() == Some("me")));
    /// # Ok(())
    /// # }
    /// ```
    pub fn clear_context(&mut self, keep: usize) {
        self.emit(format!(
            "<clear-context xmlns=\"{SYSTEM_NS}\" keep-messages=\"{keep}\"/>"
        ));
    }

    /// Sends a loop signal to the governor (`continue`, `done`, `abort`); see [`Signal`].
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::governor::{Control, Signal};
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// cx.signal(Signal::new(Control::Abort).reason("no-data"));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let report = &pump.reports(thread).await?[0];
    /// assert_eq!(report.class, "aborted");
    /// # Ok(())
    /// # }
    /// ```
    pub fn signal(&mut self, signal: Signal) {
        self.emit(signal.to_xml());
    }

    /// Declares (or tightens) the thread's goal: criteria, certificates, r-p, budget.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::governor::{Budget, CertificateType, Goal};
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// let budget = Budget { turns: Some(1), ..Budget::unlimited() };
    /// cx.goal(&Goal { text: "answer once".into(), certificates: vec![CertificateType::Timeout], budget, ..Goal::default() });
    /// cx.emit(r#"<ask xmlns="urn:example:v1"/>"#); // another turn: over the goal's budget
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask")).role(agentpump::Role::Agent)).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let report = &pump.reports(thread).await?[0];
    /// assert_eq!((report.class.as_str(), report.stop_reason.as_str()), ("TIMEOUT", "max-turns"));
    /// assert_eq!(report.goal.as_deref(), Some("answer once"));
    /// # Ok(())
    /// # }
    /// ```
    pub fn goal(&mut self, goal: &Goal) {
        self.emit(goal.to_xml());
    }

    /// Reports the distance to the goal, an exact decimal (never a float).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::governor::{CertificateType, Goal};
    /// # use rust_decimal::Decimal;
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// cx.goal(&Goal { text: "converge".into(), certificates: vec![CertificateType::Converged], ..Goal::default() });
    /// cx.residual(Decimal::new(1, 12)); // 0.000000000001, below the default r-p
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// assert_eq!(pump.reports(thread).await?[0].class, "CONVERGED");
    /// # Ok(())
    /// # }
    /// ```
    pub fn residual(&mut self, value: Decimal) {
        self.emit(format!(
            "<residual xmlns=\"{GOVERNOR_NS}\" value=\"{value}\"/>"
        ));
    }

    /// Reports whether acceptance criterion `id` is met, with a link to the evidence.
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
    /// cx.criterion("tests-pass", true, "ci run 17");
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let record = &pump.history(thread).await?[1];
    /// assert_eq!(record.root.local(), "criterion");
    /// assert!(record.payload.contains(r#"id="tests-pass" met="true" evidence="ci run 17""#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn criterion(&mut self, id: &str, met: bool, evidence: &str) {
        let (id, evidence) = (escape(id), escape(evidence));
        self.emit(format!(
            "<criterion xmlns=\"{GOVERNOR_NS}\" id=\"{id}\" met=\"{met}\" evidence=\"{evidence}\"/>"
        ));
    }

    /// Reports criterion `id` as the listener of child thread `thread` judged it (a verifier's
    /// verdict, forwarded): the governor credits the criterion to that listener when it is
    /// not this one, so a `done` of this listener can earn EXACT on it. A `thread` this
    /// thread did not spawn is refused with `huh invalid-request`.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration, Spawn};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// if let Some(result) = msg.thread_result() {
    ///     cx.criterion_confirmed_in(result.thread(), "tests-pass", true, "ci run 17");
    /// } else if msg.qname().local() == "ask" {
    ///     cx.spawn(Spawn::new(r#"<say xmlns="urn:example:say:v1">check</say>"#).to("echo"));
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
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let history = pump.history(thread).await?;
    /// let criterion = history.iter().find(|r| r.root.local() == "criterion").unwrap();
    /// assert!(criterion.payload.contains(" thread=\""));
    /// # Ok(())
    /// # }
    /// ```
    pub fn criterion_confirmed_in(
        &mut self,
        thread: ThreadId,
        id: &str,
        met: bool,
        evidence: &str,
    ) {
        let (id, evidence) = (escape(id), escape(evidence));
        self.emit(format!(
            "<criterion xmlns=\"{GOVERNOR_NS}\" id=\"{id}\" met=\"{met}\" evidence=\"{evidence}\" thread=\"{thread}\"/>"
        ));
    }

    /// Records something learned, lane-typed (A hard, B verified, C guidance).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::governor::Lane;
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// cx.learning(Lane::B, "the cache must be warm");
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let record = &pump.history(thread).await?[1];
    /// assert_eq!(&*record.payload, r#"<learning xmlns="urn:agentpump:governor:v1" lane="B">the cache must be warm</learning>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn learning(&mut self, lane: Lane, text: &str) {
        let text = escape(text);
        self.emit(format!(
            "<learning xmlns=\"{GOVERNOR_NS}\" lane=\"{lane}\">{text}</learning>"
        ));
    }

    /// Withdraws `usage` from the thread's budget *before* spending it (a model call, a tool
    /// call): checked against this thread and every ancestor at once, so concurrent children
    /// can never spend more than a budget allows together. On `Err`, do not make the call.
    ///
    /// # Errors
    ///
    /// [`BudgetExhausted`] naming the budget that has no room.
    ///
    /// # Example
    ///
    /// ```no_run
    /// # fn call(cx: &mut agentpump::Context) -> Result<(), agentpump::ListenerError> {
    /// use agentpump::Usage;
    /// let estimate = Usage { tokens_in: 800, tokens_out: 200, ..Usage::default() };
    /// if cx.spend(estimate).is_err() {
    ///     return Ok(()); // out of budget: the governor halts the thread at its next turn
    /// }
    /// // … call the model …
    /// # Ok(()) }
    /// ```
    pub fn spend(&mut self, usage: Usage) -> Result<(), BudgetExhausted> {
        self.account
            .withdraw(usage.amount())
            .map_err(|e| BudgetExhausted { budget: e.budget })?;
        self.spent.add(&usage);
        Ok(())
    }

    /// Whether `usage` would fit the budget now, without spending it (a pre-flight check before
    /// a call whose exact cost is known only afterwards; report it with [`Context::usage`]).
    ///
    /// # Errors
    ///
    /// [`BudgetExhausted`] naming the budget that has no room.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::Usage;
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// let call = Usage { tokens_in: 1_000, ..Usage::default() };
    /// let answer = if cx.can_spend(&call).is_ok() { "yes" } else { "no" }; // tokens are unlimited by default
    /// cx.reply(format!(r#"<fits xmlns="urn:example:v1">{answer}</fits>"#));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<fits xmlns="urn:example:v1">yes</fits>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn can_spend(&self, usage: &Usage) -> Result<(), BudgetExhausted> {
        self.account
            .check(usage.amount())
            .map_err(|e| BudgetExhausted { budget: e.budget })
    }

    /// What is left of each limited budget of this thread, by name.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::governor::BudgetName;
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// let turns = cx.remaining().into_iter().find(|(name, _)| *name == BudgetName::Turns).map(|(_, left)| left);
    /// cx.reply(format!(r#"<left xmlns="urn:example:v1">{}</left>"#, turns.unwrap_or_default()));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<left xmlns="urn:example:v1">9999</left>"#); // of 10 000
    /// # Ok(())
    /// # }
    /// ```
    pub fn remaining(&self) -> Vec<(BudgetName, Decimal)> {
        self.account
            .snapshot()
            .into_iter()
            .filter_map(|line| line.remaining().map(|left| (line.name, left)))
            .collect()
    }

    /// Reports model and tool use that already happened; it is charged to the thread's budget
    /// (even past a limit, which then halts the thread) and added to its counters.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::Usage;
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// cx.usage(Usage { tokens_in: 120, tokens_out: 30, ..Usage::default() }); // a model call made
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// let counters = pump.thread(thread).expect("known").counters;
    /// assert_eq!((counters.tokens_in, counters.tokens_out), (120, 30));
    /// # Ok(())
    /// # }
    /// ```
    pub fn usage(&mut self, usage: Usage) {
        self.usage.add(&usage);
    }

    /// The thread's history as this listener sees it: everything after its last `clear-context`
    /// (keeping what that request kept), up to and including this delivery — and then any
    /// `halt` the thread went through while this delivery waited (it was resumed since).
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
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
    /// let seen = cx.history().await.map_err(ListenerError::failed)?.len();
    /// cx.reply(format!(r#"<seen xmlns="urn:example:v1">{seen}</seen>"#));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<seen xmlns="urn:example:v1">1</seen>"#); // the ask
    /// # Ok(())
    /// # }
    /// ```
    pub async fn history(&self) -> Result<Vec<Record>, HistoryError> {
        let mut records = self.store.thread(self.thread).await?;
        // Nothing after this delivery: queue order is history order, so what follows it has not
        // been delivered to this listener yet — except halts: a message that waited through a
        // halt and a resume is delivered after them, and the agent should know it was stopped.
        if let Some(here) = records.iter().position(|r| r.id == self.delivery) {
            let halts: Vec<Record> = records[here + 1..]
                .iter()
                .filter(|r| r.kind == RecordKind::System && r.root.is(SYSTEM_NS, "halt"))
                .cloned()
                .collect();
            records.truncate(here + 1);
            records.extend(halts);
        }
        if let Some((cleared_at, keep)) = self.view {
            // `cleared_at` is the request's position in the thread: that many records precede it.
            let before = usize::try_from(cleared_at)
                .unwrap_or(usize::MAX)
                .min(records.len());
            records.drain(..before.saturating_sub(keep));
        }
        Ok(records)
    }

    /// Every record of this thread so far, whatever this listener's view: unlike
    /// [`Context::history`], it includes records accepted after this delivery (outputs of
    /// earlier deliveries queued behind it). For a listener that rebuilds its state from the
    /// thread, such as a process after a restart.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
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
    /// let all = cx.whole_history().await.map_err(ListenerError::failed)?.len();
    /// cx.reply(format!(r#"<all xmlns="urn:example:v1">{all}</all>"#));
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// # pump.settle(thread).await;
    /// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<all xmlns="urn:example:v1">1</all>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn whole_history(&self) -> Result<Vec<Record>, HistoryError> {
        self.store.thread(self.thread).await
    }

    /// Runs `f` once what came of this delivery is committed to history — its outputs, or the
    /// `system-error` its failure produced — durable as far as the store's durability goes;
    /// not at all when the commit failed.
    /// For a listener that must confirm work to something outside the pump only once the pump
    /// has it for good: a remote listener acknowledges its work item here. A second call
    /// replaces the first.
    ///
    /// # Example
    ///
    /// ```
    /// # use std::sync::atomic::{AtomicBool, Ordering};
    /// # static CONFIRMED: AtomicBool = AtomicBool::new(false);
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// # struct L;
    /// # #[agentpump::async_trait]
    /// # impl Listener for L {
    /// # async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    /// # if msg.is_system() { return Ok(()); }
    /// cx.reply(r#"<ok xmlns="urn:example:v1"/>"#);
    /// cx.on_commit(|| CONFIRMED.store(true, Ordering::SeqCst)); // once the reply is in history
    /// # Ok(())
    /// # }
    /// # }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let pump = PumpBuilder::new().register(Registration::new("me", L).accepts(QName::new("urn:example:v1", "ask"))).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// pump.settle(thread).await;
    /// assert!(CONFIRMED.load(Ordering::SeqCst));
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_commit(&mut self, f: impl FnOnce() + Send + 'static) {
        *self.on_commit.get_mut().unwrap_or_else(|e| e.into_inner()) = Some(Box::new(f));
    }

    /// Outputs, usage still to charge, usage already withdrawn with [`Context::spend`], and
    /// what runs after the commit ([`Context::on_commit`]).
    pub(crate) fn into_parts(self) -> (Outputs, Usage, Usage, Option<OnCommit>) {
        let on_commit = self
            .on_commit
            .into_inner()
            .unwrap_or_else(|e| e.into_inner());
        (self.outputs, self.usage, self.spent, on_commit)
    }

    /// What this handler emitted so far, as `(target, text)`: `target` is `reply`, `route`,
    /// `text` (free text to extract from) or the name of a listener (a remote worker sends
    /// them back to the pump this way).
    #[cfg_attr(not(feature = "nats"), allow(dead_code))]
    pub(crate) fn output_texts(&self) -> Vec<(String, String)> {
        self.outputs
            .iter()
            .map(|o| {
                let target = match o {
                    Output::Payload(target, _) | Output::Read(target, _) => target,
                    Output::Text(t) => return ("text".to_owned(), t.clone()),
                };
                let text = o.text().to_owned();
                match target {
                    Target::Reply => ("reply".to_owned(), text),
                    Target::Route => ("route".to_owned(), text),
                    Target::Listener(n) => (format!("send:{n}"), text),
                }
            })
            .collect()
    }

    /// Usage reported and usage withdrawn, without consuming the context.
    #[cfg_attr(not(feature = "nats"), allow(dead_code))]
    pub(crate) fn usage_so_far(&self) -> (Usage, Usage) {
        (self.usage.clone(), self.spent.clone())
    }
}
