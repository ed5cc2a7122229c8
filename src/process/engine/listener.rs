//! [`ProcessListener`]: a process as a listener. Each delivery — the start, a tool's answer,
//! a child thread's result, a wake-up — moves the thread's machine on as far as it can go; what
//! the machine asks for leaves as messages. The machine stays in memory between deliveries;
//! after a restart it is rebuilt from the thread's history (see [`Known`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use quick_xml::Reader;
use quick_xml::events::Event as XmlEvent;

use super::effects::{Effect, Event, continue_xml};
use super::machine::{Machine, Stop, Turn, typed_input};
use super::program::{Program, Triggered};
use super::replay::{Known, Seen, lenient, slot, spawned_by_me, spawned_call};
use crate::envelope::{CLIENT_SENDER, GOVERNOR_NS, SYSTEM_NS, reference, text_content};
use crate::governor::{Budget, Control, Goal, Signal};
use crate::history::Record;
use crate::listener::{Registration, Role};
use crate::process::code::Code;
use crate::process::expr::Value;
use crate::system::Spawn;
use crate::tool::{Answer, Call, ErrorType, TOOL_NS, ToolError, ToolResult};
use crate::{Context, Delivery, Limits, Listener, ListenerError, Payload, QName, ThreadId};

/// Statements a process runs per turn before it sends itself a `continue` (each turn is
/// counted by the governor, so a loop without tool calls still meets the turn budget).
pub const DEFAULT_STEPS_PER_TURN: u64 = 10_000;

/// Payloads a turn keeps for the listener's own: the last event, the answer, an abort
/// signal, and a goal or a `continue`.
const OWN_OUTPUTS: usize = 4;

/// [`ProcessListener::new`] named a process the program does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the program has no process `{0}`")]
pub struct UnknownProcess(pub String);

/// One process of a [`Program`], registered as a listener named after the process id.
#[derive(Debug)]
pub struct ProcessListener {
    program: Arc<Program>,
    process: usize,
    steps_per_turn: u64,
    goal: Option<Goal>,
    inference: Option<String>,
    require_timeout: bool,
    max_value_bytes: usize,
    max_outputs: usize,
    /// Boxed: a run is large, and it leaves and re-enters the map on every delivery.
    runs: Mutex<HashMap<ThreadId, Box<Run>>>,
}

/// How a run was started: whom to answer, and how.
#[derive(Debug, Clone)]
struct Start {
    /// Who started it: the answer goes there.
    from: String,
    /// The call's id, when started by a call.
    call: Option<String>,
    /// Started by the first message of a child thread its spawner sent: the answer ends the
    /// thread (`thread-done`) and reaches the spawner as `thread-result`.
    spawned: bool,
}

struct Run {
    machine: Machine,
    known: Known,
    start: Start,
    /// Deliveries to this listener in the thread, for the step limit of a rebuild.
    turns: u64,
    /// What a turn asks for, kept empty between turns (its room is reused).
    effects: Vec<Effect>,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("turns", &self.turns)
            .finish_non_exhaustive()
    }
}

impl ProcessListener {
    /// The registration: named after the process, with the process role, accepting its
    /// triggers' roots and tool calls, its peers the tools and processes it calls, and allowed
    /// to message itself (its `continue`).
    pub fn registration(self) -> Registration {
        let name = self.name().to_owned();
        let peers = self.references();
        let processes = peers
            .iter()
            .filter(|p| self.program().index_of(p).is_some())
            .cloned()
            .collect();
        let triggers = self.triggers();
        let siblings = self.program().trigger_siblings(&name);
        let example = self.program().example(&name);
        let mut r = Registration::new(&name, self)
            .role(Role::Process)
            .accepts(QName::new(TOOL_NS, "call"))
            .may_loop(true)
            .description(format!("process `{name}`"))
            .peers(peers)
            .process_peers(processes)
            .trigger_siblings(siblings);
        for root in triggers {
            r = r.accepts(root);
        }
        match example {
            Some(payload) => r.example(payload),
            None => r,
        }
    }

