//! [`ExitReport`]: what phuc-loop's output contract (§6.3, §16) asks of a loop that did not
//! converge, derived from what the governor knows when it halts (the verdict, the goal, the
//! residuals, the criteria, the counters). Each field is absent for the exits that do not ask
//! for it, so that reports written before it existed keep their digests.

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::super::Counters;
use super::super::ledger::Progress;
use super::super::verdict::{HaltClass, Verdict, rising_run_start};

/// The exit-specific fields of a halting report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitReport {
    /// DIVERGED (§16.2): the rising run and the best residual, with the last learning reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnosis_attempt: Option<String>,
    /// Budget exceeded, blocked and need-info exits (§6.3): what to do with this thread next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recommendation: Option<String>,
    /// Blocked (§16.4): the phuc-loop state the loop was in when it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_known_state: Option<String>,
    /// Blocked (§16.4): deliveries run and failed, and what stopped the thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what_ran_and_failed: Option<String>,
    /// Blocked (§16.4): what an operator or the spawner can do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_actions: Option<Vec<String>>,
    /// Need-info (§16.5): the declaration fields or criteria that were missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_fields: Option<Vec<String>>,
    /// Need-info (§16.5): what can be kept of the work so far ("nothing" when nothing is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe_partials: Option<String>,
}

/// The exit fields of a halt with `verdict`.
pub(crate) fn derive(
    verdict: &Verdict,
    progress: Option<&Progress>,
    counters: &Counters,
) -> ExitReport {
    match verdict.class.status() {
        "EXIT_DIVERGED" => ExitReport {
            diagnosis_attempt: progress.map(diagnosis),
            ..ExitReport::default()
        },
        "EXIT_BUDGET_EXCEEDED" => ExitReport {
            recommendation: Some(format!(
                "resume with more of {} if the residuals were improving, or accept the partial result ({})",
                verdict.reason.replace(' ', ", "),
                partials(progress)
            )),
            ..ExitReport::default()
        },
        "EXIT_BLOCKED" => blocked(verdict, counters),
        "EXIT_NEED_INFO" => ExitReport {
            recommendation: Some(
                "declare what is missing (a goal with criteria and certificates, evidence from another listener), then resume".into(),
            ),
            missing_fields: Some(missing(verdict, progress)),
            safe_partials: Some(partials(progress)),
            ..ExitReport::default()
        },
        _ => ExitReport::default(),
    }
}

/// The rising run, the best residual, the last learning.
fn diagnosis(p: &Progress) -> String {
    let r = &p.residuals;
    let start = rising_run_start(r);
    let run: Vec<String> = r[start..].iter().map(Decimal::to_string).collect();
    let mut text = format!(
        "residuals rose at every iteration from {} to {}: {}",
        start + 1,
        r.len(),
        run.join(" < ")
    );
    if let Some((at, best)) = r.iter().enumerate().min_by(|a, b| a.1.cmp(b.1)) {
        text.push_str(&format!("; the best was {best} at iteration {}", at + 1));
    }
    if let Some((lane, learning, by)) = p.learnings.last() {
        text.push_str(&format!("; last learning (lane {lane}, {by}): {learning}"));
    }
    text
}

/// Blocked: the state, what ran, and what to do, by class.
fn blocked(verdict: &Verdict, counters: &Counters) -> ExitReport {
    let at_gate = matches!(
        verdict.reason.as_str(),
        "repeated-message" | "stop-file" | "queue-full"
    );
    let state = if at_gate {
        "SPAWN_SUBAGENT"
    } else {
        "CHECK_HALTING"
    };
    let (recommendation, actions): (&str, &[&str]) = match verdict.class {
        HaltClass::Aborted => (
            "read the listener's abort reason; resume once its cause is fixed",
            &[
                "read the abort in the thread's history",
                "fix its cause",
                "resume the thread",
            ],
        ),
        HaltClass::NoProgress => (
            "change the approach before resuming: the same message or signal kept coming back",
            &[
                "read the repeated messages in the thread's history",
                "change the prompt or the listener",
                "resume the thread",
            ],
        ),
        _ => (
            "remove the stop (stop request, stop file, queue pressure, rate limit), then resume",
            &[
                "find the signal in the halt's reason",
                "remove it",
                "resume the thread",
            ],
        ),
    };
    ExitReport {
        recommendation: Some(recommendation.into()),
        last_known_state: Some(state.into()),
        what_ran_and_failed: Some(format!(
            "{} deliveries ran, {} of them failed; stopped by {} ({})",
            counters.deliveries,
            counters.failures,
            verdict.class.as_str(),
            verdict.reason
        )),
        next_actions: Some(actions.iter().map(|a| (*a).to_owned()).collect()),
        ..ExitReport::default()
    }
}

/// Need-info: the seed's declaration fields a goal lacked, or the criteria not certified.
fn missing(verdict: &Verdict, progress: Option<&Progress>) -> Vec<String> {
    let criteria = |keep: &dyn Fn(&super::super::ledger::CriterionStatus) -> bool| {
        let ids = progress.map(|p| p.criteria.iter().filter(|c| keep(c)));
        ids.into_iter()
            .flatten()
            .map(|c| format!("criterion {}", c.id))
            .collect()
    };
    match verdict.reason.as_str() {
        "empty-goal" => vec!["goal".into(), "acceptance_criteria".into()],
        "no-certificates-declared" => vec!["halting_certificates_applicable".into()],
        "no-criteria-declared" => vec!["acceptance_criteria".into()],
        "exact-not-applicable" => vec!["halting_certificates_applicable: EXACT".into()],
        "criteria-unmet" => criteria(&|c| !c.met),
        "criteria-without-evidence" => criteria(&|c| !c.has_evidence()),
        _ => criteria(&|_| true),
    }
}

/// What the thread achieved that can be kept: criteria met and the best residual.
fn partials(progress: Option<&Progress>) -> String {
    let Some(p) = progress else {
        return "nothing".into();
    };
    let met: Vec<&str> = p
        .criteria
        .iter()
        .filter(|c| c.met && c.has_evidence())
        .map(|c| c.id.as_str())
        .collect();
    let mut parts = Vec::new();
    if !met.is_empty() {
        parts.push(format!("criteria met with evidence: {}", met.join(", ")));
    }
    if let Some((at, best)) = p.residuals.iter().enumerate().min_by(|a, b| a.1.cmp(b.1)) {
        parts.push(format!("best residual {best} at iteration {}", at + 1));
    }
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join("; ")
    }
}
