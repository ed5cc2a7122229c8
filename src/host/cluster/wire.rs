//! What goes over NATS between the pump and a worker: a [`WorkItem`] (the delivery, its
//! record and the listener's bounded history view) and an [`Outcome`] (the outputs as text,
//! the usage, or the handler's error). JSON, so that a worker in another language can serve.

use serde::{Deserialize, Serialize};

use rust_decimal::Decimal;

use crate::governor::BudgetName;
use crate::history::Record;
use crate::listener::Usage;
use crate::{ListenerError, MessageId, ThreadId};

/// The header that carries the JetStream acknowledgement subject of a work item from the
/// worker to the pump, which acknowledges after its commit.
pub const ACK_HEADER: &str = "Agentpump-Ack";

/// One delivery to a remote listener.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkItem {
    /// The delivery id (the delivered message's id): the key of at-most-once application.
    pub delivery: MessageId,
    /// The thread.
    pub thread: ThreadId,
    /// The listener's name.
    pub listener: String,
    /// The delivered message, as history keeps it (the worker rebuilds the envelope from it).
    pub record: Record,
    /// The listener's history view, the last `history_window` records of it (oldest first).
    pub history: Vec<Record>,
    /// What was left of the thread's limited budgets when the pump handed the delivery out,
    /// by name: the worker's `Context::spend`, `can_spend` and `remaining` answer from it.
    /// Empty (or absent, from an older pump) when nothing is limited.
    #[serde(default)]
    pub budget: Vec<(BudgetName, Decimal)>,
    /// The W3C `traceparent` of the pump's delivery span, when telemetry is on: the worker's
    /// span joins the pump's trace as its child.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// Where the worker publishes the outcome: the subject of the pump's partition when the
    /// threads are partitioned (`<prefix>.out.p<N>.<delivery>`, so that whichever host holds
    /// the partition then gets it). Absent: `<prefix>.out.<delivery>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out: Option<String>,
}

/// What a worker made of a [`WorkItem`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    /// The delivery id.
    pub delivery: MessageId,
    /// Which worker handled it (for logs).
    pub worker: String,
    /// The outputs in order, as `(target, text)`: `reply`, `route`, `text` or `send:NAME`.
    pub outputs: Vec<(String, String)>,
    /// Usage the handler reported.
    pub usage: Usage,
    /// Usage the handler withdrew with `Context::spend` (checked by the worker against
    /// [`WorkItem::budget`]; the pump charges it, and a budget it overspent halts the thread).
    pub spent: Usage,
    /// The handler's error, if it failed.
    pub error: Option<WireError>,
}

/// A handler's failure, by kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WireError {
    /// `failed`, `invalid-payload`, `backpressure`, `upstream`, `over-budget`, `panicked` or
    /// `timeout`.
    pub kind: String,
    /// The handler's message; for `over-budget`, the budget's name (`max-tokens`, …).
    pub message: String,
}

impl WireError {
    /// The error a local handler returned, for the wire.
    pub fn from_listener(error: &ListenerError) -> Self {
        let (kind, message) = match error {
            ListenerError::Failed(m) => ("failed", m.clone()),
            ListenerError::InvalidPayload(m) => ("invalid-payload", m.clone()),
            ListenerError::Backpressure(m) => ("backpressure", m.clone()),
            ListenerError::Upstream(m) => ("upstream", m.clone()),
            ListenerError::OverBudget(b) => ("over-budget", b.as_str().to_owned()),
        };
        Self {
            kind: kind.to_owned(),
            message,
        }
    }

    /// The error as the pump's side of the proxy returns it; `None` for a panic (the proxy
    /// panics with the message, so that the pump reports `handler-panicked` as for a local one).
    pub fn to_listener(&self) -> Option<ListenerError> {
        let m = self.message.clone();
        Some(match self.kind.as_str() {
            "panicked" => return None,
            "invalid-payload" => ListenerError::InvalidPayload(m),
            "backpressure" => ListenerError::Backpressure(m),
            "upstream" => ListenerError::Upstream(m),
            "over-budget" => match serde_json::from_value(serde_json::Value::String(m)) {
                Ok(budget) => ListenerError::OverBudget(budget),
                Err(_) => ListenerError::Failed(format!(
                    "over a budget the pump does not know: {}",
                    self.message
                )),
            },
            "timeout" => ListenerError::Failed(format!("the worker's timeout: {m}")),
            _ => ListenerError::Failed(m),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handler_error_crosses_the_wire_as_the_same_error() {
        let errors = [
            ListenerError::Failed("f".into()),
            ListenerError::InvalidPayload("i".into()),
            ListenerError::Backpressure("b".into()),
            ListenerError::Upstream("u".into()),
            ListenerError::OverBudget(BudgetName::Tokens),
            ListenerError::OverBudget(BudgetName::Cost),
        ];
        for error in errors {
            let wire = WireError::from_listener(&error);
            let back = wire.to_listener().expect("not a panic");
            assert_eq!(back.to_string(), error.to_string(), "{wire:?}");
        }
        let unknown = WireError {
            kind: "over-budget".into(),
            message: "max-patience".into(),
        };
        assert!(
            matches!(unknown.to_listener(), Some(ListenerError::Failed(m)) if m.contains("max-patience"))
        );
    }
}
