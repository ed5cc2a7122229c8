//! The XSDs in `schemas/`, checked with a real validator (`xmllint` from libxml2-utils): every
//! example validates, invalid documents are rejected, the code enumerations are exactly the
//! source's wire strings, and every system message the pump really emits validates — alone
//! against `system.xsd` and inside the envelope its own writer produces against `envelope.xsd`.

use std::collections::{BTreeMap, BTreeSet};
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use agentpump::history::RecordKind;
use agentpump::system::{ErrorCode, HuhCode, SYSTEM_NS, Spawn, ThreadErrorCode, ThreadStatus};
use agentpump::{
    Context, Delivery, Dialect, Envelope, Limits, Listener, ListenerError, Payload, PumpBuilder,
    PumpHandle, QName, Registration, ThreadId,
};

/// Namespace of the test listeners' payloads.
const NS: &str = "urn:test:schemas:v1";

/// Every element the pump emits in the system namespace.
const NOTICES: [&str; 8] = [
    "huh",
    "system-error",
    "thread-spawned",
    "system-thread-error",
    "context-cleared",
    "thread-result",
    "boot",
    "shutdown",
];

/// Every request a listener may emit in the system namespace.
const REQUESTS: [&str; 3] = ["spawn-thread", "clear-context", "thread-done"];

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

/// A scratch folder under the system temp dir, unique to one test of one run. Removed when the
/// test passes, kept for inspection when it fails.
struct Scratch(PathBuf);

impl Scratch {
    fn new(test: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("agentpump-schemas-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch folder");
        Self(dir)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write scratch file");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("scratch files kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The examples
// ---------------------------------------------------------------------------------------------

/// The example files, split by the schema they are checked against.
fn examples() -> BTreeMap<&'static str, Vec<PathBuf>> {
    let dir = schemas_dir().join("examples");
    let mut by_schema: BTreeMap<&'static str, Vec<PathBuf>> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("read schemas/examples") {
        let path = entry.expect("list schemas/examples").path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !name.ends_with(".xml") {
            continue;
        }
        let schema = if name.starts_with("envelope-") {
            "envelope.xsd"
        } else {
            "system.xsd"
        };
        by_schema.entry(schema).or_default().push(path);
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
        by_schema.contains_key("envelope.xsd") && by_schema.contains_key("system.xsd"),
        "schemas/examples needs envelope-*.xml and system examples, found {by_schema:?}"
    );
    for (schema, files) in &by_schema {
        assert_valid(schema, files, "schemas/examples");
    }
}

