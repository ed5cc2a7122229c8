//! [`Machine`]: one running process — a program counter, its symbols, its scopes — and the
//! interpreter loop that runs it until it must wait for an answer, has used its steps for this
//! turn, returns or fails.
//!
//! The machine never touches the pump. It reads what it knows of the thread ([`Known`]: the
//! answers that arrived, what was already sent and recorded) and pushes [`Effect`]s; the
//! listener turns them into messages. Because ids and counters are assigned in execution order,
//! running the same program on the same history always asks for the same things with the same
//! ids: that is what lets a restarted process skip everything already done. An id also carries a
//! hash of the call's tool and arguments, so a rerun of a changed program notices the first call
//! that is not the one history holds at its place, and stops ([`Stop::Diverged`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::compile::Op;
use super::effects::{Effect, Event};
use super::par::{ParChild, Retry};
use super::privacy::{self, REDACT_ARG, REDACTED};
use super::program::Program;
use super::replay::{HASH_DIGITS, Known, hash_of, slot};
use crate::process::ast::{Bdd, Capture, Param, Return, Use};
use crate::process::code::Code;
use crate::process::diagnostic::Span;
use crate::process::expr::{Env, EvalError, Expr, ExprKind, PathSeg, Value, eval};
use crate::tool::{Answer, Call};

mod calls;
mod inference;
mod statements;

use calls::timeout;

/// Why the machine stopped running.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Stop {
    /// Waiting for answers.
    Waiting,
    /// Used its steps for this turn; more later.
    Paused,
    /// RETURN (or the end of the body): the fields of its result.
    Returned(BTreeMap<String, Value>),
    /// A hard error no RECOVER handled: the error object (`type`, `message`, `line`, …).
    Failed(Value),
    /// The run asked for a call other than the one history holds at its place (the process
    /// file or its input changed since): the error object. No RECOVER sees it.
    Diverged(Value),
}

struct Loop {
    var: String,
    items: Vec<Value>,
    index: usize,
    locals: usize,
}

struct Handler {
    recover: usize,
    err: String,
    locals: usize,
    loops: usize,
    with: usize,
    /// PAR children launched before the TRY: those launched inside it are dropped with it.
    par: usize,
}

/// A call the machine is waiting for (USE, RUN) and how many attempts it made.
struct Pending {
    id: String,
    attempt: u32,
}

/// One running process.
pub(crate) struct Machine {
    program: Arc<Program>,
    process: usize,
    pc: usize,
    input: BTreeMap<String, Value>,
    symbols: BTreeMap<String, Value>,
    locals: Vec<(String, Value)>,
    /// WITH defaults in scope: key, value, and whether it is computed from a sensitive one.
    with: Vec<(String, Value, bool)>,
    with_marks: Vec<usize>,
    loops: Vec<Loop>,
    handlers: Vec<Handler>,
    /// The last answer of each tool (or process), for CAPTURE.
    last: BTreeMap<String, Arc<Answer>>,
    /// The PAR children not yet joined, in lexical order.
    par: Vec<ParChild>,
    pending: Option<Pending>,
    /// The tool that answers `(from "Agent Inference")`, when the organism allows inference.
    inference: Option<String>,
    /// Placeholders resolved by agent inference in this run (the last resort, 03).
    inferred: BTreeMap<String, Value>,
    /// Warn AG-W02 for a USE without `timeout_ms` (the organism's time policy).
    require_timeout: bool,
    /// The largest value an expression may build (bytes of JSON).
    max_value_bytes: usize,
    /// The USEs warned AG-W02 so far (op index, index in a PAR): once per statement and run.
    lax: BTreeSet<(usize, usize)>,
    calls: u64,
    /// A call differed from history's: the run stops, whatever handlers are open.
    diverged: bool,
    events: u64,
    residuals: u64,
    /// Sensitive symbols (06): named in a `redact=` list, or SET from one.
    redacted: BTreeSet<String>,
    snapped: BTreeMap<String, Value>,
    /// Statements run, in all.
    pub steps: u64,
    done: Option<Stop>,
}

