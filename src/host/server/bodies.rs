//! The JSON bodies the API takes. Their keys are snake_case, as in every JSON answer the API
//! gives and in organism.toml (docs/decisions/2026-11-26-json-keys-snake-case.md); a key spelt
//! another way is refused naming the right spelling ([`super::strict::json_body`]).

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::governor::Budget;

/// Body of `POST /threads/{id}/resume`: the budget to add, keyed as `[governor.budget]` in
/// organism.toml (`tool_calls`, `wall_clock_ms`).
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BudgetBody {
    turns: Option<u64>,
    tokens: Option<u64>,
    cost: Option<Decimal>,
    tool_calls: Option<u64>,
    threads: Option<u64>,
    wall_clock_ms: Option<u64>,
    depth: Option<u32>,
}

impl From<BudgetBody> for Budget {
    fn from(b: BudgetBody) -> Self {
        Budget {
            turns: b.turns,
            tokens: b.tokens,
            cost: b.cost,
            tool_calls: b.tool_calls,
            threads: b.threads,
            wall_clock: b.wall_clock_ms.map(std::time::Duration::from_millis),
            depth: b.depth,
        }
    }
}

impl From<&Budget> for BudgetBody {
    fn from(b: &Budget) -> Self {
        BudgetBody {
            turns: b.turns,
            tokens: b.tokens,
            cost: b.cost,
            tool_calls: b.tool_calls,
            threads: b.threads,
            wall_clock_ms: b
                .wall_clock
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            depth: b.depth,
        }
    }
}

/// Body of `POST /history/prune`: exactly one of `before` and `keep_days`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PruneCut {
    /// A UTC date or time.
    pub before: Option<String>,
    /// Keep this many days.
    pub keep_days: Option<u32>,
}
