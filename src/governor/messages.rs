//! The governor namespace `urn:agentpump:governor:v1`: what listeners tell the governor
//! (`goal`, `loop`, `residual`, `criterion`, `learning`), parsed from payloads and built for
//! [`Context`](crate::Context).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use quick_xml::escape::escape;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use super::Budget;
use crate::envelope::GOVERNOR_NS;
use crate::envelope::Vocabulary;
use crate::{Payload, ThreadId};

/// What a loop signal asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Control {
    /// Keep going.
    Continue,
    /// The work is finished; halt with the best certificate the evidence allows.
    Done,
    /// Give up; halt as aborted.
    Abort,
}

/// A certificate type of phuc-loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum CertificateType {
    /// Done, and every declared criterion met with evidence from another listener.
    Exact,
    /// The residual fell below r-p.
    Converged,
    /// A budget ran out.
    Timeout,
    /// Something downstream asked to stop.
    Backpressure,
    /// The residual kept rising.
    Diverged,
}

impl CertificateType {
    /// The name as written on the wire.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::CertificateType;
    /// assert_eq!(CertificateType::Converged.as_str(), "CONVERGED");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exact => "EXACT",
            Self::Converged => "CONVERGED",
            Self::Timeout => "TIMEOUT",
            Self::Backpressure => "BACKPRESSURE",
            Self::Diverged => "DIVERGED",
        }
    }
}

/// A certificate name that is none of the five ([`CertificateType`]'s `FromStr`); it keeps the
/// name it was given.
///
/// # Example
///
/// ```
/// use agentpump::governor::{CertificateType, UnknownCertificate};
/// assert_eq!("EXACT".parse::<CertificateType>(), Ok(CertificateType::Exact));
/// let err = "PROVEN".parse::<CertificateType>().unwrap_err();
/// assert_eq!(err, UnknownCertificate("PROVEN".to_owned()));
/// assert!(err.to_string().starts_with("unknown certificate `PROVEN`, expected EXACT"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown certificate `{0}`, expected EXACT, CONVERGED, TIMEOUT, BACKPRESSURE or DIVERGED")]
pub struct UnknownCertificate(pub String);

impl FromStr for CertificateType {
    type Err = UnknownCertificate;

    fn from_str(s: &str) -> Result<Self, UnknownCertificate> {
        match s {
            "EXACT" => Ok(Self::Exact),
            "CONVERGED" => Ok(Self::Converged),
            "TIMEOUT" => Ok(Self::Timeout),
            "BACKPRESSURE" => Ok(Self::Backpressure),
            "DIVERGED" => Ok(Self::Diverged),
            other => Err(UnknownCertificate(other.to_owned())),
        }
    }
}

/// The lane of a learning (phuc-loop §5.2): A hard fact, B verified, C guidance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Lane {
    /// Hard: verified fact or failure.
    A,
    /// Verified by another listener.
    B,
    /// Guidance only.
    C,
}

/// A `loop` signal. Build one with [`Signal::new`] and hand it to [`Context::signal`](crate::Context::signal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    /// What it asks for.
    pub control: Control,
    /// Human-readable rationale.
    pub notes: Option<String>,
    /// Machine-readable reason (for `abort`).
    pub reason: Option<String>,
}

impl Signal {
    /// A signal with no notes.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::{Control, Signal};
    /// assert_eq!(Signal::new(Control::Done).to_xml(), r#"<loop xmlns="urn:agentpump:governor:v1" control="done"/>"#);
    /// ```
    pub fn new(control: Control) -> Self {
        Self {
            control,
            notes: None,
            reason: None,
        }
    }

    /// Adds notes.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::{Control, Signal};
    /// let signal = Signal::new(Control::Continue).notes("two tests left");
    /// assert_eq!(signal.notes.as_deref(), Some("two tests left"));
    /// ```
    pub fn notes(mut self, notes: impl Into<String>) -> Self {
        self.notes = Some(notes.into());
        self
    }

