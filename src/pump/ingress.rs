//! Input from outside the pump: [`PumpHandle::send`] (a whole envelope, either dialect) and
//! [`PumpHandle::post`] (a payload). Every refusal is recorded and returned as [`IngressError`];
//! an accepted message is acknowledged only after its record is committed.

use std::sync::Arc;

use super::notice::Recipient;
use super::route::{Refusal, Route, Sender, Targets, smuggled, tool_checked};
use super::tx::{Place, Tx};
use super::{PumpHandle, Shared};
use crate::envelope::local::local;
use crate::governor::ledger::Ledger;
use crate::history::{HistoryError, RecordKind, Ticket};
use crate::listener::Target;
use crate::system::{CLIENT_SENDER, ErrorCode, SystemMessage, ThreadErrorCode, attempt};
use crate::thread::registry::ThreadEntry;
use crate::{Dialect, Envelope, EnvelopeError, Incoming, MessageId, Payload, ThreadId};

/// What an accepted outside message became: the thread it went into and its message ids. It
/// is returned once the message is recorded in history.
///
/// # Example
///
/// ```
/// # use agentpump::{PumpBuilder, Registration, QName, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let say = QName::new("urn:example:say:v1", "say");
/// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
/// let receipt = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?;
/// assert_eq!(receipt.ids().len(), 1); // one listener accepts <say>
/// pump.settle(receipt.thread()).await;
/// assert_eq!(pump.history(receipt.thread()).await?[0].id, receipt.ids()[0]);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    thread: ThreadId,
    ids: Vec<MessageId>,
}

impl Receipt {
    /// The thread the message went into (new when the message named none).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let first = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?;
    /// let again = pump.post(Some(first.thread()), None, r#"<say xmlns="urn:example:say:v1">again</say>"#).await?;
    /// assert_eq!(again.thread(), first.thread()); // posted into the same thread
    /// # Ok(())
    /// # }
    /// ```
    pub fn thread(&self) -> ThreadId {
        self.thread
    }

    /// One message id per listener it was delivered to, in registration order.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let receipt = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?;
    /// let record = pump.store().record(receipt.ids()[0]).await?.expect("recorded");
    /// assert_eq!(&*record.from, "client");
    /// # Ok(())
    /// # }
    /// ```
    pub fn ids(&self) -> &[MessageId] {
        &self.ids
    }
}

/// Outside input the pump refused. The answer is recorded in history (in the named thread, or
/// in the system thread when there is no usable one) — unless the history store itself failed.
///
/// # Example
///
/// ```
/// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let say = QName::new("urn:example:say:v1", "say");
/// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
/// let refused = pump.post(None, Some("nobody"), r#"<say xmlns="urn:example:say:v1">hi</say>"#).await.unwrap_err();
/// assert_eq!(refused.to_string(), "system-error no-route: no listener is named `nobody`");
/// let in_history = pump.history(refused.recorded_in().expect("recorded")).await?;
/// assert!(in_history.iter().any(|r| r.payload.contains("<code>no-route</code>")));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(.answer))]
pub struct IngressError {
    answer: SystemMessage,
    /// Where the answer is recorded, and its message id; `None` when the store failed.
    recorded: Option<(ThreadId, MessageId)>,
    dialect: Dialect,
}

impl IngressError {
    /// The system message that answers the refused input (`huh`, `system-error`, `system-thread-error`).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let refused = pump.post(None, None, "<say xmlns=\"urn:example:say:v1\">").await.unwrap_err();
    /// assert_eq!(refused.answer().element(), "huh");
    /// assert_eq!(refused.code(), "malformed-xml");
    /// # Ok(())
    /// # }
    /// ```
    pub fn answer(&self) -> &SystemMessage {
        &self.answer
    }

