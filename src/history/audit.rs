//! Re-deriving a halt from the history: what `agentpump verify --certificates` checks. A halting
//! report is only worth trusting if the recorded thread supports it — the residuals, criteria,
//! goal, signals and budgets the governor saw are all in the hash-chained history, and the `halt`
//! message there carries the sha256 of the report it left.

use std::sync::Arc;

use rust_decimal::Decimal;
use sha2::{Digest as _, Sha256};

use super::{Record, RecordKind};
use crate::MessageId;
use crate::envelope::{GOVERNOR_NS, SYSTEM_NS};
use crate::governor::budget::Account;
use crate::governor::ledger::{Absorbed, Ledger, Progress};
use crate::governor::{
    Budget, CertificateType, Control, Decision, GovernorMessage, HaltMessage, HaltingReport,
    applicable, diverging,
};
use crate::{Limits, Payload};

/// What the governor saw in a thread up to one of its halts: its ledger, rebuilt by the
/// governor's own `absorb` from the recorded governor messages, and the loop signals with the
/// position of the record that carried them.
struct Seen {
    ledger: Ledger,
    controls: Vec<(usize, Control, Arc<str>)>,
}

impl Seen {
    /// Replays the governor messages of `records` (one thread, in order).
    fn replay(records: &[Record]) -> Self {
        let mut seen = Self {
            ledger: Ledger::new(Account::root(&Budget::unlimited()), None, None),
            controls: Vec::new(),
        };
        let limits = Limits::default();
        for (at, r) in records.iter().enumerate() {
            if r.kind != RecordKind::Message || r.root.namespace() != GOVERNOR_NS {
                continue;
            }
            let Some(message) = Payload::parse(&r.payload, &limits)
                .ok()
                .and_then(|p| GovernorMessage::parse(&p).ok())
            else {
                continue;
            };
            if let Absorbed::Loop(signal) = seen.ledger.absorb(message, &r.from, 0) {
                seen.controls
                    .push((at, signal.control, Arc::clone(&r.from)));
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

    /// Who signalled `control` at or after record `since`.
    fn said(&self, control: Control, since: usize) -> impl Iterator<Item = &str> {
        self.controls
            .iter()
            .filter(move |(at, c, _)| *at >= since && *c == control)
            .map(|(_, _, by)| &**by)
    }
}

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

/// Whether the recorded evidence earns the report's class.
fn derive(report: &HaltingReport, seen: &Seen, since: usize) -> Result<(), AuditError> {
    let progress = seen.progress();
    let applies = |c| applicable(progress, c);
    let last = seen.residuals().last().copied();
    let r_p = report
        .halting_certificate
        .as_ref()
        .and_then(|c| c.r_p_decimal_string.parse::<Decimal>().ok());
    let said = |control| seen.said(control, since).next().is_some();
    let earned = match (report.class.as_str(), report.stop_reason.as_str()) {
        ("EXACT", "residual-zero") => {
            last.is_some_and(|r| r.is_zero()) && applies(CertificateType::Exact)
        }
        ("EXACT", _) => {
            let done_by: Vec<&str> = seen.said(Control::Done, since).collect();
            let criteria = progress.map_or(&[][..], |p| &p.criteria);
            !done_by.is_empty()
                && applies(CertificateType::Exact)
                && !criteria.is_empty()
                && criteria.iter().all(|c| {
                    c.met
                        && c.reported_by
                            .as_deref()
                            .is_some_and(|by| !done_by.contains(&by))
                })
        }
        ("CONVERGED", _) => {
            applies(CertificateType::Converged)
                && matches!((last, r_p), (Some(l), Some(r)) if l < r)
        }
        ("DIVERGED", _) => {
            applies(CertificateType::Diverged)
                && diverging(seen.residuals(), 2)
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
        ("need-info", _) => progress
            .and_then(|p| p.goal.as_ref())
            .is_some_and(|g| g.certificates.is_empty()),
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
