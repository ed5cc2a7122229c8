//! [`SystemMessage`]: the messages only the pump emits, rendered as payloads of the system namespace.

use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use quick_xml::escape::escape;

use super::{ErrorCode, HuhCode, SYSTEM_NS, ThreadErrorCode};
use crate::{Payload, QName, ThreadId};

/// How many bytes of a refused attempt `<huh>` carries (base64-encoded) before truncating.
pub const ORIGINAL_ATTEMPT_LIMIT: usize = 4096;

/// The start of a refused input that `<huh>` can carry, as text: [`ORIGINAL_ATTEMPT_LIMIT`]
/// bytes plus the rest of a character that starts within them, so the rendering cuts where it
/// would have cut the whole input and still marks a longer input truncated. A refusal copies only
/// this much: refusing 100 MB keeps 4 KiB of it, not another 100 MB.
pub(crate) fn attempt(bytes: &[u8]) -> String {
    let keep = bytes.len().min(ORIGINAL_ATTEMPT_LIMIT + 4);
    String::from_utf8_lossy(&bytes[..keep]).into_owned()
}

/// How a child thread ended, as reported to its spawner by `<thread-result>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadStatus {
    /// A listener in the child emitted `<thread-done>`.
    Done,
    /// The child ran out of work without `<thread-done>`; its last payload is carried.
    Idle,
    /// The governor halted the child.
    Halted,
}

impl ThreadStatus {
    /// The status as written on the wire.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::system::ThreadStatus;
    /// assert_eq!(ThreadStatus::Halted.as_str(), "halted");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Idle => "idle",
            Self::Halted => "halted",
        }
    }
}

/// A message only the pump emits. [`SystemMessage::to_payload`] renders it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemMessage {
    /// A payload failed to parse, validate or route.
    Huh {
        /// Why.
        code: HuhCode,
        /// What exactly, and where.
        message: String,
        /// The refused attempt, as sent (carried base64-encoded, truncated).
        original: String,
    },
    /// A delivery failed.
    Error {
        /// Why.
        code: ErrorCode,
        /// What exactly.
        message: String,
    },
    /// Answer to `spawn-thread`: the child exists and has its initial payload.
    ThreadSpawned {
        /// The child's id.
        assigned: ThreadId,
        /// The spawning thread.
        parent: ThreadId,
        /// The sub-id the spawner suggested (sanitised), used in display paths.
        suggested_sub_id: String,
        /// The child's display path.
        path: String,
    },
    /// A message named a thread that does not exist.
    ThreadError {
        /// The id as written.
        unknown_id: String,
        /// Why.
        code: ThreadErrorCode,
        /// What to do instead.
        message: String,
    },
    /// Answer to `clear-context`.
    ContextCleared {
        /// How many earlier messages stay in the listener's view.
        kept: usize,
    },
    /// A child thread ended; delivered to its spawner in the parent thread.
    ThreadResult {
        /// The child.
        thread: ThreadId,
        /// How it ended.
        status: ThreadStatus,
        /// For a halted child: the halt class and reason.
        halt: Option<(String, String)>,
        /// Its final payload, if it has one.
        payload: Option<Payload>,
    },
    /// The governor stopped the thread.
    Halt {
        /// Machine-readable reason (`max-turns`, …).
        reason: String,
        /// The halt class (`EXACT` … `done-uncertified`).
        class: String,
        /// The certificate type, or `none`.
        certificate: String,
        /// sha256 of the halting report JSON (hex), which is stored with history.
        report_digest: String,
    },
    /// The pump started.
    Boot {
        /// Number of registered listeners.
        listeners: usize,
    },
    /// The pump stopped.
    Shutdown {
        /// Messages accepted but not delivered when it stopped (each reported in its thread).
        undelivered: usize,
    },
}

/// How the pump renders a budget warning, up to its message.
const BUDGET_WARNING_START: &str =
    "<system-error xmlns=\"urn:agentpump:system:v1\"><code>budget-warning</code>";

impl SystemMessage {
    /// Whether `payload`, sent by the pump, is a budget warning: a notice the governor sends on
    /// its own initiative, which costs the listener no turn. (Only the pump sends as
    /// `system`, so its own rendering is what to look for.)
    pub(crate) fn is_budget_warning(payload: &Payload) -> bool {
        payload.as_str().starts_with(BUDGET_WARNING_START)
    }

