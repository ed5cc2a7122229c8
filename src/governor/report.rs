//! [`HaltingReport`]: the JSON a halt leaves behind (phuc-loop §10.2, plus the thread, the class,
//! the budget and the learnings).

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::Counters;
use super::IterationBudget;
use super::budget::BudgetName;
use super::ledger::Ledger;
use super::verdict::{HaltClass, Verdict, rising_run_start};
use crate::{MessageId, ThreadId};

mod exit;

pub use exit::ExitReport;

/// The halting report of one halt. Serialized as JSON; `schemas/halting-report.schema.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaltingReport {
    /// `"1.0"`.
    pub schema_version: String,
    /// The thread that halted.
    pub thread: ThreadId,
    /// Its display path.
    pub path: String,
    /// The id of the `halt` message in the thread's history.
    pub halt_id: MessageId,
    /// The declared goal text, if any.
    pub goal: Option<String>,
    /// `EXIT_CONVERGED`, `EXIT_DIVERGED`, `EXIT_BUDGET_EXCEEDED`, `EXIT_BLOCKED` or `EXIT_NEED_INFO`.
    pub status: String,
    /// The halt class (`EXACT` … `done-uncertified`).
    pub class: String,
    /// Machine-readable reason (`max-turns`, `residual-below-r-p`, …).
    pub stop_reason: String,
    /// phuc-loop's name for the stop reason (`MAX_ITERS`, `BACKPRESSURE_SIGNAL`, …;
    /// [`seed_stop_reason`](super::seed_stop_reason)); absent where the seed names none, and
    /// in reports written before it existed (skipped when absent, so they keep their digests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed_stop_reason: Option<String>,
    /// The certificate, for the classes that carry one.
    pub halting_certificate: Option<Certificate>,
    /// Deliveries in the thread.
    pub iterations_completed: u64,
    /// Self-iterations per listener.
    pub self_iterations: BTreeMap<String, u64>,
    /// Seconds from the thread's start to the halt, exact (microsecond resolution).
    pub total_seconds_elapsed: String,
    /// Of those, seconds with nothing queued and nothing running.
    pub total_seconds_idle: String,
    /// Of the idle time, seconds spent waiting for a person's answer (`pump/inbox`); absent
    /// when the thread never waited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_seconds_waiting: Option<String>,
    /// Limits, spend (descendants included) and what remains, per budget.
    pub budget: BTreeMap<String, BudgetLine>,
    /// Lane-typed learnings reported in the thread.
    pub learnings: Vec<Learning>,
    /// The lowest residual reported and its iteration (phuc-loop's `best_result_so_far`);
    /// `null` when no residual was reported.
    #[serde(default)]
    pub best_result_so_far: Option<BestResult>,
    /// For DIVERGED: the iteration whose residual first rose in the final rising run.
    #[serde(default)]
    pub divergence_start_iteration: Option<u64>,
    /// For DIVERGED: the iteration just before the rise (the lowest residual of the run).
    #[serde(default)]
    pub last_known_good_iteration: Option<u64>,
    /// phuc-loop §11: the verification rung a certified halt aims at ([`RUNG_REPLAYED`]);
    /// absent for the classes without a certificate (and in reports written before it existed,
    /// so that their digests still verify).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification_rung_target: Option<u32>,
    /// The rung the governor reached when it halted: [`RUNG_CERTIFIED`], a certificate whose
    /// evidence it checked. The replays that reach [`RUNG_REPLAYED`] are
    /// `agentpump verify --certificates`'s, after the fact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verification_rung_achieved: Option<u32>,
    /// What the residuals measure, as the goal declared it (phuc-loop §3.2 `residual_metric`);
    /// absent when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual_metric: Option<String>,
    /// The fields phuc-loop's output contract asks of an exit that did not converge.
    #[serde(flatten)]
    pub exit: ExitReport,
}

/// phuc-loop §11 "RUNG_641_requirements: halting_certificate_present, …": a halt whose
/// certificate the governor issued after checking its evidence.
pub const RUNG_CERTIFIED: u32 = 641;

/// phuc-loop §11 "rung_274177_requires: … residual_history_all_decimal_strings,
/// at_least_2_replays_of_final_iteration_produce_same_certificate": reached by a certified halt
/// that two independent replays of its recorded history re-derive (`verify --certificates`).
pub const RUNG_REPLAYED: u32 = 274_177;

