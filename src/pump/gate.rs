//! The governor's gate before every delivery: control before data (stop requests, the stop
//! file, queue-full, the deadline), budgets breached, cycles, then the withdrawal of what the
//! delivery costs — a turn, and a tool call for a tool — and the budget warnings due.

use std::sync::Arc;

use rust_decimal::Decimal;
use tokio::time::Instant;

use super::Shared;
use crate::Envelope;
use crate::governor::budget::{Account, Admit, Amount, BudgetName, Line};
use crate::governor::ledger::Ledger;
use crate::governor::{HaltClass, Verdict};
use crate::listener::{Registration, Role, Usage};
use crate::system::{CLIENT_SENDER, ErrorCode, SYSTEM_SENDER, SystemMessage};
use crate::thread::registry::{Queued, ThreadEntry};

/// The gate's answer for one delivery.
pub(crate) enum Admission {
    /// Deliver, within this deadline, sending these warnings first.
    Go {
        view: Option<(u64, usize)>,
        deadline: Option<Instant>,
        warnings: Vec<SystemMessage>,
        account: Arc<Account>,
        /// What the gate withdrew (a turn, a tool call), to record with the delivery.
        cost: Cost,
    },
    /// Do not deliver: halt the thread.
    Halt(Verdict),
}

impl Shared {
    /// The governor's gate before a delivery: control before data, then budgets, then repeats.
    /// `forwarded`: the delivery is a held call its approval let through, already charged.
    pub(crate) fn gate(&self, entry: &ThreadEntry, item: &Queued, forwarded: bool) -> Admission {
        let policy = &self.config.governor;
        let mut inner = entry.lock();
        let listener = &self.routes[item.target].name;
        let view = inner.view_of(listener);
        let l = &mut inner.ledger;
        if !policy.enabled {
            let account = Arc::clone(&l.account);
            return Admission::Go {
                view,
                deadline: None,
                warnings: Vec::new(),
                account,
                cost: Cost::default(),
            };
        }
        if let Some(reason) = l.stop_requested {
            return Admission::Halt(Verdict::backpressure(reason));
        }
        if policy
            .stop_file
            .as_deref()
            .is_some_and(std::path::Path::exists)
        {
            return Admission::Halt(Verdict::backpressure("stop-file"));
        }
        if l.queue_full_streak >= policy.queue_full_limit {
            return Admission::Halt(Verdict::backpressure("queue-full"));
        }
        // One reading of the clock serves the deadline and the wall-clock warning.
        let now = Instant::now();
        if l.deadline.is_some_and(|d| now >= d) {
            return Admission::Halt(Verdict::timeout(BudgetName::WallClock));
        }
        let env = &item.envelope;
        let cost = Cost::of(env, &self.routes[item.target], forwarded);
        // Budgets breached, then cycles, then the withdrawal: under one lock of the account chain.
        let account = Arc::clone(&l.account);
        let admitted = account.admit(cost.amount(), || {
            // Outside input is the caller's choice, and the governor's own notices are not part
            // of a conversation; loops are made of what listeners and the pump emit.
            let cycle = env.from() != CLIENT_SENDER
                && !cost.free
                && l.cycles(
                    env.from(),
                    listener,
                    env.payload().as_str(),
                    policy.no_progress_window,
                    policy.cycle_max_period,
                );
            cycle.then(|| Verdict::new(HaltClass::NoProgress, "repeated-message"))
        });
        let lines = match admitted {
            Ok(lines) => lines,
            // Never empty (`Admit::Breached`); were it, nothing would be breached.
            Err(Admit::Breached(breaches)) => match Verdict::breach(&breaches) {
                Some(verdict) => return Admission::Halt(verdict),
                None => account.snapshot(),
            },
            Err(Admit::Refused(verdict)) => return Admission::Halt(verdict),
            Err(Admit::NoRoom(e)) => return Admission::Halt(Verdict::timeout(e.budget)),
        };
        let warnings = warnings(l, &lines, policy.warning_fraction, now);
        Admission::Go {
            view,
            deadline: l.deadline,
            warnings,
            account,
            cost,
        }
    }
}

/// What the gate withdraws for one delivery.
///
/// Every delivery costs a turn, except a notice the governor sends on its own initiative (a
/// budget warning must not spend the budget it warns about). A call delivered to a listener
/// registered with the tool role also costs a tool call, charged to the caller's thread — once:
/// a call held for approval is charged when it is made, and the same call forwarded after the
/// approval costs no second one (one call is one call, whatever a person decided).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Cost {
    /// The delivery costs no turn.
    pub free: bool,
    /// The delivery is a tool call.
    pub tool_call: bool,
}

impl Cost {
    fn of(env: &Envelope, to: &Registration, forwarded: bool) -> Self {
        let from_pump = env.from() == SYSTEM_SENDER;
        Self {
            free: from_pump && SystemMessage::is_budget_warning(env.payload()),
            tool_call: !from_pump && !forwarded && to.role == Role::Tool,
        }
    }

    fn amount(self) -> Amount {
        let mut amount = Amount::default();
        if !self.free {
            amount = Amount::of(BudgetName::Turns, Decimal::ONE);
        }
        if self.tool_call {
            amount.add(BudgetName::ToolCalls, Decimal::ONE);
        }
        amount
    }

    /// The usage to record with the delivery for what the gate withdrew (turns are counted
    /// by the delivery itself).
    pub fn usage(self) -> Usage {
        Usage {
            tool_calls: u64::from(self.tool_call),
            ..Usage::default()
        }
    }
}

/// One `budget-warning` per budget that crossed the warning fraction and was not warned about.
fn warnings(
    ledger: &mut Ledger,
    lines: &[Line; 5],
    fraction: Decimal,
    now: Instant,
) -> Vec<SystemMessage> {
    let mut out = Vec::new();
    for line in lines {
        let (name, spent) = (line.name, line.spent);
        let Some(limit) = line.limit else { continue };
        if limit > Decimal::ZERO && spent >= limit * fraction && ledger.first_warning(name) {
            let left = line.remaining().unwrap_or_default();
            let message = format!("budget {name}: {spent} of {limit} used, {left} remain; wrap up");
            out.push(SystemMessage::Error {
                code: ErrorCode::BudgetWarning,
                message,
            });
        }
    }
    if let Some(deadline) = ledger.deadline {
        let total = deadline.saturating_duration_since(ledger.started);
        let used = now.saturating_duration_since(ledger.started);
        let crossed = Decimal::from(used.as_millis() as u64)
            >= Decimal::from(total.as_millis() as u64) * fraction;
        if !total.is_zero() && crossed && ledger.first_warning(BudgetName::WallClock) {
            let left = deadline.saturating_duration_since(now);
            let message = format!(
                "budget max-wall-clock: {} ms remain; wrap up",
                left.as_millis()
            );
            out.push(SystemMessage::Error {
                code: ErrorCode::BudgetWarning,
                message,
            });
        }
    }
    out
}