    /// The wire code of the answer (`malformed-xml`, `queue-full`, `unknown-thread`, …).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
    /// let refused = pump.post(Some(thread), Some("nobody"), r#"<say xmlns="urn:example:say:v1">hi</say>"#).await.unwrap_err();
    /// assert_eq!(refused.code(), "no-route");
    /// # Ok(())
    /// # }
    /// ```
    pub fn code(&self) -> &'static str {
        match &self.answer {
            SystemMessage::Huh { code, .. } => code.as_str(),
            SystemMessage::Error { code, .. } => code.as_str(),
            SystemMessage::ThreadError { code, .. } => code.as_str(),
            other => other.element(),
        }
    }

    /// The thread whose history holds the answer; `None` when the history store could not
    /// record anything (`history-unavailable`).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
    /// let refused = pump.post(Some(thread), None, r#"<shout xmlns="urn:example:say:v1"/>"#).await.unwrap_err();
    /// assert_eq!(refused.recorded_in(), Some(thread)); // the refusal is in the thread it named
    /// assert_eq!(refused.code(), "unknown-root");
    /// # Ok(())
    /// # }
    /// ```
    pub fn recorded_in(&self) -> Option<ThreadId> {
        self.recorded.map(|(thread, _)| thread)
    }

    /// The answer as an envelope in the sender's dialect, with the id it has in history.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let refused = pump.post(None, None, r#"<shout xmlns="urn:example:say:v1"/>"#).await.unwrap_err();
    /// let xml = refused.to_xml();
    /// assert!(xml.starts_with(r#"<message xmlns="urn:agentpump:envelope:v1">"#));
    /// assert!(xml.contains("<to>client</to>") && xml.contains(r#"code="unknown-root""#));
    /// # Ok(())
    /// # }
    /// ```
    pub fn to_xml(&self) -> String {
        let (thread, id) = self
            .recorded
            .unwrap_or_else(|| (ThreadId::new(), MessageId::new()));
        let env = Envelope::new(Arc::from("system"), thread, self.answer.to_payload())
            .with_id(id)
            .with_to(Some(Arc::from(CLIENT_SENDER)));
        env.to_xml(self.dialect)
    }

    fn unrecorded(e: &HistoryError, dialect: Dialect) -> Self {
        let message = format!("history store refused the message: {e}");
        let answer = SystemMessage::Error {
            code: ErrorCode::HistoryUnavailable,
            message,
        };
        Self {
            answer,
            recorded: None,
            dialect,
        }
    }
}

fn describe(answer: &SystemMessage) -> String {
    match answer {
        SystemMessage::Huh { code, message, .. } => format!("huh {code}: {message}"),
        SystemMessage::Error { code, message } => format!("system-error {code}: {message}"),
        SystemMessage::ThreadError {
            code,
            message,
            unknown_id,
        } => {
            format!("system-thread-error {code} `{unknown_id}`: {message}")
        }
        other => other.element().to_owned(),
    }
}

/// The thread an outside message names.
enum Named {
    New,
    Existing(Arc<ThreadEntry>),
    /// An AgentServer client's new conversation: a root thread under the id it chose.
    Adopt(ThreadId),
}

/// The thread outside input names: as written in an envelope's `<thread>`, or as an id.
#[derive(Debug, Clone, Copy)]
enum Naming<'a> {
    Written(&'a str),
    Id(ThreadId),
}