    /// Adds a reason.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::{Control, Signal};
    /// let signal = Signal::new(Control::Abort).reason("no-data");
    /// assert!(signal.to_xml().contains(r#"control="abort" reason="no-data""#));
    /// ```
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    /// The `<loop>` element.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::{Control, Signal};
    /// let xml = Signal::new(Control::Abort).reason("stuck").notes("a < b").to_xml();
    /// assert_eq!(xml, r#"<loop xmlns="urn:agentpump:governor:v1" control="abort" reason="stuck" notes="a &lt; b"/>"#);
    /// ```
    pub fn to_xml(&self) -> String {
        let control = match self.control {
            Control::Continue => "continue",
            Control::Done => "done",
            Control::Abort => "abort",
        };
        let mut x = format!("<loop xmlns=\"{GOVERNOR_NS}\" control=\"{control}\"");
        if let Some(reason) = &self.reason {
            x.push_str(&format!(" reason=\"{}\"", escape(reason.as_str())));
        }
        if let Some(notes) = &self.notes {
            x.push_str(&format!(" notes=\"{}\"", escape(notes.as_str())));
        }
        x.push_str("/>");
        x
    }
}

/// A declared goal: text, acceptance criteria, applicable certificates, r-p and budget overrides
/// (which may only tighten the policy).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Goal {
    /// What the thread is for.
    pub text: String,
    /// `(id, description)` of each acceptance criterion.
    pub criteria: Vec<(String, String)>,
    /// Certificates that may end the thread (phuc-loop's `halting_certificates_applicable`).
    /// A goal that declares none halts its thread at once with `EXIT_NEED_INFO`.
    pub certificates: Vec<CertificateType>,
    /// Convergence threshold for residuals.
    pub r_p: Option<Decimal>,
    /// What the residuals measure (phuc-loop §3.2 `residual_metric`: "fraction_of_failing_tests
    /// OR benchmark_gap OR custom"), carried to the halting report.
    pub residual_metric: Option<String>,
    /// Budget overrides (tighten only).
    pub budget: Budget,
}

impl Goal {
    /// The `<goal>` element.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::governor::{CertificateType, Goal};
    /// let goal = Goal { text: "sum".into(), certificates: vec![CertificateType::Exact], ..Goal::default() };
    /// assert_eq!(goal.to_xml(), r#"<goal xmlns="urn:agentpump:governor:v1" certificates="EXACT"><text>sum</text></goal>"#);
    /// ```
    pub fn to_xml(&self) -> String {
        let mut x = format!("<goal xmlns=\"{GOVERNOR_NS}\"");
        if let Some(r_p) = self.r_p {
            x.push_str(&format!(" r-p=\"{r_p}\""));
        }
        if let Some(metric) = &self.residual_metric {
            x.push_str(&format!(" residual-metric=\"{}\"", escape(metric.as_str())));
        }
        if !self.certificates.is_empty() {
            let names: Vec<&str> = self.certificates.iter().map(|c| c.as_str()).collect();
            x.push_str(&format!(" certificates=\"{}\"", names.join(" ")));
        }
        x.push_str(&format!("><text>{}</text>", escape(self.text.as_str())));
        for (id, description) in &self.criteria {
            x.push_str(&format!(
                "<criterion id=\"{}\">{}</criterion>",
                escape(id.as_str()),
                escape(description.as_str())
            ));
        }
        x.push_str(&budget_xml(&self.budget, ""));
        x.push_str("</goal>");
        x
    }
}

/// The attributes a `<budget/>` element may carry.
pub(crate) const BUDGET_ATTRIBUTES: &[&str] = &[
    "turns",
    "tokens",
    "cost",
    "tool-calls",
    "threads",
    "wall-clock-ms",
    "depth",
];

/// What each governor message may contain. `loop` is absent: Ask-Loop v2 says of its payload
/// "Any other fields are for logging and diagnostics", so it may carry any.
fn vocabulary(local: &str) -> Option<Vocabulary<'_>> {
    let (attributes, children): (&[&str], &[(&str, &[&str])]) = match local {
        "goal" => (
            // phuc-loop §3.2 spells it `residual_metric`: a documented alias.
            &["r-p", "certificates", "residual-metric", "residual_metric"],
            &[
                ("text", &[]),
                ("criterion", &["id"]),
                ("budget", BUDGET_ATTRIBUTES),
            ],
        ),
        "residual" => (&["value"], &[]),
        "criterion" => (&["id", "met", "evidence", "thread"], &[]),
        "learning" => (&["lane"], &[]),
        _ => return None,
    };
    Some(Vocabulary {
        element: local,
        attributes,
        children,
    })
}

