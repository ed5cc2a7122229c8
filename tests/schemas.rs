//! The XSDs in `schemas/`, checked with a real validator (`xmllint` from libxml2-utils): every
//! example validates (tool-*.xml against tool.xsd, and read back by the tool protocol's
//! parsers), invalid documents are rejected, the code enumerations are exactly the
//! source's wire strings, the governor's decimal pattern agrees with its parser, and every system
//! and governor message the pump really records validates — alone against `system.xsd` /
//! `governor.xsd` and inside the envelope its own writer produces against `envelope.xsd` — and
//! every payload `agentpump demo` writes validates against the schema of its namespace.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use support::Scratch;

use agentpump::governor::{
    Budget, BudgetName, CertificateType, Control, Goal, GovernorMessage, HaltClass, Lane, Signal,
};
use agentpump::history::RecordKind;
use agentpump::system::{
    ErrorCode, GOVERNOR_NS, HuhCode, Request, SYSTEM_NS, Spawn, ThreadErrorCode, ThreadStatus,
};
use agentpump::tool::{Answer, Call, ErrorType, TOOL_NS};
use agentpump::{
    Context, Delivery, Dialect, Envelope, Limits, Listener, ListenerError, Payload, PumpBuilder,
    PumpHandle, QName, Registration, ThreadId,
};
use rust_decimal::Decimal;

/// Namespace of the test listeners' payloads.
const NS: &str = "urn:test:schemas:v1";

/// Every element the pump emits in the system namespace.
const NOTICES: [&str; 9] = [
    "huh",
    "system-error",
    "thread-spawned",
    "system-thread-error",
    "context-cleared",
    "thread-result",
    "halt",
    "boot",
    "shutdown",
];

/// Every request a listener may emit in the system namespace.
const REQUESTS: [&str; 3] = ["spawn-thread", "clear-context", "thread-done"];

/// Every message a listener may emit to the governor.
const GOVERNOR_MESSAGES: [&str; 5] = ["goal", "loop", "residual", "criterion", "learning"];

/// Every message of the tool protocol.
const TOOL_MESSAGES: [&str; 3] = ["call", "result", "error"];

/// Every `action` of the pump's `decision` records (`DecisionAction` in governor.xsd).
const DECISIONS: [&str; 5] = ["halt", "goal", "carve", "resume", "fork"];

// ---------------------------------------------------------------------------------------------
// xmllint and scratch files
// ---------------------------------------------------------------------------------------------

fn schemas_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas")
}

/// What xmllint said about a batch of files.
#[derive(Debug)]
struct Verdict {
    /// Exit code: 0 valid, 3 invalid, anything else a parse or schema error.
    code: Option<i32>,
    stderr: String,
}

