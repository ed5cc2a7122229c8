//! Visible plans: seed 003's `<todo-until condition="…"><step done="…">…</step></todo-until>`
//! ("Enables self-reading, GUI rendering, explicit termination"), in [`TODO_NS`].
//!
//! An agent writes its plan as a payload; the pump checks it, records it in the thread (to the
//! governor) and holds the thread to it: a `done` while the thread's latest plan has open steps
//! is refused with a `system-error code="plan-open"` naming them. The agent closes a step
//! (`done="true"`) or gives it up (`done="abandoned"`) by writing the plan again. The seed's
//! spelling in no namespace is taken into [`TODO_NS`]. A listener reads the thread's latest plan
//! back with [`Plan::latest`].

mod rule;

pub(crate) use rule::{adopt, is_plan, refuses_done};

use std::fmt;

use quick_xml::escape::escape;
use quick_xml::events::Event;
use serde::Deserialize;

use crate::Payload;
pub use crate::envelope::TODO_NS;
use crate::envelope::Vocabulary;
use crate::history::{Record, RecordKind};

/// The plan's element, the one element of [`TODO_NS`].
pub const PLAN_ELEMENT: &str = "todo-until";

/// Where a step stands: the `done` attribute (`"false"`, `"true"`, `"abandoned"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mark {
    /// `done="false"`: still to do; it holds the thread's `done` back.
    Open,
    /// `done="true"`: done.
    Done,
    /// `done="abandoned"`: given up on purpose, closed without being done.
    Abandoned,
}

impl Mark {
    /// The value as written in `done="…"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "false",
            Self::Done => "true",
            Self::Abandoned => "abandoned",
        }
    }

    fn read(value: &str) -> Option<Self> {
        match value {
            "false" => Some(Self::Open),
            "true" => Some(Self::Done),
            "abandoned" => Some(Self::Abandoned),
            _ => None,
        }
    }
}

impl fmt::Display for Mark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// One step of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What is to be done.
    pub text: String,
    /// Where it stands.
    pub mark: Mark,
}

/// A plan: what the agent works until, and its steps in order.
///
/// # Example
///
/// ```
/// use agentpump::todo::{Mark, Plan};
/// use agentpump::{Limits, Payload};
/// let xml = r#"<todo-until xmlns="urn:agentpump:todo:v1" condition="all sources checked">
///   <step done="true">Search web</step><step done="false">Analyze results</step></todo-until>"#;
/// let plan = Plan::parse(&Payload::parse(xml, &Limits::default())?)?;
/// assert_eq!(plan.condition(), "all sources checked");
/// let open: Vec<_> = plan.open().map(|(n, s)| (n, s.text.as_str())).collect();
/// assert_eq!(open, [(2, "Analyze results")]);
/// assert_eq!(Plan::new("all sources checked").step("Search web", Mark::Done).steps()[0].mark, Mark::Done);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    condition: String,
    steps: Vec<Step>,
}

/// Why a payload of [`TODO_NS`] is not a plan; its text is what the agent reads in the `huh`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// An element of the namespace other than `todo-until`.
    #[error("<{0}> is not a plan element; {TODO_NS} has one element, <todo-until>")]
    NotAPlan(String),
    /// An attribute or child element a plan does not define.
    #[error("{0}")]
    Vocabulary(String),
    /// The XML does not have a plan's shape.
    #[error("<todo-until>: {0}")]
    Malformed(String),
    /// No `condition` (or a blank one).
    #[error("<todo-until> needs condition=\"…\": what the plan runs until")]
    NoCondition,
    /// No `<step>` at all.
    #[error("<todo-until> lists no <step>; a plan has at least one")]
    NoSteps,
    /// A step without `done`.
    #[error(
        "step {step} of <todo-until> has no `done`; expected done=\"false\", \"true\" or \"abandoned\""
    )]
    NoMark {
        /// The step's number, from 1.
        step: usize,
    },
    /// A `done` value that is none of the three.
    #[error(
        "step {step} of <todo-until>: done=\"{value}\" is not \"false\", \"true\" or \"abandoned\""
    )]
    BadMark {
        /// The step's number, from 1.
        step: usize,
        /// The value written.
        value: String,
    },
    /// A step with no text.
    #[error("step {step} of <todo-until> is empty; a step says what is to be done")]
    EmptyStep {
        /// The step's number, from 1.
        step: usize,
    },
}

