//! Re-deriving a halt from the history: what `agentpump verify --certificates` checks. A halting
//! report is only worth trusting if the recorded thread supports it — the residuals, criteria,
//! goal, signals and budgets the governor saw are all in the hash-chained history, and the `halt`
//! message there carries the sha256 of the report it left.

use rust_decimal::Decimal;
use sha2::{Digest as _, Sha256};

use super::{Record, RecordKind};
use crate::MessageId;
use crate::envelope::{GOVERNOR_NS, SYSTEM_NS};
use crate::governor::{CertificateType, Control, GovernorMessage, HaltingReport, diverging};
use crate::{Limits, Payload};

/// What the governor saw in a thread up to one of its halts, read back from the records.
#[derive(Debug, Default)]
struct Seen {
    residuals: Vec<Decimal>,
    /// `(id, met, reported by)`, latest per id.
    criteria: Vec<(String, bool, String)>,
    certificates: Option<Vec<CertificateType>>,
    controls: Vec<(Control, String)>,
}

impl Seen {
    /// Replays the governor messages of `records` (one thread, in order).
    fn replay(records: &[Record]) -> Self {
        let mut seen = Self::default();
        let limits = Limits::default();
        let messages = records
            .iter()
            .filter(|r| r.kind == RecordKind::Message && r.root.namespace() == GOVERNOR_NS)
            .filter_map(|r| {
                let payload = Payload::parse(&r.payload, &limits).ok()?;
                Some((GovernorMessage::parse(&payload).ok()?, r.from.to_string()))
            });
        for (message, from) in messages {
            match message {
                GovernorMessage::Goal(goal) => seen.certificates = Some(goal.certificates),
                GovernorMessage::Residual(r) => seen.residuals.push(r),
                GovernorMessage::Criterion { id, met, .. } => {
                    seen.criteria.retain(|(c, _, _)| *c != id);
                    seen.criteria.push((id, met, from));
                }
                GovernorMessage::Loop(signal) => seen.controls.push((signal.control, from)),
                GovernorMessage::Learning { .. } => {}
            }
        }
        seen
    }

    fn applicable(&self, c: CertificateType) -> bool {
        self.certificates
            .as_ref()
            .is_none_or(|all| all.contains(&c))
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
    let halt = &records[at];
    if halt.kind != RecordKind::System || !halt.root.is(SYSTEM_NS, "halt") {
        return Err(AuditError::NotAHalt(report.halt_id));
    }
    let json = serde_json::to_string(report).expect("a report serializes");
    let digest = hex::encode(Sha256::digest(json.as_bytes()));
    if !halt
        .payload
        .contains(&format!("report-digest=\"{digest}\""))
    {
        return Err(AuditError::DigestDiffers);
    }
    for (attribute, value) in [("class", &report.class), ("reason", &report.stop_reason)] {
        let quoted = format!(
            "{attribute}=\"{}\"",
            quick_xml::escape::escape(value.as_str())
        );
        if !halt.payload.contains(&quoted) {
            return Err(AuditError::Unsaid(quoted));
        }
    }
    let since = records[..at]
        .iter()
        .rposition(|r| r.kind == RecordKind::Decision && r.payload.contains("action=\"resume\""))
        .map_or(0, |r| r + 1);
    let seen = Seen::replay(&records[..at]);
    let recorded: Vec<String> = seen.residuals.iter().map(Decimal::to_string).collect();
    if let Some(cert) = &report.halting_certificate {
        if cert.residual_history_decimal_strings != recorded {
            return Err(AuditError::Residuals {
                reported: cert.residual_history_decimal_strings.clone(),
                recorded,
            });
        }
    }
    derive(report, &seen, &records[since..at])
}

/// Whether the recorded evidence earns the report's class.
fn derive(report: &HaltingReport, seen: &Seen, turn: &[Record]) -> Result<(), AuditError> {
    let last = seen.residuals.last().copied();
    let r_p = report
        .halting_certificate
        .as_ref()
        .and_then(|c| c.r_p_decimal_string.parse::<Decimal>().ok());
    let said = |control: Control| turn.iter().rev().any(|r| said_in(r, control));
    let earned = match (report.class.as_str(), report.stop_reason.as_str()) {
        ("EXACT", "residual-zero") => {
            last.is_some_and(|r| r.is_zero()) && seen.applicable(CertificateType::Exact)
        }
        ("EXACT", _) => {
            let done_by: Vec<&str> = turn
                .iter()
                .filter(|r| said_in(r, Control::Done))
                .map(|r| &*r.from)
                .collect();
            said(Control::Done)
                && seen.applicable(CertificateType::Exact)
                && !seen.criteria.is_empty()
                && seen
                    .criteria
                    .iter()
                    .all(|(_, met, by)| *met && !done_by.contains(&by.as_str()))
        }
        ("CONVERGED", _) => {
            seen.applicable(CertificateType::Converged)
                && matches!((last, r_p), (Some(l), Some(r)) if l < r)
        }
        ("DIVERGED", _) => {
            seen.applicable(CertificateType::Diverged)
                && diverging(&seen.residuals, 2)
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
        ("need-info", _) => seen.certificates.as_ref().is_some_and(Vec::is_empty),
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

/// Whether `record` is a `loop` signal with this control.
fn said_in(record: &Record, control: Control) -> bool {
    let word = match control {
        Control::Continue => "continue",
        Control::Done => "done",
        Control::Abort => "abort",
    };
    record.kind == RecordKind::Message
        && record.root.is(GOVERNOR_NS, "loop")
        && record.payload.contains(&format!("control=\"{word}\""))
}
