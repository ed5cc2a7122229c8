//! The loop's journal: one `<progress>` record per step, sent to `client` (egress: recorded,
//! delivered to no listener), and [`Run`], the fold of a loop thread's history that every
//! delivery starts from. The controller keeps nothing in memory, so a restarted pump continues
//! the loop where its history stands and never runs a finished iteration again.

use quick_xml::escape::escape;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::LOOP_NS;
use super::agents_md::Entry;
use super::wire::{Declaration, text_of};
use crate::history::Record;
use crate::listeners::capsule::ArtifactLink;

/// A role of the mini swarm cycle (§7.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads AGENTS.md and the state; plans.
    Scout,
    /// Executes the plan; produces artifacts.
    Solver,
    /// Verifies; assigns lanes; measures the residual.
    Skeptic,
}

impl Role {
    /// The role's name as capsules and sub-ids write it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scout => "scout",
            Self::Solver => "solver",
            Self::Skeptic => "skeptic",
        }
    }
}

/// A criterion as the controller reported it to the governor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriterionState {
    /// Its id.
    pub id: String,
    /// Met, with an artifact as evidence.
    pub met: bool,
    /// The artifact link (`path#sha256`).
    pub evidence: Option<String>,
}

/// One step of the loop, as the journal records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "kebab-case")]
pub enum Step {
    /// A role's thread was spawned.
    Spawned {
        /// The iteration.
        iteration: u64,
        /// The role.
        role: Role,
        /// The loop thread's tool calls left when the iteration began.
        tool_calls_left: Option<u64>,
    },
    /// The Scout answered; its plan is an artifact.
    Scouted {
        /// The iteration.
        iteration: u64,
        /// The plan's link, when it gave one.
        plan: Option<ArtifactLink>,
    },
    /// The Solver answered.
    Solved {
        /// The iteration.
        iteration: u64,
        /// The artifacts taken.
        artifacts: Vec<ArtifactLink>,
        /// What was refused, and why (Lane A failures).
        refused: Vec<String>,
    },
    /// The iteration's AGENTS.md entry is written.
    Judged {
        /// The entry.
        entry: Entry,
        /// The criteria as reported to the governor.
        criteria: Vec<CriterionState>,
    },
}

impl Step {
    /// The `<progress>` payload carrying this step.
    pub fn to_xml(&self) -> String {
        let json = serde_json::to_string(self).expect("a step serializes");
        format!("<progress xmlns=\"{LOOP_NS}\">{}</progress>", escape(&json))
    }
}

/// One iteration as far as it went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Iteration {
    /// When its Scout was spawned (µs since the epoch, the record's time).
    pub started_us: i64,
    /// The loop thread's tool calls left then.
    pub tool_calls_left: Option<u64>,
    /// The Scout's plan.
    pub plan: Option<ArtifactLink>,
    /// The Solver's artifacts.
    pub artifacts: Vec<ArtifactLink>,
    /// What was refused of the Solver's answer.
    pub refused: Vec<String>,
    /// The AGENTS.md entry, once judged.
    pub entry: Option<Entry>,
    /// The criteria, once judged.
    pub criteria: Vec<CriterionState>,
}

/// A loop thread's state, folded from its history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The declaration of the `<run>` that started it.
    pub declaration: Declaration,
    /// When the `<run>` was accepted (µs since the epoch).
    pub started_us: i64,
    /// Every iteration begun, by number.
    pub iterations: Vec<Iteration>,
    /// The role whose thread is running, if any.
    pub open: Option<(u64, Role)>,
}

impl Run {
    /// Folds the loop thread's records as `me` wrote them; `None` when no `<run>` started it.
    pub fn fold(me: &str, records: &[Record]) -> Option<Self> {
        let start = records
            .iter()
            .find(|r| r.root.is(LOOP_NS, "run") && r.to.as_deref() == Some(me))?;
        let mut run = Run {
            declaration: Declaration::parse(&start.payload).ok()?,
            started_us: start.time_us,
            iterations: Vec::new(),
            open: None,
        };
        let steps = records.iter().filter(|r| {
            &*r.from == me && r.to.as_deref() == Some("client") && r.root.is(LOOP_NS, "progress")
        });
        for r in steps {
            if let Ok(step) = serde_json::from_str::<Step>(&text_of(&r.payload)) {
                run.apply(step, r.time_us);
            }
        }
        Some(run)
    }

    fn at(&mut self, n: u64) -> &mut Iteration {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        if self.iterations.len() <= n {
            self.iterations.resize_with(n + 1, Iteration::default);
        }
        &mut self.iterations[n]
    }

    fn apply(&mut self, step: Step, time_us: i64) {
        match step {
            Step::Spawned {
                iteration,
                role,
                tool_calls_left,
            } => {
                if role == Role::Scout {
                    let it = self.at(iteration);
                    it.started_us = time_us;
                    it.tool_calls_left = tool_calls_left;
                }
                self.open = Some((iteration, role));
            }
            Step::Scouted { iteration, plan } => {
                self.at(iteration).plan = plan;
                self.open = None;
            }
            Step::Solved {
                iteration,
                artifacts,
                refused,
            } => {
                let it = self.at(iteration);
                it.artifacts = artifacts;
                it.refused = refused;
                self.open = None;
            }
            Step::Judged { entry, criteria } => {
                let it = self.at(entry.iteration);
                it.criteria = criteria;
                it.entry = Some(entry);
                self.open = None;
            }
        }
    }

    /// Iterations whose entry is written.
    pub fn judged(&self) -> impl Iterator<Item = &Entry> {
        self.iterations.iter().filter_map(|i| i.entry.as_ref())
    }

    /// The residuals measured, in order.
    pub fn residuals(&self) -> Vec<Decimal> {
        self.judged()
            .filter_map(|e| e.residual.as_deref()?.parse().ok())
            .collect()
    }

    /// Every artifact so far, with its iteration (plans first in each).
    pub fn manifest(&self) -> Vec<(u64, &ArtifactLink)> {
        self.iterations
            .iter()
            .enumerate()
            .flat_map(|(n, it)| {
                it.plan
                    .iter()
                    .chain(&it.artifacts)
                    .map(move |l| (n as u64, l))
            })
            .collect()
    }

    /// The criteria as last judged (empty before the first verdict).
    pub fn criteria(&self) -> &[CriterionState] {
        self.iterations
            .iter()
            .rev()
            .find(|i| i.entry.is_some())
            .map_or(&[][..], |i| &i.criteria)
    }
}
