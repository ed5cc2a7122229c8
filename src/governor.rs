//! The governor: the pump's gate on every delivery. Per thread it keeps a budget account
//! (turns, tokens, cost, tool calls, threads — withdrawn before they are spent, charged to every
//! ancestor, carved out for children) and a ledger of goal, residuals, criteria and
//! progress; it reads the governor namespace (`goal`, `loop`, `residual`, `criterion`,
//! `learning`) and halts a thread with a typed [`HaltClass`] and a [`HaltingReport`] when it is
//! done, converged, diverging, stuck, aborted, stopped or out of budget.

pub(crate) mod budget;
mod decision;
pub(crate) mod ledger;
mod messages;
mod policy;
pub mod report;
mod verdict;

pub use budget::{Budget, BudgetName};
pub(crate) use decision::Decision;
pub(crate) use messages::{
    BUDGET_ATTRIBUTES, budget_xml, decimal as messages_decimal, parse_budget,
};
pub use messages::{CertificateType, Control, Goal, GovernorMessage, Lane, Signal};
pub use policy::GovernorPolicy;
pub use report::HaltingReport;
pub(crate) use verdict::Signals;
pub use verdict::{HaltClass, Verdict};

/// The Ask-Loop v2 text form of a control message: `<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:KIND:{json}>>>`.
pub const MAGIC_PREFIX: &str = "<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:";

/// Renders a halt in the Ask-Loop text form, for agents that speak it:
/// `<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:HALT:{"reason":"max-turns","class":"TIMEOUT"}>>>`.
pub fn halt_magic(verdict: &Verdict) -> String {
    let json = serde_json::json!({ "reason": verdict.reason, "class": verdict.class.as_str() });
    format!("{MAGIC_PREFIX}HALT:{json}>>>")
}
