//! An answer applied once: checked against the request and against the history (a second
//! answer is refused naming the first), then recorded with its effect — the held call
//! forwarded (as it was, or edited), the caller's `denied` error, or the question's answer —
//! in one commit. One answer is applied at a time, so two answers to one request cannot both
//! pass the check.

use std::sync::Arc;

use super::caller::tool_payload;
use super::changes::InboxChange;
use super::hold::INBOX_SENDER;
use super::record::{self, AnswerRecord, Decision, Request, RequestKind, now_ms};
use super::timeout::timed_out;
use super::{InboxError, Reply};
use crate::history::{Record, RecordKind};
use crate::pump::Shared;
use crate::pump::tx::{Place, Tx};
use crate::tool::{Call, ErrorType, ToolError, ToolResult};
use crate::value::Value;
use crate::{Envelope, MessageId, Payload};

/// What an answer does besides being recorded.
enum Effect {
    /// The held call goes to its tool, from its caller.
    Forward(Payload),
    /// The caller gets this tool answer from the tool.
    ToCaller(Payload),
}

impl Shared {
    /// Applies `reply` to request `id` unless it was answered or expired (then its default
    /// applies first and the reply is refused).
    pub(crate) async fn answer(
        self: Arc<Self>,
        id: MessageId,
        reply: Reply,
    ) -> Result<AnswerRecord, InboxError> {
        let _one = self.inbox.answering.lock().await;
        // A request is listed only once its record is durable (`inbox/listing.rs`): a listed
        // request is always found here.
        let asked = self.store.record(id).await?;
        let (asked, request) = asked
            .and_then(|r| record::read::<Request>("request", &r).map(|q| (r, q)))
            .ok_or(InboxError::NotFound(id))?;
        if let Some(first) = self.first_answer(&asked).await? {
            return Err(InboxError::AlreadyAnswered {
                id,
                by: first.by,
                at_ms: first.at_ms,
                decision: first.decision.as_str(),
            });
        }
        let expired = request.expires_at_ms.filter(|&at| now_ms() >= at);
        if let Some(expired_at_ms) = expired
            && reply.decision != Decision::Timeout
        {
            self.apply(&asked, &request, timed_out()).await?;
            return Err(InboxError::Expired { id, expired_at_ms });
        }
        self.apply(&asked, &request, reply).await
    }

    /// The answer already recorded for the request `asked`, if any.
    async fn first_answer(&self, asked: &Record) -> Result<Option<AnswerRecord>, InboxError> {
        let later = self.store.thread(asked.thread, asked.seq).await?;
        Ok(later
            .iter()
            .filter_map(|r| record::read::<AnswerRecord>("answer", r))
            .find(|a| a.request == asked.id))
    }

    /// Records the answer and its effect in one commit, and closes the request.
    async fn apply(
        self: &Arc<Self>,
        asked: &Record,
        request: &Request,
        reply: Reply,
    ) -> Result<AnswerRecord, InboxError> {
        let effect = self.effect(asked, request, &reply).await?;
        let answer = AnswerRecord {
            request: asked.id,
            decision: reply.decision,
            by: reply.by,
            at_ms: now_ms(),
        };
        let thread = asked.thread;
        let entry = self
            .load(thread)
            .await?
            .ok_or(InboxError::NotFound(asked.id))?;
        let committed = {
            let mut inner = entry.lock();
            let mut tx = Tx::new();
            let payload = record::to_payload("answer", &answer, &self.config.limits);
            let env = Envelope::new(Arc::from(INBOX_SENDER), thread, payload)
                .with_to(Some(Arc::from(request.listener.as_str())))
                .with_in_reply_to(Some(asked.id));
            tx.record(&mut inner, env, RecordKind::System);
            let ends = (request.tool.as_str(), request.listener.as_str());
            match effect {
                Effect::Forward(call) => {
                    let env = Envelope::new(Arc::from(ends.1), thread, call)
                        .with_to(Some(Arc::from(ends.0)))
                        .with_in_reply_to(Some(asked.id));
                    match self.routes.index_of(ends.0) {
                        Some(tool) => {
                            tx.queue(&mut inner, Place::Here, env, tool, RecordKind::Message);
                        }
                        None => tx.record(&mut inner, env, RecordKind::Message),
                    }
                }
                Effect::ToCaller(payload) => {
                    self.to_caller(&mut tx, &mut inner, ends, payload, asked.id, &entry);
                }
            }
            let waiting = inner.waiting.saturating_sub(1);
            inner.set_waiting(waiting);
            if waiting == 0 {
                inner.ledger.ended_waiting(self.config.inbox.waiting_counts);
            }
            tx.commit(self, (&entry, &mut inner), None)
        };
        self.await_commit(thread, committed).await?;
        let kind = match request.kind {
            RequestKind::Ask => "question",
            RequestKind::Approval => "approval",
        };
        let waited = crate::pump::telemetry::Waited {
            request: asked.id,
            kind,
            tool: Some(request.tool.as_str()),
            outcome: answer.decision.as_str(),
            by: Some(answer.by.as_str()),
            asked_at_ms: asked.time_us / 1000,
        };
        self.telemetry.waited(&self.registry, &entry, &waited);
        self.inbox.open().remove(&asked.id);
        self.inbox
            .changed(InboxChange::closed(thread, answer.clone()));
        Ok(answer)
    }

