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

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use super::compile::Op;
use super::effects::{Effect, Event};
use super::par::{ParChild, Retry};
use super::privacy::{self, REDACT_ARG, REDACTED};
use super::program::Program;
use crate::process::ast::{Bdd, Capture, Param, Return, Use};
use crate::process::code::Code;
use crate::process::diagnostic::Span;
use crate::process::expr::{Env, EvalError, Expr, ExprKind, PathSeg, Value, eval};
use crate::tool::{Answer, Call};

/// What the thread's history already holds for this process: answers by call id (until the
/// machine takes one: call ids only grow, so a taken answer is never asked for again, and a
/// long run keeps only the answers it has not read yet), the calls already sent, how many
/// events and residuals were recorded, and whether the run already ended.
#[derive(Debug, Default)]
pub(crate) struct Known {
    /// Shared with the delivery that carried it (the pump's reading of the payload).
    /// Ordered maps: a run holds few answers at a time, and comparing a short id costs less
    /// than hashing it.
    pub answers: BTreeMap<String, Arc<Answer>>,
    /// The calls already sent, by their place in the run (the id without its arguments'
    /// hash, [`slot`]): what a rerun compares its own calls with.
    pub sent: BTreeMap<String, Sent>,
    pub events: u64,
    pub residuals: u64,
    /// A `return` or `failed` event is recorded: the starter has had its answer.
    pub finished: bool,
    /// Child threads spawned for calls: the child, and the call id (its sub-id).
    pub children: HashMap<crate::ThreadId, String>,
}

/// A call history shows as sent: its whole id and the tool it called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sent {
    pub id: String,
    pub tool: String,
}

impl Known {
    /// Notes a call history shows as sent.
    pub fn sent(&mut self, id: String, tool: String) {
        self.sent
            .entry(slot(&id).to_owned())
            .or_insert(Sent { id, tool });
    }
}

/// Digits of the arguments' hash in a call id.
const HASH_DIGITS: usize = 12;

/// A process call id's place in the run, `process-n`: the id without its `-h` arguments'
/// hash (an id without one, written before ids carried it, is its own place). What a reader of
/// history names a process's calls by: `main-2-4560f9d10d35` is `main-2`, the second call.
///
/// ```
/// use agentpump::process::engine::call_place;
/// assert_eq!(call_place("main-2-4560f9d10d35"), "main-2");
/// assert_eq!(call_place("main-2"), "main-2");
/// ```
pub fn slot(id: &str) -> &str {
    match id.rsplit_once('-') {
        Some((place, hash))
            if hash.len() == HASH_DIGITS && hash.bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            place
        }
        _ => id,
    }
}