    /// Process `id` of `program`.
    ///
    /// # Errors
    ///
    /// [`UnknownProcess`] when the program has no such process.
    pub fn new(program: Arc<Program>, id: &str) -> Result<Self, UnknownProcess> {
        let process = program
            .index_of(id)
            .ok_or_else(|| UnknownProcess(id.to_owned()))?;
        Ok(Self {
            program,
            process,
            steps_per_turn: DEFAULT_STEPS_PER_TURN,
            goal: None,
            inference: None,
            require_timeout: false,
            max_value_bytes: crate::process::expr::DEFAULT_MAX_VALUE_BYTES,
            max_outputs: Limits::DEFAULT_MAX_OUTPUTS,
            runs: Mutex::new(HashMap::new()),
        })
    }

    /// Statements per turn (default [`DEFAULT_STEPS_PER_TURN`]).
    pub fn steps_per_turn(mut self, steps: u64) -> Self {
        self.steps_per_turn = steps.max(1);
        self
    }

    /// Allows `SET S := question (from "Agent Inference")`: the question goes to the tool
    /// named `tool` (arguments `symbol`, `question`, `process`, `input_hash`), whose `value`
    /// is bound, with AG-W03 recorded. Without it such a SET is AG-006 (03's default).
    pub fn infer_with(mut self, tool: impl Into<String>) -> Self {
        self.inference = Some(tool.into());
        self
    }

    /// The time policy of 07's AG-W02 LaxTime ("Step without explicit time where policy
    /// requires"): with `true`, every USE without `timeout_ms` records a `warning` event
    /// (`code="AG-W02"`, its line and tool) the first time it runs in a run. Off by default.
    pub fn require_timeout(mut self, require: bool) -> Self {
        self.require_timeout = require;
        self
    }

    /// The largest value the process may build, in bytes of its JSON text (default
    /// [`DEFAULT_MAX_VALUE_BYTES`](crate::process::expr::DEFAULT_MAX_VALUE_BYTES), an
    /// organism's `[limits] max_value_bytes`): a list, object or string past it is an AP-002
    /// `LimitExceeded` error, raised before the value is built, that RECOVER can handle.
    pub fn max_value_bytes(mut self, limit: usize) -> Self {
        self.max_value_bytes = limit;
        self
    }

    /// The most payloads one delivery may carry on the pump it runs on (its
    /// [`Limits::max_outputs`], default 64): a turn that would emit more (a loop of TELLs, a
    /// wide PAR) goes on in the next turn, and a statement that cannot fit even an empty
    /// turn fails with AP-002.
    pub fn max_outputs(mut self, max: usize) -> Self {
        self.max_outputs = max;
        self
    }

    /// A goal the process declares when it starts in a root thread (certificates, r_p, budget):
    /// with it, `RESIDUAL` bindings can end the thread CONVERGED.
    pub fn goal(mut self, goal: Goal) -> Self {
        self.goal = Some(goal);
        self
    }

    fn id(&self) -> &str {
        &self.program.processes[self.process].id
    }

    pub(crate) fn program(&self) -> &Program {
        &self.program
    }

    /// The process id, which is also the listener's name.
    pub fn name(&self) -> &str {
        self.id()
    }

    /// The tools and processes this process calls (its peers), each once, in order.
    pub fn references(&self) -> Vec<String> {
        use super::compile::Op;
        let mut names: Vec<String> = Vec::new();
        for op in &self.program.processes[self.process].code.ops {
            let found: Vec<&str> = match op {
                Op::Use(u) => vec![u.tool.name.as_str()],
                Op::Par(uses) => uses.iter().map(|u| u.tool.name.as_str()).collect(),
                Op::Run { process, .. } => vec![process.as_str()],
                _ => vec![],
            };
            for n in found {
                if n != self.id() && !names.iter().any(|x| x == n) {
                    names.push(n.to_owned());
                }
            }
        }
        if let Some(tool) = &self.inference
            && !names.contains(tool)
        {
            names.push(tool.clone());
        }
        names
    }