/// The best residual so far. Iterations are numbered by residual reports: the n-th residual a
/// thread reports belongs to iteration n.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BestResult {
    /// Its iteration (1-based).
    pub iteration: u64,
    /// The residual, as an exact decimal string.
    pub residual_decimal_string: String,
}

/// The halting certificate block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificate {
    /// `EXACT`, `CONVERGED`, `TIMEOUT`, `BACKPRESSURE` or `DIVERGED`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `A`, `B` or `C`.
    pub lane: String,
    /// The last residual, if any was reported.
    pub final_residual_decimal_string: Option<String>,
    /// The convergence threshold in force.
    #[serde(rename = "R_p_decimal_string")]
    pub r_p_decimal_string: String,
    /// Every residual reported, in order.
    pub residual_history_decimal_strings: Vec<String>,
    /// The declared criteria and their last reported status.
    pub acceptance_criteria_checklist: Vec<CriterionLine>,
}

/// One acceptance criterion in the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriterionLine {
    /// Its id.
    pub id: String,
    /// What it says.
    pub criterion: String,
    /// Whether it was reported met.
    pub met: bool,
    /// The evidence link reported with it.
    pub evidence_link: Option<String>,
    /// Who reported it.
    pub reported_by: Option<String>,
}

/// One budget in the report; decimal strings, `null` when unlimited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetLine {
    /// The limit.
    pub limit: Option<String>,
    /// Spent by the thread and its descendants.
    pub spent: String,
    /// Held for carved children and not yet spent by them.
    #[serde(default = "zero")]
    pub reserved: String,
    /// What is left to spend (limit − spent − reserved, not below zero).
    pub remaining: Option<String>,
}

/// Every budget line of `ledger` now, by budget name, as the report writes them: its account's
/// lines and, when the thread has a deadline, `max-wall-clock` in milliseconds.
pub(crate) fn budget_lines(ledger: &Ledger) -> BTreeMap<String, BudgetLine> {
    let mut lines: BTreeMap<String, BudgetLine> = ledger
        .account
        .snapshot()
        .into_iter()
        .map(|line| {
            let out = BudgetLine {
                limit: line.limit.map(|l| l.to_string()),
                spent: line.spent.to_string(),
                reserved: line.reserved.to_string(),
                remaining: line.remaining().map(|r| r.to_string()),
            };
            (line.name.as_str().to_owned(), out)
        })
        .collect();
    if let Some(clock) = ledger.wall_clock(tokio::time::Instant::now()) {
        // Whole milliseconds that add up: spent + remaining = limit.
        let (limit, remaining) = (clock.limit.as_millis(), clock.remaining.as_millis());
        let line = BudgetLine {
            limit: Some(limit.to_string()),
            spent: (limit - remaining).to_string(),
            reserved: "0".to_owned(),
            remaining: Some(remaining.to_string()),
        };
        lines.insert(BudgetName::WallClock.as_str().to_owned(), line);
    }
    lines
}

/// One learning.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Learning {
    /// `A`, `B` or `C`.
    pub lane: String,
    /// The text.
    pub text: String,
    /// Who reported it.
    pub reported_by: String,
}

/// The per-iteration lines of the budget section, for the limits that are set: the limit, and
/// as spent the most any one self-iteration spent (tool calls; handler time in ms).
pub(crate) fn iteration_lines(
    limits: &IterationBudget,
    ledger: &Ledger,
) -> Vec<(String, BudgetLine)> {
    let (calls, took) = ledger.iteration_peak;
    let millis = |d: std::time::Duration| d.as_millis() as u64;
    [
        (BudgetName::ToolCallsPerIteration, limits.tool_calls, calls),
        (
            BudgetName::WallClockPerIteration,
            limits.wall_clock.map(millis),
            millis(took),
        ),
    ]
    .into_iter()
    .filter_map(|(name, limit, peak)| {
        let limit = limit?;
        let line = BudgetLine {
            limit: Some(limit.to_string()),
            spent: peak.to_string(),
            reserved: zero(),
            remaining: Some(limit.saturating_sub(peak).to_string()),
        };
        Some((name.as_str().to_owned(), line))
    })
    .collect()
}

