//! [`HaltClass`] and [`Verdict`]: why a thread stops, and the precedence that decides it.

use std::fmt;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::budget::BudgetName;
use super::ledger::{CriterionStatus, Progress};
use super::messages::{CertificateType, Control};
use crate::Payload;

/// Why a thread halted. The first five carry a phuc-loop certificate; the rest do not.
///
/// phuc-loop's rules, as the governor applies them:
///
/// - EXACT: "goal_achieved == true AND all acceptance_criteria passed", "residual: 0 (exact)" —
///   `done`, or a residual of exactly zero, with every declared criterion met, with an evidence
///   link, by a listener other than the claimant; only when the goal declares EXACT applicable.
/// - CONVERGED: "residual < R_p", compared as exact decimals.
/// - DIVERGED: "all_increasing(residuals[-3:])" — the last `divergence_window` residuals each
///   larger than the one before, whether or not the goal declares DIVERGED (§2.5 forbids
///   SILENT_DIVERGENCE).
/// - need-info: "If `halting_certificates_applicable` is missing or empty: `EXIT_NEED_INFO`
///   immediately", and a goal with neither text nor criteria (§2.4 NULL_CHECK).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HaltClass {
    /// Done, and every declared criterion met with evidence from a listener other than the one
    /// that said done.
    Exact,
    /// The last residual is below r-p.
    Converged,
    /// The residual rose in each of the last `divergence_window` reports.
    Diverged,
    /// A budget ran out (named).
    Timeout(BudgetName),
    /// Something outside asked to stop: a stop request, the stop file, a halted parent,
    /// sustained queue-full, an upstream rate limit.
    Backpressure(String),
    /// A listener signalled `abort`.
    Aborted,
    /// The same control signal, or the same message between the same listeners, kept coming.
    NoProgress,
    /// `done` without a certificate: no criteria declared, or not all met by another listener.
    DoneUncertified,
    /// A goal declared no applicable certificate: the loop cannot know when it is done.
    NeedInfo,
}

impl HaltClass {
    /// The certificate this class carries, if any.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::{CertificateType, HaltClass};
    /// assert_eq!(HaltClass::Exact.certificate(), Some(CertificateType::Exact));
    /// assert_eq!(HaltClass::Aborted.certificate(), None); // a halt without a certificate
    /// ```
    pub fn certificate(&self) -> Option<CertificateType> {
        match self {
            Self::Exact => Some(CertificateType::Exact),
            Self::Converged => Some(CertificateType::Converged),
            Self::Diverged => Some(CertificateType::Diverged),
            Self::Timeout(_) => Some(CertificateType::Timeout),
            Self::Backpressure(_) => Some(CertificateType::Backpressure),
            Self::Aborted | Self::NoProgress | Self::DoneUncertified | Self::NeedInfo => None,
        }
    }

    /// The class as written in `halt class="…"` and reports.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::{BudgetName, HaltClass};
    /// assert_eq!(HaltClass::Timeout(BudgetName::Turns).as_str(), "TIMEOUT");
    /// assert_eq!(HaltClass::NoProgress.as_str(), "no-progress");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Exact => "EXACT",
            Self::Converged => "CONVERGED",
            Self::Diverged => "DIVERGED",
            Self::Timeout(_) => "TIMEOUT",
            Self::Backpressure(_) => "BACKPRESSURE",
            Self::Aborted => "aborted",
            Self::NoProgress => "no-progress",
            Self::DoneUncertified => "done-uncertified",
            Self::NeedInfo => "need-info",
        }
    }

    /// phuc-loop §10.2 status.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::HaltClass;
    /// assert_eq!(HaltClass::Converged.status(), "EXIT_CONVERGED");
    /// assert_eq!(HaltClass::Aborted.status(), "EXIT_BLOCKED");
    /// ```
    pub fn status(&self) -> &'static str {
        match self {
            Self::Exact | Self::Converged => "EXIT_CONVERGED",
            Self::Diverged => "EXIT_DIVERGED",
            Self::Timeout(_) => "EXIT_BUDGET_EXCEEDED",
            Self::Backpressure(_) | Self::Aborted | Self::NoProgress => "EXIT_BLOCKED",
            Self::DoneUncertified | Self::NeedInfo => "EXIT_NEED_INFO",
        }
    }

    /// phuc-loop lane of the certificate: A hard, B verified threshold, C budget.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::HaltClass;
    /// assert_eq!(HaltClass::Converged.lane(), Some("B"));
    /// assert_eq!(HaltClass::DoneUncertified.lane(), None);
    /// ```
    pub fn lane(&self) -> Option<&'static str> {
        match self {
            Self::Exact | Self::Diverged | Self::Backpressure(_) => Some("A"),
            Self::Converged => Some("B"),
            Self::Timeout(_) => Some("C"),
            _ => None,
        }
    }
}