impl PumpHandle {
    /// Sends an envelope (`urn:agentpump:envelope:v1` or AgentServer v2.1) into the pump:
    /// `<thread>` absent starts a new root thread; `<to>` directs it at one listener, otherwise it
    /// goes to every listener of its root. Returns once the message is recorded.
    ///
    /// # Errors
    ///
    /// [`IngressError`] for a message that does not parse, names an unknown or closed thread,
    /// uses a pump-owned namespace, has no route, or does not fit the thread's queue. The
    /// answer is in history.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let receipt = pump.send(r#"<message xmlns="urn:agentpump:envelope:v1"><meta><to>echo</to></meta>
    ///   <say xmlns="urn:example:say:v1">hi</say></message>"#).await?;
    /// pump.settle(receipt.thread()).await;
    /// let answer = &pump.history(receipt.thread()).await?[1];
    /// assert_eq!((&*answer.from, &*answer.payload), ("echo", r#"<say xmlns="urn:example:say:v1">hi</say>"#));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn send(&self, xml: impl AsRef<[u8]>) -> Result<Receipt, IngressError> {
        let bytes = xml.as_ref();
        match Incoming::parse(bytes, &self.shared.config.limits) {
            Ok(incoming) => self.admit_envelope(incoming, None, None).await,
            Err(e) => Err(self.refuse_unparsed(e, bytes).await),
        }
    }

    /// The one door for bytes from outside (the HTTP API's): an envelope of either dialect or a
    /// bare payload, parsed once with the pump's own limits. `into` is a thread the caller
    /// names (a URL's): it wins over an envelope's `<thread>`; `None` lets the envelope name
    /// it, or starts a root thread. `to` directs a message that names no addressee.
    ///
    /// # Errors
    ///
    /// As [`PumpHandle::send`].
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let bare = pump.receive(br#"<say xmlns="urn:example:say:v1">hi</say>"#, None, None).await?; // a bare payload
    /// let into = pump.receive(br#"<say xmlns="urn:example:say:v1">again</say>"#, Some(bare.thread()), Some("echo")).await?;
    /// assert_eq!(into.thread(), bare.thread());
    /// let broken = pump.receive(br#"<message xmlns="urn:agentpump:envelope:v1"><meta>"#, None, None).await;
    /// assert_eq!(broken.unwrap_err().answer().element(), "huh"); // refused, never posted as a payload
    /// # Ok(())
    /// # }
    /// ```
    pub async fn receive(
        &self,
        bytes: &[u8],
        into: Option<ThreadId>,
        to: Option<&str>,
    ) -> Result<Receipt, IngressError> {
        match Incoming::parse(bytes, &self.shared.config.limits) {
            Ok(incoming) => self.admit_envelope(incoming, into, to).await,
            Err(EnvelopeError::NotAnEnvelope { .. }) => {
                let text = std::str::from_utf8(bytes).unwrap_or_default();
                self.post(into, to, text.strip_prefix('\u{feff}').unwrap_or(text))
                    .await
            }
            // A broken envelope is refused and recorded, never posted whole as a payload.
            Err(e) => Err(self.refuse_unparsed(e, bytes).await),
        }
    }

    /// Refuses bytes that did not parse, recorded in the pump's thread.
    async fn refuse_unparsed(&self, error: EnvelopeError, bytes: &[u8]) -> IngressError {
        let shared = &self.shared;
        let refused = shared.refuse_unparsed(error, attempt(bytes), Dialect::default());
        match shared
            .await_commit(shared.system_thread.id, refused.committed)
            .await
        {
            Ok(()) => refused.error,
            Err(e) => IngressError::unrecorded(&e, Dialect::default()),
        }
    }

    /// Admits a parsed envelope: into `into` when given, else the thread it names.
    async fn admit_envelope(
        &self,
        incoming: Incoming,
        into: Option<ThreadId>,
        to: Option<&str>,
    ) -> Result<Receipt, IngressError> {
        let shared = &self.shared;
        let dialect = incoming.dialect();
        let to = incoming.to().or(to).map(str::to_owned);
        let thread = incoming.thread().map(str::to_owned);
        let in_reply_to = incoming.in_reply_to();
        let payload = incoming.into_payload();
        let payload = match dialect {
            Dialect::Agentpump => Ok(payload),
            Dialect::AgentServer => shared
                .adopt_payload(payload.clone())
                .map_err(|e| (e, attempt(payload.as_str().as_bytes()))),
        };
        let naming = into
            .map(Naming::Id)
            .or(thread.as_deref().map(Naming::Written));
        self.admit(dialect, naming, to.as_deref(), in_reply_to, payload)
            .await
    }

    /// Posts one payload: into `thread` (or a new root thread), to `to` (or every listener of its root).
    ///
    /// # Errors
    ///
    /// As [`PumpHandle::send`].
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let receipt = pump.post(None, Some("echo"), r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?;
    /// pump.settle(receipt.thread()).await;
    /// assert_eq!(pump.history(receipt.thread()).await?.len(), 2); // the say and its echo
    /// let refused = pump.post(None, None, "not xml").await.unwrap_err();
    /// assert_eq!(refused.code(), "malformed-xml");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn post(
        &self,
        thread: Option<ThreadId>,
        to: Option<&str>,
        payload: &str,
    ) -> Result<Receipt, IngressError> {
        let parsed = Payload::parse(payload, &self.shared.config.limits)
            .map_err(|e| (e, attempt(payload.as_bytes())));
        let thread = thread.map(Naming::Id);
        self.admit(Dialect::default(), thread, to, None, parsed)
            .await
    }

    async fn admit(
        &self,
        dialect: Dialect,
        thread: Option<Naming<'_>>,
        to: Option<&str>,
        in_reply_to: Option<MessageId>,
        payload: Result<Payload, (EnvelopeError, String)>,
    ) -> Result<Receipt, IngressError> {
        let shared = &self.shared;
        shared.sweep_evictions();
        // An evicted thread comes back first; holding it keeps its tree in memory meanwhile.
        let named = thread.and_then(|n| match n {
            Naming::Id(id) => Some(id),
            Naming::Written(text) => text.parse().ok(),
        });
        let _pinned = match named {
            Some(id) => shared
                .load(id)
                .await
                .map_err(|e| IngressError::unrecorded(&e, dialect))?,
            None => None,
        };
        let Admitted { answer, committed } =
            shared.admit(dialect, thread, to, in_reply_to, payload);
        let thread = match &answer {
            Ok(receipt) => receipt.thread,
            Err(err) => err.recorded_in().unwrap_or(shared.system_thread.id),
        };
        // Acknowledged only once durable: a failed commit is an error, never an `Ok`.
        match shared.await_commit(thread, committed).await {
            Ok(()) => answer,
            Err(e) => Err(IngressError::unrecorded(&e, dialect)),
        }
    }

    /// Whether the pump accepts new input now.
    ///
    /// # Errors
    ///
    /// The answer new input would get: `shutting-down` once shutdown started,
    /// `history-unavailable` while the history store refuses writes (a full or failing disk).
    /// Asking may try the disk again (see [`crate::history::HistoryStore::writable`]): once it
    /// takes writes, the answer is `Ok` again, without a restart.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// assert!(pump.health().is_ok());
    /// pump.shutdown(std::time::Duration::ZERO).await;
    /// assert_eq!(pump.health().unwrap_err().code(), "shutting-down");
    /// # Ok(())
    /// # }
    /// ```
    pub fn health(&self) -> Result<(), Box<IngressError>> {
        let shared = &self.shared;
        if shared.lifecycle.is_closing() {
            return Err(Box::new(IngressError {
                answer: shutting_down(),
                recorded: None,
                dialect: Dialect::default(),
            }));
        }
        shared
            .store
            .writable()
            .map_err(|e| Box::new(IngressError::unrecorded(&e, Dialect::default())))
    }
}

