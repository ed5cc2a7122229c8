//! [`Capsule`]: phuc-loop's Context Normal Form (seed 002 §4.1), the one first message of every
//! subagent — built by the loop controller for each role and by the LLM agent's
//! `context = "capsule"` mode from its thread.
//!
//! "Each iteration's subagent receives exactly this capsule structure. No more, no less." The
//! fields are the seed's; the bytes are canonical JSON (keys sorted, two-space indent, LF, a
//! final newline), residuals are decimal strings, and [`Capsule::new`] refuses what §4.1
//! forbids: absolute paths and parent steps in links, a digest that is not sha256, a role the
//! seed does not list. Nothing in it is read from a clock or a process, so the same state gives
//! the same bytes. An optional field (seed 003's plan) is one more `Option` on
//! [`CapsuleState`], skipped when absent.

use std::collections::BTreeSet;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

/// The skills every subagent loads (§4.2: `skill_pack: ["prime-safety", "prime-coder",
/// "phuc-swarms"]`).
pub const SKILL_PACK: [&str; 3] = ["prime-safety", "prime-coder", "phuc-swarms"];

/// The roles an artifact link may have (§4.1 `role: "[plan|log|test|artifact|proof|snapshot]"`).
pub const ARTIFACT_ROLES: [&str; 6] = ["plan", "log", "test", "artifact", "proof", "snapshot"];

/// Everything a capsule says, before it is checked and written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CapsuleState {
    /// The full goal text, never truncated or paraphrased.
    pub goal_statement: String,
    /// The full acceptance criteria (sorted when written).
    pub acceptance_criteria: Vec<String>,
    /// Carried from the goal's declaration unchanged.
    pub halting_certificates_applicable: Vec<String>,
    /// Where the work stands, from artifacts only.
    pub current_state_summary: StateSummary,
    /// The full text of AGENTS.md (compacted only with its `[COMPACTION]` line).
    pub accumulated_learnings: String,
    /// What is left; `None` is unlimited.
    pub remaining_budget: RemainingBudget,
    /// Links to artifacts: never their content.
    pub artifact_links: Vec<ArtifactLink>,
    /// The role this subagent plays (`scout`, `solver`, `skeptic`, or an agent's name).
    pub subagent_role: String,
    /// The thread's latest plan (seed 003's `<todo-until>`), read back by the agent that wrote
    /// it; `None` (no `plan` field at all) when the thread has none.
    pub plan: Option<PlanState>,
}

/// A plan as the capsule carries it: its condition and each step with where it stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanState {
    /// The plan's `condition`: when it is done.
    pub condition: String,
    /// Each step's text and its status (`open`, `done` or `abandoned`), in order.
    pub steps: Vec<(String, &'static str)>,
}

/// §4.1 `current_state_summary`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateSummary {
    /// The iteration this capsule is for (0-based, as the seed counts).
    pub iteration_number: u64,
    /// The last residual, if one was measured (never a float).
    pub residual_current: Option<Decimal>,
    /// Criteria met with evidence so far.
    pub criteria_met_so_far: Vec<String>,
    /// Criteria not met yet.
    pub criteria_still_open: Vec<String>,
}

/// §4.1 `remaining_budget`; `None` where nothing limits it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemainingBudget {
    /// Iterations left.
    pub iterations_remaining: Option<u64>,
    /// Tool calls left.
    pub tool_calls_remaining: Option<u64>,
    /// Whole seconds left.
    pub seconds_remaining: Option<u64>,
}

/// One §4.1 artifact link: a repo-relative path, its sha256 and its role.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ArtifactLink {
    /// Relative to the workspace, `/`-separated, without `..`.
    pub path: String,
    /// sha256 of the bytes, 64 lowercase hex digits.
    pub sha256: String,
    /// One of [`ARTIFACT_ROLES`].
    pub role: String,
}

/// Why a capsule cannot be written: something §4.1 forbids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CapsuleError {
    /// A link whose path is absolute or climbs out of the workspace.
    #[error("artifact link `{0}` is not a relative path inside the workspace")]
    PathNotRelative(String),
    /// A link whose digest is not sha256 hex.
    #[error("artifact link `{path}` has sha256 `{sha256}`, expected 64 lowercase hex digits")]
    NotSha256 {
        /// The link.
        path: String,
        /// What it gave.
        sha256: String,
    },
    /// A link whose role the seed does not list.
    #[error(
        "artifact link `{path}` has role `{role}`, expected plan, log, test, artifact, proof or snapshot"
    )]
    UnknownRole {
        /// The link.
        path: String,
        /// What it gave.
        role: String,
    },
}

/// A checked capsule; [`Capsule::to_json`] gives its canonical bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capsule(serde_json::Value);

#[derive(Serialize)]
struct Wire<'a> {
    goal_statement: &'a str,
    acceptance_criteria: Vec<&'a str>,
    halting_certificates_applicable: &'a [String],
    current_state_summary: WireState<'a>,
    accumulated_learnings: &'a str,
    remaining_budget: WireBudget,
    artifact_links: Vec<&'a ArtifactLink>,
    skill_pack: [&'static str; 3],
    subagent_role: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    plan: Option<WirePlan<'a>>,
}

#[derive(Serialize)]
struct WirePlan<'a> {
    condition: &'a str,
    steps: Vec<WireStep<'a>>,
}

#[derive(Serialize)]
struct WireStep<'a> {
    text: &'a str,
    status: &'static str,
}

