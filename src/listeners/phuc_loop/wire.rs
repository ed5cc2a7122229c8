//! The loop's payloads in `urn:agentpump:loop:v1`: the `<run>` that declares a loop (§3.2's
//! DREAM_GOAL block), the `<capsule>` each role receives, and what each role answers —
//! `<plan>`, `<artifacts>`, `<verdict>`.

use quick_xml::escape::{escape, unescape};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::LOOP_NS;
use crate::governor::{CertificateType, Lane, messages_decimal};

/// A loop's declaration (§3.2): goal, criteria, applicable certificates, R_p, iterations,
/// residual metric.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Declaration {
    /// The goal, never paraphrased.
    pub goal: String,
    /// `(id, text)` of each acceptance criterion.
    pub acceptance_criteria: Vec<(String, String)>,
    /// The certificates that may end the loop.
    pub halting_certificates_applicable: Vec<CertificateType>,
    /// The convergence tolerance.
    #[serde(rename = "R_p")]
    pub r_p: Option<Decimal>,
    /// Iterations before the profile scales them (the configuration's when absent).
    pub max_iterations: Option<u64>,
    /// What the residual measures.
    pub residual_metric: Option<String>,
}

#[derive(Deserialize)]
struct RunXml {
    #[serde(rename = "@certificates", default)]
    certificates: String,
    #[serde(rename = "@r-p")]
    r_p: Option<String>,
    #[serde(rename = "@max-iterations")]
    max_iterations: Option<u64>,
    #[serde(rename = "@residual-metric")]
    residual_metric: Option<String>,
    #[serde(default)]
    goal: String,
    #[serde(rename = "criterion", default)]
    criteria: Vec<CriterionXml>,
}

#[derive(Deserialize)]
struct CriterionXml {
    #[serde(rename = "@id")]
    id: String,
    #[serde(rename = "$text", default)]
    text: String,
}

impl Declaration {
    /// Reads a `<run>` payload.
    ///
    /// # Errors
    ///
    /// A message naming what does not parse (an unknown certificate, an r-p that is not an
    /// exact decimal, a malformed element).
    pub fn parse(payload: &str) -> Result<Self, String> {
        let run: RunXml =
            quick_xml::de::from_str(payload).map_err(|e| format!("<run> does not parse: {e}"))?;
        let halting_certificates_applicable = run
            .certificates
            .split_whitespace()
            .map(|c| {
                c.parse()
                    .map_err(|e: crate::governor::UnknownCertificate| e.to_string())
            })
            .collect::<Result<_, _>>()?;
        let r_p = run
            .r_p
            .map(|r| messages_decimal(&r, "r-p").map_err(|e| e.to_string()))
            .transpose()?;
        Ok(Self {
            goal: run.goal.trim().to_owned(),
            acceptance_criteria: run
                .criteria
                .into_iter()
                .map(|c| (c.id, c.text.trim().to_owned()))
                .collect(),
            halting_certificates_applicable,
            r_p,
            max_iterations: run.max_iterations,
            residual_metric: run.residual_metric,
        })
    }

    /// What §14's `null_detected` finds missing, besides the certificates (which the governor
    /// answers): the goal, the criteria, R_p when CONVERGED applies.
    pub fn missing(&self) -> Vec<&'static str> {
        let mut missing = Vec::new();
        if self.goal.is_empty() {
            missing.push("goal");
        }
        if self.acceptance_criteria.is_empty() {
            missing.push("acceptance_criteria");
        }
        if self.r_p.is_none()
            && self
                .halting_certificates_applicable
                .contains(&CertificateType::Converged)
        {
            missing.push("R_p");
        }
        missing
    }
}

/// The payload a role's thread starts with, named after the role (`<scout>`, `<solver>`,
/// `<skeptic>`: an agent's root is its own, so each role has one): the capsule's canonical
/// JSON as text.
pub fn capsule_payload(role: &str, iteration: u64, json: &str) -> String {
    format!(
        "<{role} xmlns=\"{LOOP_NS}\" iteration=\"{iteration}\">{}</{role}>",
        escape(json)
    )
}

/// The text content of a loop payload's root (unescaped), `""` for an empty element.
pub fn text_of(payload: &str) -> String {
    let (Some(open), Some(close)) = (payload.find('>'), payload.rfind("</")) else {
        return String::new();
    };
    if open >= close || payload[..open].ends_with('/') {
        return String::new();
    }
    let inner = &payload[open + 1..close];
    unescape(inner).map_or_else(|_| inner.to_owned(), |t| t.into_owned())
}

/// An artifact a Solver names: a path in the workspace, its role, and its content when the
/// Solver gives it inline (else the file must exist).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ArtifactClaim {
    /// Relative to the workspace.
    #[serde(rename = "@path")]
    pub path: String,
    /// `artifact` when not given.
    #[serde(rename = "@role", default = "artifact_role")]
    pub role: String,
    /// The file's content, written by the controller.
    #[serde(rename = "$text")]
    pub content: Option<String>,
}

