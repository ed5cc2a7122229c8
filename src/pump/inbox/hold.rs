//! A call held at delivery: a call to `ask`, or a call the policy says waits for approval,
//! is not handed to the tool; a `<request>` record takes its place in the same commit as its
//! delivery mark, and the thread waits.

use std::time::Duration;

use super::ask;
use super::record::{self, Request, RequestKind, now_ms};
use crate::Envelope;
use crate::listener::{Delivery, Registration, Role};
use crate::pump::Shared;
use crate::tool::{Call, ErrorType, TOOL_NS, ToolError};
use crate::value::Value;

/// The sender of the inbox's records.
pub(crate) const INBOX_SENDER: &str = "inbox";
/// Whom a request is addressed to (recorded, never delivered).
pub(crate) const PERSON: &str = "person";

/// A held call: the request to record, or the error its caller gets instead (an `ask` call
/// whose arguments do not fit).
pub(crate) type Held = Result<Request, ToolError>;

impl Shared {
    /// Whether `delivery` to `registration` is held for a person, and as what. A call its
    /// approval `forwarded` ([`Shared::forwarded`]) is never held again.
    pub(crate) async fn held(
        &self,
        registration: &Registration,
        delivery: &Delivery,
        forwarded: bool,
    ) -> Option<Held> {
        if !delivery.qname().is(TOOL_NS, "call") {
            return None;
        }
        let name = &*registration.name;
        let approval = self.config.inbox.approvals.get(name);
        if name != ask::ASK_TOOL && approval.is_none() {
            return None;
        }
        let call = Call::shared(delivery.payload()).ok()?;
        let caller = delivery.from();
        if name == ask::ASK_TOOL {
            return Some(question(&call, caller));
        }
        if !approval?.applies(&call) || forwarded {
            return None;
        }
        let timeout = self.config.inbox.approval_timeout;
        Some(Ok(approval_of(&call, caller, timeout)))
    }

    /// Whether `envelope`, a call to the tool `to`, is a held call its approval forwarded: it
    /// answers a `<request>` of its own thread, which only the pump writes (and no listener is
    /// ever delivered). Such a call is the call its caller made, held and then let through:
    /// it was charged its tool call when it was made (`pump/gate.rs`).
    pub(crate) async fn forwarded(&self, to: &Registration, envelope: &Envelope) -> bool {
        // Every delivery asks: the cheap questions first, and only a call answering something,
        // to a tool with an approval policy, costs a read of the history.
        if to.role != Role::Tool || !envelope.payload().qname().is(TOOL_NS, "call") {
            return false;
        }
        let Some(id) = envelope.in_reply_to() else {
            return false;
        };
        if !self.config.inbox.approvals.contains_key(&*to.name) {
            return false;
        }
        matches!(self.store.record(id).await,
            Ok(Some(r)) if r.root == record::root("request") && r.thread == envelope.thread())
    }
}

/// An error answering the held call of `delivery`.
pub(crate) fn held_error(delivery: &Delivery, kind: ErrorType, message: String) -> ToolError {
    match Call::shared(delivery.payload()) {
        Ok(call) => call.error(kind, message),
        Err(_) => ToolError {
            tool: String::new(),
            call: None,
            kind,
            message,
            retry: false,
        },
    }
}

/// The request of an `ask` call, or the error its arguments earn.
fn question(call: &Call, caller: &str) -> Held {
    ask::signature().check(call)?;
    let text = |name: &str| call.args.get(name).map(Value::to_string);
    let choices = match call.args.get("choices") {
        Some(Value::List(items)) => items.iter().map(Value::to_string).collect(),
        _ => Vec::new(),
    };
    let schema = call
        .args
        .get("schema")
        .and_then(|s| serde_json::from_str(&s.to_json()).ok());
    let expires_at_ms = match call.args.get("timeout_seconds") {
        Some(Value::Num(n)) => {
            let ms = (n * rust_decimal::Decimal::ONE_THOUSAND).trunc();
            let ms = i64::try_from(ms).unwrap_or(i64::MAX).max(0);
            Some(now_ms().saturating_add(ms))
        }
        _ => None,
    };
    Ok(Request {
        kind: RequestKind::Ask,
        listener: caller.to_owned(),
        tool: call.tool.clone(),
        call: call.id.clone(),
        question: text("question").unwrap_or_default(),
        choices,
        schema,
        arguments: None,
        default: text("default"),
        expires_at_ms,
    })
}

/// The request of a call that waits for approval.
fn approval_of(call: &Call, caller: &str, timeout: Option<Duration>) -> Request {
    let arguments = Value::Object(call.args.clone()).to_json();
    let expires_at_ms = timeout.map(|t| {
        let ms = i64::try_from(t.as_millis()).unwrap_or(i64::MAX);
        now_ms().saturating_add(ms)
    });
    Request {
        kind: RequestKind::Approval,
        listener: caller.to_owned(),
        tool: call.tool.clone(),
        call: call.id.clone(),
        question: format!("may `{caller}` call `{}` with {arguments}?", call.tool),
        choices: Vec::new(),
        schema: None,
        arguments: serde_json::from_str(&arguments).ok(),
        default: Some("deny".to_owned()),
        expires_at_ms,
    }
}
