//! One delivery: call the handler (with its timeout, catching panics), plan its outputs, and
//! apply them to the thread in one transaction.

use std::any::Any;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures_util::FutureExt as _;

use super::Shared;
use super::plan::Step;
use super::route::Refusal;
use super::tx::{Place, Tx};
use crate::history::{HistoryError, RecordKind, Ticket};
use crate::listener::{Context, Delivery, ListenerError, Registration, Usage};
use crate::system::{
    CLIENT_SENDER, ErrorCode, HuhCode, SYSTEM_SENDER, SystemMessage, ThreadStatus,
};
use crate::thread::registry::{Queued, ThreadEntry, ThreadInner, View};
use crate::{Envelope, MessageId, Payload, ThreadId, ThreadState};

/// Who a pump notice goes to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Recipient<'a> {
    /// A listener in the thread: queued for it while the thread is open.
    Listener(usize),
    /// The outside sender: recorded as egress.
    Client,
    /// Nobody can take it (the pump itself sent the failed message): recorded, addressed to this name.
    RecordOnly(&'a str),
}

impl Shared {
    /// Delivers one queued message and commits what came of it.
    pub(crate) async fn deliver(self: &Arc<Self>, entry: &Arc<ThreadEntry>, item: Queued) {
        let registration = &self.listeners[item.target];
        let view = entry.lock().view_of(&registration.name);
        let delivery = Delivery::new(item.envelope);
        let mut cx = Context::new(
            entry.id,
            Arc::clone(&registration.name),
            delivery.id(),
            Arc::clone(&self.store),
            view,
        );
        let outcome = invoke(registration, &delivery, &mut cx).await;
        let (outputs, usage) = cx.into_parts();
        let steps = match outcome {
            Ok(()) => self.plan(item.target, &delivery, outputs),
            Err(_) => Vec::new(),
        };
        let committed =
            self.apply_delivery(entry, item.target, &delivery, outcome.err(), steps, &usage);
        self.await_commit(entry.id, committed).await;
    }

    /// Waits for a commit's durability and logs a failure (the pump keeps serving).
    pub(crate) async fn await_commit(
        &self,
        thread: ThreadId,
        committed: Result<Ticket, HistoryError>,
    ) {
        let result = match committed {
            Ok(ticket) => ticket.wait().await,
            Err(e) => Err(e),
        };
        if let Err(error) = result {
            tracing::error!(thread = %thread, %error, "history commit failed");
        }
    }

    fn apply_delivery(
        self: &Arc<Self>,
        entry: &Arc<ThreadEntry>,
        me: usize,
        delivery: &Delivery,
        failure: Option<Failure>,
        steps: Vec<Step>,
        usage: &Usage,
    ) -> Result<Ticket, HistoryError> {
        let needs_parent = steps.iter().any(|s| matches!(s, Step::Done { .. }));
        let parent = needs_parent
            .then(|| entry.parent.and_then(|p| self.registry.get(p)))
            .flatten();
        let mut parent_inner = parent.as_ref().map(|p| p.lock());
        let mut inner = entry.lock();
        let mut tx = Tx::new(Some(delivery.id()));
        let c = &mut inner.counters;
        c.deliveries += 1;
        c.tokens_in += usage.tokens_in;
        c.tokens_out += usage.tokens_out;
        c.cost += usage.cost;
        c.tool_calls += usage.tool_calls;
        if let Some(failure) = failure {
            inner.counters.failures += 1;
            tracing::warn!(thread = %entry.id, listener = %self.listeners[me].name, error = %failure.message, "handler failed");
            let to = self.recipient_of(delivery.from(), me);
            let notice = failure.into_notice(delivery.payload().as_str());
            self.notice(&mut tx, entry, &mut inner, to, notice, Some(delivery.id()));
        }
        let mut parent_pair = parent.as_ref().zip(parent_inner.as_deref_mut());
        for step in steps {
            self.apply_step(
                &mut tx,
                entry,
                &mut inner,
                parent_pair.as_mut().map(|(e, i)| (*e, &mut **i)),
                me,
                delivery,
                step,
            );
        }
        tx.commit(self, (entry, &mut inner), parent_pair)
    }