/// A hard error as the RECOVER variable sees it.
fn error(kind: &str, message: impl Into<String>, span: Span) -> Value {
    let mut m = BTreeMap::new();
    m.insert("type".into(), Value::Str(kind.to_owned()));
    m.insert("message".into(), Value::Str(message.into()));
    m.insert("line".into(), Value::Num(span.line.into()));
    Value::Object(m)
}

fn eval_error(e: EvalError) -> Value {
    let mut v = error(e.code.as_str(), e.message, e.span);
    if let Value::Object(m) = &mut v {
        m.insert("name".into(), Value::Str(e.code.name().to_owned()));
    }
    v
}

fn coded(code: Code, message: impl Into<String>, span: Span) -> Value {
    eval_error(EvalError {
        code,
        message: message.into(),
        span,
    })
}

impl Env for Machine {
    fn symbol(&self, name: &str) -> Option<Value> {
        if name == "_INDEX" {
            return self.loops.last().map(|l| Value::Num(l.index.into()));
        }
        if name == "INP" {
            return Some(Value::Object(self.input.clone()));
        }
        self.symbols
            .get(name)
            .or_else(|| self.program.constants.get(name))
            .or_else(|| self.program.runtime.get(name))
            .cloned()
    }

    fn local(&self, name: &str) -> Option<Value> {
        self.locals
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .or_else(|| {
                let declared = self.program.processes[self.process]
                    .args
                    .iter()
                    .any(|a| a.name.name == name);
                declared.then(|| self.input.get(name).cloned()).flatten()
            })
    }

    fn placeholder(&self, name: &str) -> Option<Value> {
        self.input
            .get(name)
            .or_else(|| self.input.get(&name.to_ascii_lowercase()))
            .or_else(|| self.program.constants.get(name))
            .or_else(|| self.program.runtime.get(name))
            .or_else(|| self.inferred.get(name))
            .cloned()
    }

    fn max_value_bytes(&self) -> usize {
        self.max_value_bytes
    }
}

/// What one `run` sees and does: what history holds, and where effects go.
pub(crate) struct Turn<'a> {
    pub known: &'a mut Known,
    pub effects: &'a mut Vec<Effect>,
    /// Steps this turn may run.
    pub limit: u64,
    /// Effects this turn may push: the payloads one delivery may carry, less what the
    /// listener adds (its answer, its notices, a `continue`).
    pub room: usize,
}

impl Machine {
    /// A machine at the start of `process`, with its input.
    /// The arguments a calling process named in [`REDACT_ARG`] are sensitive from the start.
    pub fn new(program: Arc<Program>, process: usize, mut input: BTreeMap<String, Value>) -> Self {
        let redacted = match input.remove(REDACT_ARG) {
            Some(Value::List(keys)) => keys
                .into_iter()
                .filter_map(|k| match k {
                    Value::Str(k) => Some(k),
                    _ => None,
                })
                .collect(),
            _ => BTreeSet::new(),
        };
        Self {
            program,
            process,
            pc: 0,
            input,
            symbols: BTreeMap::new(),
            locals: Vec::new(),
            with: Vec::new(),
            with_marks: Vec::new(),
            loops: Vec::new(),
            handlers: Vec::new(),
            last: BTreeMap::new(),
            par: Vec::new(),
            pending: None,
            inference: None,
            inferred: BTreeMap::new(),
            require_timeout: false,
            max_value_bytes: crate::process::expr::DEFAULT_MAX_VALUE_BYTES,
            lax: BTreeSet::new(),
            calls: 0,
            diverged: false,
            events: 0,
            residuals: 0,
            redacted,
            snapped: BTreeMap::new(),
            steps: 0,
            done: None,
        }
    }

    /// Lets `(from "Agent Inference")` ask `tool`.
    pub fn infer_with(mut self, tool: Option<String>) -> Self {
        self.inference = tool;
        self
    }

    /// Warns AG-W02 (a `warning` event) for every USE without `timeout_ms`.
    pub fn require_timeout(mut self, require: bool) -> Self {
        self.require_timeout = require;
        self
    }

