//! Replay from any record: [`PumpHandle::fork`] starts a new thread from a record of an old
//! one. Its first record is a `fork` decision naming the source thread, the record's seq and
//! chain digest; in context mode the source's conversation before that record follows,
//! copied and re-chained (already delivered: recorded, never queued), and the chosen message is
//! delivered again, from the client, to the listener it went to or the one given — as it was,
//! or edited: then the decision names the edited payload's SHA-256, and the delivered record
//! is a new message, not a copy.

use std::collections::HashMap;
use std::sync::Arc;

use sha2::{Digest as _, Sha256};

use super::PumpHandle;
use super::route::{Refusal, Route, Sender, smuggled, tool_checked};
use super::tx::{Place, Tx};
use crate::governor::{Budget, Decision, Fork, ForkMode};
use crate::history::{HistoryError, Record, RecordKind, is_carried};
use crate::listener::Target;
use crate::{Envelope, EnvelopeError, MessageId, Payload, ThreadId};

/// How to fork: the mode, and optionally another listener or budget.
#[derive(Debug, Clone, Default)]
pub struct ForkOptions {
    /// Context (the history up to the record) or the source's first message.
    pub mode: ForkMode,
    /// The listener the message is delivered to (default: the one it went to).
    pub listener: Option<String>,
    /// The new thread's limits; unset ones are the governor policy's (default: the policy's).
    pub budget: Option<Budget>,
    /// The message to deliver instead of the record's: the edited payload, checked like a
    /// post (default, or the same text: the record's message as it was).
    pub payload: Option<String>,
}

/// Why a thread cannot be forked.
#[derive(Debug, thiserror::Error)]
pub enum ForkError {
    /// No such thread (or the system thread).
    #[error("no thread {0}")]
    UnknownThread(ThreadId),
    /// The thread has no record with that seq.
    #[error("thread {thread} has no record {seq}")]
    UnknownSeq {
        /// The source thread.
        thread: ThreadId,
        /// The seq asked for.
        seq: u64,
    },
    /// Only a message (kind `message`) can be delivered again.
    #[error("record {seq} is a {kind} record; only a message record can be delivered again")]
    NotRedeliverable {
        /// The record.
        seq: u64,
        /// Its kind.
        kind: RecordKind,
    },
    /// The edited message is not a payload the pump accepts (not XML, over a limit, …).
    #[error("the edited message is not a payload: {0}")]
    InvalidPayload(EnvelopeError),
    /// The listener asked for is not registered.
    #[error("no listener {0}")]
    UnknownListener(String),
    /// The listener does not take the message (its root, or a reserved one).
    #[error("record {seq} cannot be delivered to {listener}: {why}")]
    Refused {
        /// The record.
        seq: u64,
        /// The listener.
        listener: String,
        /// The router's reason.
        why: String,
    },
    /// The pump is shutting down.
    #[error("the pump is shutting down and starts no thread")]
    ShuttingDown,
    /// The history could not be read or written.
    #[error(transparent)]
    History(#[from] HistoryError),
}

impl PumpHandle {
    /// Forks `thread` at its record `at`: a new root thread whose first record is a `fork`
    /// decision naming the source, the seq and its chain digest. In [`ForkMode::Context`] the
    /// source's records before `at` that [`is_carried`] are copied into it as context
    /// (recorded under new ids, never delivered) and record `at` (a message) is delivered again;
    /// in [`ForkMode::FirstMessage`] the source's first message is (`at` must still name a
    /// message). Returns the new thread.
    ///
    /// # Errors
    ///
    /// [`ForkError`]: unknown thread, seq or listener, a record that is not a message, a
    /// listener that does not take it, shutdown, or the store.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # use agentpump::pump::ForkOptions;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let old = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
    /// pump.settle(old).await;
    /// let first = pump.history(old).await?[0].seq;
    /// let new = pump.fork(old, first, ForkOptions::default()).await?;
    /// pump.settle(new).await;
    /// let records = pump.history(new).await?;
    /// assert_eq!(records[0].root.local(), "decision"); // the fork, naming `old`
    /// assert_eq!(records[1].payload, pump.history(old).await?[0].payload);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn fork(
        &self,
        thread: ThreadId,
        at: u64,
        options: ForkOptions,
    ) -> Result<ThreadId, ForkError> {
        let source = self
            .controllable(thread)
            .await
            .map_err(|_| ForkError::UnknownThread(thread))?;
        let records = self.shared.store.thread(source.id, 0).await?;
        let plan = plan(thread, &records, at, options.mode)?;
        let edited = match options.payload {
            Some(text) if *text != *plan.message.payload => Some(
                Payload::parse(&text, &self.shared.config.limits)
                    .map_err(ForkError::InvalidPayload)?,
            ),
            _ => None,
        };
        let listener = match (&options.listener, &plan.message.to) {
            (Some(name), _) => name.clone(),
            (None, Some(to)) => to.to_string(),
            (None, None) => {
                return Err(ForkError::Refused {
                    seq: plan.message.seq,
                    listener: String::new(),
                    why: "the record names no listener; give one".to_owned(),
                });
            }
        };
        let target = self.target(plan.message, edited.as_ref(), &listener)?;
        let policy = &self.shared.config.governor.budget;
        let budget = options
            .budget
            .map_or_else(|| policy.clone(), |given| policy.overridden(&given));
        let decision = Decision::Fork(Fork {
            source: thread,
            at,
            digest: hex::encode(plan.chosen.digest),
            mode: options.mode,
            carried: plan.carried.iter().map(|r| r.seq).collect(),
            edited: edited
                .as_ref()
                .map(|p| hex::encode(Sha256::digest(p.as_str()))),
            budget: budget.clone(),
        });
        let delivered = Delivered {
            target,
            listener,
            edited,
        };
        let (id, committed) = self.start_fork(&plan, &decision, &budget, delivered)?;
        self.shared
            .await_commit(id, committed)
            .await
            .map_err(ForkError::History)?;
        Ok(id)
    }

