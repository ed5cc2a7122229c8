//! [`Program`]: a checked APS document made ready to run — constants evaluated, triggers read
//! (their patterns compiled once), every process compiled.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::compile::Code;
use crate::QName;
use crate::process::ast::Arg;
use crate::process::check::{is_unresolved_placeholder, trigger_pattern};
use crate::process::expr::{Env, Value, eval};
use crate::process::source::{ConstValue, Constant};
use crate::process::{Diagnostic, check_source};

/// A process document that passed the static checks, ready to run on the pump.
#[derive(Debug)]
pub struct Program {
    pub(crate) processes: Vec<Compiled>,
    pub(crate) constants: BTreeMap<String, Value>,
    pub(crate) runtime: BTreeMap<String, Value>,
    pub(crate) triggers: Vec<Trigger>,
    /// Warnings the checks found (hard errors refuse the program).
    pub warnings: Vec<Diagnostic>,
}

/// One `<trigger>`: the root it starts on, the pattern the payload's text must match (if any),
/// and the process it starts.
#[derive(Debug)]
pub(crate) struct Trigger {
    pub root: QName,
    pub pattern: Option<regex::Regex>,
    pub target: String,
}

/// How a payload meets the triggers of one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Triggered {
    /// A trigger of the process has its root and, if it has a pattern, matches its text.
    Starts,
    /// No trigger of the process has its root.
    NotATrigger,
    /// Triggers of the process have its root, but its text matches none of their patterns
    /// (listed); `elsewhere`: a trigger of another process of the program starts on it.
    Unmatched {
        patterns: Vec<String>,
        elsewhere: bool,
    },
}

/// One compiled `<process>`.
#[derive(Debug)]
pub(crate) struct Compiled {
    pub id: String,
    pub args: Vec<Arg>,
    pub code: Code,
}

/// Why a document does not load: its hard errors (07: fatal), in file order.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{} error(s) in the process document; the first: {}", .0.len(), .0.first().map(|d| d.to_string()).unwrap_or_default())]
pub struct ProgramError(pub Vec<Diagnostic>);

impl Program {
    /// Checks and compiles the text of a process file.
    ///
    /// # Errors
    ///
    /// [`ProgramError`] with every hard error of the static checks (and a constant that does
    /// not evaluate).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::process::engine::Program;
    /// let text = "<processes>\n<process id=\"hello\">\n  RETURN: greeting=\"hi\"\n</process>\n</processes>\n";
    /// let program = Program::parse(text)?;
    /// assert_eq!(program.process_ids(), ["hello"]);
    /// # Ok::<(), agentpump::process::engine::ProgramError>(())
    /// ```
    pub fn parse(text: &str) -> Result<Arc<Program>, ProgramError> {
        Self::parse_with(text, false)
    }

    /// [`Program::parse`] for an organism that allows agent inference (`infer_with`): a
    /// placeholder that no argument, constant or runtime value resolves is not AG-006 here; the
    /// process asks the inference tool for it when a statement first reads it (03: "INP →
    /// constants → runtime → agent inference"), and records AG-W03.
    ///
    /// # Errors
    ///
    /// As [`Program::parse`], but for those placeholders.
    pub fn parse_inferring(text: &str) -> Result<Arc<Program>, ProgramError> {
        Self::parse_with(text, true)
    }

    fn parse_with(text: &str, inferring: bool) -> Result<Arc<Program>, ProgramError> {
        let checked = check_source(text);
        let errors: Vec<_> = checked
            .diagnostics
            .iter()
            .filter(|d| d.severity() == crate::process::Severity::Error)
            .filter(|d| !(inferring && is_unresolved_placeholder(d)))
            .cloned()
            .collect();
        if !errors.is_empty() {
            return Err(ProgramError(errors));
        }
        let constants = evaluate(&checked.document.constants, &BTreeMap::new())?;
        let runtime = evaluate(&checked.document.runtime, &constants)?;
        let triggers = checked
            .document
            .triggers
            .iter()
            .map(|t| {
                let pattern = t
                    .pattern
                    .as_ref()
                    .map(|(p, at)| trigger_pattern(p, *at))
                    .transpose()
                    .map_err(|d| ProgramError(vec![d]))?;
                Ok(Trigger {
                    root: event_qname(&t.event),
                    pattern,
                    target: t.target.name.clone(),
                })
            })
            .collect::<Result<_, ProgramError>>()?;
        let processes = checked
            .processes
            .iter()
            .map(|p| {
                let end = p.body.last().map_or(p.span, |s| s.span);
                Compiled {
                    id: p.id.name.clone(),
                    args: p.args.clone(),
                    code: Code::compile(&p.body, end),
                }
            })
            .collect();
        Ok(Arc::new(Program {
            processes,
            constants,
            runtime,
            triggers,
            warnings: checked.diagnostics,
        }))
    }

    /// The ids of its processes, in file order.
    pub fn process_ids(&self) -> Vec<&str> {
        self.processes.iter().map(|p| p.id.as_str()).collect()
    }

