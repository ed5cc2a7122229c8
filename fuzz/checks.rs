//! The invariants the fuzz targets check, beyond "no panic". The same file is compiled into the
//! fuzz targets and into `tests/fuzz_corpus.rs`, which replays the checked-in corpus through it
//! on every test run. Each check panics on a violation.

use agentpump::extract::extract;
#[cfg(feature = "host")]
use agentpump::host::organism::Organism;
use agentpump::listeners::calculator::{self, CalcError};
use agentpump::{Dialect, Envelope, Incoming, Limits, Payload, ThreadId};

/// The name organism texts are parsed under; every error must start with it.
#[cfg(feature = "host")]
pub const ORIGIN: &str = "fuzz.toml";

/// Envelope and payload parsing.
///
/// Any bytes go through [`Incoming::parse`], and UTF-8 text through [`Payload::parse`]. An
/// accepted envelope, written back with [`Envelope::to_xml`] in its dialect, parses to the same
/// addressee, reply id, UUID thread and payload; an accepted payload parses again from its own
/// text, and inside an envelope of either dialect, to an equal payload. Every error has a message.
pub fn check_envelope(data: &[u8]) {
    let limits = Limits::default();
    match Incoming::parse(data, &limits) {
        Ok(incoming) => {
            envelope_round_trips(&incoming, &limits);
            payload_round_trips(incoming.payload(), &limits);
        }
        Err(err) => assert!(!err.to_string().is_empty(), "empty message for {err:?}"),
    }
    if let Ok(text) = std::str::from_utf8(data) {
        match Payload::parse(text, &limits) {
            Ok(payload) => payload_round_trips(&payload, &limits),
            Err(err) => assert!(!err.to_string().is_empty(), "empty message for {err:?}"),
        }
    }
}

/// Extraction from listener or model output.
///
/// UTF-8 text goes through [`extract`]; every payload it returns parses again from its own text
/// to an equal payload, there are no more than [`Limits::max_outputs`], and every error has a
/// message.
pub fn check_extract(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let limits = Limits::default();
    match extract(text, &limits) {
        Ok(payloads) => {
            assert!(
                payloads.len() <= limits.max_outputs,
                "{} payloads extracted, over the limit of {}",
                payloads.len(),
                limits.max_outputs
            );
            for payload in &payloads {
                let again = Payload::parse(payload.as_str(), &limits).unwrap_or_else(|err| {
                    panic!("extracted {:?} does not parse: {err}", payload.as_str())
                });
                assert_eq!(
                    &again, payload,
                    "extracted payload changed on a second parse"
                );
            }
        }
        Err(err) => assert!(!err.to_string().is_empty(), "empty message for {err:?}"),
    }
}

/// Organism files.
///
/// UTF-8 text goes through [`Organism::parse`]; on success [`Organism::config`] and, unless a
/// listener would touch the world when built, [`Organism::registrations`] run too. Every error
/// names the origin.
#[cfg(feature = "host")]
pub fn check_organism(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let organism = match Organism::parse(text, ORIGIN) {
        Ok(organism) => organism,
        Err(err) => return names_origin(&err.to_string()),
    };
    if let Err(err) = organism.config(ORIGIN) {
        names_origin(&err.to_string());
    }
    let built = builds_only_pure_listeners(text).then(|| organism.registrations(ORIGIN));
    if let Some(Err(err)) = built {
        names_origin(&err.to_string());
    }
}

/// Writes the envelope of `incoming` back out and checks that it reads the same.
/// The calculator's expressions.
///
/// UTF-8 text goes through [`calculator::evaluate`]. A value survives being parenthesised and
/// negated (`(x)` and `-(x)` give the value and its negation, unless that nesting is one level
/// past [`calculator::MAX_DEPTH`]); every error has a message, and a position in it lies
/// within the text (or just past its end).
pub fn check_calculator(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match calculator::evaluate(text) {
        Ok(value) => {
            for (again, expected) in [(format!("({text})"), value), (format!("-({text})"), -value)]
            {
                match calculator::evaluate(&again) {
                    Ok(v) => assert_eq!(v, expected, "{again:?}"),
                    Err(CalcError::TooDeep { .. }) => {}
                    Err(e) => panic!("{text:?} is {value} but {again:?} fails: {e}"),
                }
            }
        }
        Err(err) => {
            let message = err.to_string();
            assert!(!message.is_empty(), "empty message for {err:?}");
            let at = match err {
                CalcError::Unexpected { at, .. }
                | CalcError::Unclosed { at }
                | CalcError::SqrtParen { at }
                | CalcError::NotANumber { at, .. }
                | CalcError::DivisionByZero { at }
                | CalcError::TooDeep { at, .. } => at,
                _ => 1,
            };
            assert!((1..=text.len() + 1).contains(&at), "{message} in {text:?}");
        }
    }
}

