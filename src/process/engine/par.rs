//! What a USE may repeat ([`Retry`], from its `retry` and `atomic` modifiers) and a PAR child
//! the machine waits for ([`ParChild`]): the same rules inside a PAR as outside (03:
//! "modifiers: [atomic, timeout_ms, retry]" apply to every USE).

use std::collections::BTreeMap;

use crate::process::ast::Use;
use crate::process::expr::Value;
use crate::tool::{ErrorType, ToolError};

/// A USE's repeat policy: `retry=N` more attempts after a failure that may be repeated; an
/// `atomic` USE only after `unavailable` (the tool says it did nothing).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Retry {
    retries: u32,
    atomic: bool,
}

impl Retry {
    /// The policy of `u`'s modifiers.
    pub fn of(u: &Use) -> Self {
        let Some(m) = &u.modifiers else {
            return Self::default();
        };
        Self {
            retries: m
                .retry
                .map_or(0, |(n, _)| u32::try_from(n.trunc().mantissa()).unwrap_or(0)),
            atomic: m.atomic,
        }
    }

    /// Whether a call that made `attempt` repeats so far and failed with `e` is made again.
    pub fn allows(self, e: &ToolError, attempt: u32) -> bool {
        let repeatable = if self.atomic {
            e.kind == ErrorType::Unavailable
        } else {
            e.retry || matches!(e.kind, ErrorType::Timeout | ErrorType::Unavailable)
        };
        repeatable && attempt < self.retries
    }
}

/// A PAR child not yet joined: its tool, its current call id, what a repeat sends again (the
/// arguments as evaluated when the PAR ran) and how many repeats it made.
#[derive(Debug, Clone)]
pub(crate) struct ParChild {
    pub tool: String,
    pub id: String,
    pub args: BTreeMap<String, Value>,
    pub timeout_ms: Option<u64>,
    pub retry: Retry,
    pub attempt: u32,
}
