//! A person in the loop: questions (the [`ask`](ask_tool) tool) and approvals of held tool
//! calls ([`InboxPolicy`]) are [`Request`] records in the thread; the thread *waits*
//! ([`ThreadState::Waiting`](crate::ThreadState::Waiting)) until [`PumpHandle::answer`]
//! records the [`Decision`] and applies it, once.
//!
//! | file | what |
//! | --- | --- |
//! | `inbox/policy.rs` | which calls wait for approval, the `questions` budget, waiting and the wall clock |
//! | `inbox/record.rs` | the `<request>` and `<answer>` records |
//! | `inbox/hold.rs` | a call held at delivery and the request recorded in its place |
//! | `inbox/listing.rs` | a request listed once its record is durable, taken back when it is not |
//! | `inbox/changes.rs` | the inbox's changes (listed, answered, expired), for its followers |
//! | `inbox/answer.rs` | an answer checked, recorded and applied with its effect in one commit |
//! | `inbox/reopen.rs` | open requests read back from history after a restart; timeouts |
//! | `inbox/ask.rs` | the `ask` tool's signature |
//! | `inbox/part.rs` | the pump's part: open requests, questions asked |
//! | `inbox/caller.rs` | a tool answer to the caller |
//! | `inbox/timeout.rs` | a request's default applied when it expires |

mod answer;
mod ask;
pub(crate) mod caller;
mod changes;
pub(crate) mod hold;
mod listing;
mod part;
mod policy;
pub(crate) mod record;
mod reopen;
mod timeout;

pub(crate) use part::Inbox;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use ask::{ASK_TOOL, ask_tool};
pub use changes::InboxChange;
pub use policy::{Approval, InboxPolicy};
pub use record::{AnswerRecord, Decision, INBOX_NS, Request, RequestKind};
pub use reopen::open_requests;

use super::PumpHandle;
use crate::history::HistoryError;
use crate::{MessageId, ThreadId};

/// A request no one has answered yet, as the inbox lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenRequest {
    /// The request's id (its record's message id): answer it with [`PumpHandle::answer`].
    pub id: MessageId,
    /// The thread that waits.
    pub thread: ThreadId,
    /// When it was asked, in milliseconds since the Unix epoch.
    pub asked_at_ms: i64,
    /// What is asked.
    pub request: Request,
}

/// Which open requests [`PumpHandle::inbox`] lists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxFilter {
    /// Only this thread's.
    pub thread: Option<ThreadId>,
    /// Only those this listener asked.
    pub listener: Option<String>,
}

/// A person's answer to a request, given to [`PumpHandle::answer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// What they decided.
    pub decision: Decision,
    /// Who they are, as recorded (`alice`, `cli`, …).
    pub by: String,
}

/// A time in milliseconds since the Unix epoch as an RFC 3339 UTC timestamp, as errors show it.
pub(crate) fn utc(ms: i64) -> String {
    crate::history::export::rfc3339(ms.saturating_mul(1000))
}

/// Why an answer was not applied.
#[derive(Debug, thiserror::Error)]
pub enum InboxError {
    /// No request has this id.
    #[error("no inbox request {0}")]
    NotFound(MessageId),
    /// The request was answered already: the first answer stands.
    #[error("inbox request {id} was answered already by `{by}` at {} ({decision})", utc(*at_ms))]
    AlreadyAnswered {
        /// The request.
        id: MessageId,
        /// Who answered it.
        by: String,
        /// When, in milliseconds since the Unix epoch.
        at_ms: i64,
        /// What they decided.
        decision: &'static str,
    },
    /// The request's time ran out; its default applied.
    #[error("inbox request {id} expired at {}; its default applied", utc(*expired_at_ms))]
    Expired {
        /// The request.
        id: MessageId,
        /// When it expired, in milliseconds since the Unix epoch.
        expired_at_ms: i64,
    },
    /// The decision does not fit the request.
    #[error("answer to inbox request {id} refused: {why}")]
    Invalid {
        /// The request.
        id: MessageId,
        /// What does not fit.
        why: String,
    },
    /// The history store failed.
    #[error("inbox: {0}")]
    History(#[from] HistoryError),
}

impl PumpHandle {
    /// The open requests, oldest first, filtered by thread and listener. After a restart the
    /// first call reads the open ones back from history.
    ///
    /// # Errors
    ///
    /// [`InboxError::History`] when history cannot be read back.
    pub async fn inbox(&self, filter: &InboxFilter) -> Result<Vec<OpenRequest>, InboxError> {
        self.shared.reopen().await?;
        let open = self.shared.inbox.open();
        let wanted = |r: &&OpenRequest| {
            filter.thread.is_none_or(|t| r.thread == t)
                && filter
                    .listener
                    .as_ref()
                    .is_none_or(|l| &r.request.listener == l)
        };
        Ok(open.values().filter(wanted).cloned().collect())
    }

    /// Answers request `id` once: records the answer and its effect (the held call forwarded,
    /// edited or denied; the question's answer to the asker) in one commit, and returns the
    /// record.
    ///
    /// # Errors
    ///
    /// [`InboxError::NotFound`], [`InboxError::AlreadyAnswered`] (naming who answered and
    /// when), [`InboxError::Expired`], [`InboxError::Invalid`] (a decision that does not fit
    /// the request: an edit of a question, an answer outside the choices or the schema, a
    /// `timeout` given by a person), or
    /// [`InboxError::History`].
    pub async fn answer(&self, id: MessageId, reply: Reply) -> Result<AnswerRecord, InboxError> {
        if reply.decision == Decision::Timeout {
            let why = "`timeout` is recorded by the pump when a request expires".to_owned();
            return Err(InboxError::Invalid { id, why });
        }
        self.shared.reopen().await?;
        Arc::clone(&self.shared).answer(id, reply).await
    }
}