/// Builds the report of a halt (the per-iteration budget lines are added by the caller, who
/// holds the policy: [`iteration_lines`]).
pub(crate) fn build(
    thread: ThreadId,
    path: &str,
    halt_id: MessageId,
    verdict: &Verdict,
    ledger: &Ledger,
    counters: &Counters,
    r_p: Decimal,
) -> HaltingReport {
    let progress = ledger.progress.as_deref();
    let strings = |v: &[Decimal]| v.iter().map(Decimal::to_string).collect::<Vec<_>>();
    let residuals = progress.map(|p| strings(&p.residuals)).unwrap_or_default();
    let certified = verdict.class.certificate().is_some();
    let halting_certificate = verdict.class.certificate().map(|c| Certificate {
        kind: c.as_str().to_owned(),
        lane: verdict.class.lane().unwrap_or("C").to_owned(),
        final_residual_decimal_string: residuals.last().cloned(),
        r_p_decimal_string: r_p.to_string(),
        residual_history_decimal_strings: residuals.clone(),
        acceptance_criteria_checklist: progress
            .map(|p| {
                p.criteria
                    .iter()
                    .map(|c| CriterionLine {
                        id: c.id.clone(),
                        criterion: c.description.clone(),
                        met: c.met,
                        evidence_link: c.evidence.clone(),
                        reported_by: c.reported_by.as_deref().map(str::to_owned),
                    })
                    .collect()
            })
            .unwrap_or_default(),
    });
    let best_result_so_far = progress.and_then(|p| best(&p.residuals));
    let diverged = verdict.class == HaltClass::Diverged;
    let run_start = progress
        .filter(|_| diverged)
        .map(|p| rising_run_start(&p.residuals) as u64);
    let elapsed = ledger.started.elapsed();
    let budget = budget_lines(ledger);
    HaltingReport {
        schema_version: "1.0".to_owned(),
        thread,
        path: path.to_owned(),
        halt_id,
        goal: progress
            .and_then(|p| p.goal.as_ref())
            .map(|g| g.text.clone()),
        status: verdict.class.status().to_owned(),
        class: verdict.class.as_str().to_owned(),
        stop_reason: verdict.reason.clone(),
        seed_stop_reason: super::seed_stop_reason(verdict.class.as_str(), &verdict.reason)
            .map(str::to_owned),
        halting_certificate,
        iterations_completed: counters.deliveries,
        self_iterations: ledger
            .iterations
            .iter()
            .map(|(l, n)| (l.to_string(), *n))
            .collect(),
        total_seconds_idle: seconds(ledger.idle_time()),
        total_seconds_waiting: Some(ledger.waited()).filter(|w| !w.is_zero()).map(seconds),
        total_seconds_elapsed: seconds(elapsed),
        budget,
        learnings: progress
            .map(|p| {
                p.learnings
                    .iter()
                    .map(|(lane, text, by)| Learning {
                        lane: lane.to_string(),
                        text: text.clone(),
                        reported_by: by.to_string(),
                    })
                    .collect()
            })
            .unwrap_or_default(),
        best_result_so_far,
        divergence_start_iteration: run_start.map(|s| s + 2),
        last_known_good_iteration: run_start.map(|s| s + 1),
        verification_rung_target: certified.then_some(RUNG_REPLAYED),
        verification_rung_achieved: certified.then_some(RUNG_CERTIFIED),
        residual_metric: progress
            .and_then(|p| p.goal.as_ref())
            .and_then(|g| g.residual_metric.clone()),
        exit: exit::derive(verdict, progress, counters),
    }
}

/// The lowest residual (the first, on a tie) and its 1-based iteration.
fn best(residuals: &[Decimal]) -> Option<BestResult> {
    let (at, value) = residuals
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(&b.0)))?;
    Some(BestResult {
        iteration: at as u64 + 1,
        residual_decimal_string: value.to_string(),
    })
}

fn zero() -> String {
    "0".to_owned()
}

/// Exact seconds (microsecond resolution), normalized.
fn seconds(d: std::time::Duration) -> String {
    Decimal::from_i128_with_scale(d.as_micros() as i128, 6)
        .normalize()
        .to_string()
}