    /// The roots that start this process: its triggers' events, each once.
    pub fn triggers(&self) -> Vec<QName> {
        let id = self.id();
        let mut roots: Vec<QName> = Vec::new();
        for (q, _) in self.program.triggers().filter(|(_, target)| *target == id) {
            if !roots.contains(q) {
                roots.push(q.clone());
            }
        }
        roots
    }

    /// Whether `payload` starts this process: a call of it, or a trigger's root whose pattern
    /// (if it has one) the payload's text matches.
    fn starts(&self, payload: &Payload) -> bool {
        let q = payload.qname();
        if q.is(TOOL_NS, "call") {
            return Call::parse(payload).is_ok_and(|c| c.tool == self.id());
        }
        self.triggered(payload) == Triggered::Starts
    }

    fn triggered(&self, payload: &Payload) -> Triggered {
        self.program.triggered(self.id(), payload.qname(), || {
            text_content(payload.as_str())
        })
    }

    /// A machine started by `payload`, or the code and message of the error answer when its
    /// input does not fit (AG-044; AG-014 for an `ISO8601` argument that is not ISO 8601).
    fn machine(&self, payload: &Payload) -> Result<Machine, (Code, String)> {
        let mismatch = Code::ProcessArgsMismatch;
        let input = if payload.qname().is(TOOL_NS, "call") {
            Call::parse(payload)
                .map_err(|e| (mismatch, e.to_string()))?
                .args
        } else {
            trigger_input(payload.as_str())
        };
        let mut typed = BTreeMap::new();
        for arg in &self.program.processes[self.process].args {
            let name = &arg.name.name;
            let Some(v) = input.get(name).cloned() else {
                let message = format!("argument `{name}` ({}) is missing", arg.ty);
                return Err((mismatch, format!("{}: {message}", mismatch.name())));
            };
            let v = typed_input(&arg.ty, v)
                .map_err(|(code, m)| (code, format!("{}: argument `{name}`: {m}", code.name())))?;
            typed.insert(name.clone(), v);
        }
        for (k, v) in input {
            typed.entry(k).or_insert(v);
        }
        Ok(Machine::new(Arc::clone(&self.program), self.process, typed)
            .infer_with(self.inference.clone())
            .require_timeout(self.require_timeout)
            .max_value_bytes(self.max_value_bytes))
    }

    /// Rebuilds the thread's run from its whole history: the start, what was sent and
    /// answered. `None` when this thread has no run of this process (a relay, or nothing).
    async fn rebuild(
        &self,
        msg: &Delivery,
        cx: &mut Context,
    ) -> Result<Option<Run>, ListenerError> {
        let records = cx.whole_history().await.map_err(ListenerError::failed)?;
        let me = cx.me().to_owned();
        let limits = lenient();
        let mut known = Known::default();
        let mut start: Option<(Start, Payload)> = None;
        let mut turns = 0u64;
        let mut first_call: Option<(String, bool)> = None;
        for (i, r) in records.iter().enumerate() {
            let Ok(payload) = Payload::parse(&r.payload, &limits) else {
                continue;
            };
            if i == 0 && &*r.from == me.as_str() && payload.qname().is(TOOL_NS, "call") {
                first_call = Call::parse(&payload)
                    .ok()
                    .and_then(|c| c.id)
                    .map(|id| (id, true));
            }
            let to = r.to.as_deref();
            if to == Some(me.as_str()) {
                turns += 1;
                if start.is_none() && self.starts(&payload) {
                    start = Some((self.start_of(r, &payload, i), payload.clone()));
                }
            }
            if !spawned_by_me(i, r, &me) {
                known.fold(
                    &Seen {
                        from: &r.from,
                        to,
                        payload: &payload,
                    },
                    &me,
                );
            }
        }
        let Some((start, payload)) = start else {
            // A child thread this process spawned for one tool call: the answer ends it.
            if let Some((id, _)) = first_call {
                relay(msg, cx, &id);
                return Ok(None);
            }
            // Nothing of this process runs here and this does not start it (a call naming
            // another tool, sent here by name; a trigger's root whose text does not match its
            // pattern): the sender hears why — unless another process of the file starts on
            // it, which is where the sender's payload went (the pump builds only with that
            // process registered too: `Registration::trigger_siblings`).
            if let Some(Ok(answer)) = Answer::parse(msg.payload()) {
                return Err(ListenerError::InvalidPayload(format!(
                    "process `{}` has no run in this thread: nothing waits for the answer to {}",
                    self.id(),
                    answer
                        .call()
                        .map_or("no call".into(), |id| format!("call `{id}`"))
                )));
            }
            if !msg.is_system() && Answer::parse(msg.payload()).is_none() {
                let why = match self.triggered(msg.payload()) {
                    Triggered::Unmatched {
                        elsewhere: true, ..
                    } => return Ok(None),
                    Triggered::Unmatched { patterns, .. } => format!(
                        "its text does not match the trigger pattern {}",
                        patterns
                            .iter()
                            .map(|p| format!("`{p}`"))
                            .collect::<Vec<_>>()
                            .join(" or ")
                    ),
                    _ => "has no run in this thread".to_owned(),
                };
                return Err(ListenerError::InvalidPayload(format!(
                    "process `{}` does not start on this {}: {why}",
                    self.id(),
                    msg.qname()
                )));
            }
            return Ok(None);
        };
        let machine = match self.machine(&payload) {
            Ok(m) => m,
            Err((code, message)) => {
                if known.events == 0 {
                    self.answer(cx, &start, Err(input_error(code, &message)));
                }
                return Ok(None);
            }
        };
        Ok(Some(Run {
            machine,
            known,
            start,
            turns,
            effects: Vec::new(),
        }))
    }