#[derive(Deserialize)]
struct PlanXml {
    #[serde(rename = "@condition")]
    condition: Option<String>,
    #[serde(default)]
    step: Vec<StepXml>,
}

#[derive(Deserialize)]
struct StepXml {
    #[serde(rename = "@done")]
    done: Option<String>,
    #[serde(rename = "$text", default)]
    text: String,
}

const VOCABULARY: Vocabulary<'static> = Vocabulary {
    element: PLAN_ELEMENT,
    attributes: &["condition"],
    children: &[("step", &["done"])],
};

impl Plan {
    /// An empty plan running until `condition`; add steps with [`Plan::step`].
    pub fn new(condition: impl Into<String>) -> Self {
        Self {
            condition: condition.into(),
            steps: Vec::new(),
        }
    }

    /// The plan with one more step.
    #[must_use]
    pub fn step(mut self, text: impl Into<String>, mark: Mark) -> Self {
        self.steps.push(Step {
            text: text.into(),
            mark,
        });
        self
    }

    /// Reads a plan from a payload of [`TODO_NS`].
    ///
    /// # Errors
    ///
    /// [`PlanError`] naming what does not fit: another element, an unknown attribute or child,
    /// no condition, no steps, a step without text, with markup in it or with a `done` other
    /// than `false`, `true` or `abandoned`, text between the steps.
    pub fn parse(payload: &Payload) -> Result<Self, PlanError> {
        let local = payload.qname().local();
        if local != PLAN_ELEMENT {
            return Err(PlanError::NotAPlan(local.to_owned()));
        }
        Self::read(payload.as_str())
    }

    /// Reads the text of a `todo-until` element (its root checked by the caller).
    fn read(text: &str) -> Result<Self, PlanError> {
        VOCABULARY.check(text).map_err(PlanError::Vocabulary)?;
        check_shape(text)?;
        let xml: PlanXml =
            quick_xml::de::from_str(text).map_err(|e| PlanError::Malformed(e.to_string()))?;
        let condition = xml.condition.unwrap_or_default().trim().to_owned();
        if condition.is_empty() {
            return Err(PlanError::NoCondition);
        }
        if xml.step.is_empty() {
            return Err(PlanError::NoSteps);
        }
        let steps = xml
            .step
            .into_iter()
            .enumerate()
            .map(|(i, s)| s.read(i + 1))
            .collect::<Result<_, _>>()?;
        Ok(Self { condition, steps })
    }

    /// The thread's latest plan in `history` (a thread's records in order, as `Context::history`
    /// gives them), `None` when it has none.
    ///
    /// # Errors
    ///
    /// [`PlanError`] when the latest plan record does not read as a plan (the pump checked it
    /// on the way in, so only a record written past the pump can).
    pub fn latest(history: &[Record]) -> Result<Option<Self>, PlanError> {
        match history.iter().rev().find(|r| is_plan_record(r)) {
            Some(record) => Self::read(&record.payload).map(Some),
            None => Ok(None),
        }
    }

    /// What the plan runs until.
    pub fn condition(&self) -> &str {
        &self.condition
    }

    /// The steps, in order.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }

    /// The open steps with their numbers (from 1), in order.
    pub fn open(&self) -> impl Iterator<Item = (usize, &Step)> {
        self.steps
            .iter()
            .enumerate()
            .filter(|(_, s)| s.mark == Mark::Open)
            .map(|(i, s)| (i + 1, s))
    }

    /// The plan as a payload of [`TODO_NS`].
    pub fn to_xml(&self) -> String {
        let mut xml = format!(
            r#"<{PLAN_ELEMENT} xmlns="{TODO_NS}" condition="{}">"#,
            escape(self.condition.as_str())
        );
        for s in &self.steps {
            xml.push_str(&format!(
                r#"<step done="{}">{}</step>"#,
                s.mark,
                escape(s.text.as_str())
            ));
        }
        xml.push_str(&format!("</{PLAN_ELEMENT}>"));
        xml
    }
}

