//! phuc-loop's (seed 002) stop-reason and status names, and agentpump's: one table read both
//! ways — our class and reason to the seed's name for reports (`seed_stop_reason`), the seed's
//! name to ours where a listener writes one (`<loop control="abort" reason="…">`).

/// One row: a seed stop reason, the class it stands for, and our reasons under it; the first
/// reason is what the seed name reads as.
struct Row {
    seed: &'static str,
    class: &'static str,
    reasons: &'static [&'static str],
}

/// The table (docs/governor.md, "Status and stop-reason names").
const STOP_REASONS: &[Row] = &[
    Row {
        seed: "SILENT_DIVERGENCE_DETECTED",
        class: "DIVERGED",
        reasons: &["residual-rising"],
    },
    Row {
        seed: "MAX_ITERS",
        class: "TIMEOUT",
        reasons: &["max-turns", "max-iterations"],
    },
    Row {
        seed: "MAX_TOOL_CALLS",
        class: "TIMEOUT",
        reasons: &[
            "max-tool-calls",
            "max-wall-clock",
            "max-tool-calls-per-iteration",
            "max-wall-clock-per-iteration",
        ],
    },
    Row {
        seed: "BACKPRESSURE_SIGNAL",
        class: "BACKPRESSURE",
        reasons: &[
            "upstream",
            "stop-request",
            "stop-file",
            "queue-full",
            "parent-halted",
            "disk-usage",
            "dependency-unavailable",
        ],
    },
    Row {
        seed: "EVIDENCE_INCOMPLETE",
        class: "aborted",
        reasons: &["EVIDENCE_INCOMPLETE"],
    },
    Row {
        seed: "INVARIANT_VIOLATION",
        class: "no-progress",
        reasons: &["repeated-message", "same-control-signal"],
    },
    Row {
        seed: "NULL_INPUT",
        class: "need-info",
        reasons: &["empty-goal"],
    },
    Row {
        seed: "HALTING_CRITERIA_MISSING",
        class: "need-info",
        reasons: &["no-certificates-declared"],
    },
    Row {
        seed: "CONVERGENCE_CLAIM_WITHOUT_R_P_CERTIFICATE",
        class: "done-uncertified",
        reasons: &[
            "no-criteria-declared",
            "criteria-unmet",
            "criteria-without-evidence",
            "criteria-self-certified",
            "exact-not-applicable",
        ],
    },
];

/// The seed's stop reason for a halt of `class` (as written in reports) for `reason`; `None`
/// where the seed names none (EXACT and CONVERGED, which the seed gives a status only; a
/// TIMEOUT of tokens, cost, threads or depth; an abort for a reason of the listener's own).
/// An abort whose reason is a seed name keeps that name.
///
/// # Example
///
/// ```
/// use agentpump::governor::seed_stop_reason;
/// assert_eq!(seed_stop_reason("TIMEOUT", "max-turns"), Some("MAX_ITERS"));
/// assert_eq!(seed_stop_reason("CONVERGED", "residual-below-r-p"), None);
/// ```
pub fn seed_stop_reason(class: &str, reason: &str) -> Option<&'static str> {
    if class == "aborted" {
        return STOP_REASONS
            .iter()
            .find(|r| r.seed == reason)
            .map(|r| r.seed);
    }
    // A TIMEOUT names every budget breached: the first decides.
    let first = reason.split(' ').next().unwrap_or_default();
    STOP_REASONS
        .iter()
        .find(|r| r.class == class && r.reasons.contains(&first))
        .map(|r| r.seed)
}

/// The class a listener's `abort` with `reason` stands for: the seed's name read as ours
/// ([`from_seed`]), or one of our own reasons (`stop-file`, `max-iterations`) with its row's
/// class; `None` for a reason in no row.
pub(crate) fn abort_class(reason: &str) -> Option<(&'static str, &'static str)> {
    from_seed(reason).or_else(|| {
        STOP_REASONS.iter().find_map(|r| {
            let ours = r.reasons.iter().find(|ours| **ours == reason)?;
            Some((r.class, *ours))
        })
    })
}

/// Our class and reason for the seed's stop reason `seed`, `None` for a name not in the table.
///
/// # Example
///
/// ```
/// use agentpump::governor::from_seed;
/// assert_eq!(from_seed("MAX_ITERS"), Some(("TIMEOUT", "max-turns")));
/// assert_eq!(from_seed("NOT_A_REASON"), None);
/// ```
pub fn from_seed(seed: &str) -> Option<(&'static str, &'static str)> {
    STOP_REASONS
        .iter()
        .find(|r| r.seed == seed)
        .map(|r| (r.class, r.reasons[0]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row read both ways comes back to itself: our first reason names the seed name.
    #[test]
    fn the_table_reads_both_ways() {
        for row in STOP_REASONS {
            let (class, reason) = from_seed(row.seed).unwrap();
            assert_eq!(seed_stop_reason(class, reason), Some(row.seed));
            for reason in row.reasons {
                assert_eq!(seed_stop_reason(row.class, reason), Some(row.seed));
            }
        }
    }

    #[test]
    fn names_without_a_seed_name_stay_ours() {
        assert_eq!(seed_stop_reason("TIMEOUT", "max-tokens max-cost"), None);
        assert_eq!(seed_stop_reason("EXACT", "all-criteria-met"), None);
        assert_eq!(seed_stop_reason("aborted", "gave-up"), None);
        assert_eq!(seed_stop_reason("aborted", "MAX_ITERS"), Some("MAX_ITERS"));
        assert_eq!(
            seed_stop_reason("TIMEOUT", "max-tool-calls max-turns"),
            Some("MAX_TOOL_CALLS")
        );
        assert_eq!(from_seed("NULL_INPUT"), Some(("need-info", "empty-goal")));
        assert_eq!(from_seed("max-turns"), None);
    }
}