    fn start_of(&self, r: &Record, payload: &Payload, index: usize) -> Start {
        let call = if payload.qname().is(TOOL_NS, "call") {
            Call::parse(payload).ok().and_then(|c| c.id)
        } else {
            None
        };
        Start {
            from: r.from.to_string(),
            call,
            spawned: index == 0 && &*r.from != CLIENT_SENDER,
        }
    }

    /// Answers the starter: the RETURN's fields, or the failure.
    fn answer(
        &self,
        cx: &mut Context,
        start: &Start,
        outcome: Result<&BTreeMap<String, Value>, Value>,
    ) {
        let id = self.id().to_owned();
        let xml = match outcome {
            Ok(fields) => ToolResult {
                tool: id,
                call: start.call.clone(),
                fields: fields.clone(),
            }
            .to_xml(),
            Err(error) => {
                let text = |k: &str| match &error {
                    Value::Object(m) => m.get(k).map(ToString::to_string).unwrap_or_default(),
                    _ => String::new(),
                };
                // A process of this file that failed (RUN, or USE of it) already said why, and
                // where unless it failed to start: its message is the root cause, passed on
                // once, with this RUN's line when it names none.
                let relayed = text("type") == ErrorType::Failed.as_str()
                    && self.program.index_of(&text("tool")).is_some();
                let (message, line) = (text("message"), text("line"));
                ToolError {
                    tool: id,
                    call: start.call.clone(),
                    kind: ErrorType::Failed,
                    message: match line.as_str() {
                        _ if relayed && names_line(&message) => message,
                        "0" | "" if relayed => message,
                        line if relayed => format!("{message} (line {line})"),
                        "0" | "" => format!("{}: {message}", text("type")),
                        line => format!("{}: {message} (line {line})", text("type")),
                    },
                    retry: false,
                }
                .to_xml()
            }
        };
        if start.spawned {
            cx.done(xml);
        } else {
            cx.send(start.from.clone(), xml);
        }
    }