    #[allow(clippy::too_many_arguments)]
    fn apply_step(
        self: &Arc<Self>,
        tx: &mut Tx,
        entry: &Arc<ThreadEntry>,
        inner: &mut ThreadInner,
        parent: Option<(&Arc<ThreadEntry>, &mut ThreadInner)>,
        me: usize,
        delivery: &Delivery,
        step: Step,
    ) {
        let me_name = &self.listeners[me].name;
        if inner.state.is_closed() {
            let message = format!(
                "thread {} is {}; output not delivered",
                entry.id, inner.state
            );
            let notice = SystemMessage::Error {
                code: ErrorCode::ThreadClosed,
                message,
            };
            self.notice(
                tx,
                entry,
                inner,
                Recipient::RecordOnly(me_name),
                notice,
                Some(delivery.id()),
            );
            return;
        }
        let envelope = |payload: Payload| Envelope::new(Arc::clone(me_name), entry.id, payload);
        match step {
            Step::Deliver {
                payload,
                targets,
                reply,
            } => {
                let room = self
                    .config
                    .queue_capacity
                    .saturating_sub(inner.queue.len() + tx.queued_here());
                if targets.len() > room {
                    let message = format!(
                        "queue of thread {} is full ({} messages); payload not accepted",
                        entry.id, self.config.queue_capacity
                    );
                    let notice = SystemMessage::Error {
                        code: ErrorCode::QueueFull,
                        message,
                    };
                    self.notice(
                        tx,
                        entry,
                        inner,
                        Recipient::Listener(me),
                        notice,
                        Some(delivery.id()),
                    );
                    return;
                }
                inner.last_payload = Some(payload.clone());
                let in_reply_to = reply.then(|| delivery.id());
                for target in targets {
                    let to = Arc::clone(&self.listeners[target].name);
                    let env = envelope(payload.clone())
                        .with_to(Some(to))
                        .with_in_reply_to(in_reply_to);
                    tx.queue(inner, Place::Here, env, target, RecordKind::Message);
                }
            }
            Step::Egress { payload } => {
                inner.last_payload = Some(payload.clone());
                let env = envelope(payload)
                    .with_to(Some(Arc::from(CLIENT_SENDER)))
                    .with_in_reply_to(Some(delivery.id()));
                tx.record(inner, env, RecordKind::Egress);
            }
            Step::Refused { refusal, original } => {
                let notice = refusal_notice(refusal, original);
                self.notice(
                    tx,
                    entry,
                    inner,
                    Recipient::Listener(me),
                    notice,
                    Some(delivery.id()),
                );
            }
            Step::Spawn {
                request,
                sub_id,
                initial,
                targets,
            } => {
                tx.record(inner, envelope(request), RecordKind::Message);
                let child = self.new_child(entry, inner, me_name, sub_id.as_deref());
                for target in targets {
                    let to = Arc::clone(&self.listeners[target].name);
                    let env = Envelope::new(Arc::clone(me_name), child.id, initial.clone())
                        .with_to(Some(to));
                    tx.queue_in_child(&child, env, target);
                }
                let notice = SystemMessage::ThreadSpawned {
                    assigned: child.id,
                    parent: entry.id,
                    suggested_sub_id: child.path.rsplit('.').next().unwrap_or_default().to_owned(),
                    path: child.path.to_string(),
                };
                inner.children.push(child.id);
                inner.live_children += 1;
                tx.add_child(child);
                tx.snapshot(entry, inner);
                self.notice(
                    tx,
                    entry,
                    inner,
                    Recipient::Listener(me),
                    notice,
                    Some(delivery.id()),
                );
            }
            Step::ClearContext { request, keep } => {
                let cleared_at = inner.records;
                tx.record(inner, envelope(request), RecordKind::Message);
                let kept = keep.min(usize::try_from(cleared_at).unwrap_or(usize::MAX));
                inner.views.retain(|v| v.listener != *me_name);
                inner.views.push(View {
                    listener: Arc::clone(me_name),
                    cleared_at,
                    keep: kept,
                });
                let notice = SystemMessage::ContextCleared { kept };
                self.notice(
                    tx,
                    entry,
                    inner,
                    Recipient::Listener(me),
                    notice,
                    Some(delivery.id()),
                );
            }
            Step::Done { request, payload } => {
                tx.record(inner, envelope(request), RecordKind::Message);
                inner.state = ThreadState::Done;
                tx.snapshot(entry, inner);
                if let Some((parent, parent_inner)) = parent {
                    self.report_to_parent(
                        tx,
                        entry,
                        parent,
                        parent_inner,
                        ThreadStatus::Done,
                        payload,
                    );
                }
            }
        }
    }

    /// Queues (or records) a pump notice for `to` in this thread.
    pub(crate) fn notice(
        &self,
        tx: &mut Tx,
        entry: &ThreadEntry,
        inner: &mut ThreadInner,
        to: Recipient<'_>,
        message: SystemMessage,
        in_reply_to: Option<MessageId>,
    ) {
        let system = Arc::clone(&self.system_name);
        let env =
            Envelope::new(system, entry.id, message.to_payload()).with_in_reply_to(in_reply_to);
        match to {
            Recipient::Listener(index) if !inner.state.is_closed() => {
                let env = env.with_to(Some(Arc::clone(&self.listeners[index].name)));
                tx.queue(inner, Place::Here, env, index, RecordKind::System);
            }
            Recipient::Listener(index) => {
                let env = env.with_to(Some(Arc::clone(&self.listeners[index].name)));
                tx.record(inner, env, RecordKind::System);
            }
            Recipient::Client => tx.record(
                inner,
                env.with_to(Some(Arc::from(CLIENT_SENDER))),
                RecordKind::System,
            ),
            Recipient::RecordOnly(name) => tx.record(
                inner,
                env.with_to(Some(Arc::from(name))),
                RecordKind::System,
            ),
        }
    }