fn envelope_round_trips(incoming: &Incoming, limits: &Limits) {
    let thread = incoming.thread().and_then(|t| t.parse::<ThreadId>().ok());
    let envelope = Envelope::new(
        "client".into(),
        thread.unwrap_or_default(),
        incoming.payload().clone(),
    )
    .with_to(incoming.to().map(Into::into))
    .with_in_reply_to(incoming.in_reply_to());
    let xml = envelope.to_xml(incoming.dialect());
    // The written envelope carries an id and a thread the original may not have had.
    let roomy = Limits {
        max_bytes: usize::MAX,
        ..*limits
    };
    let back = Incoming::parse(xml.as_bytes(), &roomy)
        .unwrap_or_else(|err| panic!("written envelope {xml:?} does not parse: {err}"));
    assert_eq!(back.dialect(), incoming.dialect(), "dialect of {xml:?}");
    assert_eq!(back.to(), incoming.to(), "addressee of {xml:?}");
    assert_eq!(
        back.in_reply_to(),
        incoming.in_reply_to(),
        "reply id of {xml:?}"
    );
    assert_eq!(back.payload(), incoming.payload(), "payload of {xml:?}");
    if let Some(thread) = thread {
        let again = back.thread().and_then(|t| t.parse::<ThreadId>().ok());
        assert_eq!(again, Some(thread), "thread of {xml:?}");
    }
}

/// Parses a payload's text again, alone and inside an envelope of each dialect.
fn payload_round_trips(payload: &Payload, limits: &Limits) {
    let text = payload.as_str();
    let again = Payload::parse(text, limits)
        .unwrap_or_else(|err| panic!("payload {text:?} does not parse again: {err}"));
    assert_eq!(
        &again, payload,
        "payload {text:?} changed on a second parse"
    );
    // The envelope adds bytes and one level of nesting around the payload.
    let roomy = Limits {
        max_bytes: usize::MAX,
        max_depth: limits.max_depth + 1,
        ..*limits
    };
    for dialect in [Dialect::Agentpump, Dialect::AgentServer] {
        let xml = Envelope::new("client".into(), ThreadId::new(), payload.clone()).to_xml(dialect);
        let back = Incoming::parse(xml.as_bytes(), &roomy)
            .unwrap_or_else(|err| panic!("envelope {xml:?} does not parse: {err}"));
        assert_eq!(back.payload(), payload, "payload inside {xml:?}");
    }
}

#[cfg(feature = "host")]
/// Whether building the registrations stays in memory: an `llm` listener reads its definition
/// file and the system's CA certificates (for its HTTP client), so such files are not built.
fn builds_only_pure_listeners(text: &str) -> bool {
    let Ok(table) = text.parse::<toml::Table>() else {
        return false;
    };
    let Some(listeners) = table.get("listener").and_then(toml::Value::as_array) else {
        return true;
    };
    !listeners
        .iter()
        .any(|l| l.get("kind").and_then(toml::Value::as_str) == Some("llm"))
}

#[cfg(feature = "host")]
fn names_origin(err: &str) {
    assert!(
        err.starts_with(ORIGIN),
        "error does not name {ORIGIN}: {err:?}"
    );
}

