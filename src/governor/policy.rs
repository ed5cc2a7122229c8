//! [`GovernorPolicy`]: the organism-wide limits and thresholds, with documented defaults.

use std::path::PathBuf;
use std::time::Duration;

use rust_decimal::Decimal;

use super::{Budget, BudgetName};

/// The governor's settings. Plain data; `goal` messages may tighten the budget per thread, never
/// loosen it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GovernorPolicy {
    /// Whether the governor gates deliveries and halts threads at all (default `true`). Off, no
    /// budget is enforced and no thread halts; messages to the governor are still recorded. For
    /// measuring the governor's cost, and for hosts that govern elsewhere.
    pub enabled: bool,
    /// Limits of every root thread (children carve theirs out of their parent's). Default:
    /// 10 000 turns, 1 hour of wall clock, 1 000 threads per tree, spawn depth 8; tokens, cost
    /// and tool calls unlimited.
    pub budget: Budget,
    /// Limits of one self-iteration — a delivery of a listener's message to itself (none).
    pub iteration: IterationBudget,
    /// Fraction of a budget at which one `system-error code="budget-warning"` is sent (0.8).
    pub warning_fraction: Decimal,
    /// Repeats that count as no progress (3): the same control signal this many times in a
    /// row, or the same cycle of deliveries — the same (from, to, payload) sequence of any
    /// period up to [`GovernorPolicy::cycle_max_period`] — this many times in a row. 0 turns
    /// the guard off; it needs at least 2 to mean anything.
    pub no_progress_window: usize,
    /// The longest cycle of deliveries the no-progress guard looks for (8): A→B→…→A with
    /// up to this many deliveries per round, repeated [`GovernorPolicy::no_progress_window`]
    /// times with identical payloads.
    pub cycle_max_period: usize,
    /// Residuals in a row, each larger than the one before, that count as divergence (3):
    /// phuc-loop's `all_increasing(residuals[-3:])`.
    pub divergence_window: usize,
    /// Default convergence threshold when a goal gives none (`1e-10`).
    pub r_p: Decimal,
    /// Queue-full refusals in a row after which a thread halts with BACKPRESSURE (10).
    pub queue_full_limit: u32,
    /// While this file exists, every delivery halts its thread with BACKPRESSURE (none).
    pub stop_file: Option<PathBuf>,
}

impl GovernorPolicy {
    /// The default root budget.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::GovernorPolicy;
    /// let budget = GovernorPolicy::default_budget();
    /// assert_eq!((budget.turns, budget.depth, budget.tokens), (Some(10_000), Some(8), None));
    /// ```
    pub fn default_budget() -> Budget {
        Budget {
            turns: Some(10_000),
            wall_clock: Some(Duration::from_secs(3600)),
            threads: Some(1_000),
            depth: Some(8),
            ..Budget::default()
        }
    }
}

impl Default for GovernorPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            budget: Self::default_budget(),
            iteration: IterationBudget::default(),
            warning_fraction: Decimal::new(8, 1),
            no_progress_window: 3,
            cycle_max_period: 8,
            divergence_window: 3,
            r_p: Decimal::new(1, 10),
            queue_full_limit: 10,
            stop_file: None,
        }
    }
}

/// phuc-loop §6.1's per-iteration limits, for threads whose iterations are self-messages: what
/// one delivery of a listener's own message to itself may spend. `None` is unlimited. Spending
/// a limit exactly is allowed; an iteration that goes past one halts its thread TIMEOUT naming
/// it (`max-tool-calls-per-iteration`, `max-wall-clock-per-iteration`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IterationBudget {
    /// Tool calls the iteration withdraws or reports (`cx.spend`, `cx.usage`), seed
    /// `max_tool_calls_per_iteration`.
    pub tool_calls: Option<u64>,
    /// How long the iteration's handler runs, seed `max_seconds_per_iteration`.
    pub wall_clock: Option<Duration>,
}

impl IterationBudget {
    /// Whether it sets no limit: then no delivery needs timing or checking.
    pub(crate) fn is_unlimited(&self) -> bool {
        self.tool_calls.is_none() && self.wall_clock.is_none()
    }

    /// Every limit that an iteration of `tool_calls` in `took` goes past.
    pub(crate) fn breached(&self, tool_calls: u64, took: Duration) -> Vec<BudgetName> {
        let calls = self.tool_calls.is_some_and(|limit| tool_calls > limit);
        let time = self.wall_clock.is_some_and(|limit| took > limit);
        [
            (calls, BudgetName::ToolCallsPerIteration),
            (time, BudgetName::WallClockPerIteration),
        ]
        .into_iter()
        .filter_map(|(over, name)| over.then_some(name))
        .collect()
    }
}