/// The `<budget …/>` element (with `prefix`, e.g. `sys:`) for a budget, empty when nothing is limited.
pub(crate) fn budget_xml(b: &Budget, prefix: &str) -> String {
    let mut attrs = String::new();
    let mut put = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            attrs.push_str(&format!(" {name}=\"{v}\""));
        }
    };
    put("turns", b.turns.map(|v| v.to_string()));
    put("tokens", b.tokens.map(|v| v.to_string()));
    put("cost", b.cost.map(|v| v.to_string()));
    put("tool-calls", b.tool_calls.map(|v| v.to_string()));
    put("threads", b.threads.map(|v| v.to_string()));
    put(
        "wall-clock-ms",
        b.wall_clock.map(|v| v.as_millis().to_string()),
    );
    put("depth", b.depth.map(|v| v.to_string()));
    if attrs.is_empty() {
        String::new()
    } else {
        format!("<{prefix}budget{attrs}/>")
    }
}

/// A message to the governor, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GovernorMessage {
    /// Declares or tightens the thread's goal.
    Goal(Goal),
    /// A loop signal.
    Loop(Signal),
    /// Distance to the goal, exact.
    Residual(Decimal),
    /// A criterion's status, with an evidence link.
    Criterion {
        /// The criterion's id.
        id: String,
        /// Whether it is met.
        met: bool,
        /// Where the evidence is (a message id, a file, a URL).
        evidence: Option<String>,
        /// The child thread whose listener confirmed it (`thread="…"`): the criterion is
        /// credited to that listener when it is not the reporter (see `docs/governor.md`).
        thread: Option<ThreadId>,
    },
    /// Something learned, lane-typed.
    Learning {
        /// The lane.
        lane: Lane,
        /// The text.
        text: String,
    },
}

#[derive(Deserialize)]
struct GoalXml {
    #[serde(rename = "@r-p")]
    r_p: Option<String>,
    #[serde(rename = "@certificates")]
    certificates: Option<String>,
    #[serde(rename = "@residual-metric", alias = "@residual_metric")]
    residual_metric: Option<String>,
    text: Option<String>,
    #[serde(default)]
    criterion: Vec<CriterionXml>,
    budget: Option<BudgetXml>,
}

#[derive(Deserialize)]
struct CriterionXml {
    #[serde(rename = "@id")]
    id: String,
    #[serde(rename = "@met")]
    met: Option<bool>,
    #[serde(rename = "@evidence")]
    evidence: Option<String>,
    #[serde(rename = "@thread")]
    thread: Option<String>,
    #[serde(rename = "$text", default)]
    text: String,
}

#[derive(Deserialize)]
struct BudgetXml {
    #[serde(rename = "@turns")]
    turns: Option<u64>,
    #[serde(rename = "@tokens")]
    tokens: Option<u64>,
    #[serde(rename = "@cost")]
    cost: Option<String>,
    #[serde(rename = "@tool-calls")]
    tool_calls: Option<u64>,
    #[serde(rename = "@threads")]
    threads: Option<u64>,
    #[serde(rename = "@wall-clock-ms")]
    wall_clock_ms: Option<u64>,
    #[serde(rename = "@depth")]
    depth: Option<u32>,
}

#[derive(Deserialize)]
struct LoopXml {
    #[serde(rename = "@control")]
    control: Control,
    #[serde(rename = "@notes")]
    notes: Option<String>,
    #[serde(rename = "@reason")]
    reason: Option<String>,
}

#[derive(Deserialize)]
struct ResidualXml {
    #[serde(rename = "@value")]
    value: String,
}

#[derive(Deserialize)]
struct LearningXml {
    #[serde(rename = "@lane")]
    lane: Lane,
    #[serde(rename = "$text", default)]
    text: String,
}

