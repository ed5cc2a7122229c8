//! The codes carried by `huh`, `system-error` and `system-thread-error`.

use std::fmt;

/// Why a payload was answered with `<huh>`: it failed to parse, validate or route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HuhCode {
    /// Not well-formed XML, invalid UTF-8 or a forbidden character.
    MalformedXml,
    /// Over a size, depth, attribute, namespace or output-count limit.
    LimitExceeded,
    /// A DOCTYPE declaration (DTDs are never processed).
    ForbiddenDtd,
    /// An entity other than the five predefined ones.
    UnknownEntity,
    /// A namespace prefix not declared inside the payload.
    UnknownPrefix,
    /// No listener accepts the payload's root element.
    UnknownRoot,
    /// A payload in a namespace only the pump may emit (system, governor or envelope).
    ReservedNamespace,
    /// A system request (`spawn-thread`, `clear-context`, `thread-done`) that does not follow its schema.
    InvalidRequest,
    /// The payload does not fit the type the listener reads.
    InvalidPayload,
    /// Listener output with no payload element in it.
    NoPayload,
}

/// Why a delivery failed, carried by `<system-error>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// The addressee is not among the sender's peers.
    PeerNotAllowed,
    /// The addressee does not exist or does not accept the payload's root.
    NoRoute,
    /// The thread's queue is full.
    QueueFull,
    /// The handler returned an error.
    HandlerFailed,
    /// The handler panicked.
    HandlerPanicked,
    /// The handler ran longer than its delivery timeout.
    HandlerTimeout,
    /// The thread is done or halted and accepts no new messages.
    ThreadClosed,
    /// The pump shut down before the message was delivered.
    ShuttingDown,
    /// The history store could not record the message, so it was not accepted.
    HistoryUnavailable,
    /// A listener without loop permission addressed itself.
    LoopNotPermitted,
    /// A budget is nearly spent (sent once per budget, before the halt).
    BudgetWarning,
    /// A spawn would exceed the thread or depth budget.
    BudgetExhausted,
    /// An upstream service (a model endpoint) failed after its retries.
    UpstreamFailed,
    /// Refusals identical to an earlier recorded one (its `in-reply-to`) were answered but
    /// counted instead of recorded one by one; the message says how many.
    RefusalsRepeated,
    /// The listener signalled `done` in a delivery some of whose outputs were refused: the
    /// `done` does not stand and the listener takes another turn on the refusals. Recorded,
    /// not delivered.
    DoneSetAside,
    /// The listener signalled `done` (or `thread-done`) while the thread's latest plan
    /// (`<todo-until>`) has open steps, which the message names: the thread goes on until the
    /// plan's steps are done or abandoned.
    PlanOpen,
}

/// Why a message naming a thread was refused, carried by `<system-thread-error>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadErrorCode {
    /// No thread has this id.
    UnknownThread,
    /// The thread id is not a UUID.
    MalformedThreadId,
}

impl HuhCode {
    /// The code as written on the wire.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::system::HuhCode;
    /// assert_eq!(HuhCode::UnknownRoot.as_str(), "unknown-root");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MalformedXml => "malformed-xml",
            Self::LimitExceeded => "limit-exceeded",
            Self::ForbiddenDtd => "forbidden-dtd",
            Self::UnknownEntity => "unknown-entity",
            Self::UnknownPrefix => "unknown-prefix",
            Self::UnknownRoot => "unknown-root",
            Self::ReservedNamespace => "reserved-namespace",
            Self::InvalidRequest => "invalid-request",
            Self::InvalidPayload => "invalid-payload",
            Self::NoPayload => "no-payload",
        }
    }
}

impl ErrorCode {
    /// The code as written on the wire.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::system::ErrorCode;
    /// assert_eq!(ErrorCode::QueueFull.as_str(), "queue-full");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PeerNotAllowed => "peer-not-allowed",
            Self::NoRoute => "no-route",
            Self::QueueFull => "queue-full",
            Self::HandlerFailed => "handler-failed",
            Self::HandlerPanicked => "handler-panicked",
            Self::HandlerTimeout => "handler-timeout",
            Self::ThreadClosed => "thread-closed",
            Self::ShuttingDown => "shutting-down",
            Self::HistoryUnavailable => "history-unavailable",
            Self::LoopNotPermitted => "loop-not-permitted",
            Self::BudgetWarning => "budget-warning",
            Self::BudgetExhausted => "budget-exhausted",
            Self::UpstreamFailed => "upstream-failed",
            Self::RefusalsRepeated => "refusals-repeated",
            Self::DoneSetAside => "done-set-aside",
            Self::PlanOpen => "plan-open",
        }
    }

    /// Whether sending the same message again may succeed.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::system::ErrorCode;
    /// assert!(ErrorCode::QueueFull.retry_allowed()); // the queue may have room later
    /// assert!(!ErrorCode::NoRoute.retry_allowed());
    /// ```
    pub fn retry_allowed(self) -> bool {
        matches!(
            self,
            Self::QueueFull
                | Self::HandlerFailed
                | Self::HandlerTimeout
                | Self::ShuttingDown
                | Self::HistoryUnavailable
                | Self::UpstreamFailed
                | Self::DoneSetAside
                | Self::PlanOpen
        )
    }
}

impl ThreadErrorCode {
    /// The code as written on the wire.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::system::ThreadErrorCode;
    /// assert_eq!(ThreadErrorCode::MalformedThreadId.as_str(), "malformed-thread-id");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownThread => "unknown-thread",
            Self::MalformedThreadId => "malformed-thread-id",
        }
    }
}

macro_rules! display_as_str {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.pad(self.as_str())
            }
        }
    )*};
}

display_as_str!(HuhCode, ErrorCode, ThreadErrorCode);
