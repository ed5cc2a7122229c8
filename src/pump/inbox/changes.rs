//! [`InboxChange`]: what happens to the inbox, for everyone who follows it
//! ([`PumpHandle::inbox_changes`]): a request listed (once its record is durable), answered,
//! or expired (its default applied).

use serde::Serialize;
use tokio::sync::broadcast;

use super::OpenRequest;
use super::record::{AnswerRecord, Decision};
use crate::ThreadId;
use crate::pump::PumpHandle;

/// How many changes a slow follower may fall behind before it is told it lagged.
pub(super) const FOLLOWERS_LAG: usize = 256;

/// A change of the inbox, as JSON `{"event": "listed" | "answered" | "expired", …}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum InboxChange {
    /// A request is open: its record is durable and it can be answered.
    Listed(OpenRequest),
    /// A person answered a request.
    Answered {
        /// The thread that waited.
        thread: ThreadId,
        /// The answer recorded.
        answer: AnswerRecord,
    },
    /// A request expired: its default applied (recorded as a `timeout` answer).
    Expired {
        /// The thread that waited.
        thread: ThreadId,
        /// The answer recorded.
        answer: AnswerRecord,
    },
}

impl InboxChange {
    /// The change an answer recorded in `thread` makes.
    pub(super) fn closed(thread: ThreadId, answer: AnswerRecord) -> Self {
        if answer.decision == Decision::Timeout {
            Self::Expired { thread, answer }
        } else {
            Self::Answered { thread, answer }
        }
    }

    /// Its name: `listed`, `answered` or `expired`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Listed(_) => "listed",
            Self::Answered { .. } => "answered",
            Self::Expired { .. } => "expired",
        }
    }
}

impl PumpHandle {
    /// Follows the inbox: every change from now on, in order, for every thread. Read
    /// [`PumpHandle::inbox`] after subscribing to know what is open already. A follower that
    /// falls more than 256 changes behind gets [`broadcast::error::RecvError::Lagged`]: it
    /// reads the inbox again.
    pub fn inbox_changes(&self) -> broadcast::Receiver<InboxChange> {
        self.shared.inbox.changes.subscribe()
    }
}