/// The answer to input that arrives after shutdown started.
fn shutting_down() -> SystemMessage {
    SystemMessage::Error {
        code: ErrorCode::ShuttingDown,
        message: "the pump is shutting down and accepts no new messages".to_owned(),
    }
}

/// What admitting outside input came to: the caller's answer, and the commit that must succeed
/// before it is given (a refusal is recorded as well).
struct Admitted {
    answer: Result<Receipt, IngressError>,
    committed: Result<Ticket, HistoryError>,
}

/// Outside input refused: the error for the caller, and the commit of its recorded answer.
struct Refused {
    error: IngressError,
    committed: Result<Ticket, HistoryError>,
}

impl From<Refused> for Admitted {
    fn from(r: Refused) -> Self {
        Self {
            answer: Err(r.error),
            committed: r.committed,
        }
    }
}

impl Shared {
    fn admit(
        self: &Arc<Self>,
        dialect: Dialect,
        thread: Option<Naming<'_>>,
        to: Option<&str>,
        in_reply_to: Option<MessageId>,
        payload: Result<Payload, (EnvelopeError, String)>,
    ) -> Admitted {
        // Held until the message is registered, so shutdown cannot slip in between (it takes
        // the gate for writing when it starts refusing input).
        let Some(_admitting) = self.lifecycle.admitting() else {
            return self
                .refuse(&self.system_thread, shutting_down(), dialect)
                .into();
        };
        let named = match self.named_thread(thread, dialect) {
            Ok(named) => named,
            Err(answer) => return self.refuse(&self.system_thread, *answer, dialect).into(),
        };
        let home = match &named {
            Named::Existing(entry) => Arc::clone(entry),
            Named::New | Named::Adopt(_) => Arc::clone(&self.system_thread),
        };
        let payload = match payload {
            Ok(p) => p,
            Err((e, original)) => {
                let answer = Refusal::unparsed(&e).into_notice(original);
                return self.refuse(&home, answer, dialect).into();
            }
        };
        // A root in a reserved namespace (system messages included) is refused by `route`.
        // A tool call routed by its root goes to the tool it names; a malformed one is refused.
        let target = to.map_or(Target::Route, |name| Target::Listener(name.to_owned()));
        let route = match smuggled(&payload).map_or_else(|| tool_checked(&payload, &target), Err) {
            Err(refusal) => Err(refusal),
            Ok(by_tool) => self.routes.route(
                Sender::Client,
                by_tool.as_ref().unwrap_or(&target),
                payload.qname(),
            ),
        };
        let targets = match route {
            Ok(Route::Listeners(targets)) => targets,
            Ok(Route::Client) => unreachable!("an outside sender is never routed to itself"),
            Err(refusal) => {
                let refusal = match dialect {
                    Dialect::AgentServer => self.explain_refusal(refusal, &payload),
                    Dialect::Agentpump => refusal,
                };
                let answer = refusal.into_notice(attempt(payload.as_str().as_bytes()));
                return self.refuse(&home, answer, dialect).into();
            }
        };
        let entry = match named {
            Named::Existing(entry) => entry,
            Named::New => self.new_root(
                self.config.new_thread(),
                dialect,
                &self.config.governor.budget,
            ),
            Named::Adopt(id) => {
                let _adopting = self.registry.adopting();
                // Another message may have opened it meanwhile: then it goes in there.
                let entry = match self.registry.get(id) {
                    Some(entry) => entry,
                    None => self.new_root(id, dialect, &self.config.governor.budget),
                };
                return self.enqueue_outside(&entry, targets, payload, in_reply_to, dialect);
            }
        };
        self.enqueue_outside(&entry, targets, payload, in_reply_to, dialect)
    }

