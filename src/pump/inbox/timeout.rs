//! A request's default applied when it expires (unless a person answered first).

use std::sync::Arc;
use std::time::Duration;

use super::record::{Decision, now_ms};
use super::{InboxError, Reply};
use crate::MessageId;
use crate::pump::Shared;

impl Shared {
    /// Applies the default of request `id` when it expires at `at_ms` (unless answered first).
    pub(crate) fn arm_timeout(self: &Arc<Self>, id: MessageId, at_ms: i64) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = Arc::downgrade(self);
        runtime.spawn(async move {
            let wait = u64::try_from(at_ms.saturating_sub(now_ms())).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(wait)).await;
            let Some(shared) = shared.upgrade() else {
                return;
            };
            match shared.answer(id, timed_out()).await {
                Ok(_) | Err(InboxError::AlreadyAnswered { .. }) => {}
                Err(error) => tracing::warn!(request = %id, %error, "inbox timeout not applied"),
            }
        });
    }
}

/// The reply a timeout records.
pub(super) fn timed_out() -> Reply {
    Reply {
        decision: Decision::Timeout,
        by: "timeout".to_owned(),
    }
}