    /// The largest value its expressions may build, in bytes of JSON.
    pub fn max_value_bytes(mut self, limit: usize) -> Self {
        self.max_value_bytes = limit;
        self
    }

    /// The process's id.
    pub fn id(&self) -> &str {
        &self.program.processes[self.process].id
    }

    /// Events recorded so far in this run.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The call ids it waits for (a USE or RUN, and PAR children not yet joined).
    pub fn waiting(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.par.iter().map(|c| c.id.clone()).collect();
        ids.extend(self.pending.as_ref().map(|p| p.id.clone()));
        ids
    }

    /// Whether `id` is the id of a call this run made (a USE, RUN, PAR child or inference):
    /// `process-n…` with `n` at most the calls it made so far.
    pub fn made(&self, id: &str) -> bool {
        slot(id)
            .strip_prefix(self.id())
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|n| n.parse::<u64>().ok())
            .is_some_and(|n| (1..=self.calls).contains(&n))
    }

    /// Whether it returned or failed.
    pub fn finished(&self) -> bool {
        self.done.is_some()
    }

    /// Runs until it waits, pauses, returns or fails.
    pub fn run(&mut self, turn: &mut Turn<'_>) -> Stop {
        if let Some(done) = &self.done {
            return done.clone();
        }
        let stop_at = self.steps + turn.limit.max(1);
        let program = Arc::clone(&self.program);
        let code = &program.processes[self.process].code;
        loop {
            if self.steps >= stop_at {
                return Stop::Paused;
            }
            let span = code.spans[self.pc];
            let op = &code.ops[self.pc];
            let need = self.outputs(op);
            if turn.effects.len() + need > turn.room {
                // The rest of the turn's payloads would not fit one delivery: the next turn.
                if !turn.effects.is_empty() {
                    return Stop::Paused;
                }
                let message = format!(
                    "this statement needs {need} payloads in one delivery; max_outputs leaves {}",
                    turn.room
                );
                if let Some(stop) = self.raise(coded(Code::LimitExceeded, message, span)) {
                    self.done = Some(stop.clone());
                    return stop;
                }
                continue;
            }
            self.steps += 1;
            match self.op(op, span, turn) {
                Ok(Flow::Next) => self.pc += 1,
                Ok(Flow::Go(to)) => self.pc = to,
                Ok(Flow::Wait) => {
                    self.steps -= 1;
                    return Stop::Waiting;
                }
                Ok(Flow::Finish(fields)) => {
                    let stop = Stop::Returned(fields);
                    self.done = Some(stop.clone());
                    return stop;
                }
                Err(err) => {
                    if let Some(stop) = self.raise(err) {
                        self.done = Some(stop.clone());
                        return stop;
                    }
                }
            }
        }
    }

    /// The most effects `op` can push: a PAR its children, its event and a warning for each
    /// under the time policy; any other statement two (a call or an event, and a warning or
    /// a residual).
    fn outputs(&self, op: &Op) -> usize {
        match op {
            Op::Par(uses) => {
                let lax = uses.iter().filter(|u| timeout(u).is_none()).count();
                uses.len() + 1 + if self.require_timeout { lax } else { 0 }
            }
            // Its event, and a repeat of each child that may be repeated.
            Op::Join(_) => self.par.len().max(1) + 1,
            _ => 2,
        }
    }

    /// A hard error: to the innermost RECOVER, or the end of the process. A code of 07
    /// (`AG-…`) is fatal for the run (07: "Engines MUST treat all `errors.hard` codes as fatal
    /// for the current compile/run"): no RECOVER sees it.
    fn raise(&mut self, mut err: Value) -> Option<Stop> {
        self.pending = None;
        self.scrub(&mut err);
        if self.diverged {
            return Some(Stop::Diverged(err));
        }
        if is_fatal(&err) {
            return Some(Stop::Failed(err));
        }
        let Some(h) = self.handlers.pop() else {
            return Some(Stop::Failed(err));
        };
        self.locals.truncate(h.locals);
        self.loops.truncate(h.loops);
        // A PAR launched inside the TRY is abandoned with it: no later JOIN takes its children.
        self.par.truncate(h.par);
        if let Some(&mark) = self.with_marks.get(h.with) {
            self.with.truncate(mark);
        }
        self.with_marks.truncate(h.with);
        self.locals.push((h.err, err));
        self.pc = h.recover;
        None
    }

    /// Cuts the texts of sensitive values out of a value about to be recorded or answered (an
    /// error, a RETURN's field, an event's value): 06, never in a log or an error message.
    fn scrub(&self, value: &mut Value) {
        if self.redacted.is_empty() {
            return;
        }
        let mut secrets = Vec::new();
        for name in &self.redacted {
            if let Some(v) = self.symbol(name).or_else(|| self.local(name)) {
                privacy::texts(&v, &mut secrets);
            }
        }
        // Longest first: a secret that contains another is cut whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        privacy::scrub(value, &secrets);
    }

    /// AG-W02 LaxTime: the `i`-th USE of the op at `pc` has no `timeout_ms` and the policy
    /// requires one; recorded once per statement and run.
    fn lax_time(&mut self, u: &Use, i: usize, span: Span, turn: &mut Turn<'_>) {
        if self.require_timeout && timeout(u).is_none() && self.lax.insert((self.pc, i)) {
            let event = Event::LaxTime {
                tool: u.tool.name.clone(),
                line: span.line,
            };
            self.event(event, turn);
        }
    }

    fn value(&self, e: &Expr) -> Result<Value, Value> {
        eval(e, self).map_err(eval_error)
    }

    fn bind(&mut self, symbol: &str, value: Value, turn: &mut Turn<'_>) {
        if symbol == "RESIDUAL"
            && let Value::Num(n) = value
        {
            self.residuals += 1;
            if self.residuals > turn.known.residuals {
                turn.effects.push(Effect::Residual(n));
            }
        }
        // A symbol bound again (a loop's) keeps its key: no new string.
        match self.symbols.get_mut(symbol) {
            Some(slot) => *slot = value,
            None => {
                self.symbols.insert(symbol.to_owned(), value);
            }
        }
    }

    fn event(&mut self, mut event: Event, turn: &mut Turn<'_>) {
        self.events += 1;
        if self.events > turn.known.events {
            event.values_mut().for_each(|v| self.scrub(v));
            turn.effects.push(Effect::Event(self.events, event));
        }
    }

    /// Runs one statement: a dispatch to its method (`machine/statements.rs`,
    /// `machine/calls.rs`, `machine/inference.rs`).
    fn op(&mut self, op: &Op, span: Span, turn: &mut Turn<'_>) -> Result<Flow, Value> {
        if self.inference.is_some() && !self.infer_placeholders(op, turn)? {
            return Ok(Flow::Wait);
        }
        match op {
            Op::Set {
                symbol,
                value,
                inferred,
            } => self.set(symbol, value, *inferred, span, turn),
            Op::Unset(s) => {
                self.symbols.remove(s);
                Ok(Flow::Next)
            }
            Op::Use(u) => {
                self.lax_time(u, 0, span, turn);
                self.use_(u, span, turn)
            }
            Op::Run { process, params } => self.run_process(process, params, span, turn),
            Op::Par(uses) => self.par(uses, span, turn),
            Op::Join(captures) => self.join(captures, span, turn),
            Op::Capture(c) => {
                let answer = self.last.get(&c.tool.name).cloned();
                self.capture(c, answer.as_deref(), span, turn)?;
                Ok(Flow::Next)
            }
            Op::Return(r) => Ok(Flow::Finish(self.returned(r)?)),
            Op::End => Ok(Flow::Finish(BTreeMap::new())),
            Op::Assert(conds) => self.assert(conds),
            Op::Condition { kind, cond, skip } => self.condition(*kind, cond, *skip, span),
            Op::Tell(t) => {
                self.tell(t, span, turn);
                Ok(Flow::Next)
            }
            Op::Milestone(title) => {
                let event = Event::Milestone {
                    title: title.clone(),
                    line: span.line,
                };
                self.event(event, turn);
                Ok(Flow::Next)
            }
            Op::Snap(s) => {
                self.snap(s, span, turn);
                Ok(Flow::Next)
            }
            Op::Unless { cond, to } => self.unless(cond, *to),
            Op::Jump(to) => Ok(Flow::Go(*to)),
            Op::WithPush(defaults) => self.with_push(defaults),
            Op::WithPop => {
                self.with_pop();
                Ok(Flow::Next)
            }
            Op::Foreach { var, list, end } => self.foreach(var, list, *end, span),
            Op::Next { body } => Ok(self.next_pass(*body)),
            Op::TryPush { recover, err } => {
                self.try_push(*recover, err);
                Ok(Flow::Next)
            }
            Op::TryPop { end } => {
                self.handlers.pop();
                Ok(Flow::Go(*end))
            }
            Op::RecoverEnd => {
                self.locals.pop();
                Ok(Flow::Next)
            }
        }
    }

    /// The fields of a RETURN; a sensitive one is `[REDACTED]` (06), in the recorded event and
    /// in the answer alike.
    fn returned(&self, r: &Return) -> Result<BTreeMap<String, Value>, Value> {
        let mut fields = BTreeMap::new();
        match r {
            Return::Symbols(symbols) => {
                for s in symbols {
                    let v = self.symbol(&s.name).ok_or_else(|| {
                        coded(
                            Code::UndefinedSymbol,
                            format!("symbol {} is not bound", s.name),
                            s.span,
                        )
                    })?;
                    let mut v = if self.redacted.contains(&s.name) {
                        Value::from(REDACTED)
                    } else {
                        v
                    };
                    self.scrub(&mut v);
                    fields.insert(s.name.clone(), v);
                }
            }
            Return::Pairs(pairs) => {
                for p in pairs {
                    // Evaluated all the same: an error in it is the process's error.
                    let v = self.value(&p.value)?;
                    let mut v = if privacy::reads_any(&p.value, &self.redacted) {
                        Value::from(REDACTED)
                    } else {
                        v
                    };
                    self.scrub(&mut v);
                    fields.insert(p.key.name.clone(), v);
                }
            }
        }
        Ok(fields)
    }
}

