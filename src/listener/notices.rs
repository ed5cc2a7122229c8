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
    pub fn thread(&self) -> ThreadId {
        self.thread
    }

    /// How it ended: done, idle (ran out of work) or halted.
    pub fn status(&self) -> ThreadStatus {
        self.status
    }

    /// For a halted child: the halt class (`TIMEOUT`, …) and reason (`max-turns`, …).
    pub fn halt(&self) -> Option<(&str, &str)> {
        self.halt.as_ref().map(|(c, r)| (c.as_str(), r.as_str()))
    }

    /// The child's final payload (its `thread-done` payload, or its last one), if any.
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
    pub fn code(&self) -> &str {
        &self.code
    }

    /// What exactly happened.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether sending the same message again may succeed.
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
    pub fn code(&self) -> &str {
        &self.code
    }

    /// What exactly was wrong, and where.
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
    pub fn child(&self) -> ThreadId {
        self.assigned
    }

    /// The spawning thread.
    pub fn parent(&self) -> ThreadId {
        self.parent
    }

    /// The child's display path (`46a2acab.part1`).
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