#[test]
fn every_element_has_an_example_listed_in_the_readme() {
    let dir = schemas_dir().join("examples");
    for element in NOTICES.iter().chain(&REQUESTS) {
        let file = dir.join(format!("{element}.xml"));
        assert!(
            file.is_file(),
            "no example for <{element}>: {}",
            file.display()
        );
    }
    let readme = std::fs::read_to_string(schemas_dir().join("README.md")).expect("README.md");
    for files in examples().values() {
        for file in files {
            let name = file.file_name().unwrap().to_string_lossy();
            assert!(
                readme.contains(&format!("`examples/{name}`")),
                "schemas/README.md does not list examples/{name}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Invalid documents
// ---------------------------------------------------------------------------------------------

const UUID_A: &str = "a59cdcd8-a140-46d9-b03a-e7579822c264";

/// `(name, schema, document, what xmllint must complain about)`.
fn invalid_documents() -> Vec<(&'static str, &'static str, String, &'static str)> {
    let sys = format!("xmlns=\"{SYSTEM_NS}\"");
    let env = "xmlns=\"urn:agentpump:envelope:v1\"";
    let system = "system.xsd";
    let envelope = "envelope.xsd";
    vec![
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
            "Missing child element(s). Expected is ( {urn:agentpump:system:v1}initial-payload )",
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
            "halt-is-not-declared-yet",
            system,
            format!("<halt {sys}/>"),
            "No matching global declaration available for the validation root",
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
    ]
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
// The code enumerations
// ---------------------------------------------------------------------------------------------

/// The `value`s of the enumeration `<xs:simpleType name="{name}">` in `xsd`.
fn enumeration(xsd: &str, name: &str) -> BTreeSet<String> {
    let start = xsd
        .find(&format!("<xs:simpleType name=\"{name}\">"))
        .unwrap_or_else(|| panic!("system.xsd has no simpleType {name}"));
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

/// Every code enumeration of the source: (simpleType name in system.xsd, wire strings).
fn source_codes() -> Vec<(&'static str, BTreeSet<String>)> {
    vec![
        (
            "HuhCode",
            wire_codes!(HuhCode: MalformedXml, LimitExceeded, ForbiddenDtd, UnknownEntity,
            UnknownPrefix, UnknownRoot, ReservedNamespace, InvalidRequest, InvalidPayload,
            NoPayload),
        ),
        (
            "ErrorCode",
            wire_codes!(ErrorCode: PeerNotAllowed, NoRoute, QueueFull, HandlerFailed,
            HandlerPanicked, HandlerTimeout, ThreadClosed, ShuttingDown, HistoryUnavailable,
            LoopNotPermitted, BudgetWarning, BudgetExhausted),
        ),
        (
            "ThreadErrorCode",
            wire_codes!(ThreadErrorCode: UnknownThread, MalformedThreadId),
        ),
        (
            "ThreadStatus",
            wire_codes!(ThreadStatus: Done, Idle, Halted),
        ),
    ]
}

#[test]
fn code_enumerations_are_exactly_the_wire_codes_of_the_source() {
    let xsd = std::fs::read_to_string(schemas_dir().join("system.xsd")).expect("system.xsd");
    for (name, codes) in source_codes() {
        assert_eq!(
            enumeration(&xsd, name),
            codes,
            "system.xsd simpleType {name}"
        );
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
            // `loner` accepts <task> but is not a peer: system-error peer-not-allowed.
            "rude" => cx.send("loner", format!("<task xmlns=\"{NS}\"/>")),
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

fn pump() -> PumpHandle {
    let root = |local: &str| QName::new(NS, local);
    let probe = ["garble", "rude", "fail", "forget", "branch", "forge"]
        .into_iter()
        .fold(Registration::new("probe", Probe), |r, l| r.accepts(root(l)))
        .peers(["worker"]);
    PumpBuilder::new()
        .register(probe)
        .register(Registration::new("worker", Probe).accepts(root("work")))
        .register(Registration::new("loner", Probe).accepts(root("task")))
        .build()
        .expect("build the pump")
}

/// Drives the pump through every case that emits a system message; returns the envelopes the
/// pump wrote back to refused outside senders (`IngressError::to_xml`).
async fn drive(pump: &PumpHandle) -> Vec<String> {
    let mut answers = Vec::new();
    let mut threads = Vec::new();
    for local in ["garble", "rude", "fail", "forget", "branch"] {
        let payload = format!("<{local} xmlns=\"{NS}\"/>");
        let receipt = pump.post(None, None, &payload).await.expect("post");
        threads.push(receipt.thread());
    }
    for thread in &threads {
        pump.settle(*thread).await;
    }
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

/// One system-namespace payload the pump recorded.
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
    /// Every record as an envelope, one file each.
    envelopes: Vec<PathBuf>,
    /// What the payload files hold.
    seen: Vec<Seen>,
    /// Envelopes written with the `env:` prefix / with a default namespace.
    prefixed: usize,
    unprefixed: usize,
}

/// Writes every record of every thread: its payload when it is in the system namespace, and the
/// whole record as the envelope the pump's own writer makes of it (with a fresh meta id).
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
async fn every_system_message_the_pump_emits_validates() {
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
        "envelope.xsd",
        &written.envelopes,
        "records and answers as envelopes",
    );
    assert!(
        written.prefixed > 0 && written.unprefixed > 0,
        "both envelope forms must be exercised: {written:?}"
    );
    assert_coverage(&written.seen);
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
