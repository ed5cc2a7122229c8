//! The governor: the pump's gate on every delivery. Per thread it keeps a budget account
//! (turns, tokens, cost, tool calls, threads — withdrawn before they are spent, charged to every
//! ancestor, carved out for children) and a ledger of goal, residuals, criteria and
//! progress; it reads the governor namespace (`goal`, `loop`, `residual`, `criterion`,
//! `learning`) and halts a thread with a typed [`HaltClass`] and a [`HaltingReport`] when it is
//! done, converged, diverging, stuck, aborted, stopped or out of budget.

pub(crate) mod budget;
mod decision;
mod goal;
pub(crate) mod ledger;
mod messages;
mod policy;
pub mod report;
mod seed_names;
mod usage;
mod verdict;

pub use budget::{Budget, BudgetName};
pub(crate) use decision::Decision;
pub(crate) use decision::Fork;
pub use decision::ForkMode;
pub(crate) use messages::decimal as messages_decimal;
pub(crate) use messages::{BUDGET_ATTRIBUTES, budget_xml, parse_budget};
pub use messages::{
    CertificateType, Control, Goal, GovernorMessage, Lane, MessageError, Signal, UnknownCertificate,
};
pub use policy::{GovernorPolicy, IterationBudget};
pub use report::HaltingReport;
pub use seed_names::{from_seed, seed_stop_reason};
pub use usage::{Counters, Usage};
pub use verdict::{HaltClass, Verdict};
pub(crate) use verdict::{Signals, applicable, criteria_gap, diverging};

/// The Ask-Loop v2 text form of a control message: `<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:KIND:{json}>>>`.
pub const MAGIC_PREFIX: &str = "<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:";

/// Renders a halt in the Ask-Loop text form, for agents that speak it:
/// `<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:HALT:{"reason":"max-turns","class":"TIMEOUT"}>>>`.
pub fn halt_magic(verdict: &Verdict) -> String {
    magic_halt(&verdict.reason, verdict.class.as_str())
}

fn magic_halt(reason: &str, class: &str) -> String {
    let json = serde_json::json!({ "reason": reason, "class": class });
    format!("{MAGIC_PREFIX}HALT:{json}>>>")
}

/// The Ask-Loop text form of a recorded `<halt>` system message (its `reason` and `class`), for
/// agents that speak it; `None` when `payload` is not one.
///
/// # Example
///
/// ```
/// use agentpump::governor::halt_magic_of;
/// let halt = r#"<halt xmlns="urn:agentpump:system:v1" reason="max-turns" class="TIMEOUT" certificate="TIMEOUT" report-digest="00"/>"#;
/// assert_eq!(halt_magic_of(halt).as_deref(), Some(r#"<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:HALT:{"class":"TIMEOUT","reason":"max-turns"}>>>"#));
/// assert_eq!(halt_magic_of("<other/>"), None);
/// ```
pub fn halt_magic_of(payload: &str) -> Option<String> {
    let halt = HaltMessage::read(payload)?;
    Some(magic_halt(&halt.reason, &halt.class))
}

/// What a recorded `<halt>` system message says, read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HaltMessage {
    pub reason: String,
    pub class: String,
    /// sha256 (hex) of the halting report it left.
    pub report_digest: String,
}

impl HaltMessage {
    /// Reads a `<halt>` element the pump wrote; `None` for anything else.
    pub fn read(payload: &str) -> Option<Self> {
        let mut reader = quick_xml::Reader::from_str(payload);
        let start = match reader.read_event().ok()? {
            quick_xml::events::Event::Empty(e) | quick_xml::events::Event::Start(e) => e,
            _ => return None,
        };
        if start.local_name().as_ref() != "halt" {
            return None;
        }
        let attribute = |name: &str| {
            let a = start.try_get_attribute(name).ok()??;
            let v = a
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .ok()?;
            Some(v.into_owned())
        };
        Some(Self {
            reason: attribute("reason")?,
            class: attribute("class")?,
            report_digest: attribute("report-digest")?,
        })
    }
}
