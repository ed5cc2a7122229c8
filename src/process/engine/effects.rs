//! What a running process asks of the pump ([`Effect`]) and the events it records
//! ([`Event`]), written as payloads of `urn:agentpump:process:v1` (`schemas/process.xsd`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use quick_xml::escape::escape;
use rust_decimal::Decimal;

use crate::envelope::PROCESS_NS;
use crate::process::ast::Level;
use crate::process::expr::Value;
use crate::tool::{Call, items};

/// One thing a process asks for.
#[derive(Debug, Clone)]
pub(crate) enum Effect {
    /// A tool call; `child` runs it in a child thread (PAR, and every process target).
    Call { call: Call, child: bool },
    /// An event, numbered from 1 in the process's run.
    Event(u64, Event),
    /// The symbol `RESIDUAL` was bound to a number: the governor hears it.
    Residual(Decimal),
}

/// A recorded step of a process.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Event {
    /// `TELL`; `why` is the symbol and its value (`None` when redacted).
    Tell {
        message: String,
        why: Option<(String, Option<Value>)>,
        level: Option<Level>,
        outcome: Option<String>,
        line: u32,
    },
    /// `MILESTONE`.
    Milestone { title: String, line: u32 },
    /// `SNAP`: symbols and values (`None` when redacted).
    Snap {
        values: Vec<(String, Option<Value>)>,
        delta: bool,
        line: u32,
    },
    /// PAR launched these tools, in lexical order.
    Par { tools: Vec<String>, line: u32 },
    /// JOIN: every child answered.
    Join { children: usize, line: u32 },
    /// RETURN with these fields.
    Return { fields: BTreeMap<String, Value> },
    /// The process failed: its error object.
    Failed { error: Value },
    /// AG-W03 HeuristicInference: a value the inference tool gave (`None` when the symbol is
    /// redacted), and the input hash.
    Inferred {
        symbol: String,
        value: Option<Value>,
        hash: String,
        line: u32,
    },
    /// AG-W02 LaxTime: a USE without `timeout_ms` under a policy that requires one.
    LaxTime { tool: String, line: u32 },
}

#[cfg(feature = "otel")]
impl Event {
    /// TELL, MILESTONE, PAR and JOIN as events on the current delivery's span, when telemetry
    /// is on (`pump/telemetry.rs`): their kind, number and line, never a value or a message.
    pub(crate) fn trace(&self, seq: u64) {
        use opentelemetry::KeyValue;
        use opentelemetry::trace::TraceContextExt as _;
        let (name, line, mut attributes) = match self {
            Self::Tell { level, line, .. } => {
                let level = level.map_or("info".to_owned(), |l| format!("{l:?}").to_lowercase());
                (
                    "process.tell",
                    line,
                    vec![KeyValue::new("agentpump.process.level", level)],
                )
            }
            Self::Milestone { title, line } => (
                "process.milestone",
                line,
                vec![KeyValue::new("agentpump.process.milestone", title.clone())],
            ),
            Self::Par { tools, line } => (
                "process.par",
                line,
                vec![KeyValue::new("agentpump.process.tools", tools.join(","))],
            ),
            Self::Join { children, line } => (
                "process.join",
                line,
                vec![KeyValue::new(
                    "agentpump.process.children",
                    *children as i64,
                )],
            ),
            _ => return,
        };
        attributes.push(KeyValue::new("agentpump.process.event", seq as i64));
        attributes.push(KeyValue::new("agentpump.process.line", i64::from(*line)));
        opentelemetry::Context::map_current(|cx| cx.span().add_event(name, attributes));
    }
}

/// One named value, or a redacted one (its name only: 06 forbids its content).
fn named(out: &mut String, element: &str, name: &str, value: Option<&Value>) {
    match value {
        Some(v) => {
            let mut one = BTreeMap::new();
            one.insert(name.to_owned(), v.clone());
            items(out, element, &one);
        }
        None => {
            let _ = write!(
                out,
                "<{element} name=\"{}\" redacted=\"true\"/>",
                escape(name)
            );
        }
    }
}