/// Runs `xmllint --noout --nonet --schema schemas/<schema> FILES…`. Panics (never skips) when
/// xmllint is not installed.
fn xmllint(schema: &str, files: &[PathBuf]) -> Verdict {
    assert!(!files.is_empty(), "no files to validate against {schema}");
    let run = Command::new("xmllint")
        .args(["--noout", "--nonet", "--schema"])
        .arg(schemas_dir().join(schema))
        .args(files)
        .output();
    let out = match run {
        Ok(out) => out,
        Err(e) if e.kind() == ErrorKind::NotFound => panic!(
            "xmllint is not on PATH: install libxml2-utils (`apt-get install libxml2-utils`; \
             .ci/run installs it). The schema tests need a real XSD validator and do not skip."
        ),
        Err(e) => panic!("cannot run xmllint: {e}"),
    };
    Verdict {
        code: out.status.code(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Asserts that every file validates against `schema`, printing xmllint's report if not.
fn assert_valid(schema: &str, files: &[PathBuf], what: &str) {
    let verdict = xmllint(schema, files);
    assert_eq!(
        verdict.code,
        Some(0),
        "{what}: {} file(s) checked against {schema}; xmllint says:\n{}",
        files.len(),
        verdict.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// The examples
// ---------------------------------------------------------------------------------------------

/// The XSD an example file is checked against: `process-*.xml` against process.xsd,
/// `tool-*.xml` against tool.xsd, `envelope-*.xml` against envelope.xsd, `history-*.xml`
/// against history.xsd, `governor-*.xml` against governor.xsd, `tasks-*.xml` against tasks.xsd,
/// `todo-*.xml` against todo.xsd, `loop-*.xml` against loop.xsd, `inbox-*.xml` against inbox.xsd,
/// `calc-*.xml` against calc.xsd, `demo-*.xml` against demo.xsd, every other `.xml` against
/// system.xsd.
fn schema_of(file_name: &str) -> &'static str {
    if file_name.starts_with("calc-") {
        "calc.xsd"
    } else if file_name.starts_with("demo-") {
        "demo.xsd"
    } else if file_name.starts_with("process-") {
        "process.xsd"
    } else if file_name.starts_with("tool-") {
        "tool.xsd"
    } else if file_name.starts_with("envelope-") {
        "envelope.xsd"
    } else if file_name.starts_with("history-") {
        "history.xsd"
    } else if file_name.starts_with("governor-") {
        "governor.xsd"
    } else if file_name.starts_with("tasks-") {
        "tasks.xsd"
    } else if file_name.starts_with("todo-") {
        "todo.xsd"
    } else if file_name.starts_with("loop-") {
        "loop.xsd"
    } else if file_name.starts_with("inbox-") {
        "inbox.xsd"
    } else {
        "system.xsd"
    }
}

/// The XML example files, split by the schema they are checked against.
fn examples() -> BTreeMap<&'static str, Vec<PathBuf>> {
    let dir = schemas_dir().join("examples");
    let mut by_schema: BTreeMap<&'static str, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("read schemas/examples") {
        let path = entry.expect("list schemas/examples").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".xml") {
            continue;
        }
        by_schema.entry(schema_of(&name)).or_default().push(path);
    }
    for files in by_schema.values_mut() {
        files.sort();
    }
    by_schema
}

#[test]
fn every_example_validates() {
    let by_schema = examples();
    assert!(
        ["envelope.xsd", "governor.xsd", "system.xsd", "tool.xsd"]
            .iter()
            .all(|xsd| by_schema.contains_key(xsd)),
        "schemas/examples needs envelope-*.xml, governor-*.xml, tool-*.xml and system examples, found {by_schema:?}"
    );
    for (schema, files) in &by_schema {
        assert_valid(schema, files, "schemas/examples");
    }
}

#[test]
fn every_element_has_an_example_listed_in_the_readme() {
    let dir = schemas_dir().join("examples");
    let system = NOTICES.iter().chain(&REQUESTS).map(|e| format!("{e}.xml"));
    let governor = GOVERNOR_MESSAGES
        .iter()
        .chain(&["decision"])
        .map(|e| format!("governor-{e}.xml"));
    let tool = TOOL_MESSAGES.iter().map(|e| format!("tool-{e}.xml"));
    for name in system.chain(governor).chain(tool) {
        let file = dir.join(&name);
        assert!(file.is_file(), "no example {}", file.display());
    }
    let readme = std::fs::read_to_string(schemas_dir().join("README.md")).expect("README.md");
    let listed = |entry: &std::path::Path, prefix: &str| {
        let name = entry.file_name().unwrap().to_string_lossy();
        assert!(
            readme.contains(&format!("`{prefix}{name}`")),
            "schemas/README.md does not list {prefix}{name}"
        );
    };
    for entry in std::fs::read_dir(&dir).expect("read schemas/examples") {
        listed(&entry.expect("list schemas/examples").path(), "examples/");
    }
    for entry in std::fs::read_dir(schemas_dir()).expect("read schemas") {
        let path = entry.expect("list schemas").path();
        if path.is_file() && path.extension().is_some_and(|e| e != "md") {
            listed(&path, "");
        }
    }
}

/// The payload element of an example file (its XML declaration and comments skipped).
fn example_payload(name: &str) -> Payload {
    let text = std::fs::read_to_string(schemas_dir().join("examples").join(name))
        .unwrap_or_else(|e| panic!("read examples/{name}: {e}"));
    let mut found = agentpump::extract::extract(&text, &Limits::default())
        .unwrap_or_else(|e| panic!("examples/{name} does not parse: {e}"));
    assert_eq!(found.len(), 1, "examples/{name}: one payload element");
    found.pop().unwrap()
}

/// The examples of what listeners emit are what the pump's own parsers accept: the governor
/// messages (and not `decision`, which only the pump writes), the plans and `spawn-thread` with a
/// budget.
#[test]
fn the_examples_a_listener_may_emit_are_accepted_by_the_pump() {
    let dir = schemas_dir().join("examples");
    for entry in std::fs::read_dir(&dir).expect("read schemas/examples") {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !name.starts_with("governor-") {
            continue;
        }
        let payload = example_payload(&name);
        let parsed = GovernorMessage::parse(&payload);
        if payload.qname().local() == "decision" {
            assert!(
                parsed.is_err(),
                "{name}: a listener may not emit <decision>"
            );
        } else {
            assert!(
                parsed.is_ok(),
                "{name}: the governor refuses it: {parsed:?}"
            );
        }
    }
    let budget = Budget {
        turns: Some(20),
        tokens: Some(50_000),
        cost: Some(Decimal::new(50, 2)),
        tool_calls: Some(10),
        threads: Some(3),
        wall_clock: Some(Duration::from_secs(60)),
        depth: Some(2),
    };
    for entry in std::fs::read_dir(&dir).expect("read schemas/examples") {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !name.starts_with("tool-") {
            continue;
        }
        let payload = example_payload(&name);
        if payload.qname().local() == "call" {
            let call = Call::parse(&payload);
            assert!(call.is_ok(), "{name}: {call:?}");
        } else {
            let answer = Answer::parse(&payload);
            assert!(matches!(answer, Some(Ok(_))), "{name}: {answer:?}");
        }
    }
    for name in ["todo-until.xml", "todo-until-closed.xml"] {
        let plan = agentpump::todo::Plan::parse(&example_payload(name));
        assert!(plan.is_ok(), "{name}: the pump refuses it: {plan:?}");
    }
    let spawn = Request::parse(
        &example_payload("spawn-thread-budget.xml"),
        &Limits::default(),
    );
    assert!(
        matches!(&spawn, Ok(Request::Spawn { budget: b, .. }) if *b == budget),
        "spawn-thread-budget.xml: {spawn:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Invalid documents
// ---------------------------------------------------------------------------------------------

const UUID_A: &str = "a59cdcd8-a140-46d9-b03a-e7579822c264";
/// A well-formed `report-digest` (the one of examples/halt.xml).
const DIGEST: &str = "40afb734d164116b585fd24ccfb0cd26956cb8de07c16e565bde66b0a03130d8";

/// `(name, schema, document, what xmllint must complain about)`.
fn invalid_documents() -> Vec<(&'static str, &'static str, String, &'static str)> {
    let sys = format!("xmlns=\"{SYSTEM_NS}\"");
    let gov = format!("xmlns=\"{GOVERNOR_NS}\"");
    let env = "xmlns=\"urn:agentpump:envelope:v1\"";
    let system = "system.xsd";
    let governor = "governor.xsd";
    let envelope = "envelope.xsd";
    let tool = "tool.xsd";
    let tns = format!("xmlns=\"{TOOL_NS}\"");
    vec![
        (
            "tool-call-without-tool",
            tool,
            format!("<call {tns}><arg name=\"a\">1</arg></call>"),
            "The attribute 'tool' is required but missing",
        ),
        (
            "tool-call-timeout-not-a-number",
            tool,
            format!("<call {tns} tool=\"t\" timeout-ms=\"soon\"/>"),
            "'soon' is not a valid value of the atomic type",
        ),
        (
            "tool-call-timeout-negative",
            tool,
            format!("<call {tns} tool=\"t\" timeout-ms=\"-1\"/>"),
            "'-1' is not a valid value of the atomic type",
        ),
        (
            "tool-arg-bad-name",
            tool,
            format!("<call {tns} tool=\"t\"><arg name=\"a b\">1</arg></call>"),
            "is not accepted by the pattern",
        ),
        (
            "tool-arg-unknown-type",
            tool,
            format!("<call {tns} tool=\"t\"><arg name=\"a\" type=\"date\">1</arg></call>"),
            "The value 'date' is not an element of the set",
        ),
        (
            "tool-error-unknown-type",
            tool,
            format!("<error {tns} tool=\"t\" type=\"oops\">m</error>"),
            "The value 'oops' is not an element of the set",
        ),
        (
            "tool-result-unknown-element",
            tool,
            format!("<result {tns} tool=\"t\"><arg name=\"a\">1</arg></result>"),
            "This element is not expected",
        ),
        (
            "huh-unknown-code",
            system,
            format!("<huh {sys}><error code=\"bogus\">x</error><original-attempt/></huh>"),
            "The value 'bogus' is not an element of the set",
        ),
        (
            "system-error-unknown-code",
            system,
            format!(
                "<system-error {sys}><code>oops</code><message>m</message><retry-allowed>true</retry-allowed></system-error>"
            ),
            "The value 'oops' is not an element of the set",
        ),
        (
            "system-error-retry-not-boolean",
            system,
            format!(
                "<system-error {sys}><code>no-route</code><message>m</message><retry-allowed>maybe</retry-allowed></system-error>"
            ),
            "'maybe' is not a valid value of the atomic type 'xs:boolean'",
        ),
        (
            "thread-spawned-without-path",
            system,
            format!(
                "<thread-spawned {sys} assigned-id=\"{UUID_A}\" parent-id=\"{UUID_A}\" suggested-sub-id=\"w\"/>"
            ),
            "The attribute 'path' is required but missing",
        ),
        (
            "system-thread-error-without-code",
            system,
            format!("<system-thread-error {sys} unknown-id=\"x\" message=\"m\"/>"),
            "The attribute 'code' is required but missing",
        ),
        (
            "thread-result-unknown-status",
            system,
            format!("<thread-result {sys} thread=\"{UUID_A}\" status=\"finished\"/>"),
            "The value 'finished' is not an element of the set",
        ),
        (
            "thread-result-two-payloads",
            system,
            format!(
                "<thread-result {sys} thread=\"{UUID_A}\" status=\"done\"><a xmlns=\"urn:a\"/><b xmlns=\"urn:b\"/></thread-result>"
            ),
            "Element '{urn:b}b': This element is not expected",
        ),
        (
            "context-cleared-negative",
            system,
            format!("<context-cleared {sys} kept-messages=\"-1\"/>"),
            "'-1' is not a valid value of the atomic type 'xs:nonNegativeInteger'",
        ),
        (
            "thread-result-id-not-uuid",
            system,
            format!("<thread-result {sys} thread=\"sess-1\" status=\"done\"/>"),
            "[facet 'pattern'] The value 'sess-1' is not accepted",
        ),
        (
            "huh-attempt-not-base64",
            system,
            format!(
                "<huh {sys}><error code=\"no-payload\">x</error><original-attempt>not base64!</original-attempt></huh>"
            ),
            "is not a valid value of the atomic type 'xs:base64Binary'",
        ),
        (
            "spawn-thread-without-initial-payload",
            system,
            format!("<spawn-thread {sys} suggested-sub-id=\"w\"/>"),
            "Missing child element(s). Expected is one of ( {urn:agentpump:system:v1}budget, {urn:agentpump:system:v1}initial-payload )",
        ),
        (
            "spawn-thread-system-initial-payload",
            system,
            format!(
                "<spawn-thread {sys}><initial-payload><boot version=\"0.1.0\" listeners=\"1\"/></initial-payload></spawn-thread>"
            ),
            "Element '{urn:agentpump:system:v1}boot': This element is not expected",
        ),
        (
            "halt-without-report-digest",
            system,
            format!("<halt {sys} reason=\"max-turns\" class=\"TIMEOUT\" certificate=\"TIMEOUT\"/>"),
            "The attribute 'report-digest' is required but missing",
        ),
        (
            "halt-unknown-class",
            system,
            format!(
                "<halt {sys} reason=\"x\" class=\"finished\" certificate=\"none\" report-digest=\"{DIGEST}\"/>"
            ),
            "The value 'finished' is not an element of the set",
        ),
        (
            "halt-unknown-certificate",
            system,
            format!(
                "<halt {sys} reason=\"x\" class=\"aborted\" certificate=\"NONE\" report-digest=\"{DIGEST}\"/>"
            ),
            "The value 'NONE' is not an element of the set",
        ),
        (
            "halt-digest-not-hex",
            system,
            format!(
                "<halt {sys} reason=\"x\" class=\"aborted\" certificate=\"none\" report-digest=\"sha256:ab\"/>"
            ),
            "[facet 'pattern'] The value 'sha256:ab' is not accepted",
        ),
        (
            "thread-result-unknown-halt-class",
            system,
            format!(
                "<thread-result {sys} thread=\"{UUID_A}\" status=\"halted\" class=\"timeout\" reason=\"max-turns\"/>"
            ),
            "The value 'timeout' is not an element of the set",
        ),
        (
            "spawn-thread-budget-after-initial-payload",
            system,
            format!(
                "<spawn-thread {sys}><initial-payload><a xmlns=\"urn:a\"/></initial-payload><budget turns=\"1\"/></spawn-thread>"
            ),
            "Element '{urn:agentpump:system:v1}budget': This element is not expected",
        ),
        (
            "spawn-thread-budget-negative-turns",
            system,
            format!(
                "<spawn-thread {sys}><budget turns=\"-1\"/><initial-payload><a xmlns=\"urn:a\"/></initial-payload></spawn-thread>"
            ),
            "'-1' is not a valid value of the atomic type '{urn:agentpump:governor:v1}Count'",
        ),
        (
            "spawn-thread-budget-in-governor-namespace",
            system,
            format!(
                "<spawn-thread {sys}><budget xmlns=\"{GOVERNOR_NS}\" turns=\"1\"/><initial-payload><a xmlns=\"urn:a\"/></initial-payload></spawn-thread>"
            ),
            "Element '{urn:agentpump:governor:v1}budget': This element is not expected",
        ),
        (
            "loop-control-maybe",
            governor,
            format!("<loop {gov} control=\"maybe\"/>"),
            "The value 'maybe' is not an element of the set",
        ),
        (
            "loop-without-control",
            governor,
            format!("<loop {gov} notes=\"n\"/>"),
            "The attribute 'control' is required but missing",
        ),
        (
            "loop-unknown-child",
            governor,
            format!("<loop {gov} control=\"done\"><plan>x</plan></loop>"),
            "Element '{urn:agentpump:governor:v1}plan': This element is not expected",
        ),
        (
            "residual-float-suffix",
            governor,
            format!("<residual {gov} value=\"0.1f\"/>"),
            "[facet 'pattern'] The value '0.1f' is not accepted",
        ),
        (
            "residual-nan",
            governor,
            format!("<residual {gov} value=\"NaN\"/>"),
            "[facet 'pattern'] The value 'NaN' is not accepted",
        ),
        (
            "learning-lane-d",
            governor,
            format!("<learning {gov} lane=\"D\">x</learning>"),
            "The value 'D' is not an element of the set",
        ),
        (
            "criterion-without-met",
            governor,
            format!("<criterion {gov} id=\"c1\"/>"),
            "The attribute 'met' is required but missing",
        ),
        (
            "criterion-met-maybe",
            governor,
            format!("<criterion {gov} id=\"c1\" met=\"maybe\"/>"),
            "'maybe' is not a valid value of the atomic type 'xs:boolean'",
        ),
        (
            "goal-unknown-certificate",
            governor,
            format!("<goal {gov} certificates=\"EXACT CERTAIN\"><text>t</text></goal>"),
            "The value 'CERTAIN' is not an element of the set",
        ),
        (
            "goal-r-p-infinite",
            governor,
            format!("<goal {gov} r-p=\"inf\"><text>t</text></goal>"),
            "[facet 'pattern'] The value 'inf' is not accepted",
        ),
        (
            "goal-budget-before-text",
            governor,
            format!("<goal {gov}><budget turns=\"1\"/><text>t</text></goal>"),
            "Element '{urn:agentpump:governor:v1}text': This element is not expected",
        ),
        (
            "decision-unknown-action",
            governor,
            format!("<decision {gov} action=\"warn\"/>"),
            "The value 'warn' is not an element of the set",
        ),
        (
            "decision-carve-thread-not-uuid",
            governor,
            format!("<decision {gov} action=\"carve\" thread=\"child\"/>"),
            "[facet 'pattern'] The value 'child' is not accepted",
        ),
        (
            "envelope-two-payloads",
            envelope,
            format!("<message {env}><meta/><a xmlns=\"urn:a\"/><b xmlns=\"urn:b\"/></message>"),
            "Element '{urn:b}b': This element is not expected",
        ),
        (
            "envelope-no-payload",
            envelope,
            format!("<message {env}><meta/></message>"),
            "Missing child element(s)",
        ),
        (
            "envelope-meta-out-of-order",
            envelope,
            format!(
                "<message {env}><meta><thread>{UUID_A}</thread><from>x</from></meta><a xmlns=\"urn:a\"/></message>"
            ),
            "Element '{urn:agentpump:envelope:v1}from': This element is not expected",
        ),
        (
            "envelope-id-not-uuid",
            envelope,
            format!("<message {env}><meta><id>nope</id></meta><a xmlns=\"urn:a\"/></message>"),
            "[facet 'pattern'] The value 'nope' is not accepted",
        ),
        (
            "envelope-payload-in-envelope-namespace",
            envelope,
            format!("<message {env}><meta/><message/></message>"),
            "Element '{urn:agentpump:envelope:v1}message': This element is not expected",
        ),
        (
            "envelope-payload-in-no-namespace",
            envelope,
            "<env:message xmlns:env=\"urn:agentpump:envelope:v1\"><env:meta/><x/></env:message>"
                .to_owned(),
            "Element 'x': This element is not expected",
        ),
        (
            "envelope-invalid-system-payload",
            envelope,
            format!("<message {env}><meta/><huh {sys}><original-attempt/></huh></message>"),
            "Element '{urn:agentpump:system:v1}original-attempt': This element is not expected",
        ),
        (
            "envelope-invalid-governor-payload",
            envelope,
            format!("<message {env}><meta/><residual {gov} value=\"0.1f\"/></message>"),
            "[facet 'pattern'] The value '0.1f' is not accepted",
        ),
        (
            "history-record-unknown-kind",
            "history.xsd",
            history_record("kind=\"note\"", ""),
            "The value 'note' is not an element of the set",
        ),
        (
            "history-record-short-digest",
            "history.xsd",
            history_record("kind=\"message\"", "").replace(&"a".repeat(64), "abc"),
            "[facet 'pattern'] The value 'abc' is not accepted",
        ),
        (
            "history-record-invalid-envelope",
            "history.xsd",
            history_record(
                "kind=\"message\"",
                &format!("<message {env}><meta/></message>"),
            ),
            "Missing child element(s)",
        ),
    ]
}

/// A history export with one record: `attributes` besides seq, time and digest, and `content`.
fn history_record(attributes: &str, content: &str) -> String {
    format!(
        "<history xmlns=\"urn:agentpump:history:v1\"><record seq=\"1\" \
         time=\"2026-11-24T15:07:02.123456Z\" {attributes} digest=\"{}\">{content}</record></history>",
        "a".repeat(64)
    )
}

#[test]
fn invalid_documents_are_rejected_for_the_right_reason() {
    let scratch = Scratch::new("invalid");
    for (name, schema, document, complaint) in invalid_documents() {
        let file = scratch.write(&format!("{name}.xml"), &document);
        let verdict = xmllint(schema, &[file]);
        assert_eq!(
            verdict.code,
            Some(3),
            "{name}: expected {schema} to reject\n{document}\nxmllint says:\n{}",
            verdict.stderr
        );
        assert!(
            verdict.stderr.contains(complaint),
            "{name}: rejected, but not for {complaint:?}; xmllint says:\n{}",
            verdict.stderr
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The schemas and the pump's parsers agree
// ---------------------------------------------------------------------------------------------

/// Validates each document against `schema` (one xmllint run) and parses it with the pump's
/// parser of its namespace (`GovernorMessage::parse`, `Request::parse`); returns a line for each
/// whose `(valid, accepted)` is not the expected one.
fn disagreements(schema: &str, cases: &[(String, bool, bool)]) -> Vec<String> {
    let scratch = Scratch::new(&format!("agree-{schema}"));
    let files: Vec<PathBuf> = cases
        .iter()
        .enumerate()
        .map(|(i, (xml, _, _))| scratch.write(&format!("case-{i:02}.xml"), xml))
        .collect();
    let verdict = xmllint(schema, &files);
    let mut wrong = Vec::new();
    for ((xml, schema_ok, parser_ok), file) in cases.iter().zip(&files) {
        let path = file.display().to_string();
        let said = |what: &str| {
            verdict
                .stderr
                .lines()
                .any(|l| l == format!("{path} {what}"))
        };
        let valid = said("validates");
        assert!(
            valid != said("fails to validate"),
            "no verdict for {path}:\n{}",
            verdict.stderr
        );
        let payload = Payload::parse(xml, &Limits::default()).expect("well-formed");
        let parsed = match payload.qname().namespace() {
            GOVERNOR_NS => GovernorMessage::parse(&payload)
                .map(|m| format!("{m:?}"))
                .map_err(|e| e.to_string()),
            SYSTEM_NS => Request::parse(&payload, &Limits::default())
                .map(|r| format!("{r:?}"))
                .map_err(|(code, message)| format!("{code}: {message}")),
            other => panic!("no parser for {other}"),
        };
        if (valid, parsed.is_ok()) != (*schema_ok, *parser_ok) {
            wrong.push(format!(
                "{xml}\n  {schema}: valid = {valid} (expected {schema_ok}); parser: {parsed:?} \
                 (expected ok = {parser_ok})"
            ));
        }
    }
    if !wrong.is_empty() {
        wrong.push(format!("xmllint says:\n{}", verdict.stderr));
    }
    wrong
}

/// `(value, valid against governor.xsd's Decimal, accepted by the governor's parser)`.
const DECIMALS: [(&str, bool, bool); 25] = [
    ("0", true, true),
    ("-1.5", true, true),
    ("+2", true, true),
    (".5", true, true),
    ("5.", true, true),
    ("0.0001", true, true),
    ("1e-4", true, true),
    ("2.5E+3", true, true),
    ("-1e-4", true, true),
    (" 0.25 ", true, true),
    ("NaN", false, false),
    ("inf", false, false),
    ("Infinity", false, false),
    ("0.1f", false, false),
    ("1e", false, false),
    ("e5", false, false),
    ("1ee5", false, false),
    ("1.2.3", false, false),
    ("1,5", false, false),
    ("0x10", false, false),
    (".", false, false),
    ("-", false, false),
    ("", false, false),
    // The two documented differences (governor.xsd, schemas/README.md): `_` digit separators
    // are the parser's leniency; magnitude is beyond what a pattern can count.
    ("1_000", false, true),
    ("1e29", true, false),
];

/// governor.xsd's `Decimal` and the governor's parser (`residual value`, `r-p`, `budget cost`)
/// agree on plain and scientific notation, and refuse NaN, infinities and floats alike.
#[test]
fn the_decimal_pattern_agrees_with_the_governors_parser() {
    let cases: Vec<(String, bool, bool)> = DECIMALS
        .iter()
        .map(|&(value, valid, accepted)| {
            let xml = format!("<residual xmlns=\"{GOVERNOR_NS}\" value=\"{value}\"/>");
            (xml, valid, accepted)
        })
        .collect();
    let wrong = disagreements("governor.xsd", &cases);
    assert!(wrong.is_empty(), "decimals:\n{}", wrong.join("\n"));
}

/// What governor.xsd accepts, the governor accepts; what it refuses for a value, the governor
/// refuses too. Where the schema is stricter than the parser (element order, unknown children
/// and attributes) the difference is listed, so it stays a decision.
#[test]
fn the_governor_schema_and_the_pumps_parsers_agree() {
    let gov = |body: &str| body.replace("GOV", &format!("xmlns=\"{GOVERNOR_NS}\""));
    let governor: Vec<(String, bool, bool)> = [
        (
            "<loop GOV control=\"done\"><field name=\"a\">1</field></loop>",
            true,
            true,
        ),
        // Ask-Loop v2: "Any other fields are for logging and diagnostics."
        (
            "<loop GOV control=\"continue\" plan_digest=\"sha256:ab\" tries=\"2\"/>",
            true,
            true,
        ),
        ("<loop GOV control=\" done \"/>", false, false),
        ("<loop GOV control=\"Done\"/>", false, false),
        ("<loop GOV reason=\"r\"/>", false, false),
        ("<learning GOV lane=\"A\">x</learning>", true, true),
        ("<learning GOV lane=\" A \">x</learning>", false, false),
        ("<learning GOV lane=\"a\">x</learning>", false, false),
        ("<criterion GOV id=\"c\" met=\"1\"/>", true, true),
        (
            "<criterion GOV id=\"c\" met=\" false \">why</criterion>",
            true,
            true,
        ),
        ("<criterion GOV id=\"c\" met=\"yes\"/>", false, false),
        ("<criterion GOV met=\"true\"/>", false, false),
        ("<residual GOV/>", false, false),
        (
            "<goal GOV certificates=\" EXACT  CONVERGED \"><text>t</text></goal>",
            true,
            true,
        ),
        (
            "<goal GOV certificates=\"EXACT,CONVERGED\"><text>t</text></goal>",
            false,
            false,
        ),
        (
            "<goal GOV certificates=\"exact\"><text>t</text></goal>",
            false,
            false,
        ),
        (
            "<goal GOV><text>t</text><budget turns=\"5\" depth=\"1\" wall-clock-ms=\"007\"/></goal>",
            true,
            true,
        ),
        (
            "<goal GOV><text>t</text><budget turns=\"-5\"/></goal>",
            false,
            false,
        ),
        (
            "<goal GOV><text>t</text><budget turns=\"1.5\"/></goal>",
            false,
            false,
        ),
        (
            "<goal GOV><text>t</text><budget cost=\"1e-2\"/></goal>",
            true,
            true,
        ),
        (
            "<goal GOV><text>t</text><budget cost=\"cheap\"/></goal>",
            false,
            false,
        ),
        (
            "<goal GOV><text>t</text><text>u</text></goal>",
            false,
            false,
        ),
        ("<goal GOV/>", true, true),
        // The schema is stricter than the parser (which ignores order and unknown content, and
        // reads integers with a sign).
        (
            "<goal GOV><text>t</text><budget turns=\"+5\"/></goal>",
            false,
            true,
        ),
        (
            "<goal GOV><criterion id=\"a\">x</criterion><text>t</text></goal>",
            false,
            true,
        ),
        // Unknown words in the pump's namespaces are refused by name, as the schema does.
        (
            "<goal GOV><text>t</text><budget turns=\"1\" bogus=\"2\"/></goal>",
            false,
            false,
        ),
        ("<loop GOV control=\"done\"><other/></loop>", false, true),
        ("<residual GOV value=\"1\"><x/></residual>", false, false),
    ]
    .into_iter()
    .map(|(body, valid, accepted)| (gov(body), valid, accepted))
    .collect();
    let mut wrong = disagreements("governor.xsd", &governor);
    let spawn = |budget: &str, after: &str| {
        format!(
            "<sys:spawn-thread xmlns:sys=\"{SYSTEM_NS}\">{budget}<sys:initial-payload>\
             <a xmlns=\"urn:a\"/></sys:initial-payload>{after}</sys:spawn-thread>"
        )
    };
    let system = [
        (
            spawn("<sys:budget turns=\"1\" cost=\"2.5e-1\"/>", ""),
            true,
            true,
        ),
        (spawn("<sys:budget turns=\"x\"/>", ""), false, false),
        (spawn("<sys:budget cost=\"NaN\"/>", ""), false, false),
        (spawn("<sys:budget/><sys:budget/>", ""), false, false),
        // Stricter schema: the budget comes first, and has only the budget attributes.
        (spawn("", "<sys:budget turns=\"1\"/>"), false, true),
        (
            spawn("<sys:budget turns=\"1\" bogus=\"2\"/>", ""),
            false,
            false,
        ),
    ];
    wrong.extend(disagreements("system.xsd", &system));
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `<sys:budget …></sys:budget>` is the same element as `<sys:budget …/>` (XML does not tell
/// them apart, and neither does system.xsd); the pump should read both.
#[test]
fn a_budget_with_an_end_tag_is_read_like_an_empty_one() {
    let xml = format!(
        "<sys:spawn-thread xmlns:sys=\"{SYSTEM_NS}\"><sys:budget turns=\"1\"></sys:budget>\
         <sys:initial-payload><a xmlns=\"urn:a\"/></sys:initial-payload></sys:spawn-thread>"
    );
    let wrong = disagreements("system.xsd", &[(xml, true, true)]);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// The code enumerations
// ---------------------------------------------------------------------------------------------

/// The `value`s of the enumeration `<xs:simpleType name="{name}">` in `xsd`.
fn enumeration(xsd: &str, name: &str) -> BTreeSet<String> {
    let start = xsd
        .find(&format!("<xs:simpleType name=\"{name}\">"))
        .unwrap_or_else(|| panic!("no simpleType {name}"));
    let block = &xsd[start..start + xsd[start..].find("</xs:simpleType>").unwrap()];
    block
        .split("<xs:enumeration value=\"")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].to_owned())
        .collect()
}

/// The wire strings of the given variants. The `match` has no wildcard and lists the same
/// variants, so a variant added in the source does not compile here until it is listed — and
/// then the test below asks for it in system.xsd.
macro_rules! wire_codes {
    ($ty:ident: $($variant:ident),+) => {{
        let _exhaustive = |code: $ty| match code {
            $($ty::$variant)|+ => (),
        };
        [$($ty::$variant.as_str()),+].into_iter().map(str::to_owned).collect::<BTreeSet<_>>()
    }};
}

/// Every halt class, as written in `halt class`, `thread-result class` and reports. The `match`
/// has no wildcard, so a class added in the source does not compile here until it is listed.
fn halt_classes() -> BTreeSet<String> {
    let all = [
        HaltClass::Exact,
        HaltClass::Converged,
        HaltClass::Diverged,
        HaltClass::Timeout(BudgetName::Turns),
        HaltClass::Backpressure(String::new()),
        HaltClass::Aborted,
        HaltClass::NoProgress,
        HaltClass::DoneUncertified,
        HaltClass::NeedInfo,
    ];
    let _exhaustive = |class: &HaltClass| match class {
        HaltClass::Exact
        | HaltClass::Converged
        | HaltClass::Diverged
        | HaltClass::Timeout(_)
        | HaltClass::Backpressure(_)
        | HaltClass::Aborted
        | HaltClass::NoProgress
        | HaltClass::DoneUncertified
        | HaltClass::NeedInfo => (),
    };
    all.iter().map(|c| c.as_str().to_owned()).collect()
}

/// The `control` values as `Signal::to_xml` writes them.
fn controls() -> BTreeSet<String> {
    let _exhaustive = |control: Control| match control {
        Control::Continue | Control::Done | Control::Abort => (),
    };
    [Control::Continue, Control::Done, Control::Abort]
        .into_iter()
        .map(|c| {
            let xml = Signal::new(c).to_xml();
            let rest = &xml[xml.find("control=\"").expect("a control attribute") + 9..];
            rest[..rest.find('"').unwrap()].to_owned()
        })
        .collect()
}

/// The lanes as written in `learning lane`.
fn lanes() -> BTreeSet<String> {
    let _exhaustive = |lane: Lane| match lane {
        Lane::A | Lane::B | Lane::C => (),
    };
    [Lane::A, Lane::B, Lane::C]
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Every code enumeration of the source: (schema, simpleType name, wire strings).
fn source_codes() -> Vec<(&'static str, &'static str, BTreeSet<String>)> {
    let certificates = wire_codes!(CertificateType: Exact, Converged, Timeout, Backpressure,
    Diverged);
    let mut halt_certificates = certificates.clone();
    halt_certificates.insert("none".to_owned());
    vec![
        (
            "system.xsd",
            "HuhCode",
            wire_codes!(HuhCode: MalformedXml, LimitExceeded, ForbiddenDtd, UnknownEntity,
            UnknownPrefix, UnknownRoot, ReservedNamespace, InvalidRequest, InvalidPayload,
            NoPayload),
        ),
        (
            "system.xsd",
            "ErrorCode",
            wire_codes!(ErrorCode: PeerNotAllowed, NoRoute, QueueFull, HandlerFailed,
            HandlerPanicked, HandlerTimeout, ThreadClosed, ShuttingDown, HistoryUnavailable,
            LoopNotPermitted, BudgetWarning, BudgetExhausted, UpstreamFailed, RefusalsRepeated,
            DoneSetAside, PlanOpen),
        ),
        (
            "system.xsd",
            "ThreadErrorCode",
            wire_codes!(ThreadErrorCode: UnknownThread, MalformedThreadId),
        ),
        (
            "system.xsd",
            "ThreadStatus",
            wire_codes!(ThreadStatus: Done, Idle, Halted),
        ),
        ("governor.xsd", "HaltClass", halt_classes()),
        ("governor.xsd", "CertificateType", certificates),
        ("governor.xsd", "HaltCertificate", halt_certificates),
        ("governor.xsd", "Control", controls()),
        ("governor.xsd", "Lane", lanes()),
        (
            "tool.xsd",
            "ErrorType",
            wire_codes!(ErrorType: InvalidArgument, Failed, Timeout, NotAllowed, Unavailable, Denied),
        ),
        (
            "governor.xsd",
            "DecisionAction",
            DECISIONS.iter().map(|&a| a.to_owned()).collect(),
        ),
    ]
}

#[test]
fn code_enumerations_are_exactly_the_wire_codes_of_the_source() {
    for (file, name, codes) in source_codes() {
        let xsd = std::fs::read_to_string(schemas_dir().join(file)).expect("read the schema");
        assert_eq!(enumeration(&xsd, name), codes, "{file} simpleType {name}");
    }
}

// ---------------------------------------------------------------------------------------------
// What the pump emits
// ---------------------------------------------------------------------------------------------

/// A test listener: ignores pump notices, otherwise does what the payload's root names.
struct Probe;

#[async_trait::async_trait]
impl Listener for Probe {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let work = |text: &str| format!("<work xmlns=\"{NS}\">{text}</work>");
        match msg.qname().local() {
            // Malformed output of every sort, each answered with <huh> to this listener.
            "garble" => {
                cx.emit("<oops");
                cx.emit("");
                cx.emit_text("no payload in this text");
                cx.emit(format!("<spawn-thread xmlns=\"{SYSTEM_NS}\"/>"));
                cx.emit(format!(
                    "<boot xmlns=\"{SYSTEM_NS}\" version=\"9.9.9\" listeners=\"0\"/>"
                ));
            }
            // `loner` accepts <task> but is not a peer: system-error peer-not-allowed; and a
            // probe has no loop permission: system-error loop-not-permitted.
            "rude" => {
                cx.send("loner", format!("<task xmlns=\"{NS}\"/>"));
                cx.emit(format!("<rude xmlns=\"{NS}\"/>"));
            }
            "fail" => return Err(ListenerError::failed("told to fail")),
            "forget" => cx.clear_context(1),
            // Three children: one ends with thread-done and a payload, one with an empty
            // thread-done, one runs out of work (idle) after a reply.
            "branch" => {
                cx.spawn(Spawn::new(work("done")).sub_id("done").to("worker"));
                cx.spawn(Spawn::new(work("quit")).sub_id("quit"));
                cx.spawn(Spawn::new(work("idle")).sub_id("idle"));
            }
            // A child whose thread-done carries a pump-only element: refused with huh.
            "forge" => cx.spawn(Spawn::new(work("forge")).sub_id("forge")),
            // A child with a carved budget, run by `agent`, which talks to the governor and
            // aborts: halt in the child, thread-result status="halted" here.
            "govern" => {
                let budget = Budget {
                    turns: Some(2),
                    cost: Some(Decimal::new(50, 2)),
                    ..Budget::default()
                };
                let first = format!("<iterate xmlns=\"{NS}\">1</iterate>");
                cx.spawn(Spawn::new(first).sub_id("gov").to("agent").budget(budget));
            }
            "work" => match msg.payload().as_str() {
                p if p.contains(">done<") => cx.done(format!("<answer xmlns=\"{NS}\">42</answer>")),
                p if p.contains(">quit<") => cx.done(""),
                p if p.contains(">forge<") => cx.done(format!(
                    "<boot xmlns=\"{SYSTEM_NS}\" version=\"6.6.6\" listeners=\"99\"/>"
                )),
                _ => cx.reply(format!(
                    "<c:partial xmlns:c=\"{NS}\"><note>half</note></c:partial>"
                )),
            },
            _ => {}
        }
        Ok(())
    }
}

/// An agent that uses every governor message (through `Context`'s helpers and the Ask-Loop text
/// form), then gives up. Its budget: 2 turns, so the second delivery brings a budget-warning.
struct Agent;

#[async_trait::async_trait]
impl Listener for Agent {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        if msg.payload().as_str().contains(">1<") {
            cx.goal(&Goal {
                text: "say <why> & stop".into(),
                criteria: vec![("c1".into(), "it is said".into())],
                certificates: vec![CertificateType::Exact, CertificateType::Converged],
                r_p: Some(Decimal::from_scientific("1e-4").unwrap()),
                residual_metric: None,
                // depth 0: this thread may not spawn (budget-exhausted below).
                budget: Budget {
                    turns: Some(100),
                    cost: Some(Decimal::new(25, 2)),
                    wall_clock: Some(Duration::from_secs(60)),
                    depth: Some(0),
                    ..Budget::default()
                },
            });
            cx.residual(Decimal::new(125, 3));
            cx.criterion("c1", false, "msg:nowhere");
            cx.learning(Lane::C, "try \"harder\"");
            cx.signal(Signal::new(Control::Continue).notes("one more").reason("r"));
            // Ask-Loop v2: "Any other fields are for logging and diagnostics."
            cx.emit(format!(
                "<loop xmlns=\"{GOVERNOR_NS}\" control=\"continue\" plan_digest=\"sha256:ab\"/>"
            ));
            cx.emit(format!("<iterate xmlns=\"{NS}\">2</iterate>"));
        } else {
            cx.spawn(Spawn::new(format!("<iterate xmlns=\"{NS}\">1</iterate>")));
            cx.emit_text(
                "still thinking <<<NSENVELOPE_MAGIC_9E3B6F2D:V2:LOOP:\
                 {\"control\":\"continue\",\"plan_digest\":\"sha256:ab\",\"tries\":2}>>>",
            );
            cx.signal(Signal::new(Control::Abort).reason("gave-up"));
        }
        Ok(())
    }
}

fn pump() -> PumpHandle {
    let root = |local: &str| QName::new(NS, local);
    let probe = [
        "garble", "rude", "fail", "forget", "branch", "forge", "govern",
    ]
    .into_iter()
    .fold(Registration::new("probe", Probe), |r, l| r.accepts(root(l)))
    .peers(["worker", "agent"]);
    PumpBuilder::new()
        .register(probe)
        .register(Registration::new("worker", Probe).accepts(root("work")))
        .register(Registration::new("loner", Probe).accepts(root("task")))
        .register(
            Registration::new("agent", Agent)
                .accepts(root("iterate"))
                .may_loop(true),
        )
        .build()
        .expect("build the pump")
}

/// Drives the pump through every case that emits a system message; returns the envelopes the
/// pump wrote back to refused outside senders (`IngressError::to_xml`).
async fn drive(pump: &PumpHandle) -> Vec<String> {
    let mut answers = Vec::new();
    let mut threads = Vec::new();
    for local in ["garble", "rude", "fail", "forget", "branch", "govern"] {
        let payload = format!("<{local} xmlns=\"{NS}\"/>");
        let receipt = pump.post(None, None, &payload).await.expect("post");
        threads.push(receipt.thread());
    }
    for thread in &threads {
        pump.settle(*thread).await;
    }
    // The governed child halted (aborted); resume it with more turns (decision action="resume").
    let governed = pump
        .tree(threads[5])
        .into_iter()
        .find(|t| t.parent.is_some())
        .expect("the governed child");
    let more = Budget {
        turns: Some(3),
        ..Budget::default()
    };
    pump.resume(governed.id, &more)
        .await
        .expect("resume the halted child");
    pump.settle(threads[5]).await;
    // A fork of the first thread at its first record, with a budget (decision action="fork").
    let first = pump.history(threads[0]).await.expect("history")[0].seq;
    let options = agentpump::pump::ForkOptions {
        budget: Some(more.clone()),
        ..Default::default()
    };
    let fork = pump.fork(threads[0], first, options).await.expect("fork");
    pump.settle(fork).await;
    // A halt with a certificate: stop an idle root thread (BACKPRESSURE).
    pump.stop(threads[3]).await.expect("stop the idle thread");
    let big = format!("<x xmlns='urn:none'>{}</x>", "a".repeat(5000));
    let child = pump
        .tree(threads[4])
        .into_iter()
        .find(|t| t.parent.is_some())
        .expect("a child");
    let envelope = |thread: &str| {
        format!(
            "<message xmlns=\"urn:agentpump:envelope:v1\"><meta><thread>{thread}</thread></meta>\
             <task xmlns=\"{NS}\"/></message>"
        )
    };
    let task = format!("<task xmlns=\"{NS}\"/>");
    let fail = format!("<fail xmlns=\"{NS}\"/>");
    let refusals = [
        // huh unknown-root, then the same with an attempt over the limit (truncated)
        pump.post(None, None, "<x xmlns='urn:none'/>").await,
        pump.post(None, None, &big).await,
        // huh malformed-xml
        pump.post(None, None, "<x").await,
        // system-error no-route, then thread-closed (the child is done)
        pump.post(None, Some("loner"), &fail).await,
        pump.post(Some(child.id), None, &task).await,
        // system-thread-error unknown-thread, then malformed-thread-id
        pump.send(envelope(&ThreadId::new().to_string())).await,
        pump.send(envelope("sess-1")).await,
    ];
    let report = pump.shutdown(Duration::from_secs(1)).await;
    assert!(report.drained, "the pump did not drain: {report:?}");
    // system-error shutting-down
    let late = pump.post(None, None, &task).await;
    for refused in refusals.into_iter().chain([late]) {
        let err = refused.expect_err("the pump should refuse this input");
        answers.push(err.to_xml());
    }
    answers
}

/// One system- or governor-namespace payload the pump recorded.
#[derive(Debug)]
struct Seen {
    kind: RecordKind,
    local: String,
    payload: String,
}

/// Every record of every thread, written out for xmllint.
#[derive(Debug, Default)]
struct Written {
    /// The system-namespace payloads (notices and requests), one file each.
    payloads: Vec<PathBuf>,
    /// The governor-namespace payloads (messages to the governor and decisions), one file each.
    governor: Vec<PathBuf>,
    /// Every record as an envelope, one file each.
    envelopes: Vec<PathBuf>,
    /// What the system payload files hold.
    seen: Vec<Seen>,
    /// What the governor payload files hold.
    governed: Vec<Seen>,
    /// Envelopes written with the `env:` prefix / with a default namespace.
    prefixed: usize,
    unprefixed: usize,
}

/// Writes every record of every thread: its payload when it is in the system or governor
/// namespace, and the whole record as the envelope the pump's own writer makes of it (with a
/// fresh meta id).
async fn write_history(pump: &PumpHandle, scratch: &Scratch) -> Written {
    let mut out = Written::default();
    for thread in pump.threads() {
        for record in pump.history(thread.id).await.expect("history") {
            let local = record.root.local().to_owned();
            if record.kind == RecordKind::System {
                assert_eq!(&*record.from, "system", "record {}", record.seq);
                assert_eq!(record.root.namespace(), SYSTEM_NS, "record {}", record.seq);
            }
            if record.root.namespace() == SYSTEM_NS {
                let name = format!("{:04}-{}-{local}.xml", record.seq, record.kind);
                out.payloads.push(scratch.write(&name, &record.payload));
                let payload = record.payload.to_string();
                let (kind, local) = (record.kind, local.clone());
                out.seen.push(Seen {
                    kind,
                    local,
                    payload,
                });
            }
            if record.kind == RecordKind::Decision {
                assert_eq!(&*record.from, "governor", "record {}", record.seq);
                assert_eq!(
                    record.root.namespace(),
                    GOVERNOR_NS,
                    "record {}",
                    record.seq
                );
            }
            if record.root.namespace() == GOVERNOR_NS {
                let to_governor =
                    record.kind == RecordKind::Message && record.to.as_deref() == Some("governor");
                assert!(
                    to_governor || record.kind == RecordKind::Decision,
                    "a governor payload is either a message to the governor or a decision: {record:?}"
                );
                let name = format!("{:04}-{}-{local}.xml", record.seq, record.kind);
                out.governor.push(scratch.write(&name, &record.payload));
                out.governed.push(Seen {
                    kind: record.kind,
                    local: local.clone(),
                    payload: record.payload.to_string(),
                });
            }
            let payload = Payload::parse(&record.payload, &Limits::default()).expect("payload");
            let xml = Envelope::new(record.from.clone(), record.thread, payload)
                .with_to(record.to.clone())
                .with_in_reply_to(record.in_reply_to)
                .to_xml(Dialect::Agentpump);
            if xml.starts_with("<env:message") {
                out.prefixed += 1;
            } else {
                out.unprefixed += 1;
            }
            let name = format!("envelope-{:04}-{local}.xml", record.seq);
            out.envelopes.push(scratch.write(&name, &xml));
        }
    }
    out
}

#[tokio::test]
async fn every_system_and_governor_message_the_pump_emits_validates() {
    let scratch = Scratch::new("emitted");
    let pump = pump();
    let answers = tokio::time::timeout(Duration::from_secs(4), drive(&pump))
        .await
        .expect("the scenario took more than 4 s");
    let mut written = write_history(&pump, &scratch).await;
    for (i, xml) in answers.iter().enumerate() {
        let file = scratch.write(&format!("answer-{i}.xml"), xml);
        written.envelopes.push(file);
    }
    assert_valid(
        "system.xsd",
        &written.payloads,
        "system payloads the pump recorded",
    );
    assert_valid(
        "governor.xsd",
        &written.governor,
        "governor payloads the pump recorded",
    );
    assert_valid(
        "envelope.xsd",
        &written.envelopes,
        "records and answers as envelopes",
    );
    assert!(
        written.prefixed > 0 && written.unprefixed > 0,
        "both envelope forms must be exercised: {written:?}"
    );
    // The export wrapper: every thread's records, as `history --format xml` writes them.
    let mut exports = Vec::new();
    for thread in pump.threads() {
        let records = pump.history(thread.id).await.expect("history");
        let name = format!("export-{}.xml", thread.id);
        exports.push(scratch.write(&name, &agentpump::history::export::to_xml(&records)));
    }
    assert_valid("history.xsd", &exports, "history exports");
    assert_coverage(&written.seen);
    assert_governor_coverage(&written.governed);
}

/// Fails when a governor message or decision this test drives stopped being recorded.
fn assert_governor_coverage(seen: &[Seen]) {
    let of = |kind: RecordKind| -> BTreeSet<&str> {
        seen.iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.local.as_str())
            .collect()
    };
    assert_eq!(
        of(RecordKind::Message),
        BTreeSet::from(GOVERNOR_MESSAGES),
        "messages to the governor recorded"
    );
    assert_eq!(
        of(RecordKind::Decision),
        BTreeSet::from(["decision"]),
        "decision records"
    );
    let actions: BTreeSet<&str> = seen
        .iter()
        .filter(|s| s.kind == RecordKind::Decision)
        .filter_map(|s| s.payload.split("action=\"").nth(1))
        .filter_map(|rest| rest.split('"').next())
        .collect();
    assert_eq!(actions, BTreeSet::from(DECISIONS), "decision actions");
    let payloads: Vec<&str> = seen.iter().map(|s| s.payload.as_str()).collect();
    let expected = [
        "r-p=\"0.0001\" certificates=\"EXACT CONVERGED\"",
        "<criterion id=\"c1\">it is said</criterion>",
        "<budget turns=\"100\" cost=\"0.25\" wall-clock-ms=\"60000\" depth=\"0\"/>",
        "<field name=\"plan_digest\">sha256:ab</field>",
        "control=\"abort\" reason=\"gave-up\"",
        "action=\"halt\" class=\"aborted\" reason=\"gave-up\"",
        "action=\"halt\" class=\"BACKPRESSURE\" reason=\"stop-request\"",
        "action=\"goal\" criteria=\"1\"",
        "><budget turns=\"2\" cost=\"0.50\"/></decision>",
        "action=\"resume\"><budget turns=\"3\"/></decision>",
    ];
    for fragment in expected {
        assert!(
            payloads.iter().any(|p| p.contains(fragment)),
            "no recorded governor payload contains {fragment:?}; recorded:\n{}",
            payloads.join("\n")
        );
    }
}

/// Fails when a kind of notice, request or code this test drives stopped being recorded.
fn assert_coverage(seen: &[Seen]) {
    let of = |kind: RecordKind| -> BTreeSet<&str> {
        seen.iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.local.as_str())
            .collect()
    };
    assert_eq!(
        of(RecordKind::System),
        BTreeSet::from(NOTICES),
        "system notices emitted"
    );
    assert_eq!(
        of(RecordKind::Message),
        BTreeSet::from(REQUESTS),
        "requests recorded"
    );
    // What XSD 1.0 cannot say: a thread-result names a halt class and reason iff it is halted.
    for result in seen.iter().filter(|s| s.local == "thread-result") {
        let tag = &result.payload[..result.payload.find('>').unwrap()];
        let halted = tag.contains(" status=\"halted\"");
        assert_eq!(
            (tag.contains(" class=\""), tag.contains(" reason=\"")),
            (halted, halted),
            "class and reason go with status=\"halted\", and only with it: {tag}"
        );
    }
    let payloads: Vec<&str> = seen.iter().map(|s| s.payload.as_str()).collect();
    let expected = [
        "code=\"unknown-root\"",
        "code=\"malformed-xml\"",
        "code=\"no-payload\"",
        "code=\"invalid-request\"",
        "code=\"reserved-namespace\"",
        "<original-attempt></original-attempt>",
        "<original-attempt truncated=\"true\">",
        "<code>peer-not-allowed</code>",
        "<code>handler-failed</code>",
        "<code>no-route</code>",
        "<code>thread-closed</code>",
        "<code>shutting-down</code>",
        "code=\"unknown-thread\"",
        "code=\"malformed-thread-id\"",
        "status=\"done\"><answer",
        "status=\"done\"/>",
        "status=\"idle\"><c:partial",
        "<code>loop-not-permitted</code>",
        "<code>budget-warning</code>",
        "<code>budget-exhausted</code>",
        "status=\"halted\" class=\"aborted\" reason=\"gave-up\"",
        "class=\"aborted\" certificate=\"none\"",
        "class=\"BACKPRESSURE\" certificate=\"BACKPRESSURE\"",
        "<sys:budget turns=\"2\" cost=\"0.50\"/><sys:initial-payload>",
    ];
    for fragment in expected {
        assert!(
            payloads.iter().any(|p| p.contains(fragment)),
            "no recorded system payload contains {fragment:?}; recorded:\n{}",
            payloads.join("\n")
        );
    }
}

/// DESIGN.md §2: only the pump emits system messages; a listener that emits one gets `<huh>`
/// (`src/system.rs`: `code="reserved-namespace"`, whatever prefix it used) — also when the
/// element is smuggled inside `thread-done`, which would otherwise come back out of the pump
/// inside `thread-result`, from `system`.
#[tokio::test]
async fn a_listener_cannot_smuggle_a_system_message_through_thread_done() {
    let scratch = Scratch::new("forged");
    let pump = pump();
    let payload = format!("<forge xmlns=\"{NS}\"/>");
    let thread = pump
        .post(None, None, &payload)
        .await
        .expect("post")
        .thread();
    tokio::time::timeout(Duration::from_secs(4), pump.settle(thread))
        .await
        .expect("the thread did not settle within 4 s");
    let (mut files, mut refused) = (Vec::new(), false);
    for info in pump.tree(thread) {
        for record in pump.history(info.id).await.expect("history") {
            if record.kind == RecordKind::System {
                refused |= record.payload.contains("code=\"reserved-namespace\"");
                let name = format!("{:04}-{}.xml", record.seq, record.root.local());
                files.push(scratch.write(&name, &record.payload));
            }
        }
    }
    assert_valid(
        "system.xsd",
        &files,
        "system messages after a forged thread-done",
    );
    assert!(
        refused,
        "the forger should get <huh code=\"reserved-namespace\">"
    );
}

/// Every process event the engine records validates against process.xsd: TELL (with a why and
/// a redacted why), SNAP (with a redacted symbol), MILESTONE, PAR, JOIN, RETURN, a failure, an
/// AG-W02 warning (the time policy on, PAR USEs without timeout_ms), and a `continue`.
#[tokio::test]
async fn every_process_event_the_engine_records_validates() {
    use agentpump::process::engine::{ProcessListener, Program};
    let text = concat!(
        "<triggers>\n<trigger event=\"{urn:test:schemas:v1}go\" target=\"main\" />\n</triggers>\n",
        "<processes>\n<process id=\"main\">\n",
        "  MILESTONE \"start\"\n",
        "  SET ITEMS := range(30)\n",
        "  SET TOTAL := 0\n",
        "  FOREACH i IN ITEMS:\n",
        "    SET TOTAL := TOTAL + i\n",
        "  SET SECRET := \"s3cret\"\n",
        "  SNAP [TOTAL, SECRET] redact=[SECRET]\n",
        "  TELL \"the secret is kept\" why:SECRET level=full outcome:\"ok\"\n",
        "  TELL \"the total\" why:TOTAL\n",
        "  PAR:\n",
        "    USE `child` where: n=1\n",
        "    USE `child` where: n=2\n",
        "  JOIN:\n",
        "    CAPTURE AA from `child` map: \"twice\"→AA\n",
        "    CAPTURE BB from `child` map: \"twice\"→BB\n",
        "  RETURN: total=TOTAL, parts=[AA, BB]\n",
        "</process>\n<process id=\"child\" args=\"n: Number\">\n",
        "  ASSERT n < 2\n",
        "  RETURN: twice=n * 2\n",
        "</process>\n</processes>\n",
    );
    let program = Program::parse(text).expect("the document checks");
    let mut builder = PumpBuilder::new();
    for id in program.process_ids() {
        let l = ProcessListener::new(std::sync::Arc::clone(&program), id).expect("process");
        let l = l.steps_per_turn(20).require_timeout(id == "main");
        builder = builder.register(l.registration());
    }
    let pump = builder.build().expect("pump");
    let thread = pump
        .post(None, None, &format!("<go xmlns=\"{NS}\"/>"))
        .await
        .expect("post")
        .thread();
    pump.settle(thread).await;
    let scratch = Scratch::new("process-events");
    let mut files = Vec::new();
    let mut locals = BTreeSet::new();
    for t in pump.threads() {
        for record in pump.history(t.id).await.expect("history") {
            if record.root.namespace() == agentpump::envelope::PROCESS_NS {
                let local = record.root.local().to_owned();
                files.push(
                    scratch.write(&format!("{:04}-{local}.xml", record.seq), &record.payload),
                );
                locals.insert(local);
            }
        }
    }
    assert_valid("process.xsd", &files, "process events the engine recorded");
    let expected = [
        "continue",
        "failed",
        "join",
        "milestone",
        "par",
        "return",
        "snap",
        "tell",
        "warning",
    ];
    assert_eq!(
        locals.iter().map(String::as_str).collect::<Vec<_>>(),
        expected
    );
}

// ---------------------------------------------------------------------------------------------
// Everything the demo writes
// ---------------------------------------------------------------------------------------------

/// A schema that imports every `schemas/*.xsd` by its target namespace, written to `scratch`:
/// a document valid against it has a root declared in the schema of its namespace, and every
/// element below a lax wildcard (a payload inside an envelope, a `thread-done`, a history
/// record) is checked against the schema of its own namespace. A namespace with no schema
/// fails ("No matching global declaration").
fn every_schema(scratch: &Scratch) -> PathBuf {
    let mut imports = String::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(schemas_dir())
        .expect("read schemas")
        .map(|e| e.expect("list schemas").path())
        .filter(|p| p.extension().is_some_and(|e| e == "xsd"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read an xsd");
        let namespace = text
            .split("targetNamespace=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("{} has no targetNamespace", file.display()));
        imports.push_str(&format!(
            "  <xs:import namespace=\"{namespace}\" schemaLocation=\"{}\"/>\n",
            file.display()
        ));
    }
    scratch.write(
        "every-schema.xsd",
        &format!(
            "<?xml version=\"1.0\"?>\n<xs:schema xmlns:xs=\"http://www.w3.org/2001/XMLSchema\">\n{imports}</xs:schema>\n"
        ),
    )
}

/// Issue 28: "`schemas/tool.xsd` does not declare the `timeout-ms` attribute the crate writes on
/// every `<call>`: 14 of the demo's 78 process and tool payloads are invalid against the shipped
/// schema"; done when "every payload the demo writes validates against `schemas/*.xsd`". Runs
/// `agentpump demo` and validates every recorded payload, by its namespace's schema, and every
/// thread's history export (each record as its envelope, the payload inside checked too).
#[tokio::test]
async fn every_payload_the_demo_writes_validates() {
    use agentpump::history::{HistoryStore as _, SqliteHistory};
    let scratch = Scratch::new("demo-payloads");
    let (ok, _, err) = support::agentpump_in(&scratch.0, &["demo"]);
    assert!(ok, "the demo fails: {err}");
    let db = scratch.0.join("agentpump-demo.db");
    let every = every_schema(&scratch);
    let every = every.to_str().expect("a UTF-8 path");
    // Every record of every thread, the pump's own thread included.
    let rows: Vec<(i64, String, String)> = {
        let sql = rusqlite::Connection::open(&db).expect("open the demo's database");
        let mut query = sql
            .prepare("SELECT seq, root, payload FROM records ORDER BY seq")
            .expect("query records");
        query
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .expect("read records")
            .collect::<Result<_, _>>()
            .expect("read a record")
    };
    let mut by_namespace: BTreeMap<String, usize> = BTreeMap::new();
    let mut payloads = Vec::new();
    for (seq, root, payload) in &rows {
        let namespace = root[1..root.find('}').expect("a Clark root")].to_owned();
        let short = namespace.rsplit(':').nth(1).unwrap_or("other").to_owned();
        let local = &root[root.find('}').unwrap() + 1..];
        payloads.push(scratch.write(&format!("{seq:04}-{short}-{local}.xml"), payload));
        *by_namespace.entry(namespace).or_default() += 1;
    }
    assert_valid(every, &payloads, "every payload the demo recorded");
    let store = SqliteHistory::open(&db).expect("open the demo's history");
    let mut exports = Vec::new();
    for thread in store.threads(None).await.expect("threads") {
        let records = store.thread(thread.id, 0).await.expect("records");
        let name = format!("export-{}.xml", thread.id);
        exports.push(scratch.write(&name, &agentpump::history::export::to_xml(&records)));
    }
    assert_valid(every, &exports, "the demo's history exports");
    let namespaces: Vec<&str> = by_namespace.keys().map(String::as_str).collect();
    assert_eq!(
        namespaces,
        [
            "urn:agentpump:calc:v1",
            "urn:agentpump:demo:v1",
            "urn:agentpump:governor:v1",
            "urn:agentpump:inbox:v1",
            "urn:agentpump:loop:v1",
            "urn:agentpump:process:v1",
            "urn:agentpump:system:v1",
            "urn:agentpump:tool:v1",
        ],
        "the demo writes in these namespaces; a new one needs its schema"
    );
    let calls = rows
        .iter()
        .filter(|(_, root, payload)| {
            root == "{urn:agentpump:tool:v1}call" && payload.contains("timeout-ms=")
        })
        .count();
    assert!(calls > 0, "the demo's processes make calls with timeout-ms");
}
