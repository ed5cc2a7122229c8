//! The two records of a person in the loop, kept in the thread's history: a [`Request`]
//! (`<request>` in [`INBOX_NS`]) and the [`Decision`] that answered it (`<answer>`). Each
//! carries its fields as JSON text inside its element, written and read only by the pump.

use serde::{Deserialize, Serialize};

use crate::history::Record;
use crate::{Limits, MessageId, Payload, QName};

pub use crate::envelope::INBOX_NS;

/// What kind of answer a request wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RequestKind {
    /// A question (the `ask` tool): answered with a value.
    Ask,
    /// A held tool call: approved, edited or denied.
    Approval,
}

/// A question or an approval put to a person: the `<request>` record. Its id is the record's
/// message id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Question or approval.
    pub kind: RequestKind,
    /// The listener that asked (the caller of the held call).
    pub listener: String,
    /// The tool called: `ask`, or the tool whose call waits for approval.
    pub tool: String,
    /// The call's `id`, echoed on the answer the caller gets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
    /// The question, for a person.
    pub question: String,
    /// The answers allowed, when the question offers a choice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<String>,
    /// A JSON Schema the answer (read as JSON) must fit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<serde_json::Value>,
    /// The held call's arguments (an approval), as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    /// What a timeout answers: a value for a question, `approve` or `deny` for an approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// When the request expires, in milliseconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
}

/// How a person (or the timeout) answered a request: the `<answer>` record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "kebab-case")]
pub enum Decision {
    /// Forward the held call as it is.
    Approve,
    /// Answer the caller `<error type="denied">` with this reason.
    Deny {
        /// Why, for the caller.
        #[serde(default)]
        reason: String,
    },
    /// Forward the held call with these arguments instead (a JSON object).
    Edit {
        /// The arguments the tool gets.
        arguments: serde_json::Value,
    },
    /// Answer a question with this value.
    Answer {
        /// The answer, as text.
        value: String,
    },
    /// Nobody answered in time: the request's default applied (recorded as such).
    Timeout,
}

impl Decision {
    /// The decision's name as written (`approve`, `deny`, `edit`, `answer`, `timeout`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Deny { .. } => "deny",
            Self::Edit { .. } => "edit",
            Self::Answer { .. } => "answer",
            Self::Timeout => "timeout",
        }
    }
}

/// The `<answer>` record: which request, what was decided, by whom and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerRecord {
    /// The request answered.
    pub request: MessageId,
    /// What was decided.
    #[serde(flatten)]
    pub decision: Decision,
    /// Who answered (`timeout` when the default applied).
    pub by: String,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: i64,
}

/// Writes `fields` as JSON inside `<local xmlns="urn:agentpump:inbox:v1">`.
pub(crate) fn to_payload<T: Serialize>(local: &str, fields: &T, limits: &Limits) -> Payload {
    let json = serde_json::to_string(fields).unwrap_or_default();
    let text = format!(
        "<{local} xmlns=\"{INBOX_NS}\">{}</{local}>",
        quick_xml::escape::escape(json.as_str())
    );
    Payload::parse(&text, limits).unwrap_or_else(|_| Payload::from_trusted(root(local), text, true))
}

/// The fields of `record` when it is the pump's `<local>` in [`INBOX_NS`].
pub(crate) fn read<T: for<'de> Deserialize<'de>>(local: &str, record: &Record) -> Option<T> {
    if !record.root.is(INBOX_NS, local) {
        return None;
    }
    let text = record.payload.as_ref();
    let body = text.get(text.find('>')? + 1..text.rfind("</")?)?;
    let json = quick_xml::escape::unescape(body).ok()?;
    serde_json::from_str(&json).ok()
}

/// The root of the inbox's `<local>` records.
pub(crate) fn root(local: &str) -> QName {
    QName::new(INBOX_NS, local)
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
