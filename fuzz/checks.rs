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