fn artifact_role() -> String {
    "artifact".into()
}

/// A Solver's `<artifacts>`: the files, and how many learnings it tried to write (refused:
/// only the Skeptic's verified entries reach AGENTS.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Artifacts {
    /// The files.
    pub files: Vec<ArtifactClaim>,
    /// `<learning>` elements the Solver wrote.
    pub learnings: usize,
}

#[derive(Deserialize)]
struct ArtifactsXml {
    #[serde(rename = "artifact", default)]
    files: Vec<ArtifactClaim>,
    #[serde(rename = "learning", default)]
    learnings: Vec<serde::de::IgnoredAny>,
}

impl Artifacts {
    /// Reads an `<artifacts>` payload.
    ///
    /// # Errors
    ///
    /// The parser's message.
    pub fn parse(payload: &str) -> Result<Self, String> {
        let x: ArtifactsXml = quick_xml::de::from_str(payload)
            .map_err(|e| format!("<artifacts> does not parse: {e}"))?;
        Ok(Self {
            files: x.files,
            learnings: x.learnings.len(),
        })
    }
}

/// One lane-typed line of a verdict.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Claim {
    /// `A`, `B` or `C` (C when not given).
    #[serde(rename = "@lane", default = "lane_c")]
    pub lane: Lane,
    /// An artifact path (optionally `#sha256`) backing it.
    #[serde(rename = "@evidence")]
    pub evidence: Option<String>,
    /// What it says.
    #[serde(rename = "$text", default)]
    pub text: String,
}

fn lane_c() -> Lane {
    Lane::C
}

/// A criterion as the Skeptic judged it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Judged {
    /// The criterion's id.
    #[serde(rename = "@id")]
    pub id: String,
    /// Whether it is met.
    #[serde(rename = "@met")]
    pub met: bool,
    /// The artifact path (optionally `#sha256`) that shows it.
    #[serde(rename = "@evidence")]
    pub evidence: Option<String>,
}

/// A Skeptic's `<verdict>` (§7.1: "Verified learning entries (A/B) and failure modes (A/C)").
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Verdict {
    /// The residual as the Skeptic measured it (checked as an exact decimal by the controller).
    #[serde(rename = "@residual")]
    pub residual: Option<String>,
    /// The criteria.
    #[serde(rename = "criterion", default)]
    pub criteria: Vec<Judged>,
    /// What was tried.
    #[serde(default)]
    pub tried: Vec<String>,
    /// What succeeded.
    #[serde(default)]
    pub succeeded: Vec<Claim>,
    /// What failed.
    #[serde(default)]
    pub failed: Vec<Claim>,
    /// Questions for the next iteration.
    #[serde(default)]
    pub open: Vec<String>,
}

impl Verdict {
    /// Reads a `<verdict>` payload.
    ///
    /// # Errors
    ///
    /// The parser's message.
    pub fn parse(payload: &str) -> Result<Self, String> {
        quick_xml::de::from_str(payload).map_err(|e| format!("<verdict> does not parse: {e}"))
    }

    /// The residual as an exact decimal.
    ///
    /// # Errors
    ///
    /// The governor's message for a value that is not one.
    pub fn residual(&self) -> Option<Result<Decimal, String>> {
        self.residual
            .as_deref()
            .map(|r| messages_decimal(r, "residual").map_err(|e| e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_reads_its_lanes_criteria_and_residual() {
        let v = Verdict::parse(&format!(
            r#"<verdict xmlns="{LOOP_NS}" residual="0.25"><criterion id="c1" met="true" evidence="out.txt"/><tried>t</tried><succeeded lane="A" evidence="out.txt">s</succeeded><failed>f</failed><open>o</open></verdict>"#
        ))
        .unwrap();
        assert_eq!(v.residual(), Some(Ok(Decimal::new(25, 2))));
        assert_eq!(v.criteria[0].id, "c1");
        assert_eq!(v.succeeded[0].lane, Lane::A);
        assert_eq!(v.failed[0].lane, Lane::C);
        assert_eq!((v.tried.len(), v.open.len()), (1, 1));
        let a = Artifacts::parse(&format!(
            r#"<artifacts xmlns="{LOOP_NS}"><artifact path="a.txt">x &amp; y</artifact><artifact path="b.txt" role="test"/><learning lane="A">mine</learning></artifacts>"#
        ))
        .unwrap();
        assert_eq!(a.files[0].content.as_deref(), Some("x & y"));
        assert_eq!(
            (a.files[1].role.as_str(), a.files[1].content.as_deref()),
            ("test", None)
        );
        assert_eq!(a.learnings, 1);
    }
}