    /// Moves the run on and sends what it asks for.
    fn advance(&self, run: &mut Run, cx: &mut Context, limit: u64) {
        let mut effects = std::mem::take(&mut run.effects);
        let stop = run.machine.run(&mut Turn {
            known: &mut run.known,
            effects: &mut effects,
            limit,
            room: self.max_outputs.saturating_sub(OWN_OUTPUTS),
        });
        let id = self.id();
        for effect in effects.drain(..) {
            match effect {
                Effect::Call { call, child: false } => {
                    let tool = call.tool.clone();
                    match call.into_payload() {
                        Ok(payload) => cx.send_read(tool, payload),
                        Err(xml) => cx.send(tool, xml),
                    }
                }
                Effect::Call { call, child: true } => {
                    let sub = call.id.clone().unwrap_or_default();
                    // The child has the call's `timeout_ms` as its wall clock: past it, the
                    // governor halts it and the call fails with `timeout`.
                    let budget = Budget {
                        wall_clock: call.timeout_ms.map(Duration::from_millis),
                        ..Budget::default()
                    };
                    let spawn = Spawn::new(call.to_xml()).to(call.tool.clone());
                    cx.spawn(spawn.sub_id(sub).budget(budget));
                }
                Effect::Event(seq, event) => {
                    #[cfg(feature = "otel")]
                    event.trace(seq);
                    cx.emit(event.to_xml(id, seq))
                }
                Effect::Residual(n) => cx.residual(n),
            }
        }
        run.effects = effects;
        let last = run.known.events;
        let finish = |event: Event, seq: u64, cx: &mut Context| {
            // Already recorded before a restart: the starter has its answer.
            if seq > last {
                cx.emit(event.to_xml(id, seq));
                true
            } else {
                false
            }
        };
        let seq = run.machine.events() + 1;
        match stop {
            Stop::Waiting => {}
            Stop::Paused => cx.emit(continue_xml(id, run.machine.steps)),
            Stop::Returned(fields) => {
                if finish(
                    Event::Return {
                        fields: fields.clone(),
                    },
                    seq,
                    cx,
                ) {
                    self.answer(cx, &run.start, Ok(&fields));
                }
            }
            Stop::Failed(error) => {
                if finish(
                    Event::Failed {
                        error: error.clone(),
                    },
                    seq,
                    cx,
                ) {
                    self.fail(cx, &run.start, error);
                }
            }
            // A rerun that diverged from history may have recorded fewer events than the run
            // before it: the failure goes after everything recorded, unless the run had ended.
            Stop::Diverged(error) => {
                if !run.known.finished {
                    let seq = seq.max(last + 1);
                    cx.emit(
                        Event::Failed {
                            error: error.clone(),
                        }
                        .to_xml(id, seq),
                    );
                    self.fail(cx, &run.start, error);
                }
            }
        }
    }

    /// Answers the starter with the failure; a root thread halts `aborted` (`process-failed`).
    fn fail(&self, cx: &mut Context, start: &Start, error: Value) {
        self.answer(cx, start, Err(error));
        if !start.spawned {
            let reason = "process-failed";
            cx.signal(Signal::new(Control::Abort).reason(reason));
        }
    }
}

