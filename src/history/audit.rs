//! Re-deriving a halt from the history: what `agentpump verify --certificates` checks. A halting
//! report is only worth trusting if the recorded thread supports it — the residuals, criteria,
//! goal, signals and budgets the governor saw are all in the hash-chained history, and the `halt`
//! message there carries the sha256 of the report it left.

mod fork;

use std::sync::Arc;

pub use fork::{ForkBreak, forked_from, is_carried, verify_fork};
use rust_decimal::Decimal;
use sha2::{Digest as _, Sha256};

use super::{Record, RecordKind};
use crate::MessageId;
use crate::envelope::{GOVERNOR_NS, SYSTEM_NS};
use crate::governor::budget::Account;
use crate::governor::ledger::{Absorbed, Ledger, Progress};
use crate::governor::report::{RUNG_CERTIFIED, RUNG_REPLAYED};
use crate::governor::{
    Budget, CertificateType, Control, Decision, GovernorMessage, HaltMessage, HaltingReport,
    applicable, criteria_gap, diverging,
};
use crate::{Limits, Payload};

/// What the governor saw in a thread up to one of its halts: its ledger, rebuilt by the
/// governor's own `absorb` from the recorded governor messages and carve decisions, and the loop signals with the
/// position of the record that carried them.
struct Seen {
    ledger: Ledger,
    controls: Vec<(usize, Control, Arc<str>)>,
    /// The position and reporter of each residual, in order.
    residuals_by: Vec<(usize, Arc<str>)>,
}

impl Seen {
    /// Replays the governor messages of `records` (one thread, in order).
    fn replay(records: &[Record]) -> Self {
        let mut seen = Self {
            ledger: Ledger::new(Account::root(&Budget::unlimited()), None, None),
            controls: Vec::new(),
            residuals_by: Vec::new(),
        };
        let limits = Limits::default();
        for (at, r) in records.iter().enumerate() {
            if r.kind == RecordKind::Decision
                && let Some(Decision::Carve { thread, to, .. }) = Decision::parse(&r.payload)
            {
                // Whom the child serves: a later `<criterion thread="…">` is credited to it.
                seen.ledger.spawned(thread, &to);
                continue;
            }
            if r.kind != RecordKind::Message || r.root.namespace() != GOVERNOR_NS {
                continue;
            }
            let Some(message) = Payload::parse(&r.payload, &limits)
                .ok()
                .and_then(|p| GovernorMessage::parse(&p).ok())
            else {
                continue;
            };
            match seen.ledger.absorb(message, &r.from, 0) {
                Absorbed::Loop(signal) => {
                    seen.controls
                        .push((at, signal.control, Arc::clone(&r.from)));
                }
                Absorbed::Residual => seen.residuals_by.push((at, Arc::clone(&r.from))),
                _ => {}
            }
        }
        seen
    }

    fn progress(&self) -> Option<&Progress> {
        self.ledger.progress.as_deref()
    }

    fn residuals(&self) -> &[Decimal] {
        self.progress().map_or(&[], |p| &p.residuals)
    }

    /// Whether the residuals end rising three times in a row (phuc-loop's
    /// `all_increasing(residuals[-3:])`), the last of them reported at or after record `since`.
    fn diverging_since(&self, since: usize) -> bool {
        diverging(self.residuals(), SEED_DIVERGENCE_WINDOW)
            && self.residuals_by.last().is_some_and(|(at, _)| *at >= since)
    }

    /// Who signalled `control` at or after record `since`.
    fn said(&self, control: Control, since: usize) -> impl Iterator<Item = &str> {
        self.controls
            .iter()
            .filter(move |(at, c, _)| *at >= since && *c == control)
            .map(|(_, _, by)| &**by)
    }
}

/// phuc-loop's divergence window: "len(residuals) >= 3 AND all_increasing(residuals[-3:])".
const SEED_DIVERGENCE_WINDOW: usize = 3;