/// Why a payload of the governor namespace is not a governor message; its text is what the
/// sender reads in the `huh` the pump answers with.
///
/// # Example
///
/// ```
/// use agentpump::{Limits, Payload};
/// use agentpump::governor::{GovernorMessage, MessageError};
/// let xml = r#"<residual xmlns="urn:agentpump:governor:v1" value="0.1f"/>"#;
/// let payload = Payload::parse(xml, &Limits::default()).unwrap();
/// let err = GovernorMessage::parse(&payload).unwrap_err();
/// assert!(matches!(err, MessageError::NotExact { .. }));
/// assert_eq!(err.to_string(), r#"value="0.1f" is not an exact decimal"#);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MessageError {
    /// The element is none of the messages a listener may send.
    #[error(
        "<{0}> is not a governor message; listeners may emit goal, loop, residual, criterion and learning"
    )]
    NotAMessage(String),
    /// An attribute or child element the message does not define.
    #[error("{0}")]
    Vocabulary(String),
    /// The XML does not have the message's shape (a missing or mistyped attribute).
    #[error("<{element}>: {reason}")]
    Malformed {
        /// The message's element name.
        element: String,
        /// What the reader found wrong.
        reason: String,
    },
    /// `certificates` names one that does not exist.
    #[error(transparent)]
    Certificate(#[from] UnknownCertificate),
    /// A decimal attribute is not an exact decimal (floats and words are refused).
    #[error("{attribute}=\"{text}\" is not an exact decimal")]
    NotExact {
        /// The attribute (`r-p`, `value`, `cost`…).
        attribute: String,
        /// The text it held.
        text: String,
    },
    /// A `<criterion>` without `met`.
    #[error("<criterion> needs met=\"true|false\"")]
    CriterionWithoutMet,
    /// A `<criterion thread="…">` that does not name a thread id.
    #[error("<criterion> thread=\"{0}\" is not a thread id (a UUID)")]
    NotAThread(String),
}

impl GovernorMessage {
    /// Parses a payload of the governor namespace.
    ///
    /// # Errors
    ///
    /// [`MessageError`] naming what does not fit (unknown element, missing or invalid attribute,
    /// a residual that is not an exact decimal).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Limits, Payload, governor::GovernorMessage};
    /// use rust_decimal::Decimal;
    /// let payload = Payload::parse(r#"<residual xmlns="urn:agentpump:governor:v1" value="0.25"/>"#, &Limits::default()).expect("well-formed");
    /// assert_eq!(GovernorMessage::parse(&payload), Ok(GovernorMessage::Residual(Decimal::new(25, 2))));
    /// ```
    pub fn parse(payload: &Payload) -> Result<Self, MessageError> {
        let text = payload.as_str();
        let local = payload.qname().local();
        let de = |e: quick_xml::DeError| MessageError::Malformed {
            element: local.to_owned(),
            reason: e.to_string(),
        };
        if let Some(words) = vocabulary(local) {
            words.check(text).map_err(MessageError::Vocabulary)?;
        }
        match local {
            "goal" => {
                let g: GoalXml = quick_xml::de::from_str(text).map_err(de)?;
                let certificates = g
                    .certificates
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(CertificateType::from_str)
                    .collect::<Result<Vec<_>, _>>()?;
                let r_p = g.r_p.map(|v| decimal(&v, "r-p")).transpose()?;
                let budget = g
                    .budget
                    .map(BudgetXml::into_budget)
                    .transpose()?
                    .unwrap_or_default();
                let criteria = g
                    .criterion
                    .into_iter()
                    .map(|c| (c.id, c.text.trim().to_owned()))
                    .collect();
                let text = g.text.unwrap_or_default().trim().to_owned();
                Ok(Self::Goal(Goal {
                    text,
                    criteria,
                    certificates,
                    r_p,
                    residual_metric: g.residual_metric.map(|m| m.trim().to_owned()),
                    budget,
                }))
            }
            "loop" => {
                let l: LoopXml = quick_xml::de::from_str(text).map_err(de)?;
                Ok(Self::Loop(Signal {
                    control: l.control,
                    notes: l.notes,
                    reason: l.reason,
                }))
            }
            "residual" => {
                let r: ResidualXml = quick_xml::de::from_str(text).map_err(de)?;
                Ok(Self::Residual(decimal(&r.value, "value")?))
            }
            "criterion" => {
                let c: CriterionXml = quick_xml::de::from_str(text).map_err(de)?;
                let met = c.met.ok_or(MessageError::CriterionWithoutMet)?;
                let thread = c
                    .thread
                    .map(|t| t.trim().parse().map_err(|_| MessageError::NotAThread(t)))
                    .transpose()?;
                Ok(Self::Criterion {
                    id: c.id,
                    met,
                    evidence: c.evidence,
                    thread,
                })
            }
            "learning" => {
                let l: LearningXml = quick_xml::de::from_str(text).map_err(de)?;
                Ok(Self::Learning {
                    lane: l.lane,
                    text: l.text.trim().to_owned(),
                })
            }
            other => Err(MessageError::NotAMessage(other.to_owned())),
        }
    }
}