/// The arguments' hash of a call id (empty when it has none).
fn hash_of(id: &str) -> &str {
    id.get(slot(id).len()..)
        .and_then(|h| h.strip_prefix('-'))
        .unwrap_or_default()
}

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

    /// The next call id, `process-n-h`: `n` the call's ordinal in the run, `h` the first
    /// [`HASH_DIGITS`] hex digits of [`args_hash`] (written without `format!`: one per USE).
    fn next_id(&mut self, tool: &str, args: &BTreeMap<String, Value>) -> String {
        self.calls += 1;
        let id = self.id();
        let mut out = String::with_capacity(id.len() + 8 + HASH_DIGITS);
        out.push_str(id);
        out.push('-');
        let mut buf = [0u8; 20]; // u64::MAX has 20 digits
        let (mut n, mut at) = (self.calls, buf.len());
        loop {
            at -= 1;
            buf[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        out.push_str(std::str::from_utf8(&buf[at..]).expect("ascii digits"));
        out.push('-');
        out.push_str(&args_hash(tool, args));
        out
    }

    /// The arguments of a USE or RUN: its `where:` over the WITH defaults in scope. A call of
    /// a process of this file also names, in [`REDACT_ARG`], the arguments computed from a
    /// sensitive value, which the child redacts in turn.
    fn args(&self, tool: &str, params: &[Param]) -> Result<BTreeMap<String, Value>, Value> {
        let mut args = BTreeMap::new();
        let mut sensitive = Vec::new();
        for (k, v, secret) in &self.with {
            args.insert(k.clone(), v.clone());
            if *secret {
                sensitive.push(k.clone());
            }
        }
        for p in params {
            args.insert(p.key.name.clone(), self.value(&p.value)?);
            sensitive.retain(|k| *k != p.key.name);
            if privacy::reads_any(&p.value, &self.redacted) {
                sensitive.push(p.key.name.clone());
            }
        }
        if !sensitive.is_empty() && self.program.index_of(tool).is_some() {
            sensitive.sort();
            let keys = sensitive.into_iter().map(Value::Str).collect();
            args.insert(REDACT_ARG.to_owned(), Value::List(keys));
        }
        Ok(args)
    }

    /// A USE's or RUN's call: its arguments, its id, sent (see [`Machine::send`]); the id.
    fn call(
        &mut self,
        tool: &str,
        params: &[Param],
        timeout_ms: Option<u64>,
        par: bool,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<String, Value> {
        let args = self.args(tool, params)?;
        self.call_with(tool, args, timeout_ms, par, span, turn)
    }

    /// [`Machine::call`] with its arguments already evaluated.
    fn call_with(
        &mut self,
        tool: &str,
        args: BTreeMap<String, Value>,
        timeout_ms: Option<u64>,
        par: bool,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<String, Value> {
        let id = self.next_id(tool, &args);
        let call = Call {
            tool: tool.to_owned(),
            id: Some(id.clone()),
            timeout_ms,
            args,
        };
        self.send(call, par, span, turn)?;
        Ok(id)
    }

    /// Sends a call (a process of this program runs in a child thread), unless history shows
    /// it sent or answered. A call history holds at the same place with other arguments or
    /// another tool is a divergence: an error no RECOVER handles.
    fn send(
        &mut self,
        call: Call,
        par: bool,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<(), Value> {
        let id = call.id.as_deref().unwrap_or_default();
        if let Some(recorded) = turn.known.sent.get(slot(id)) {
            if recorded.id == id {
                return Ok(());
            }
            self.diverged = true;
            let message = format!(
                "history diverged from the process: call {} was `{}` (arguments {}) and is now \
                 `{}` (arguments {}); the run stops rather than reuse or repeat it",
                slot(id),
                recorded.tool,
                match hash_of(&recorded.id) {
                    "" => "unhashed",
                    h => h,
                },
                call.tool,
                hash_of(id),
            );
            return Err(error("history-diverged", message, span));
        }
        if turn.known.answers.contains_key(id) {
            return Ok(());
        }
        let child = par || self.program.index_of(&call.tool).is_some();
        turn.effects.push(Effect::Call { call, child });
        Ok(())
    }

    fn op(&mut self, op: &Op, span: Span, turn: &mut Turn<'_>) -> Result<Flow, Value> {
        if self.inference.is_some() && !self.infer_placeholders(op, turn)? {
            return Ok(Flow::Wait);
        }
        match op {
            Op::Set {
                symbol,
                value,
                inferred,
            } => {
                if *inferred {
                    return self.infer(symbol, value, span, turn);
                }
                let v = self.value(value)?;
                if privacy::reads_any(value, &self.redacted) {
                    self.redacted.insert(symbol.clone());
                }
                self.bind(symbol, v, turn);
            }
            Op::Unset(s) => {
                self.symbols.remove(s);
            }
            Op::Use(u) => {
                self.lax_time(u, 0, span, turn);
                return self.use_(u, span, turn);
            }
            Op::Run { process, params } => return self.run_process(process, params, span, turn),
            Op::Par(uses) => {
                for (i, u) in uses.iter().enumerate() {
                    self.lax_time(u, i, span, turn);
                    let args = self.args(&u.tool.name, &u.params)?;
                    let tool = &u.tool.name;
                    let id = self.call_with(tool, args.clone(), timeout(u), true, span, turn)?;
                    self.par.push(ParChild {
                        tool: tool.clone(),
                        id,
                        args,
                        timeout_ms: timeout(u),
                        retry: Retry::of(u),
                        attempt: 0,
                    });
                }
                let tools: Vec<String> = uses.iter().map(|u| u.tool.name.clone()).collect();
                self.event(
                    Event::Par {
                        tools,
                        line: span.line,
                    },
                    turn,
                );
            }
            Op::Join(captures) => return self.join(captures, span, turn),
            Op::Capture(c) => {
                let answer = self.last.get(&c.tool.name).cloned();
                self.capture(c, answer.as_deref(), span, turn)?;
            }
            Op::Return(r) => return Ok(Flow::Finish(self.returned(r)?)),
            Op::End => return Ok(Flow::Finish(BTreeMap::new())),
            Op::Assert(conds) => {
                for cond in conds {
                    match self.value(cond)? {
                        Value::Bool(true) => {}
                        Value::Bool(false) => {
                            return Err(error("assert-failed", "ASSERT does not hold", cond.span));
                        }
                        other => {
                            return Err(coded(
                                Code::AssertInvalid,
                                format!("ASSERT needs a boolean, found a {}", other.kind()),
                                cond.span,
                            ));
                        }
                    }
                }
            }
            Op::Condition { kind, cond, skip } => {
                let holds = match self.value(cond)? {
                    Value::Bool(b) => b,
                    other => {
                        return Err(coded(
                            Code::AssertInvalid,
                            format!("a condition needs a boolean, found a {}", other.kind()),
                            cond.span,
                        ));
                    }
                };
                match (kind, holds) {
                    (_, true) => {}
                    (Bdd::When, false) => return Ok(Flow::Go(*skip)),
                    (Bdd::Given, false) => {
                        return Err(error("precondition-failed", "GIVEN does not hold", span));
                    }
                    (Bdd::Then, false) => {
                        return Err(error("postcondition-failed", "THEN does not hold", span));
                    }
                }
            }
            Op::Tell(t) => {
                let why = t.why.as_ref().map(|w| {
                    let shown = if self.redacted.contains(&w.name) {
                        None
                    } else {
                        self.symbol(&w.name)
                    };
                    (w.name.clone(), shown)
                });
                let event = Event::Tell {
                    message: t.message.clone().unwrap_or_default(),
                    why,
                    level: t.level,
                    outcome: t.outcome.clone(),
                    line: span.line,
                };
                self.event(event, turn);
            }
            Op::Milestone(title) => {
                let event = Event::Milestone {
                    title: title.clone(),
                    line: span.line,
                };
                self.event(event, turn);
            }
            Op::Snap(s) => {
                self.redacted
                    .extend(s.redact.iter().map(|r| r.name.clone()));
                let names: Vec<String> = if s.symbols.is_empty() {
                    self.symbols.keys().cloned().collect()
                } else {
                    s.symbols.iter().map(|i| i.name.clone()).collect()
                };
                let mut values = Vec::new();
                for name in names {
                    let v = self.symbol(&name).unwrap_or(Value::Null);
                    let changed = self.snapped.get(&name) != Some(&v);
                    self.snapped.insert(name.clone(), v.clone());
                    if s.delta == Some(true) && !changed {
                        continue;
                    }
                    let shown = (!self.redacted.contains(&name)).then_some(v);
                    values.push((name, shown));
                }
                let event = Event::Snap {
                    values,
                    delta: s.delta.unwrap_or(false),
                    line: span.line,
                };
                self.event(event, turn);
            }
            Op::Unless { cond, to } => match self.value(cond)? {
                Value::Bool(true) => {}
                Value::Bool(false) => return Ok(Flow::Go(*to)),
                other => {
                    return Err(coded(
                        Code::AssertInvalid,
                        format!("IF needs a boolean, found a {}", other.kind()),
                        cond.span,
                    ));
                }
            },
            Op::Jump(to) => return Ok(Flow::Go(*to)),
            Op::WithPush(defaults) => {
                self.with_marks.push(self.with.len());
                for p in defaults {
                    let v = self.value(&p.value)?;
                    let secret = privacy::reads_any(&p.value, &self.redacted);
                    self.with.push((p.key.name.clone(), v, secret));
                }
            }
            Op::WithPop => {
                let mark = self.with_marks.pop().unwrap_or(0);
                self.with.truncate(mark);
            }
            Op::Foreach { var, list, end } => {
                let items = match self.symbol(list) {
                    Some(Value::List(items)) => items,
                    Some(other) => {
                        return Err(coded(
                            Code::AssertInvalid,
                            format!("FOREACH needs a list, {list} is a {}", other.kind()),
                            span,
                        ));
                    }
                    None => {
                        return Err(coded(
                            Code::UndefinedSymbol,
                            format!("symbol {list} is not bound"),
                            span,
                        ));
                    }
                };
                let Some(first) = items.first().cloned() else {
                    return Ok(Flow::Go(*end));
                };
                // The loop variable holds the list's items: as sensitive as the list.
                if self.redacted.contains(list) {
                    self.redacted.insert(var.clone());
                } else {
                    self.redacted.remove(var);
                }
                let locals = self.locals.len();
                self.locals.push((var.clone(), first));
                self.loops.push(Loop {
                    var: var.clone(),
                    items,
                    index: 0,
                    locals,
                });
            }
            Op::Next { body } => {
                let l = self.loops.last_mut().expect("Next inside a loop");
                l.index += 1;
                // The body's locals go; the loop variable (just below them) takes the next item.
                self.locals.truncate(l.locals + 1);
                if let Some(item) = l.items.get(l.index).cloned() {
                    match self.locals.get_mut(l.locals) {
                        Some((name, slot)) if *name == l.var => *slot = item,
                        _ => {
                            self.locals.truncate(l.locals);
                            self.locals.push((l.var.clone(), item));
                        }
                    }
                    return Ok(Flow::Go(*body));
                }
                self.locals.truncate(l.locals);
                self.loops.pop();
            }
            Op::TryPush { recover, err } => self.handlers.push(Handler {
                recover: *recover,
                err: err.clone(),
                locals: self.locals.len(),
                loops: self.loops.len(),
                with: self.with_marks.len(),
                par: self.par.len(),
            }),
            Op::TryPop { end } => {
                self.handlers.pop();
                return Ok(Flow::Go(*end));
            }
            Op::RecoverEnd => {
                self.locals.pop();
            }
        }
        Ok(Flow::Next)
    }

    /// USE outside PAR: send once, wait, retry what may be retried, keep the answer.
    fn use_(&mut self, u: &Use, span: Span, turn: &mut Turn<'_>) -> Result<Flow, Value> {
        let tool = &u.tool.name;
        if self.pending.is_none() {
            let id = self.call(tool, &u.params, timeout(u), false, span, turn)?;
            self.pending = Some(Pending { id, attempt: 0 });
        }
        // A repeat's answer may be known already (a restart reads them all from history).
        let answer = loop {
            let pending = self.pending.as_ref().expect("set above");
            let Some(answer) = turn.known.answers.remove(&pending.id) else {
                return Ok(Flow::Wait);
            };
            let Answer::Error(e) = &*answer else {
                break answer;
            };
            if !Retry::of(u).allows(e, pending.attempt) {
                self.pending = None;
                return Err(tool_error(tool, e.kind.as_str(), &e.message, span));
            }
            let attempt = pending.attempt + 1;
            let id = self.call(tool, &u.params, timeout(u), false, span, turn)?;
            self.pending = Some(Pending { id, attempt });
        };
        self.pending = None;
        match self.last.get_mut(tool) {
            Some(slot) => *slot = answer,
            None => {
                self.last.insert(tool.clone(), answer);
            }
        }
        Ok(Flow::Next)
    }

    /// `SET S := question (from "Agent Inference")`: asks the inference tool the organism
    /// allows (a call like a USE, so a restart reads the answer back), binds its `value`, and
    /// records AG-W03 with the value and a hash of the inputs (03). Without one: AG-006.
    fn infer(
        &mut self,
        symbol: &str,
        question: &Expr,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<Flow, Value> {
        let question = self.value(question)?;
        match self.ask(symbol, question, span, turn)? {
            Some(value) => {
                self.bind(symbol, value, turn);
                Ok(Flow::Next)
            }
            None => Ok(Flow::Wait),
        }
    }

    /// Resolves, before `op` runs, each placeholder it reads that no argument, constant or
    /// runtime value resolves, by agent inference (03: "INP → constants → runtime → agent
    /// inference"), one at a time in the order they are written. False while an answer is
    /// awaited (the op runs again on the next turn).
    fn infer_placeholders(&mut self, op: &Op, turn: &mut Turn<'_>) -> Result<bool, Value> {
        for (name, span) in placeholders(op) {
            if self.placeholder(&name).is_some() {
                continue;
            }
            let question = Value::from(format!(
                "the value of placeholder <{name}> in process {}",
                self.id()
            ));
            match self.ask(&format!("<{name}>"), question, span, turn)? {
                Some(value) => {
                    self.inferred.insert(name, value);
                }
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    /// Asks the inference tool for `symbol`'s value (once: a turn that finds the answer takes
    /// it), recording AG-W03 with the value and the inputs' hash. `None` while it is awaited;
    /// AG-006 when the organism allows no inference.
    fn ask(
        &mut self,
        symbol: &str,
        question: Value,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<Option<Value>, Value> {
        let Some(tool) = self.inference.clone() else {
            return Err(coded(
                Code::UnresolvedPlaceholder,
                format!("{symbol} needs Agent Inference, which this organism does not allow"),
                span,
            ));
        };
        let hash = input_hash(self.id(), symbol, &question);
        if self.pending.is_none() {
            let mut args = BTreeMap::new();
            args.insert("symbol".to_owned(), Value::from(symbol));
            args.insert("question".to_owned(), question);
            args.insert("process".to_owned(), Value::from(self.id()));
            args.insert("input_hash".to_owned(), Value::from(hash.clone()));
            let id = self.call_with(&tool, args, None, false, span, turn)?;
            self.pending = Some(Pending { id, attempt: 0 });
        }
        let id = &self.pending.as_ref().expect("set above").id;
        let Some(answer) = turn.known.answers.remove(id) else {
            return Ok(None);
        };
        self.pending = None;
        match &*answer {
            Answer::Error(e) => Err(tool_error(&tool, e.kind.as_str(), &e.message, span)),
            Answer::Result(r) => {
                let value = r.fields.get("value").cloned().ok_or_else(|| {
                    coded(
                        Code::CapturePathError,
                        format!("the inference tool `{tool}` answered no `value`"),
                        span,
                    )
                })?;
                let shown = (!self.redacted.contains(symbol)).then(|| value.clone());
                let warning = Event::Inferred {
                    symbol: symbol.to_owned(),
                    value: shown,
                    hash,
                    line: span.line,
                };
                self.event(warning, turn);
                Ok(Some(value))
            }
        }
    }

    /// RUN: the process in a child thread; its RETURN's symbols come back bound.
    fn run_process(
        &mut self,
        process: &str,
        params: &[Param],
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<Flow, Value> {
        if self.pending.is_none() {
            let id = self.call(process, params, None, false, span, turn)?;
            self.pending = Some(Pending { id, attempt: 0 });
        }
        let id = &self.pending.as_ref().expect("set above").id;
        let Some(answer) = turn.known.answers.remove(id) else {
            return Ok(Flow::Wait);
        };
        self.pending = None;
        match &*answer {
            Answer::Error(e) => Err(tool_error(process, e.kind.as_str(), &e.message, span)),
            Answer::Result(r) => {
                // What a child computed from a sensitive argument is sensitive here too.
                let secret = self.with.iter().any(|(.., s)| *s)
                    || params
                        .iter()
                        .any(|p| privacy::reads_any(&p.value, &self.redacted));
                for (k, v) in &r.fields {
                    if is_symbol(k) {
                        if secret {
                            self.redacted.insert(k.clone());
                        }
                        self.bind(k, v.clone(), turn);
                    }
                }
                self.last.insert(process.to_owned(), answer);
                Ok(Flow::Next)
            }
        }
    }

    /// JOIN: every PAR child answered; a child that failed and may be repeated (its USE's
    /// `retry`, `atomic`) is called again, all such children at once in lexical order once
    /// every child answered (so a restart assigns the same ids); a hard failure is one
    /// composite error (the first in lexical order, the rest `suppressed`); else the captures,
    /// in lexical order, and each tool's answer is its last for a CAPTURE after the JOIN.
    fn join(
        &mut self,
        captures: &[Capture],
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<Flow, Value> {
        // A repeat's answer may be known already (a restart reads them all from history).
        let answers = loop {
            let mut answers = Vec::new();
            for c in &self.par {
                match turn.known.answers.get(&c.id) {
                    Some(a) => answers.push((c.tool.clone(), Arc::clone(a))),
                    None => return Ok(Flow::Wait),
                }
            }
            if !self.repeat_failed(&answers, span, turn)? {
                break answers;
            }
        };
        let par = std::mem::take(&mut self.par);
        self.event(
            Event::Join {
                children: par.len(),
                line: span.line,
            },
            turn,
        );
        let mut errors = answers.iter().filter_map(|(tool, a)| match &**a {
            Answer::Error(e) => Some(tool_error(tool, e.kind.as_str(), &e.message, span)),
            Answer::Result(_) => None,
        });
        if let Some(first) = errors.next() {
            let suppressed: Vec<Value> = errors.collect();
            let mut first = first;
            if let Value::Object(m) = &mut first {
                m.insert("suppressed".into(), Value::List(suppressed));
            }
            return Err(first);
        }
        for (tool, answer) in &answers {
            self.last.insert(tool.clone(), Arc::clone(answer));
        }
        // The k-th CAPTURE from a tool reads the k-th PAR USE of that tool.
        let mut used: BTreeMap<&str, usize> = BTreeMap::new();
        for c in captures {
            let n = used.entry(c.tool.name.as_str()).or_insert(0);
            let answer = answers
                .iter()
                .filter(|(t, _)| *t == c.tool.name)
                .nth(*n)
                .map(|(_, a)| Arc::clone(a));
            *n += 1;
            if answer.is_none() {
                return Err(coded(
                    Code::ConcurrencyPolicy,
                    format!(
                        "JOIN captures from `{}`, which no PAR USE launched",
                        c.tool.name
                    ),
                    span,
                ));
            }
            self.capture(c, answer.as_deref(), span, turn)?;
        }
        Ok(Flow::Next)
    }

    /// Calls again, in lexical order, each PAR child whose failure its USE may repeat;
    /// whether any was.
    fn repeat_failed(
        &mut self,
        answers: &[(String, Arc<Answer>)],
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<bool, Value> {
        let mut repeated = false;
        for (i, (_, answer)) in answers.iter().enumerate() {
            let Answer::Error(e) = &**answer else {
                continue;
            };
            let child = &self.par[i];
            if !child.retry.allows(e, child.attempt) {
                continue;
            }
            let (tool, args, timeout_ms) =
                (child.tool.clone(), child.args.clone(), child.timeout_ms);
            let id = self.call_with(&tool, args, timeout_ms, true, span, turn)?;
            let child = &mut self.par[i];
            child.id = id;
            child.attempt += 1;
            repeated = true;
        }
        Ok(repeated)
    }

    /// CAPTURE: binds symbols from an answer's fields through the map's paths.
    fn capture(
        &mut self,
        c: &Capture,
        answer: Option<&Answer>,
        span: Span,
        turn: &mut Turn<'_>,
    ) -> Result<(), Value> {
        let tool = &c.tool.name;
        let fields = match answer {
            Some(Answer::Result(r)) => &r.fields,
            Some(Answer::Error(e)) => {
                return Err(tool_error(tool, e.kind.as_str(), &e.message, span));
            }
            None => {
                return Err(coded(
                    Code::CaptureMissing,
                    format!("CAPTURE from `{tool}`, which has not answered here"),
                    span,
                ));
            }
        };
        if c.map.is_empty() {
            if let [only] = c.symbols.as_slice() {
                self.bind(&only.name, Value::Object(fields.clone()), turn);
                return Ok(());
            }
            for s in &c.symbols {
                let v = fields
                    .get(&s.name.to_ascii_lowercase())
                    .cloned()
                    .ok_or_else(|| {
                        coded(
                            Code::CapturePathError,
                            format!("`{tool}` returned no field {}", s.name.to_ascii_lowercase()),
                            s.span,
                        )
                    })?;
                self.bind(&s.name, v, turn);
            }
            return Ok(());
        }
        for entry in &c.map {
            match follow(fields, &entry.path.segs) {
                Some(v) => self.bind(&entry.symbol.name, v, turn),
                None if entry.path.optional => {}
                None => {
                    return Err(coded(
                        Code::CapturePathError,
                        format!("`{tool}`'s result has nothing at \"{}\"", entry.path),
                        entry.path.span,
                    ));
                }
            }
        }
        Ok(())
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

/// `sha256:` of the process, the symbol and the question: the deterministic input hash 03
/// asks an inference to be logged with.
fn input_hash(process: &str, symbol: &str, question: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for part in [process, symbol, question.to_json().as_str()] {
        h.update(part.as_bytes());
        h.update([0u8]);
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}

/// The placeholders `op` reads, in the order they are written, with where.
fn placeholders(op: &Op) -> Vec<(String, Span)> {
    fn values(ps: &[Param]) -> impl Iterator<Item = &Expr> {
        ps.iter().map(|p| &p.value)
    }
    let exprs: Vec<&Expr> = match op {
        Op::Set { value, .. } => vec![value],
        Op::Use(u) => values(&u.params).collect(),
        Op::Par(uses) => uses.iter().flat_map(|u| values(&u.params)).collect(),
        Op::Run { params: ps, .. } | Op::WithPush(ps) => values(ps).collect(),
        Op::Return(Return::Pairs(ps)) => values(ps).collect(),
        Op::Assert(conds) => conds.iter().collect(),
        Op::Condition { cond, .. } | Op::Unless { cond, .. } => vec![cond],
        _ => Vec::new(),
    };
    let mut out = Vec::new();
    for e in exprs {
        e.walk(&mut |e| {
            if let ExprKind::Placeholder(name) = &e.kind {
                out.push((name.clone(), e.span));
            }
        });
    }
    out
}

/// The hash a call id carries: sha256 over the tool's name, then each argument's name and
/// compact JSON value (numbers normalized) in name order, each followed by a NUL byte; its
/// first [`HASH_DIGITS`] hex digits.
fn args_hash(tool: &str, args: &BTreeMap<String, Value>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(tool.as_bytes());
    h.update([0u8]);
    let mut json = String::new();
    for (k, v) in args {
        h.update(k.as_bytes());
        h.update([0u8]);
        json.clear();
        v.append_json(&mut json);
        h.update(json.as_bytes());
        h.update([0u8]);
    }
    let digest = h.finalize();
    hex::encode(&digest[..HASH_DIGITS / 2])
}

/// A USE's `timeout_ms`, passed on its call.
fn timeout(u: &Use) -> Option<u64> {
    let (n, _) = u.modifiers.as_ref()?.timeout_ms?;
    u64::try_from(n.trunc().mantissa()).ok()
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

fn tool_error(tool: &str, kind: &str, message: &str, span: Span) -> Value {
    let mut v = error(kind, message, span);
    if let Value::Object(m) = &mut v {
        m.insert("tool".into(), Value::Str(tool.to_owned()));
    }
    v
}

/// The value at `segs` in a result's fields (no segment: the fields as one object), copied;
/// only what the path reaches is copied.
fn follow(fields: &BTreeMap<String, Value>, segs: &[PathSeg]) -> Option<Value> {
    let Some((PathSeg::Field(first), rest)) = segs.split_first() else {
        return segs.is_empty().then(|| Value::Object(fields.clone()));
    };
    let mut at = fields.get(first)?;
    for seg in rest {
        at = match (seg, at) {
            (PathSeg::Field(name), Value::Object(m)) => m.get(name)?,
            (PathSeg::Index(i), Value::List(items)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(at.clone())
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
