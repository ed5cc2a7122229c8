//! [`Usage`] and [`Counters`]: what listeners report using and what a thread has used — the
//! small words every floor above shares, kept here with their one conversion into budget
//! amounts.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::budget::{Amount, BudgetName};

/// Model and tool use reported by a listener, added to the thread's counters.
///
/// # Example
///
/// ```
/// use agentpump::Usage;
/// use rust_decimal::Decimal;
/// let call = Usage { tokens_in: 800, tokens_out: 200, cost: Decimal::new(3, 3), ..Usage::default() }; // $0.003
/// assert_eq!(call.tool_calls, 0);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens read.
    pub tokens_in: u64,
    /// Tokens written.
    pub tokens_out: u64,
    /// Cost, exact.
    pub cost: Decimal,
    /// Tool calls made.
    pub tool_calls: u64,
    /// True when the numbers are an estimate (an endpoint that reported no usage).
    pub estimated: bool,
    /// Microseconds spent waiting for a model's answers (`LlmAgent` measures it): shown in the
    /// viewer's waterfall, not a budget.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub llm_us: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Adds `other` to this.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::Usage;
    /// let mut total = Usage { tokens_in: 100, ..Usage::default() };
    /// total.add(&Usage { tokens_in: 20, tool_calls: 1, ..Usage::default() });
    /// assert_eq!((total.tokens_in, total.tool_calls), (120, 1));
    /// ```
    pub fn add(&mut self, other: &Usage) {
        self.estimated |= other.estimated;
        self.tokens_in += other.tokens_in;
        self.tokens_out += other.tokens_out;
        self.cost += other.cost;
        self.tool_calls += other.tool_calls;
        self.llm_us += other.llm_us;
    }

    /// The amounts in the governor's spent dimensions.
    pub(crate) fn amount(&self) -> Amount {
        let mut a = Amount::of(
            BudgetName::Tokens,
            Decimal::from(self.tokens_in + self.tokens_out),
        );
        a.add(BudgetName::Cost, self.cost);
        a.add(BudgetName::ToolCalls, Decimal::from(self.tool_calls));
        a
    }
}

/// What a thread has used so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Deliveries made to listeners that cost a turn.
    pub deliveries: u64,
    /// Notices the governor sent on its own initiative (budget warnings), delivered without
    /// costing a turn.
    #[serde(default)]
    pub notices: u64,
    /// Deliveries whose handler failed (error, panic or timeout).
    pub failures: u64,
    /// Tokens read by models, as reported by listeners.
    pub tokens_in: u64,
    /// Tokens written by models, as reported by listeners.
    pub tokens_out: u64,
    /// Tool calls, as reported by listeners.
    pub tool_calls: u64,
    /// Cost, as reported by listeners (exact decimal).
    pub cost: Decimal,
    /// Deliveries whose usage was estimated (the endpoint reported none), not measured.
    #[serde(default)]
    pub estimated_usage: u64,
}

impl Counters {
    /// Adds what a handler reported using (tokens, cost, tool calls, whether it was estimated).
    pub(crate) fn add_usage(&mut self, u: &Usage) {
        self.tokens_in += u.tokens_in;
        self.tokens_out += u.tokens_out;
        self.cost += u.cost;
        self.tool_calls += u.tool_calls;
        self.estimated_usage += u64::from(u.estimated);
    }

    /// What the thread has spent in the governor's dimensions: a turn per delivery that cost
    /// one, and the tokens, cost and tool calls reported (threads are counted apart).
    pub(crate) fn spent(&self) -> Amount {
        let mut a = Usage {
            tokens_in: self.tokens_in,
            tokens_out: self.tokens_out,
            cost: self.cost,
            tool_calls: self.tool_calls,
            ..Usage::default()
        }
        .amount();
        a.add(BudgetName::Turns, Decimal::from(self.deliveries));
        a
    }
}