/// Why a halting report does not agree with the recorded history.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuditError {
    /// The report names a halt message the thread does not have.
    #[error("no halt message {0} in the thread")]
    NoHalt(MessageId),
    /// The record the report names is not a `halt` message.
    #[error("record {0} is not a halt message")]
    NotAHalt(MessageId),
    /// The halt message carries the digest of another report.
    #[error("the report is not the one its halt message names (digest differs)")]
    DigestDiffers,
    /// The halt message does not repeat the report's class or reason (`class="EXACT"`).
    #[error("the halt message does not say {0}")]
    Unsaid(String),
    /// The report's residuals are not the ones recorded.
    #[error("residuals {reported:?} in the report, {recorded:?} in the history")]
    Residuals {
        /// The residuals in the report's certificate.
        reported: Vec<String>,
        /// The residuals the recorded messages carry.
        recorded: Vec<String>,
    },
    /// The report's class is none the governor gives.
    #[error("unknown halt class `{0}`")]
    UnknownClass(String),
    /// The residuals rose three times in a row and the thread halted otherwise (phuc-loop §2.5
    /// SILENT_DIVERGENCE: "all_increasing(residuals[-3:]) AND status != EXIT_DIVERGED").
    #[error("residuals {0:?} rose three times in a row, yet the halt is not DIVERGED")]
    SilentDivergence(Vec<String>),
    /// The report's r-p is not the one the recorded goals put in force.
    #[error("r-p {reported} in the report, {declared} declared by the recorded goals")]
    RpDiffers {
        /// The report's `R_p_decimal_string`.
        reported: String,
        /// The r-p in force after the recorded goals (a later goal only lowers it).
        declared: String,
    },
    /// The recorded evidence does not earn the report's class and reason.
    #[error("{class} ({reason}) is not what the recorded history supports")]
    Unearned {
        /// The report's class.
        class: String,
        /// The report's stop reason.
        reason: String,
    },
}

/// Checks one halting report against the records of its thread (all of them, in order).
///
/// # Errors
///
/// What does not agree: the report's digest against the `halt` message, its class, status or
/// residuals against what was recorded, or a certificate the recorded evidence does not earn.
pub fn audit(records: &[Record], report: &HaltingReport) -> Result<(), AuditError> {
    let at = records
        .iter()
        .position(|r| r.id == report.halt_id)
        .ok_or(AuditError::NoHalt(report.halt_id))?;
    let record = &records[at];
    let halt = (record.kind == RecordKind::System && record.root.is(SYSTEM_NS, "halt"))
        .then(|| HaltMessage::read(&record.payload))
        .flatten()
        .ok_or(AuditError::NotAHalt(report.halt_id))?;
    let json = serde_json::to_string(report).expect("a report serializes");
    if halt.report_digest != hex::encode(Sha256::digest(json.as_bytes())) {
        return Err(AuditError::DigestDiffers);
    }
    for (attribute, said, reported) in [
        ("class", &halt.class, &report.class),
        ("reason", &halt.reason, &report.stop_reason),
    ] {
        if said != reported {
            return Err(AuditError::Unsaid(format!("{attribute}=\"{reported}\"")));
        }
    }
    // The signals that count are those since the last resume (a resumed thread starts over).
    let since = records[..at]
        .iter()
        .rposition(|r| {
            r.kind == RecordKind::Decision
                && matches!(Decision::parse(&r.payload), Some(Decision::Resume { .. }))
        })
        .map_or(0, |r| r + 1);
    let seen = Seen::replay(&records[..at]);
    let recorded: Vec<String> = seen.residuals().iter().map(Decimal::to_string).collect();
    if let Some(cert) = &report.halting_certificate
        && cert.residual_history_decimal_strings != recorded
    {
        return Err(AuditError::Residuals {
            reported: cert.residual_history_decimal_strings.clone(),
            recorded,
        });
    }
    derive(report, &seen, since)
}