    /// What `reply` does to the request `asked`, or why it does not fit.
    async fn effect(
        &self,
        asked: &Record,
        request: &Request,
        reply: &Reply,
    ) -> Result<Effect, InboxError> {
        let invalid = |why: String| InboxError::Invalid { id: asked.id, why };
        let error = |kind, message: String| {
            let e = ToolError {
                tool: request.tool.clone(),
                call: request.call.clone(),
                kind,
                message,
                retry: false,
            };
            Effect::ToCaller(tool_payload(&e.to_xml(), self))
        };
        let result = |answer: &str| {
            let r = ToolResult {
                tool: request.tool.clone(),
                call: request.call.clone(),
                ..ToolResult::default()
            }
            .field("answer", answer)
            .field("by", reply.by.as_str());
            Effect::ToCaller(tool_payload(&r.to_xml(), self))
        };
        let approve = request.default.as_deref() == Some("approve");
        Ok(match (request.kind, &reply.decision) {
            (RequestKind::Approval, Decision::Approve) => {
                Effect::Forward(self.held_call(asked).await?.0)
            }
            (RequestKind::Approval, Decision::Timeout) if approve => {
                Effect::Forward(self.held_call(asked).await?.0)
            }
            (RequestKind::Approval, Decision::Edit { arguments }) => {
                let args = match Value::from_json(&arguments.to_string()) {
                    Ok(Value::Object(args)) => args,
                    _ => return Err(invalid("edited arguments must be a JSON object".into())),
                };
                let (_, mut call) = self.held_call(asked).await?;
                call.args = args;
                Effect::Forward(tool_payload(&call.to_xml(), self))
            }
            (RequestKind::Approval, Decision::Deny { reason }) => {
                let reason = if reason.is_empty() {
                    "no reason given"
                } else {
                    reason
                };
                error(
                    ErrorType::Denied,
                    format!("denied by `{}`: {reason}", reply.by),
                )
            }
            (RequestKind::Approval, Decision::Timeout) => error(
                ErrorType::Denied,
                "nobody approved the call before its request expired".to_owned(),
            ),
            (RequestKind::Ask, Decision::Answer { value }) => {
                fits(request, value).map_err(invalid)?;
                result(value)
            }
            (RequestKind::Ask, Decision::Timeout) => match &request.default {
                Some(default) => result(default),
                None => error(
                    ErrorType::Timeout,
                    "nobody answered before the question expired".to_owned(),
                ),
            },
            (RequestKind::Ask, d) => {
                return Err(invalid(format!(
                    "a question takes `answer`, not `{}`",
                    d.as_str()
                )));
            }
            (RequestKind::Approval, d) => {
                return Err(invalid(format!(
                    "an approval takes `approve`, `deny` or `edit`, not `{}`",
                    d.as_str()
                )));
            }
        })
    }

    /// The call held by the request `asked`, as recorded.
    async fn held_call(&self, asked: &Record) -> Result<(Payload, Call), InboxError> {
        let lost = || InboxError::Invalid {
            id: asked.id,
            why: "the held call is not in history".to_owned(),
        };
        let held = match asked.in_reply_to {
            Some(id) => self.store.record(id).await?,
            None => None,
        };
        let envelope = held
            .and_then(|r| r.to_envelope(&self.config.limits).ok())
            .ok_or_else(lost)?;
        let payload = envelope.payload().clone();
        let call = Call::parse(&payload).map_err(|_| lost())?;
        Ok((payload, call))
    }
}

/// Whether `value` answers `request`: one of its choices, and fitting its schema.
fn fits(request: &Request, value: &str) -> Result<(), String> {
    if !request.choices.is_empty() && !request.choices.iter().any(|c| c == value) {
        return Err(format!(
            "`{value}` is not one of the choices: {}",
            request.choices.join(", ")
        ));
    }
    if let Some(schema) = &request.schema {
        let read = Value::from_json(value).unwrap_or_else(|_| Value::Str(value.to_owned()));
        if let Some(why) = crate::tool::mismatch(schema, &read) {
            return Err(format!("the answer {why}"));
        }
    }
    Ok(())
}