/// Whether a failure message ends naming its line, as [`ProcessListener::answer`] writes it.
fn names_line(message: &str) -> bool {
    message
        .strip_suffix(')')
        .and_then(|m| m.rsplit_once(" (line "))
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The error answer for a start whose input does not fit the process's arguments.
fn input_error(code: Code, message: &str) -> Value {
    let mut m = BTreeMap::new();
    m.insert("type".into(), Value::Str(code.as_str().into()));
    m.insert("message".into(), Value::Str(message.to_owned()));
    m.insert("line".into(), Value::Num(0.into()));
    Value::Object(m)
}

/// In a child thread spawned for one tool call: the tool's answer (or the pump's notice that
/// the call failed) ends the thread and goes back to the spawner.
fn relay(msg: &Delivery, cx: &mut Context, id: &str) {
    if let Some(Ok(answer)) = Answer::parse(msg.payload()) {
        cx.done(answer.to_xml());
        return;
    }
    let failure = msg
        .system_error()
        .map(|e| (e.code().to_owned(), e.message().to_owned()))
        .or_else(|| {
            msg.huh()
                .map(|h| (h.code().to_owned(), h.message().to_owned()))
        });
    if let Some((code, message)) = failure {
        let kind = if code == "handler-timeout" {
            ErrorType::Timeout
        } else {
            ErrorType::Failed
        };
        let e = ToolError {
            tool: String::new(),
            call: Some(id.to_owned()),
            kind,
            message: format!("{code}: {message}"),
            retry: false,
        };
        cx.done(e.to_xml());
    }
}

/// A trigger payload as the process's input: the root's attributes, its child elements'
/// text by local name, and its own text as `text` when it has no children.
fn trigger_input(xml: &str) -> BTreeMap<String, Value> {
    let mut input = BTreeMap::new();
    let mut reader = Reader::from_str(xml);
    let mut depth = 0usize;
    let mut child: Option<String> = None;
    let mut text = String::new();
    let mut root_text = String::new();
    loop {
        match reader.read_event() {
            Ok(XmlEvent::Start(e) | XmlEvent::Empty(e)) if depth == 0 => {
                for a in e.attributes().flatten() {
                    let key: &str = a.key.as_ref();
                    if key == "xmlns" || key.starts_with("xmlns:") {
                        continue;
                    }
                    if let Ok(v) = a.normalized_value(quick_xml::XmlVersion::Implicit1_0) {
                        input.insert(key.to_owned(), Value::Str(v.into_owned()));
                    }
                }
                depth = 1;
            }
            Ok(XmlEvent::Start(e)) => {
                depth += 1;
                if depth == 2 {
                    child = Some(e.local_name().as_ref().to_owned());
                    text.clear();
                }
            }
            Ok(XmlEvent::Empty(e)) if depth == 1 => {
                input.insert(
                    e.local_name().as_ref().to_owned(),
                    Value::Str(String::new()),
                );
            }
            Ok(XmlEvent::Text(t)) => {
                if depth == 2 {
                    text.push_str(&t);
                } else if depth == 1 {
                    root_text.push_str(&t);
                }
            }
            Ok(XmlEvent::CData(t)) => {
                if depth == 2 {
                    text.push_str(&t);
                } else if depth == 1 {
                    root_text.push_str(&t);
                }
            }
            Ok(XmlEvent::GeneralRef(r)) => {
                if depth == 2 {
                    text.extend(reference(&r));
                } else if depth == 1 {
                    root_text.extend(reference(&r));
                }
            }
            Ok(XmlEvent::End(_)) => {
                if depth == 2
                    && let Some(name) = child.take()
                {
                    input.insert(name, Value::Str(text.trim().to_owned()));
                }
                depth = depth.saturating_sub(1);
            }
            Ok(XmlEvent::Eof) | Err(_) => break,
            _ => {}
        }
    }
    if !root_text.trim().is_empty() && !input.contains_key("text") {
        input.insert("text".into(), Value::Str(root_text.trim().to_owned()));
    }
    input
}

#[async_trait]
impl Listener for ProcessListener {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        let thread = cx.thread();
        let taken = self.runs.lock().expect("runs lock").remove(&thread);
        let rebuilt = taken.is_none();
        let mut run = match taken {
            Some(run) => run,
            None => match self.rebuild(msg, cx).await? {
                Some(run) => Box::new(run),
                None => return Ok(()),
            },
        };
        if let Some(why) = unasked(&run, msg) {
            // Nothing waits for it: the sender hears why (and the run goes on as it was).
            self.runs.lock().expect("runs lock").insert(thread, run);
            return Err(ListenerError::InvalidPayload(format!(
                "process `{}` {why}",
                self.id()
            )));
        }
        if !rebuilt {
            run.turns += 1;
            let me = cx.me();
            let seen = Seen {
                from: msg.from(),
                to: Some(me),
                payload: msg.payload(),
            };
            run.known.fold(&seen, me);
        }
        if msg.huh().is_some()
            || msg
                .system_error()
                .is_some_and(|e| e.code() != "budget-warning")
        {
            // A call of ours was refused or its handler failed: whatever we wait for that
            // history does not show as sent, or that this notice answers, fails.
            let me = cx.me().to_owned();
            let records = cx.whole_history().await.map_err(ListenerError::failed)?;
            let reason = msg
                .huh()
                .map(|h| format!("{}: {}", h.code(), h.message()))
                .or_else(|| {
                    msg.system_error()
                        .map(|e| format!("{}: {}", e.code(), e.message()))
                })
                .unwrap_or_default();
            fail_unsent(&mut run, &records, msg, &reason, &me);
        }
        if run.machine.steps == 0
            && !run.start.spawned
            && run.known.events == 0
            && let Some(goal) = &self.goal
            && run.known.residuals == 0
            && !history_has_goal(cx).await
        {
            cx.goal(goal);
        }
        let limit = if rebuilt {
            self.steps_per_turn.saturating_mul(run.turns.max(1))
        } else {
            self.steps_per_turn
        };
        self.advance(&mut run, cx, limit);
        if !run.machine.finished() {
            self.runs.lock().expect("runs lock").insert(thread, run);
        }
        Ok(())
    }
}