    /// A root thread for outside input (or a fork) with `budget`, not registered until its
    /// first record is committed.
    pub(super) fn new_root(
        &self,
        id: ThreadId,
        dialect: Dialect,
        budget: &crate::governor::Budget,
    ) -> Arc<ThreadEntry> {
        let path = Arc::from(&id.to_string()[..8]);
        let ledger = Ledger::root(budget, tokio::time::Instant::now());
        Arc::new(ThreadEntry::new(id, None, None, path, dialect, ledger))
    }

    fn enqueue_outside(
        self: &Arc<Self>,
        entry: &Arc<ThreadEntry>,
        targets: Targets,
        payload: Payload,
        in_reply_to: Option<MessageId>,
        dialect: Dialect,
    ) -> Admitted {
        let mut inner = entry.lock();
        if inner.state().is_closed() {
            let message = format!(
                "thread {} is {} and accepts no new messages",
                entry.id,
                inner.state()
            );
            drop(inner);
            let answer = SystemMessage::Error {
                code: ErrorCode::ThreadClosed,
                message,
            };
            return self.refuse(entry, answer, dialect).into();
        }
        if inner.queue.len() + targets.len() > self.config.queue_capacity {
            drop(inner);
            let message = format!(
                "queue of thread {} is full ({} messages); try again later",
                entry.id, self.config.queue_capacity
            );
            let answer = SystemMessage::Error {
                code: ErrorCode::QueueFull,
                message,
            };
            return self.refuse(entry, answer, dialect).into();
        }
        let mut tx = Tx::new();
        let is_new = inner.records == 0;
        for target in targets {
            let to = local(&self.routes[target].name);
            let env = Envelope::new(local(&self.routes.names.client), entry.id, payload.clone())
                .with_to(Some(to))
                .with_in_reply_to(in_reply_to);
            tx.queue(&mut inner, Place::Here, env, target, RecordKind::Message);
        }
        if is_new {
            tx.snapshot(entry, &inner);
        }
        let ids = tx.queued_ids().to_vec();
        let committed = tx.commit(self, (entry, &mut inner), None);
        if is_new && committed.is_ok() {
            self.registry.insert(Arc::clone(entry));
        }
        let receipt = Receipt {
            thread: entry.id,
            ids,
        };
        match committed {
            Ok(ticket) => Admitted {
                answer: Ok(receipt),
                committed: Ok(ticket),
            },
            Err(e) => Admitted {
                answer: Err(IngressError::unrecorded(&e, dialect)),
                committed: Err(e),
            },
        }
    }