/// The process language: read, parse, check, and run.
///
/// UTF-8 text goes through [`agentpump::process::check_source`]: every diagnostic has a
/// position (line and column from 1) and a message, and they come sorted. The program loads
/// ([`agentpump::process::engine::Program::parse`]) exactly when the check found no hard
/// error. A program that loads runs its first process on a pump with a tight budget, every tool
/// it names served by a stub that answers its arguments (`fail` answers an error): the run
/// ends — it answers its caller, or the governor halts it with a report; nothing is silent.
pub fn check_process(data: &[u8]) {
    use agentpump::process::{Severity, check_source};
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let checked = check_source(text);
    for d in &checked.diagnostics {
        assert!(d.span.line >= 1 && d.span.column >= 1, "no position: {d:?}");
        assert!(!d.message.is_empty(), "empty message: {d:?}");
    }
    let positions: Vec<_> = checked
        .diagnostics
        .iter()
        .map(|d| (d.span.line, d.span.column))
        .collect();
    assert!(
        positions.is_sorted(),
        "diagnostics out of order: {positions:?}"
    );
    let errors = checked
        .diagnostics
        .iter()
        .any(|d| d.severity() == Severity::Error);
    match agentpump::process::engine::Program::parse(text) {
        Ok(program) => {
            assert!(!errors, "loaded despite {:#?}", checked.diagnostics);
            runs_to_an_end(&program);
        }
        Err(e) => assert!(errors && !e.0.is_empty(), "refused without an error: {e:?}"),
    }
}

/// A stub tool: answers a call with its arguments as fields, or an error for `fail`.
struct Stub;

#[agentpump::async_trait]
impl agentpump::Listener for Stub {
    async fn handle(
        &self,
        msg: &agentpump::Delivery,
        cx: &mut agentpump::Context,
    ) -> Result<(), agentpump::ListenerError> {
        use agentpump::tool::{Call, ErrorType};
        let Ok(call) = Call::parse(msg.payload()) else {
            return Ok(());
        };
        let answer = if call.tool == "fail" {
            call.error(ErrorType::Failed, "asked to fail").to_xml()
        } else {
            let mut r = call.result();
            r.fields = call.args.clone();
            r.to_xml()
        };
        cx.reply(answer);
        Ok(())
    }
}

/// Runs the program's first process to its end (see [`check_process`]).
fn runs_to_an_end(program: &std::sync::Arc<agentpump::process::engine::Program>) {
    use agentpump::governor::{Budget, GovernorPolicy};
    use agentpump::process::engine::ProcessListener;
    use agentpump::tool::{Call, TOOL_NS};
    use agentpump::{PumpBuilder, PumpConfig, QName, Registration, Role};
    let Some(first) = program.process_ids().first().map(|s| (*s).to_owned()) else {
        return;
    };
    let budget = Budget {
        turns: Some(300),
        tool_calls: Some(60),
        threads: Some(12),
        wall_clock: Some(std::time::Duration::from_secs(5)),
        ..Budget::default()
    };
    let config = PumpConfig {
        governor: GovernorPolicy {
            budget,
            ..GovernorPolicy::default()
        },
        ..PumpConfig::default()
    };
    let mut builder = PumpBuilder::new().config(config);
    let mut tools: Vec<String> = Vec::new();
    for id in program.process_ids() {
        let l = ProcessListener::new(std::sync::Arc::clone(program), id)
            .expect("a process of the program")
            .steps_per_turn(500);
        for name in l.references() {
            if program.process_ids().contains(&name.as_str()) || tools.contains(&name) {
                continue;
            }
            builder = builder.register(
                Registration::new(&name, Stub)
                    .role(Role::Tool)
                    .accepts(QName::new(TOOL_NS, "call")),
            );
            tools.push(name);
        }
        builder = builder.register(l.registration());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        // A name the pump refuses (a tool named like a reserved listener) is the builder's
        // precise error, not a run.
        let Ok(pump) = builder.build() else {
            return;
        };
        let call = Call::new(&first).id("fuzz").to_xml();
        let thread = pump
            .post(None, Some(&first), &call)
            .await
            .expect("ingress")
            .thread();
        pump.settle(thread).await;
        let records = pump.history(thread).await.expect("history");
        let answered = records
            .iter()
            .any(|r| r.to.as_deref() == Some("client") && r.root.namespace() == TOOL_NS);
        let halted = !pump.reports(thread).await.expect("reports").is_empty();
        assert!(answered || halted, "the run ended silently: {records:#?}");
    });
}