    /// Whether two notices are the same kind of refusal: the same element and code.
    pub(crate) fn same_kind(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Huh { code: a, .. }, Self::Huh { code: b, .. }) => a == b,
            (Self::Error { code: a, .. }, Self::Error { code: b, .. }) => a == b,
            _ => false,
        }
    }

    /// The same refusal, standing for `count` refusals of one delivery's outputs: the listener
    /// gets one notice, however many outputs were refused.
    pub(crate) fn summarizing(self, count: usize) -> Self {
        let say = |m: String| {
            format!("{count} outputs of this delivery were refused this way; the first: {m}")
        };
        match self {
            Self::Huh {
                code,
                message,
                original,
            } => Self::Huh {
                code,
                message: say(message),
                original,
            },
            Self::Error { code, message } => Self::Error {
                code,
                message: say(message),
            },
            other => other,
        }
    }

    /// The element's local name.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::system::{SystemMessage, ErrorCode};
    /// let error = SystemMessage::Error { code: ErrorCode::NoRoute, message: "no listener `x`".into() };
    /// assert_eq!(error.element(), "system-error");
    /// ```
    pub fn element(&self) -> &'static str {
        match self {
            Self::Huh { .. } => "huh",
            Self::Error { .. } => "system-error",
            Self::ThreadSpawned { .. } => "thread-spawned",
            Self::ThreadError { .. } => "system-thread-error",
            Self::ContextCleared { .. } => "context-cleared",
            Self::ThreadResult { .. } => "thread-result",
            Self::Halt { .. } => "halt",
            Self::Boot { .. } => "boot",
            Self::Shutdown { .. } => "shutdown",
        }
    }

    /// Renders the message as a payload of the system namespace.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::system::SystemMessage;
    /// let payload = SystemMessage::ContextCleared { kept: 2 }.to_payload();
    /// assert!(payload.qname().is("urn:agentpump:system:v1", "context-cleared"));
    /// assert!(payload.as_str().contains(r#"kept-messages="2""#));
    /// ```
    pub fn to_payload(&self) -> Payload {
        let name = self.element();
        let mut x = String::with_capacity(160);
        match self {
            Self::Huh {
                code,
                message,
                original,
            } => {
                let cut = floor_char_boundary(original, ORIGINAL_ATTEMPT_LIMIT);
                let truncated = if cut < original.len() {
                    " truncated=\"true\""
                } else {
                    ""
                };
                let _ = write!(
                    x,
                    "<{name} xmlns=\"{SYSTEM_NS}\"><error code=\"{code}\">{}</error>\
                     <original-attempt{truncated}>{}</original-attempt></{name}>",
                    escape(message.as_str()),
                    BASE64.encode(&original.as_bytes()[..cut]),
                );
            }
            Self::Error { code, message } => {
                let _ = write!(
                    x,
                    "<{name} xmlns=\"{SYSTEM_NS}\"><code>{code}</code><message>{}</message>\
                     <retry-allowed>{}</retry-allowed></{name}>",
                    escape(message.as_str()),
                    code.retry_allowed(),
                );
            }
            Self::ThreadSpawned {
                assigned,
                parent,
                suggested_sub_id,
                path,
            } => {
                let _ = write!(
                    x,
                    "<{name} xmlns=\"{SYSTEM_NS}\" assigned-id=\"{assigned}\" parent-id=\"{parent}\" \
                     suggested-sub-id=\"{}\" path=\"{}\"/>",
                    escape(suggested_sub_id.as_str()),
                    escape(path.as_str()),
                );
            }
            Self::ThreadError {
                unknown_id,
                code,
                message,
            } => {
                let _ = write!(
                    x,
                    "<{name} xmlns=\"{SYSTEM_NS}\" unknown-id=\"{}\" code=\"{code}\" message=\"{}\"/>",
                    escape(unknown_id.as_str()),
                    escape(message.as_str()),
                );
            }
            Self::ContextCleared { kept } => {
                let _ = write!(
                    x,
                    "<{name} xmlns=\"{SYSTEM_NS}\" kept-messages=\"{kept}\"/>"
                );
            }
            Self::ThreadResult {
                thread,
                status,
                halt,
                payload,
            } => {
                let status = status.as_str();
                let _ = write!(
                    x,
                    "<sys:{name} xmlns:sys=\"{SYSTEM_NS}\" thread=\"{thread}\" status=\"{status}\""
                );
                if let Some((class, reason)) = halt {
                    let (class, reason) = (escape(class.as_str()), escape(reason.as_str()));
                    let _ = write!(x, " class=\"{class}\" reason=\"{reason}\"");
                }
                match payload {
                    Some(p) => {
                        let _ = write!(x, ">{}</sys:{name}>", p.as_str());
                    }
                    None => x.push_str("/>"),
                }
            }
            Self::Halt {
                reason,
                class,
                certificate,
                report_digest,
            } => {
                let _ = write!(
                    x,
                    "<{name} xmlns=\"{SYSTEM_NS}\" reason=\"{}\" class=\"{}\" certificate=\"{}\" \
                     report-digest=\"{report_digest}\"/>",
                    escape(reason.as_str()),
                    escape(class.as_str()),
                    escape(certificate.as_str()),
                );
            }
            Self::Boot { listeners } => {
                let version = env!("CARGO_PKG_VERSION");
                let _ = write!(
                    x,
                    "<{name} xmlns=\"{SYSTEM_NS}\" version=\"{version}\" listeners=\"{listeners}\"/>"
                );
            }
            Self::Shutdown { undelivered } => {
                let _ = write!(
                    x,
                    "<{name} xmlns=\"{SYSTEM_NS}\" undelivered=\"{undelivered}\"/>"
                );
            }
        }
        let declares_default_ns = !matches!(self, Self::ThreadResult { .. });
        Payload::from_trusted(QName::new(SYSTEM_NS, name), x, declares_default_ns)
    }
}

/// The largest char boundary of `s` at or below `index`.
fn floor_char_boundary(s: &str, index: usize) -> usize {
    let mut i = index.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
