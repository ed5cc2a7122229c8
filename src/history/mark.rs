//! [`Mark`]: one handled delivery as the store keeps it — the delivered record, the listener it
//! went to, when it was accepted, and what its handler reported spending. The viewer's totals are
//! sums of these, so they read the same over a live pump and over a history file.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::MessageId;
use crate::governor::Usage;

/// When a delivery's handler started and ended, wall clock, microseconds since the Unix epoch:
/// measured by the pump, kept with the delivered mark (never in the hash chain).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timing {
    /// The handler was called.
    pub started_us: i64,
    /// The handler returned (or failed, or timed out).
    pub handled_us: i64,
}

/// A handled delivery: which record it delivered and what its handler reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Mark {
    /// The delivered record's sequence number.
    pub seq: u64,
    /// The delivered message.
    pub id: MessageId,
    /// The listener it was addressed to (none for a message without an addressee).
    pub listener: Option<Arc<str>>,
    /// When the delivered message was accepted, microseconds since the Unix epoch.
    pub time_us: i64,
    /// What the handler reported spending.
    pub usage: Usage,
    /// When its handler ran; `None` for a delivery recorded before timings were kept.
    pub timing: Option<Timing>,
    /// When the store committed it; `None` for a delivery recorded before timings were kept.
    pub committed_us: Option<i64>,
}