#[derive(Serialize)]
struct WireState<'a> {
    iteration_number: u64,
    residual_current: Option<String>,
    criteria_met_so_far: Vec<&'a str>,
    criteria_still_open: Vec<&'a str>,
}

#[derive(Serialize)]
struct WireBudget {
    iterations_remaining: Option<u64>,
    tool_calls_remaining: Option<u64>,
    seconds_remaining: Option<u64>,
}

impl Capsule {
    /// Checks `state` against §4.1's forbidden items and fixes its order (criteria sorted,
    /// links sorted by path, duplicates dropped).
    ///
    /// # Errors
    ///
    /// [`CapsuleError`] naming the first link that breaks a rule.
    pub fn new(state: &CapsuleState) -> Result<Self, CapsuleError> {
        for link in &state.artifact_links {
            check_link(link)?;
        }
        let sorted = |v: &'_ [String]| -> Vec<String> {
            v.iter()
                .cloned()
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect()
        };
        let (criteria, met, open) = (
            sorted(&state.acceptance_criteria),
            sorted(&state.current_state_summary.criteria_met_so_far),
            sorted(&state.current_state_summary.criteria_still_open),
        );
        let links: BTreeSet<&ArtifactLink> = state.artifact_links.iter().collect();
        let s = &state.current_state_summary;
        let b = &state.remaining_budget;
        let wire = Wire {
            goal_statement: &state.goal_statement,
            acceptance_criteria: criteria.iter().map(String::as_str).collect(),
            halting_certificates_applicable: &state.halting_certificates_applicable,
            current_state_summary: WireState {
                iteration_number: s.iteration_number,
                residual_current: s.residual_current.map(|r| r.normalize().to_string()),
                criteria_met_so_far: met.iter().map(String::as_str).collect(),
                criteria_still_open: open.iter().map(String::as_str).collect(),
            },
            accumulated_learnings: &state.accumulated_learnings,
            remaining_budget: WireBudget {
                iterations_remaining: b.iterations_remaining,
                tool_calls_remaining: b.tool_calls_remaining,
                seconds_remaining: b.seconds_remaining,
            },
            artifact_links: links.into_iter().collect(),
            skill_pack: SKILL_PACK,
            subagent_role: &state.subagent_role,
            plan: state.plan.as_ref().map(|p| WirePlan {
                condition: &p.condition,
                steps: p
                    .steps
                    .iter()
                    .map(|(text, status)| WireStep { text, status })
                    .collect(),
            }),
        };
        // Through a `Value`: its maps are ordered by key, which is what makes the bytes canonical.
        Ok(Self(
            serde_json::to_value(&wire).expect("a capsule is plain data"),
        ))
    }

    /// The canonical bytes: keys sorted, two-space indent, LF line ends, a final newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(&self.0).expect("a capsule serializes");
        text.push('\n');
        text
    }

    /// The field `name` of the capsule (for tests and the viewer).
    pub fn field(&self, name: &str) -> Option<&serde_json::Value> {
        self.0.get(name)
    }
}

/// Whether `path` is relative, `/`-separated and stays inside its root: no leading `/` or `\`,
/// no drive letter, no `..` or empty step.
pub fn is_relative_inside(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with(['/', '\\'])
        && !path.contains('\\')
        && path.as_bytes().get(1).is_none_or(|c| *c != b':')
        && path.split('/').all(|step| !matches!(step, "" | "." | ".."))
}

fn check_link(link: &ArtifactLink) -> Result<(), CapsuleError> {
    if !is_relative_inside(&link.path) {
        return Err(CapsuleError::PathNotRelative(link.path.clone()));
    }
    let hex = link.sha256.len() == 64
        && link
            .sha256
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c));
    if !hex {
        return Err(CapsuleError::NotSha256 {
            path: link.path.clone(),
            sha256: link.sha256.clone(),
        });
    }
    if !ARTIFACT_ROLES.contains(&link.role.as_str()) {
        return Err(CapsuleError::UnknownRole {
            path: link.path.clone(),
            role: link.role.clone(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(path: &str, sha256: &str, role: &str) -> ArtifactLink {
        ArtifactLink {
            path: path.into(),
            sha256: sha256.into(),
            role: role.into(),
        }
    }

    /// §4.1 `forbidden_in_capsule: absolute_file_paths`, and links are "(repo-relative paths +
    /// SHA-256) only" with a role of "[plan|log|test|artifact|proof|snapshot]".
    #[test]
    fn forbidden_links_are_refused() {
        let sha = "a".repeat(64);
        let cases = [
            (link("/etc/passwd", &sha, "log"), "is not a relative path"),
            (link("../up", &sha, "log"), "is not a relative path"),
            (link("C:/x", &sha, "log"), "is not a relative path"),
            (link("a\\b", &sha, "log"), "is not a relative path"),
            (link("a/./b", &sha, "log"), "is not a relative path"),
            (link("ok.txt", "abc", "log"), "expected 64 lowercase hex"),
            (link("ok.txt", &sha, "essay"), "has role `essay`"),
        ];
        for (l, expected) in cases {
            let state = CapsuleState {
                artifact_links: vec![l.clone()],
                ..CapsuleState::default()
            };
            let err = Capsule::new(&state).unwrap_err().to_string();
            assert!(err.contains(expected), "{l:?}: {err}");
        }
    }
}
