//! [`Inbox`]: the pump's part for a person in the loop.

use std::collections::BTreeMap;
use std::sync::Mutex;

use tokio::sync::broadcast;

use super::OpenRequest;
use super::changes::{FOLLOWERS_LAG, InboxChange};
use crate::{MessageId, ThreadId};

/// The inbox's part of the pump: the open requests (oldest first: ids are UUID v7) and how
/// many each thread asked, rebuilt from history at a restart; one answer applied at a time;
/// its changes sent to its followers.
#[derive(Debug)]
pub(crate) struct Inbox {
    pub(super) open: Mutex<BTreeMap<MessageId, OpenRequest>>,
    pub(super) asked: Mutex<BTreeMap<ThreadId, u32>>,
    pub(super) answering: tokio::sync::Mutex<()>,
    pub(super) reopened: tokio::sync::OnceCell<()>,
    pub(super) changes: broadcast::Sender<InboxChange>,
}

impl Default for Inbox {
    fn default() -> Self {
        Self {
            open: Mutex::default(),
            asked: Mutex::default(),
            answering: tokio::sync::Mutex::default(),
            reopened: tokio::sync::OnceCell::default(),
            changes: broadcast::channel(FOLLOWERS_LAG).0,
        }
    }
}

impl Inbox {
    pub(crate) fn open(&self) -> std::sync::MutexGuard<'_, BTreeMap<MessageId, OpenRequest>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts one more question of `thread`; false (and nothing counted) past `limit`.
    pub(crate) fn count_question(&self, thread: ThreadId, limit: Option<u32>) -> bool {
        let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        let n = asked.entry(thread).or_default();
        if limit.is_some_and(|l| *n >= l) {
            return false;
        }
        *n += 1;
        true
    }

    /// Tells the inbox's followers of `change` (none may follow).
    pub(crate) fn changed(&self, change: InboxChange) {
        let _ = self.changes.send(change);
    }

    /// Takes back a question of `thread` whose request did not commit.
    pub(crate) fn uncount_question(&self, thread: ThreadId) {
        let mut asked = self.asked.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = asked.get_mut(&thread) {
            *n = n.saturating_sub(1);
        }
    }

    /// How many requests of `thread` are open.
    pub(crate) fn waiting_in(&self, thread: ThreadId) -> u32 {
        let open = self.open();
        let n = open.values().filter(|r| r.thread == thread).count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }
}