enum Flow {
    Next,
    Go(usize),
    Wait,
    Finish(BTreeMap<String, Value>),
}

fn is_symbol(name: &str) -> bool {
    name.len() >= 2
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Whether an error carries a code of 07 (`AG-…`): fatal for the run, whatever RECOVER is open.
fn is_fatal(err: &Value) -> bool {
    matches!(err, Value::Object(m) if matches!(m.get("type"), Some(Value::Str(t)) if t.starts_with("AG-")))
}

/// Reads an argument the way a process declares it; what does not fit is AG-044, or AG-014
/// for an `ISO8601` argument (a computed time, which the static check cannot see).
pub(crate) fn typed_input(ty: &str, v: Value) -> Result<Value, (Code, String)> {
    match (ty, v) {
        ("ISO8601", Value::Str(s)) if crate::process::check::is_iso8601(&s) => Ok(Value::Str(s)),
        ("ISO8601", other) => Err((
            Code::TimeFormat,
            format!("\"{other}\" is not ISO 8601 with an offset"),
        )),
        (ty, v) => typed_value(ty, v).map_err(|m| (Code::ProcessArgsMismatch, m)),
    }
}

fn typed_value(ty: &str, v: Value) -> Result<Value, String> {
    match (ty, v) {
        ("Number", Value::Str(s)) => crate::value::parse_number(s.trim())
            .map(Value::Num)
            .ok_or_else(|| format!("\"{s}\" is not a Number")),
        ("Boolean", Value::Str(s)) => match s.trim() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            other => Err(format!("\"{other}\" is not a Boolean")),
        },
        ("JSON", Value::Str(s)) => Value::from_json(&s).map_err(|e| e.to_string()),
        ("Number", v @ Value::Num(_)) | ("Boolean", v @ Value::Bool(_)) => Ok(v),
        ("Number" | "Boolean", other) => Err(format!("a {} is not a {ty}", other.kind())),
        (_, v) => Ok(v),
    }
}