    /// Where a notice about a message from `from` goes.
    pub(crate) fn recipient_of<'a>(&'a self, from: &'a str, me: usize) -> Recipient<'a> {
        match from {
            CLIENT_SENDER => Recipient::Client,
            SYSTEM_SENDER => Recipient::RecordOnly(&self.listeners[me].name),
            name => self
                .by_name
                .get(name)
                .map_or(Recipient::RecordOnly(name), |&i| Recipient::Listener(i)),
        }
    }

    /// Delivers `thread-result` to the child's spawner in the parent thread (locked by the caller).
    pub(crate) fn report_to_parent(
        &self,
        tx: &mut Tx,
        child: &ThreadEntry,
        parent: &ThreadEntry,
        parent_inner: &mut ThreadInner,
        status: ThreadStatus,
        payload: Option<Payload>,
    ) {
        parent_inner.live_children = parent_inner.live_children.saturating_sub(1);
        let result = SystemMessage::ThreadResult {
            thread: child.id,
            status,
            payload,
        };
        let spawner = child
            .spawner
            .as_deref()
            .and_then(|s| self.by_name.get(s).copied());
        let env = Envelope::new(
            Arc::clone(&self.system_name),
            parent.id,
            result.to_payload(),
        );
        match spawner {
            Some(index) if !parent_inner.state.is_closed() => {
                let env = env.with_to(Some(Arc::clone(&self.listeners[index].name)));
                tx.queue(parent_inner, Place::Parent, env, index, RecordKind::System);
            }
            _ => {
                let env = env.with_to(child.spawner.clone());
                tx.record(parent_inner, env, RecordKind::System);
            }
        }
    }

    fn new_child(
        &self,
        parent: &ThreadEntry,
        inner: &ThreadInner,
        spawner: &Arc<str>,
        sub_id: Option<&str>,
    ) -> Arc<ThreadEntry> {
        let sub_id = sub_id
            .map(sanitize_sub_id)
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("child-{}", inner.children.len() + 1));
        let path: Arc<str> = Arc::from(format!("{}.{sub_id}", parent.path));
        let child = ThreadEntry::new(
            ThreadId::new(),
            Some(parent),
            Some(Arc::clone(spawner)),
            path,
            parent.dialect,
        );
        child.lock().state = ThreadState::Active;
        Arc::new(child)
    }
}

/// Keeps `A-Z a-z 0-9 _ -` of a suggested sub-id, at most 64 characters.
fn sanitize_sub_id(id: &str) -> String {
    id.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        .take(64)
        .collect()
}

fn refusal_notice(refusal: Refusal, original: String) -> SystemMessage {
    match refusal {
        Refusal::Huh(code, message) => SystemMessage::Huh {
            code,
            message,
            original,
        },
        Refusal::Error(code, message) => SystemMessage::Error { code, message },
    }
}

/// How a handler failed.
#[derive(Debug)]
struct Failure {
    code: FailureCode,
    message: String,
}

#[derive(Debug)]
enum FailureCode {
    Error(ErrorCode),
    InvalidPayload,
}

impl Failure {
    fn into_notice(self, original: &str) -> SystemMessage {
        match self.code {
            FailureCode::Error(code) => SystemMessage::Error {
                code,
                message: self.message,
            },
            FailureCode::InvalidPayload => SystemMessage::Huh {
                code: HuhCode::InvalidPayload,
                message: self.message,
                original: original.to_owned(),
            },
        }
    }
}

/// Runs the handler with its timeout, turning an error, a panic or a timeout into a [`Failure`].
async fn invoke(
    registration: &Registration,
    delivery: &Delivery,
    cx: &mut Context,
) -> Result<(), Failure> {
    let name = &registration.name;
    let handling = AssertUnwindSafe(registration.listener.handle(delivery, cx)).catch_unwind();
    let (code, message) = match tokio::time::timeout(registration.timeout, handling).await {
        Ok(Ok(Ok(()))) => return Ok(()),
        Ok(Ok(Err(ListenerError::Failed(m)))) => (
            ErrorCode::HandlerFailed.into(),
            format!("`{name}` failed: {m}"),
        ),
        Ok(Ok(Err(ListenerError::InvalidPayload(m)))) => (
            FailureCode::InvalidPayload,
            format!("`{name}` cannot read the payload: {m}"),
        ),
        Ok(Err(panic)) => (
            ErrorCode::HandlerPanicked.into(),
            format!("`{name}` panicked: {}", panic_text(&*panic)),
        ),
        Err(_) => (
            ErrorCode::HandlerTimeout.into(),
            format!(
                "`{name}` did not finish within {} ms",
                registration.timeout.as_millis()
            ),
        ),
    };
    Err(Failure { code, message })
}

impl From<ErrorCode> for FailureCode {
    fn from(code: ErrorCode) -> Self {
        Self::Error(code)
    }
}

fn panic_text(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-text panic payload".to_owned())
}
