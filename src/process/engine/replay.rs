//! Replay: what a process's thread already holds, read back from its history — the answers
//! that arrived, the calls already sent (by their place in the run), events and residuals
//! recorded, children spawned, and whether the run ended. A restarted (or evicted and reloaded)
//! process folds its thread's records into [`Known`] and runs its machine again over it: the
//! machine asks for the same things with the same ids, and everything history holds is skipped.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::envelope::{GOVERNOR_NS, PROCESS_NS, SYSTEM_NS};
use crate::history::Record;
use crate::listener::notices;
use crate::tool::{Answer, Call, ErrorType, TOOL_NS, ToolError};
use crate::{Limits, Payload};

/// What the thread's history already holds for this process: answers by call id (until the
/// machine takes one: call ids only grow, so a taken answer is never asked for again, and a
/// long run keeps only the answers it has not read yet), the calls already sent, how many
/// events and residuals were recorded, and whether the run already ended.
#[derive(Debug, Default)]
pub(crate) struct Known {
    /// Shared with the delivery that carried it (the pump's reading of the payload).
    /// Ordered maps: a run holds few answers at a time, and comparing a short id costs less
    /// than hashing it.
    pub answers: BTreeMap<String, Arc<Answer>>,
    /// The calls already sent, by their place in the run (the id without its arguments'
    /// hash, [`slot`]): what a rerun compares its own calls with.
    pub sent: BTreeMap<String, Sent>,
    pub events: u64,
    pub residuals: u64,
    /// A `return` or `failed` event is recorded: the starter has had its answer.
    pub finished: bool,
    /// Child threads spawned for calls: the child, and the call id (its sub-id).
    pub children: HashMap<crate::ThreadId, String>,
}

/// A call history shows as sent: its whole id and the tool it called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sent {
    pub id: String,
    pub tool: String,
}

impl Known {
    /// Notes a call history shows as sent.
    pub fn sent(&mut self, id: String, tool: String) {
        self.sent
            .entry(slot(&id).to_owned())
            .or_insert(Sent { id, tool });
    }
}

/// Digits of the arguments' hash in a call id.
pub(super) const HASH_DIGITS: usize = 12;

/// A process call id's place in the run, `process-n`: the id without its `-h` arguments'
/// hash (an id without one, written before ids carried it, is its own place). What a reader of
/// history names a process's calls by: `main-2-4560f9d10d35` is `main-2`, the second call.
///
/// ```
/// use agentpump::process::engine::call_place;
/// assert_eq!(call_place("main-2-4560f9d10d35"), "main-2");
/// assert_eq!(call_place("main-2"), "main-2");
/// ```
pub fn slot(id: &str) -> &str {
    match id.rsplit_once('-') {
        Some((place, hash))
            if hash.len() == HASH_DIGITS && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            place
        }
        _ => id,
    }
}

/// The arguments' hash of a call id (empty when it has none).
pub(super) fn hash_of(id: &str) -> &str {
    id.get(slot(id).len()..)
        .and_then(|h| h.strip_prefix('-'))
        .unwrap_or_default()
}

/// What one history record (or delivery) tells a process: from, to, payload, ids.
pub(super) struct Seen<'a> {
    pub from: &'a str,
    pub to: Option<&'a str>,
    pub payload: &'a Payload,
}

impl Known {
    /// Takes in one record; idempotent (answers and sends are keyed by call id).
    pub(super) fn fold(&mut self, seen: &Seen<'_>, me: &str) {
        let q = seen.payload.qname();
        let ns = q.namespace();
        if seen.from == me {
            if ns == TOOL_NS && q.local() == "call" {
                if let Ok(Call {
                    id: Some(id), tool, ..
                }) = Call::parse(seen.payload)
                {
                    self.sent(id, tool);
                }
            } else if ns == SYSTEM_NS && q.local() == "spawn-thread" {
                if let Some(Call {
                    id: Some(id), tool, ..
                }) = spawned_call(seen.payload)
                {
                    self.sent(id, tool);
                }
            } else if ns == PROCESS_NS && q.local() != "continue" {
                self.events += 1;
                self.finished |= matches!(q.local(), "return" | "failed");
            } else if ns == GOVERNOR_NS && q.local() == "residual" {
                self.residuals += 1;
            }
            return;
        }
        if seen.to != Some(me) {
            return;
        }
        if let Some(Ok(answer)) = Answer::shared(seen.payload) {
            if let Some(id) = answer.call() {
                self.answers.entry(id.to_owned()).or_insert(answer);
            }
        } else if ns == SYSTEM_NS && q.local() == "thread-result" {
            let Some(result) = notices::thread_result(seen.payload.as_str()) else {
                return;
            };
            let answer = result
                .payload()
                .and_then(Answer::shared)
                .and_then(Result::ok);
            match answer {
                Some(a) => {
                    if let Some(id) = a.call() {
                        self.answers.entry(id.to_owned()).or_insert(a);
                    }
                }
                None => {
                    if let Some(id) = self.children.get(&result.thread()).cloned() {
                        let (why, kind) = match result.halt() {
                            Some((class, reason)) => (
                                format!("child thread halted: {class} {reason}"),
                                // Past the call's `timeout_ms` (its wall clock): a timeout.
                                if reason == "max-wall-clock" {
                                    ErrorType::Timeout
                                } else {
                                    ErrorType::Failed
                                },
                            ),
                            None => (
                                format!(
                                    "child thread ended {} without an answer",
                                    result.status().as_str()
                                ),
                                ErrorType::Failed,
                            ),
                        };
                        let e = ToolError {
                            tool: String::new(),
                            call: Some(id.clone()),
                            kind,
                            message: why,
                            retry: false,
                        };
                        self.answers.entry(id).or_insert(Arc::new(Answer::Error(e)));
                    }
                }
            }
        } else if ns == SYSTEM_NS
            && q.local() == "thread-spawned"
            && let Some(s) = notices::thread_spawned(seen.payload.as_str())
        {
            let sub = s.path().rsplit('.').next().unwrap_or_default().to_owned();
            self.children.insert(s.child(), sub);
        }
    }
}

/// Whether record `index` of a thread is the call that started this process in a child
/// thread the process itself spawned (a RUN of itself): the spawner's message, not a call this
/// run sent — read as one, the child would take its own first call (the same id at the same
/// place) for one already made.
pub(super) fn spawned_by_me(index: usize, r: &Record, me: &str) -> bool {
    index == 0 && &*r.from == me && r.to.as_deref() == Some(me)
}

/// The call inside a `spawn-thread` this listener emitted.
pub(super) fn spawned_call(payload: &Payload) -> Option<Call> {
    let text = payload.as_str();
    let start = text.find(&format!("<call xmlns=\"{TOOL_NS}\""))?;
    let end = text.rfind("</call>")? + "</call>".len();
    Call::parse_xml(text.get(start..end)?).ok()
}

/// Payloads in history were accepted under the pump's limits; read them back under any.
pub(super) fn lenient() -> Limits {
    Limits {
        max_bytes: usize::MAX,
        max_depth: usize::MAX,
        max_attributes: usize::MAX,
        max_outputs: usize::MAX,
    }
}