impl fmt::Display for HaltClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A decision to halt: the class and a machine-readable stop reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Why.
    pub class: HaltClass,
    /// Machine-readable reason (`max-turns`, `residual-below-r-p`, `stop-request`, …).
    pub reason: String,
}

impl Verdict {
    pub(crate) fn new(class: HaltClass, reason: impl Into<String>) -> Self {
        Self {
            class,
            reason: reason.into(),
        }
    }

    pub(crate) fn timeout(budget: BudgetName) -> Self {
        Self::new(HaltClass::Timeout(budget), budget.as_str())
    }

    /// TIMEOUT for breached budgets, naming every one (`max-tokens max-cost`); `None` when
    /// nothing is breached.
    pub(crate) fn breach(breaches: &[super::budget::Exhausted]) -> Option<Self> {
        let first = breaches.first()?;
        let names: Vec<&str> = breaches.iter().map(|e| e.budget.as_str()).collect();
        Some(Self::new(HaltClass::Timeout(first.budget), names.join(" ")))
    }

    /// TIMEOUT for a self-iteration past its per-iteration limits, naming every one;
    /// `None` when none is breached.
    pub(crate) fn iteration_breach(names: &[BudgetName]) -> Option<Self> {
        let first = *names.first()?;
        let reason: Vec<&str> = names.iter().map(|n| n.as_str()).collect();
        Some(Self::new(HaltClass::Timeout(first), reason.join(" ")))
    }

    pub(crate) fn backpressure(reason: &str) -> Self {
        Self::new(HaltClass::Backpressure(reason.to_owned()), reason)
    }
}

/// An `abort`'s halt: `aborted` for the listener's reason (or `abort`), except that phuc-loop's
/// `BACKPRESSURE_SIGNAL` is the seed's BACKPRESSURE exit (§1 step 8: "status =
/// EXIT_BLOCKED(stop_reason=BACKPRESSURE_SIGNAL)"), as an upstream refusal is, and so is each
/// of our BACKPRESSURE reasons (`stop-file`, `disk-usage`, … — §6.1's signals as the loop
/// controller sees them); `max-iterations` is the loop controller's MAX_ITERS (§6.3:
/// "on_max_iterations: action: EXIT_BUDGET_EXCEEDED").
fn abort_verdict(reason: Option<String>) -> Verdict {
    let reason = reason.unwrap_or_else(|| "abort".into());
    match super::seed_names::abort_class(&reason) {
        Some(("BACKPRESSURE", ours)) => Verdict::backpressure(ours),
        Some(("TIMEOUT", "max-iterations")) => Verdict::timeout(BudgetName::Iterations),
        _ => Verdict::new(HaltClass::Aborted, reason),
    }
}

/// What one delivery told the governor, gathered before deciding.
#[derive(Debug, Default)]
pub(crate) struct Signals {
    /// The strongest loop control seen (abort > done > continue).
    pub control: Option<Control>,
    pub abort_reason: Option<String>,
    /// A budget ran out or something outside asked to stop.
    pub halt: Option<Verdict>,
    /// A residual was reported.
    pub residual: bool,
    /// The same control payload came `window` times in a row.
    pub stuck: bool,
    /// The last `continue` payload of the delivery, for the turn it asks for.
    pub continued: Option<Payload>,
}

impl Signals {
    /// The `continue` payload, when `continue` is the strongest control of the delivery:
    /// Ask-Loop's "The host parses these LOOP signals … to decide the next action".
    pub fn next_turn(&mut self) -> Option<Payload> {
        let continued = self.continued.take();
        (self.control == Some(Control::Continue))
            .then_some(continued)
            .flatten()
    }

    pub fn control(&mut self, control: Control, reason: Option<String>) {
        if self.control.is_none_or(|c| control > c) {
            self.control = Some(control);
            if control == Control::Abort {
                self.abort_reason = reason;
            }
        }
    }