    /// Resolves the thread an outside message names, or the answer refusing it. An AgentServer
    /// client names a new conversation by a fresh UUID: an unknown id in that dialect opens it.
    fn named_thread(
        &self,
        thread: Option<Naming<'_>>,
        dialect: Dialect,
    ) -> Result<Named, Box<SystemMessage>> {
        let Some(naming) = thread else {
            return Ok(Named::New);
        };
        // Boxed: a refusal is rare, and a system message is large.
        let unknown = |code: ThreadErrorCode, message: &str| {
            Box::new(SystemMessage::ThreadError {
                unknown_id: match naming {
                    Naming::Written(text) => text.to_owned(),
                    Naming::Id(id) => id.to_string(),
                },
                code,
                message: message.to_owned(),
            })
        };
        let id = match naming {
            Naming::Id(id) => id,
            Naming::Written(text) => text.parse().map_err(|_| {
                unknown(
                    ThreadErrorCode::MalformedThreadId,
                    "a thread id is a UUID; omit <thread> to start a new thread",
                )
            })?,
        };
        match self.registry.get(id) {
            Some(entry) if entry.is_system => Err(Box::new(SystemMessage::Error {
                code: ErrorCode::ThreadClosed,
                message: "the system thread records the pump's own notices and takes no messages"
                    .to_owned(),
            })),
            Some(entry) => Ok(Named::Existing(entry)),
            None if self.config.partition.is_some_and(|p| !p.holds(id)) => Err(unknown(
                ThreadErrorCode::UnknownThread,
                "no such thread here: its id belongs to another pump's partition; send it through the organism's address",
            )),
            None if dialect == Dialect::AgentServer => Ok(Named::Adopt(id)),
            None => Err(unknown(
                ThreadErrorCode::UnknownThread,
                "no such thread; omit <thread> to start a new one, or emit <spawn-thread/> to branch",
            )),
        }
    }

    /// An envelope that did not parse: refused in the system thread.
    fn refuse_unparsed(
        self: &Arc<Self>,
        e: EnvelopeError,
        original: String,
        dialect: Dialect,
    ) -> Refused {
        let answer = Refusal::unparsed(&e).into_notice(original);
        self.refuse(&self.system_thread, answer, dialect)
    }

    /// Records `answer` in `entry`'s history, addressed to the outside sender, and returns it as the error.
    fn refuse(
        self: &Arc<Self>,
        entry: &Arc<ThreadEntry>,
        answer: SystemMessage,
        dialect: Dialect,
    ) -> Refused {
        let window = self.config.refusal_window;
        let mut inner = entry.lock();
        let summary = match self.refusals.check(entry.id, &answer, window) {
            super::refusals::Verdict::Counted(sample) => {
                drop(inner);
                let error = IngressError {
                    answer,
                    recorded: Some((entry.id, sample)),
                    dialect,
                };
                let committed = Ok(crate::history::Ticket::ready());
                return Refused { error, committed };
            }
            super::refusals::Verdict::Record(summary) => summary,
        };
        let mut tx = Tx::new();
        if let Some(summary) = summary {
            self.record_summary(&mut tx, entry, &mut inner, summary);
        }
        self.notice(
            &mut tx,
            entry,
            &mut inner,
            Recipient::Client,
            answer.clone(),
            None,
        );
        let id = tx.last_id().expect("the answer was recorded");
        let committed = tx.commit(self, (entry, &mut inner), None);
        if !window.is_zero() && committed.is_ok() {
            self.refusals.recorded(entry.id, &answer, id);
            self.sweep_refusals();
        }
        let recorded = Some((entry.id, id));
        Refused {
            error: IngressError {
                answer,
                recorded,
                dialect,
            },
            committed,
        }
    }
}