    /// The listener index for delivering `message` again — or `edited` in its place — to
    /// `listener`, as the router decides. An edit is a new payload from the client, checked as
    /// a post is (`Shared::admit`): no element only the pump emits, a tool message by the tool
    /// protocol; the message as recorded was checked when it was accepted.
    fn target(
        &self,
        message: &Record,
        edited: Option<&Payload>,
        listener: &str,
    ) -> Result<usize, ForkError> {
        let routes = &self.shared.routes;
        if routes.index_of(listener).is_none() {
            return Err(ForkError::UnknownListener(listener.to_owned()));
        }
        let target = Target::Listener(listener.to_owned());
        let refused = |why: String| ForkError::Refused {
            seq: message.seq,
            listener: listener.to_owned(),
            why,
        };
        let checked = edited.map_or(Ok(None), |p| {
            smuggled(p).map_or_else(|| tool_checked(p, &target), Err)
        });
        let root = edited.map_or(&message.root, Payload::qname);
        match checked.and_then(|_| routes.route(Sender::Client, &target, root)) {
            Ok(Route::Listeners(targets)) => targets
                .into_iter()
                .next()
                .ok_or_else(|| refused("no listener takes it".to_owned())),
            Ok(Route::Client) => Err(refused("it would go back to the client".to_owned())),
            Err(Refusal::Huh(_, why) | Refusal::Error(_, why)) => Err(refused(why)),
        }
    }

    /// Records the fork, its context and the message in one commit and registers the thread.
    fn start_fork(
        &self,
        plan: &Plan<'_>,
        decision: &Decision,
        budget: &Budget,
        delivered: Delivered,
    ) -> Result<(ThreadId, Result<crate::history::Ticket, HistoryError>), ForkError> {
        let shared = &self.shared;
        let _admitting = shared
            .lifecycle
            .admitting()
            .ok_or(ForkError::ShuttingDown)?;
        let entry = shared.new_root(
            shared.config.new_thread(),
            crate::Dialect::default(),
            budget,
        );
        let mut inner = entry.lock();
        let mut tx = Tx::new();
        shared.decide(&mut tx, &entry, &mut inner, decision);
        let mut ids: HashMap<MessageId, MessageId> = HashMap::new();
        for record in &plan.carried {
            let env = copy(record, entry.id, &mut ids, &shared.config.limits)?;
            tx.record(&mut inner, env, record.kind);
        }
        let copied = copy(plan.message, entry.id, &mut ids, &shared.config.limits)?;
        let payload = delivered.edited.unwrap_or_else(|| copied.payload().clone());
        let env = Envelope::new(Arc::clone(&shared.routes.names.client), entry.id, payload)
            .with_id(copied.id())
            .with_to(Some(Arc::from(delivered.listener)))
            .with_in_reply_to(copied.in_reply_to());
        tx.queue(
            &mut inner,
            Place::Here,
            env,
            delivered.target,
            RecordKind::Message,
        );
        tx.snapshot(&entry, &inner);
        let committed = tx.commit(shared, (&entry, &mut inner), None);
        if committed.is_ok() {
            shared.registry.insert(Arc::clone(&entry));
        }
        Ok((entry.id, committed))
    }
}

/// The message a fork delivers: to which listener (its index and name), and the edited payload
/// that replaces the source's, if any.
struct Delivered {
    target: usize,
    listener: String,
    edited: Option<Payload>,
}

/// What a fork takes from the source: the records carried and the message delivered again.
struct Plan<'r> {
    /// The record forked from.
    chosen: &'r Record,
    /// The records copied as context.
    carried: Vec<&'r Record>,
    /// The message delivered again.
    message: &'r Record,
}

/// Chooses the records of a fork of `records` (one thread's) at `at`.
fn plan(
    thread: ThreadId,
    records: &[Record],
    at: u64,
    mode: ForkMode,
) -> Result<Plan<'_>, ForkError> {
    let chosen = records
        .iter()
        .find(|r| r.seq == at)
        .ok_or(ForkError::UnknownSeq { thread, seq: at })?;
    if chosen.kind != RecordKind::Message {
        return Err(ForkError::NotRedeliverable {
            seq: at,
            kind: chosen.kind,
        });
    }
    Ok(match mode {
        ForkMode::Context => Plan {
            chosen,
            carried: records
                .iter()
                .filter(|r| r.seq < at && is_carried(r))
                .collect(),
            message: chosen,
        },
        ForkMode::FirstMessage => Plan {
            chosen,
            carried: Vec::new(),
            message: records
                .iter()
                .find(|r| r.kind == RecordKind::Message)
                .unwrap_or(chosen),
        },
    })
}

/// A copy of `record` in `thread` under a new id, its answer-to mapped to the copies' ids.
fn copy(
    record: &Record,
    thread: ThreadId,
    ids: &mut HashMap<MessageId, MessageId>,
    limits: &crate::Limits,
) -> Result<Envelope, ForkError> {
    let env = record.to_envelope(limits).map_err(|e| ForkError::Refused {
        seq: record.seq,
        listener: record.to.as_deref().unwrap_or_default().to_owned(),
        why: e.to_string(),
    })?;
    let id = MessageId::new();
    ids.insert(record.id, id);
    let reply = record.in_reply_to.and_then(|r| ids.get(&r).copied());
    Ok(
        Envelope::new(Arc::clone(&record.from), thread, env.payload().clone())
            .with_id(id)
            .with_to(record.to.clone())
            .with_in_reply_to(reply),
    )
}