impl Event {
    /// The values it records (what redaction scrubs).
    pub fn values_mut(&mut self) -> Box<dyn Iterator<Item = &mut Value> + '_> {
        match self {
            Event::Tell { why, .. } => Box::new(why.iter_mut().filter_map(|(_, v)| v.as_mut())),
            Event::Snap { values, .. } => {
                Box::new(values.iter_mut().filter_map(|(_, v)| v.as_mut()))
            }
            Event::Return { fields } => Box::new(fields.values_mut()),
            Event::Failed { error } => Box::new(std::iter::once(error)),
            Event::Inferred { value, .. } => Box::new(value.iter_mut()),
            Event::Milestone { .. }
            | Event::Par { .. }
            | Event::Join { .. }
            | Event::LaxTime { .. } => Box::new(std::iter::empty()),
        }
    }

    /// The event as a payload.
    pub fn to_xml(&self, process: &str, seq: u64) -> String {
        let (element, attrs) = match self {
            Event::Tell {
                level,
                outcome,
                line,
                ..
            } => {
                let mut a = format!(" line=\"{line}\"");
                if let Some(l) = level {
                    let l = match l {
                        Level::Brief => "brief",
                        Level::Full => "full",
                    };
                    let _ = write!(a, " level=\"{l}\"");
                }
                if let Some(o) = outcome {
                    let _ = write!(a, " outcome=\"{}\"", escape(o.as_str()));
                }
                ("tell", a)
            }
            Event::Milestone { line, .. } => ("milestone", format!(" line=\"{line}\"")),
            Event::Snap { delta, line, .. } => {
                ("snap", format!(" line=\"{line}\" delta=\"{delta}\""))
            }
            Event::Par { tools, line } => (
                "par",
                format!(
                    " line=\"{line}\" tools=\"{}\"",
                    escape(tools.join(" ").as_str())
                ),
            ),
            Event::Join { children, line } => {
                ("join", format!(" line=\"{line}\" children=\"{children}\""))
            }
            Event::Return { .. } => ("return", String::new()),
            Event::Inferred { hash, line, .. } => (
                "warning",
                format!(
                    " line=\"{line}\" code=\"AG-W03\" name=\"HeuristicInference\" input-hash=\"{hash}\""
                ),
            ),
            Event::LaxTime { tool, line } => (
                "warning",
                format!(
                    " line=\"{line}\" code=\"AG-W02\" name=\"LaxTime\" tool=\"{}\"",
                    escape(tool.as_str())
                ),
            ),
            Event::Failed { error } => {
                let get = |k: &str| match error {
                    Value::Object(m) => m.get(k).map(ToString::to_string).unwrap_or_default(),
                    _ => String::new(),
                };
                (
                    "failed",
                    format!(
                        " type=\"{}\" line=\"{}\"",
                        escape(get("type").as_str()),
                        escape(get("line").as_str())
                    ),
                )
            }
        };
        let mut out = format!(
            "<{element} xmlns=\"{PROCESS_NS}\" process=\"{}\" seq=\"{seq}\"{attrs}>",
            escape(process)
        );
        match self {
            Event::Tell { message, why, .. } => {
                out.push_str(&escape(message.as_str()));
                if let Some((name, value)) = why {
                    named(&mut out, "why", name, value.as_ref());
                }
            }
            Event::Milestone { title, .. } => out.push_str(&escape(title.as_str())),
            Event::Snap { values, .. } => {
                for (name, value) in values {
                    named(&mut out, "symbol", name, value.as_ref());
                }
            }
            Event::Return { fields } => items(&mut out, "field", fields),
            Event::Inferred { symbol, value, .. } => {
                named(&mut out, "symbol", symbol, value.as_ref());
            }
            Event::Failed { error } => {
                let message = match error {
                    Value::Object(m) => m.get("message").map(ToString::to_string),
                    _ => None,
                };
                out.push_str(&escape(message.unwrap_or_default().as_str()));
            }
            Event::Par { .. } | Event::Join { .. } | Event::LaxTime { .. } => {}
        }
        let _ = write!(out, "</{element}>");
        out
    }
}

/// The wake-up a process sends itself when it ran its steps for this turn.
pub(crate) fn continue_xml(process: &str, steps: u64) -> String {
    format!(
        "<continue xmlns=\"{PROCESS_NS}\" process=\"{}\" steps=\"{steps}\"/>",
        escape(process)
    )
}