    /// Resolves by precedence: abort > DIVERGED > halt > done > residual certificates >
    /// no-progress > continue. DIVERGED comes before every other halt because phuc-loop checks
    /// it first (§1 step 7, before the certificate and budget checks of steps 8 and 9) and
    /// forbids any other exit while the residuals rise (§2.5 SILENT_DIVERGENCE). `me` is the
    /// listener whose delivery produced the signals: it may not certify its own claim (EXACT).
    pub fn resolve(
        self,
        progress: Option<&Progress>,
        r_p: Decimal,
        window: usize,
        me: &str,
    ) -> Option<Verdict> {
        if self.control == Some(Control::Abort) {
            return Some(abort_verdict(self.abort_reason));
        }
        let residuals = progress.map_or(&[][..], |p| p.residuals.as_slice());
        if self.residual && diverging(residuals, window) {
            return Some(Verdict::new(HaltClass::Diverged, "residual-rising"));
        }
        if let Some(halt) = self.halt {
            return Some(halt);
        }
        if self.control == Some(Control::Done) {
            return Some(done_verdict(progress, me));
        }
        if self.residual
            && let Some(v) = residual_verdict(progress, r_p, me)
        {
            return Some(v);
        }
        self.stuck
            .then(|| Verdict::new(HaltClass::NoProgress, "same-control-signal"))
    }
}

fn done_verdict(progress: Option<&Progress>, me: &str) -> Verdict {
    match criteria_gap(progress, me) {
        Some(gap) => Verdict::new(HaltClass::DoneUncertified, gap),
        None if applicable(progress, CertificateType::Exact) => {
            Verdict::new(HaltClass::Exact, "all-criteria-met")
        }
        None => Verdict::new(HaltClass::DoneUncertified, "exact-not-applicable"),
    }
}

/// Why the acceptance criteria do not certify `claimant`'s claim that the goal is reached
/// (`None` when they do): phuc-loop's EXACT needs "acceptance_criteria_checklist_all_true"
/// (§3.1) backed by "artifact evidence, not prose" (§15.1), and "a loop without criteria cannot
/// terminate with EXACT certificate" (§12). Each criterion must be met, with an evidence link,
/// reported by a listener other than the claimant.
pub(crate) fn criteria_gap(progress: Option<&Progress>, claimant: &str) -> Option<&'static str> {
    let criteria = progress.map_or(&[][..], |p| p.criteria.as_slice());
    if criteria.is_empty() {
        Some("no-criteria-declared")
    } else if !criteria.iter().all(|c| c.met) {
        Some("criteria-unmet")
    } else if !criteria.iter().all(CriterionStatus::has_evidence) {
        Some("criteria-without-evidence")
    } else if !criteria
        .iter()
        .all(|c| c.reported_by.as_deref().is_some_and(|by| by != claimant))
    {
        Some("criteria-self-certified")
    } else {
        None
    }
}

/// Whether certificate `c` may end the thread: the goal declares it, or no goal was declared (a
/// thread that only reports residuals). DIVERGED, TIMEOUT and BACKPRESSURE end a thread
/// whether declared or not; this asks about EXACT and CONVERGED.
pub(crate) fn applicable(progress: Option<&Progress>, c: CertificateType) -> bool {
    progress
        .and_then(|p| p.goal.as_ref())
        .is_none_or(|g| g.certificates.contains(&c))
}

/// The certificates a residual earns once divergence is ruled out: EXACT at exactly zero
/// when the criteria certify it (`me` reported the residual: its claim), else CONVERGED below
/// r-p — each only when the goal declares it.
fn residual_verdict(progress: Option<&Progress>, r_p: Decimal, me: &str) -> Option<Verdict> {
    let last = *progress?.residuals.last()?;
    let applicable = |c| applicable(progress, c);
    if last.is_zero() && applicable(CertificateType::Exact) && criteria_gap(progress, me).is_none()
    {
        return Some(Verdict::new(HaltClass::Exact, "residual-zero"));
    }
    (applicable(CertificateType::Converged) && last < r_p)
        .then(|| Verdict::new(HaltClass::Converged, "residual-below-r-p"))
}

/// phuc-loop's `len(residuals) >= 3 AND all_increasing(residuals[-3:])`, for a window of `w`.
pub(crate) fn diverging(residuals: &[Decimal], w: usize) -> bool {
    w > 0
        && residuals.len() >= w
        && residuals[residuals.len() - w..]
            .windows(2)
            .all(|pair| pair[1] > pair[0])
}

/// Where the rising run at the end of `residuals` starts (0-based; `len − 1` when the last did
/// not rise).
pub(crate) fn rising_run_start(residuals: &[Decimal]) -> usize {
    let mut start = residuals.len().saturating_sub(1);
    while start > 0 && residuals[start] > residuals[start - 1] {
        start -= 1;
    }
    start
}