/// Why a tool answer delivered to the run answers no call of it (a call id it never made, or
/// none): `None` for anything else, and for an answer to a call it made (a late one, after a
/// retry, is recorded and changes nothing).
fn unasked(run: &Run, msg: &Delivery) -> Option<String> {
    let answer = Answer::shared(msg.payload())?.ok()?;
    let Some(id) = answer.call() else {
        return Some("was sent an answer that names no call".into());
    };
    let sent = run.known.sent.get(slot(id)).is_some_and(|s| s.id == id);
    (!sent && !run.machine.made(id))
        .then(|| format!("made no call `{id}` in this thread: nothing waits for this answer"))
}

/// Whether this listener already declared the thread's goal.
async fn history_has_goal(cx: &Context) -> bool {
    let me = cx.me();
    cx.whole_history().await.is_ok_and(|records| {
        records
            .iter()
            .any(|r| &*r.from == me && r.root.is(GOVERNOR_NS, "goal"))
    })
}

/// Fails the calls a refusal or a handler failure answers.
fn fail_unsent(run: &mut Run, records: &[Record], msg: &Delivery, reason: &str, me: &str) {
    let limits = lenient();
    let mut sent_by_message = HashMap::new();
    // The calls sent in child threads: a refused spawn is told after the delivery, not in
    // reply to the request.
    let mut spawned = std::collections::HashSet::new();
    let mut fresh = Known::default();
    for (i, r) in records.iter().enumerate() {
        let Ok(payload) = Payload::parse(&r.payload, &limits) else {
            continue;
        };
        if spawned_by_me(i, r, me) {
            continue;
        }
        if &*r.from == me
            && payload.qname().is(TOOL_NS, "call")
            && let Ok(Call { id: Some(id), .. }) = Call::parse(&payload)
        {
            sent_by_message.insert(r.id, id);
        }
        if &*r.from == me
            && payload.qname().is(SYSTEM_NS, "spawn-thread")
            && let Some(Call { id: Some(id), .. }) = spawned_call(&payload)
        {
            spawned.insert(id);
        }
        fresh.fold(
            &Seen {
                from: &r.from,
                to: r.to.as_deref(),
                payload: &payload,
            },
            me,
        );
    }
    let failed = |id: &str, kind| {
        Arc::new(Answer::Error(ToolError {
            tool: String::new(),
            call: Some(id.to_owned()),
            kind,
            message: reason.to_owned(),
            retry: false,
        }))
    };
    // A handler that failed on our call: the notice answers that call.
    if let Some(id) = msg.in_reply_to().and_then(|m| sent_by_message.get(&m)) {
        let kind = if reason.starts_with("handler-timeout") {
            ErrorType::Timeout
        } else {
            ErrorType::Failed
        };
        run.known
            .answers
            .entry(id.clone())
            .or_insert(failed(id, kind));
    }
    // A refused output: what we wait for and never reached history, or a call whose child
    // thread the budget refused (it has no `thread-spawned`: those come before this notice).
    let spawn_refused = msg.system_error().is_some_and(|e| {
        e.code() == "budget-exhausted" && e.message().starts_with("spawn refused")
    });
    for id in run.machine.waiting() {
        let sent = fresh.sent.get(slot(&id)).is_some_and(|s| s.id == id);
        let refused =
            spawn_refused && spawned.contains(&id) && !fresh.children.values().any(|c| *c == id);
        if (!sent || refused) && !run.known.answers.contains_key(&id) {
            run.known
                .answers
                .insert(id.clone(), failed(&id, ErrorType::NotAllowed));
        }
    }
    run.known.sent.extend(fresh.sent);
}