/// What the vocabulary does not check: text only inside steps, and nothing but text there.
fn check_shape(xml: &str) -> Result<(), PlanError> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let (mut depth, mut step) = (0usize, 0usize);
    loop {
        let event = reader
            .read_event()
            .map_err(|e| PlanError::Malformed(e.to_string()))?;
        match event {
            Event::Start(e) | Event::Empty(e) if depth >= 2 => {
                let name = e.local_name().as_ref().to_owned();
                return Err(PlanError::Malformed(format!(
                    "step {step} holds an element <{name}>; a step is plain text"
                )));
            }
            Event::Start(_) => {
                depth += 1;
                step += usize::from(depth == 2);
            }
            Event::Empty(_) => step += usize::from(depth == 1),
            Event::End(_) => depth -= 1,
            Event::Text(t) if depth == 1 && !t.trim().is_empty() => {
                return Err(PlanError::Malformed(format!(
                    "text outside a <step> (after step {step}); each step is a <step> element"
                )));
            }
            Event::Eof => return Ok(()),
            _ => {}
        }
    }
}

/// Whether `record` is a plan a listener wrote.
pub(crate) fn is_plan_record(record: &Record) -> bool {
    record.kind == RecordKind::Message && record.root.is(TODO_NS, PLAN_ELEMENT)
}

impl StepXml {
    fn read(self, step: usize) -> Result<Step, PlanError> {
        let value = self.done.ok_or(PlanError::NoMark { step })?;
        let mark = Mark::read(value.trim()).ok_or(PlanError::BadMark { step, value })?;
        let text = self.text.trim().to_owned();
        if text.is_empty() {
            return Err(PlanError::EmptyStep { step });
        }
        Ok(Step { text, mark })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;

    fn parse(xml: &str) -> Result<Plan, PlanError> {
        Plan::parse(&Payload::parse(xml, &Limits::default()).unwrap())
    }

    fn plan(body: &str) -> String {
        format!(r#"<todo-until xmlns="{TODO_NS}" condition="c">{body}</todo-until>"#)
    }

    #[test]
    fn a_plan_reads_back_as_written() {
        let cdata = parse(&plan(
            r#"<step done="false"><![CDATA[a < b]]> &amp; c</step>"#,
        ));
        assert_eq!(cdata.unwrap().steps()[0].text, "a < b & c");
        let written = Plan::new("a & b")
            .step("one <1>", Mark::Done)
            .step("two", Mark::Open)
            .step("three", Mark::Abandoned);
        assert_eq!(parse(&written.to_xml()), Ok(written));
    }

    #[test]
    fn each_fault_is_named() {
        let cases: &[(&str, &str)] = &[
            (
                &format!(r#"<todo xmlns="{TODO_NS}"/>"#),
                "<todo> is not a plan element",
            ),
            (
                &format!(
                    r#"<todo-until xmlns="{TODO_NS}"><step done="false">x</step></todo-until>"#
                ),
                "needs condition=",
            ),
            (&plan(""), "lists no <step>"),
            (
                &plan("<step>x</step>"),
                "step 1 of <todo-until> has no `done`",
            ),
            (
                &plan(r#"<step done="true">a</step><step done="yes">b</step>"#),
                r#"step 2 of <todo-until>: done="yes" is not"#,
            ),
            (
                &plan(r#"<step done="false">  </step>"#),
                "step 1 of <todo-until> is empty",
            ),
            (
                &plan(r#"<step done="false" by="me">x</step>"#),
                "unknown attribute `by` on <step>",
            ),
            (
                &plan(r#"<item done="false">x</item>"#),
                "unknown element <item>",
            ),
            (
                &plan(r#"<step done="true">a</step><step done="false">b <b>c</b></step>"#),
                "step 2 holds an element <b>; a step is plain text",
            ),
            (
                &plan(r#"<step done="true">a</step>b"#),
                "text outside a <step> (after step 1)",
            ),
        ];
        for (xml, expected) in cases {
            let err = parse(xml).unwrap_err().to_string();
            assert!(err.contains(expected), "{xml}: {err}");
        }
    }
}