impl BudgetXml {
    fn into_budget(self) -> Result<Budget, MessageError> {
        Ok(Budget {
            turns: self.turns,
            tokens: self.tokens,
            cost: self.cost.map(|c| decimal(&c, "cost")).transpose()?,
            tool_calls: self.tool_calls,
            threads: self.threads,
            wall_clock: self.wall_clock_ms.map(Duration::from_millis),
            depth: self.depth,
        })
    }
}

/// Parses `<budget …/>` attributes found in a `spawn-thread` request.
pub(crate) fn parse_budget(xml: &str) -> Result<Budget, MessageError> {
    let b: BudgetXml = quick_xml::de::from_str(xml).map_err(|e| MessageError::Malformed {
        element: "budget".to_owned(),
        reason: e.to_string(),
    })?;
    b.into_budget()
}

/// Parses an exact decimal: plain (`0.25`) or scientific (`1e-4`). Never a float.
pub(crate) fn decimal(text: &str, what: &str) -> Result<Decimal, MessageError> {
    let t = text.trim();
    let parsed = if t.contains(['e', 'E']) {
        Decimal::from_scientific(t)
    } else {
        Decimal::from_str_exact(t)
    };
    parsed.map_err(|_| MessageError::NotExact {
        attribute: what.to_owned(),
        text: text.to_owned(),
    })
}

impl fmt::Display for Lane {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Lane::A => "A",
            Lane::B => "B",
            Lane::C => "C",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Limits;

    #[test]
    fn every_message_round_trips_through_its_xml() {
        let goal = Goal {
            text: "ship <it>".into(),
            criteria: vec![("tests".into(), "all pass".into())],
            certificates: vec![CertificateType::Exact, CertificateType::Converged],
            r_p: Some(Decimal::new(1, 4)),
            residual_metric: Some("benchmark_gap".into()),
            budget: Budget {
                turns: Some(5),
                cost: Some(Decimal::new(250, 2)),
                ..Budget::default()
            },
        };
        let payload = Payload::parse(&goal.to_xml(), &Limits::default()).unwrap();
        assert_eq!(
            GovernorMessage::parse(&payload),
            Ok(GovernorMessage::Goal(goal))
        );
        let signal = Signal::new(Control::Abort).reason("cas-failed").notes("n");
        let payload = Payload::parse(&signal.to_xml(), &Limits::default()).unwrap();
        assert_eq!(
            GovernorMessage::parse(&payload),
            Ok(GovernorMessage::Loop(signal))
        );
    }

    #[test]
    fn decimals_are_exact_or_refused() {
        assert_eq!(decimal("1e-4", "r-p"), Ok(Decimal::new(1, 4)));
        assert_eq!(decimal(" 0.25 ", "value"), Ok(Decimal::new(25, 2)));
        // More digits than an exact decimal holds are refused, never rounded.
        for bad in ["0.1f", "NaN", "inf", "", "0.100000000000000000000000000001"] {
            assert!(decimal(bad, "value").is_err(), "{bad}");
        }
    }
}