    /// The roots its triggers start processes on, with the process each starts (a trigger
    /// with a `pattern` starts it only on a payload whose text matches).
    pub fn triggers(&self) -> impl Iterator<Item = (&QName, &str)> {
        self.triggers.iter().map(|t| (&t.root, t.target.as_str()))
    }

    /// How a payload of root `root` meets the triggers of `process`; `text` gives the
    /// payload's text content, read only when a pattern needs it.
    pub(crate) fn triggered(
        &self,
        process: &str,
        root: &QName,
        text: impl FnOnce() -> String,
    ) -> Triggered {
        let on_root = || self.triggers.iter().filter(|t| t.root == *root);
        if !on_root().any(|t| t.target == process) {
            return Triggered::NotATrigger;
        }
        let text = on_root()
            .any(|t| t.pattern.is_some())
            .then(text)
            .unwrap_or_default();
        let matches = |t: &Trigger| t.pattern.as_ref().is_none_or(|p| p.is_match(&text));
        if on_root().any(|t| t.target == process && matches(t)) {
            return Triggered::Starts;
        }
        Triggered::Unmatched {
            patterns: on_root()
                .filter(|t| t.target == process)
                .filter_map(|t| t.pattern.as_ref().map(|p| p.as_str().to_owned()))
                .collect(),
            elsewhere: on_root().any(|t| t.target != process && matches(t)),
        }
    }

    /// The other processes with a trigger on a root `process` has one on: a payload of that
    /// root that only one of them matches is theirs, so each must be registered too.
    pub(crate) fn trigger_siblings(&self, process: &str) -> Vec<String> {
        let mine: Vec<&QName> = self
            .triggers
            .iter()
            .filter(|t| t.target == process)
            .map(|t| &t.root)
            .collect();
        let mut out: Vec<String> = Vec::new();
        for t in &self.triggers {
            if t.target != process && mine.contains(&&t.root) && !out.contains(&t.target) {
                out.push(t.target.clone());
            }
        }
        out
    }

    /// A payload a client may send to start `process`: its first trigger without a pattern,
    /// each declared argument an attribute, else a call of it, each argument an `<arg>`; each
    /// value a placeholder of the argument's type. `None` for no such process.
    pub(crate) fn example(&self, process: &str) -> Option<String> {
        let args = &self.processes.get(self.index_of(process)?)?.args;
        let placeholder = |a: &Arg| match a.ty.as_str() {
            "Number" => "1".to_owned(),
            "Boolean" => "false".to_owned(),
            "JSON" => "null".to_owned(),
            "ISO8601" => "2026-01-01T00:00:00Z".to_owned(),
            _ => a.name.name.clone(),
        };
        let trigger = self
            .triggers
            .iter()
            .find(|t| t.target == process && t.pattern.is_none());
        Some(match trigger {
            Some(t) => {
                let mut x = format!("<{}", t.root.local());
                if !t.root.namespace().is_empty() {
                    x.push_str(&format!(" xmlns=\"{}\"", t.root.namespace()));
                }
                for a in args {
                    x.push_str(&format!(" {}=\"{}\"", a.name.name, placeholder(a)));
                }
                x + "/>"
            }
            None => args
                .iter()
                .fold(crate::tool::Call::new(process), |call, a| {
                    call.arg(a.name.name.clone(), placeholder(a))
                })
                .to_xml(),
        })
    }

    pub(crate) fn index_of(&self, id: &str) -> Option<usize> {
        self.processes.iter().position(|p| p.id == id)
    }
}

/// `{ns}local` (Clark notation) or a bare `local` (no namespace).
fn event_qname(event: &str) -> QName {
    match event.strip_prefix('{').and_then(|r| r.split_once('}')) {
        Some((ns, local)) => QName::new(ns, local),
        None => QName::new("", event),
    }
}

struct Constants<'a>(&'a BTreeMap<String, Value>, &'a BTreeMap<String, Value>);

impl Env for Constants<'_> {
    fn symbol(&self, name: &str) -> Option<Value> {
        self.0.get(name).or_else(|| self.1.get(name)).cloned()
    }
    fn local(&self, _: &str) -> Option<Value> {
        None
    }
    fn placeholder(&self, name: &str) -> Option<Value> {
        self.symbol(name)
    }
}

fn evaluate(
    list: &[Constant],
    outer: &BTreeMap<String, Value>,
) -> Result<BTreeMap<String, Value>, ProgramError> {
    let mut out = BTreeMap::new();
    for c in list {
        let value = match &c.value {
            ConstValue::Text(t) => Value::Str(t.clone()),
            ConstValue::Value(e) => eval(e, &Constants(outer, &out))
                .map_err(|e| ProgramError(vec![Diagnostic::new(e.code, e.span, e.message)]))?,
        };
        out.insert(c.name.name.clone(), value);
    }
    Ok(out)
}
