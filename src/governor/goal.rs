//! The goal a thread declares and what a later `<goal>` may do to it: only tighten.
//!
//! phuc-loop: "halting_certificate_must_be_declared_before_loop_start" (§A), the capsule's
//! certificates are "Carried from DREAM_GOAL block unchanged" (§4.1), and the goal text is
//! "NEVER truncated or paraphrased". The first goal of a thread is its declaration; a later one
//! may narrow the certificates, lower r-p, add criteria and tighten budgets, and is refused
//! whole when it would do anything else.

use rust_decimal::Decimal;

use super::messages::{CertificateType, Goal};

/// What a later goal would loosen or change in the declared one; the text is the `huh` its
/// sender reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Loosening {
    /// A higher r-p than the one in force.
    #[error(
        "<goal> r-p=\"{asked}\" is above the declared r-p {declared}; a later goal may only lower it"
    )]
    RaisesRp {
        /// The threshold in force.
        declared: Decimal,
        /// The one asked for.
        asked: Decimal,
    },
    /// A certificate the declaration did not list.
    #[error(
        "<goal> certificates names {}, which the declared goal does not; a later goal may only narrow the list", .0.as_str()
    )]
    AddsCertificate(CertificateType),
    /// Another goal text.
    #[error("<goal> text differs from the declared goal's; the goal is carried unchanged")]
    ChangesText,
    /// Another description for a declared criterion.
    #[error(
        "<goal> criterion `{0}` differs from the declared one; declared criteria are carried unchanged"
    )]
    ChangesCriterion(String),
}

impl Goal {
    /// Why this goal, as a thread's first, cannot start a loop (phuc-loop §2.4 NULL_CHECK,
    /// §3.2): `empty-goal` with neither text nor criteria, `no-certificates-declared` without
    /// an applicable certificate; `None` when it can.
    pub(crate) fn need_info(&self) -> Option<&'static str> {
        if self.text.is_empty() && self.criteria.is_empty() {
            Some("empty-goal")
        } else if self.certificates.is_empty() {
            Some("no-certificates-declared")
        } else {
            None
        }
    }

    /// What `later` would loosen in this declared goal, `r_p` being the threshold in force;
    /// `None` when it only tightens (or repeats) it.
    pub(crate) fn loosened_by(&self, later: &Goal, r_p: Decimal) -> Option<Loosening> {
        if let Some(asked) = later.r_p.filter(|asked| *asked > r_p) {
            return Some(Loosening::RaisesRp {
                declared: r_p,
                asked,
            });
        }
        if let Some(c) = later
            .certificates
            .iter()
            .find(|c| !self.certificates.contains(c))
        {
            return Some(Loosening::AddsCertificate(*c));
        }
        if !later.text.is_empty() && later.text != self.text {
            return Some(Loosening::ChangesText);
        }
        later
            .criteria
            .iter()
            .find(|(id, text)| {
                self.criteria
                    .iter()
                    .any(|(declared, was)| declared == id && was != text)
            })
            .map(|(id, _)| Loosening::ChangesCriterion(id.clone()))
    }

    /// Takes in a later goal: the certificates both list, the lower r-p, the criteria of both,
    /// the tighter budget. The text stays the declared one.
    pub(crate) fn tighten(&mut self, later: Goal) {
        if !later.certificates.is_empty() {
            self.certificates.retain(|c| later.certificates.contains(c));
        }
        self.r_p = match (self.r_p, later.r_p) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // Carried from the declaration unchanged; a later goal may name one none was given.
        if self.residual_metric.is_none() {
            self.residual_metric = later.residual_metric;
        }
        for (id, text) in later.criteria {
            if !self.criteria.iter().any(|(declared, _)| *declared == id) {
                self.criteria.push((id, text));
            }
        }
        self.budget = self.budget.tightened(&later.budget);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CertificateType::{Converged, Diverged, Exact};

    fn goal(certificates: &[CertificateType], r_p: Option<i64>) -> Goal {
        Goal {
            text: "t".into(),
            criteria: vec![("a".into(), "x".into())],
            certificates: certificates.to_vec(),
            r_p: r_p.map(|n| Decimal::new(n, 3)),
            ..Goal::default()
        }
    }

    #[test]
    fn a_later_goal_only_tightens() {
        let declared = goal(&[Exact, Converged], Some(1));
        let in_force = Decimal::new(1, 3);
        let cases = [
            (goal(&[Converged], None), None),
            (goal(&[], Some(1)), None),
            (
                goal(&[], Some(100_000)),
                Some(Loosening::RaisesRp {
                    declared: in_force,
                    asked: Decimal::new(100_000, 3),
                }),
            ),
            (
                goal(&[Diverged], None),
                Some(Loosening::AddsCertificate(Diverged)),
            ),
        ];
        for (later, expected) in cases {
            assert_eq!(
                declared.loosened_by(&later, in_force),
                expected,
                "{later:?}"
            );
        }
        let mut other = goal(&[], None);
        other.text = "u".into();
        assert_eq!(
            declared.loosened_by(&other, in_force),
            Some(Loosening::ChangesText)
        );
        other.text = String::new();
        other.criteria = vec![("a".into(), "y".into())];
        assert_eq!(
            declared.loosened_by(&other, in_force),
            Some(Loosening::ChangesCriterion("a".into()))
        );
        let mut merged = declared.clone();
        let mut later = goal(&[Converged], Some(0));
        later.criteria.push(("b".into(), "z".into()));
        merged.tighten(later);
        assert_eq!(merged.certificates, [Converged]);
        assert_eq!(merged.r_p, Some(Decimal::ZERO));
        assert_eq!(merged.criteria.len(), 2);
        assert_eq!(merged.text, "t");
    }
}