/// Replays a halt once per read of its thread's records in `reads` (each read taken from the
/// store on its own) and returns the phuc-loop §11 verification rung the halt reaches:
/// [`RUNG_REPLAYED`] for a certified halt that at least two replays re-derive (the seed's
/// "at_least_2_replays_of_final_iteration_produce_same_certificate"), [`RUNG_CERTIFIED`] for
/// one replayed once, `None` for a halt without a certificate.
///
/// # Errors
///
/// The first replay that does not earn the report, as [`audit`] says it.
pub fn replay(reads: &[Vec<Record>], report: &HaltingReport) -> Result<Option<u32>, AuditError> {
    for records in reads {
        audit(records, report)?;
    }
    let rung = if reads.len() >= 2 {
        RUNG_REPLAYED
    } else {
        RUNG_CERTIFIED
    };
    Ok(report.halting_certificate.as_ref().map(|_| rung))
}

/// Whether the recorded evidence earns the report's class, by phuc-loop's rules as the
/// governor applies them (`governor/verdict.rs`): the same criteria check for EXACT, DIVERGED
/// whether declared or not, the declared goal's r-p, and no other halt while the residuals rise.
fn derive(report: &HaltingReport, seen: &Seen, since: usize) -> Result<(), AuditError> {
    let progress = seen.progress();
    let applies = |c| applicable(progress, c);
    let last = seen.residuals().last().copied();
    let reported_r_p = report
        .halting_certificate
        .as_ref()
        .map(|c| c.r_p_decimal_string.as_str());
    let declared_r_p = seen.ledger.goal().and_then(|g| g.r_p);
    if let (Some(reported), Some(declared)) = (reported_r_p, declared_r_p)
        && reported.parse::<Decimal>().ok() != Some(declared)
    {
        return Err(AuditError::RpDiffers {
            reported: reported.to_owned(),
            declared: declared.to_string(),
        });
    }
    if !matches!(report.class.as_str(), "DIVERGED" | "aborted") && seen.diverging_since(since) {
        let residuals = seen.residuals().iter().map(Decimal::to_string).collect();
        return Err(AuditError::SilentDivergence(residuals));
    }
    let r_p = reported_r_p.and_then(|r| r.parse::<Decimal>().ok());
    let said = |control| seen.said(control, since).next().is_some();
    let certified_for = |claimant: &str| {
        applies(CertificateType::Exact) && criteria_gap(progress, claimant).is_none()
    };
    let earned = match (report.class.as_str(), report.stop_reason.as_str()) {
        ("EXACT", "residual-zero") => {
            last.is_some_and(|r| r.is_zero())
                && seen
                    .residuals_by
                    .last()
                    .is_some_and(|(_, by)| certified_for(by))
        }
        ("EXACT", _) => seen.said(Control::Done, since).any(certified_for),
        ("CONVERGED", _) => {
            applies(CertificateType::Converged)
                && matches!((last, r_p), (Some(l), Some(r)) if l < r)
        }
        ("DIVERGED", _) => {
            diverging(seen.residuals(), SEED_DIVERGENCE_WINDOW)
                && report.divergence_start_iteration.is_some()
        }
        ("TIMEOUT", reason) => reason.split(' ').all(|name| {
            report.budget.get(name).is_none_or(|line| {
                let (Some(limit), Ok(spent)) = (&line.limit, line.spent.parse::<Decimal>()) else {
                    return name == "max-wall-clock";
                };
                limit.parse::<Decimal>().is_ok_and(|l| spent >= l)
            })
        }),
        ("aborted", _) => said(Control::Abort),
        ("done-uncertified", _) => said(Control::Done),
        ("need-info", reason) => seen
            .ledger
            .goal()
            .is_some_and(|g| g.need_info() == Some(reason)),
        ("BACKPRESSURE" | "no-progress", _) => true,
        (other, _) => return Err(AuditError::UnknownClass(other.to_owned())),
    };
    if !earned {
        return Err(AuditError::Unearned {
            class: report.class.clone(),
            reason: report.stop_reason.clone(),
        });
    }
    Ok(())
}
