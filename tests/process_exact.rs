//! Seed 001 read statement by statement (issue 38): each test quotes the 03/05/06/07 line it
//! checks, and each failed on the code before the issue's fixes (the last group tests what
//! was true but untested).

mod support;

use std::collections::BTreeSet;

use agentpump::envelope::PROCESS_NS;
use agentpump::history::Record;
use agentpump::process::engine::Program;
use agentpump::process::{Code, check_source};
use agentpump::value::Value;
use support::process::{CallLog, Setup, counts, doc, failure, fields, go, num, settle_tree};

/// Runs `text` (tools `echo`, `fail`, `flaky`) started by `<go>`: every record of the thread
/// tree, root first, and the call log.
async fn tree(text: &str) -> (Vec<Record>, Vec<Record>, CallLog) {
    let log = CallLog::default();
    let pump = Setup::new(text, &log).build();
    let root = pump.post(None, None, &go("")).await.unwrap().thread();
    let records = settle_tree(&pump, root).await;
    let mut all = Vec::new();
    for t in pump.tree(root) {
        pump.settle(t.id).await;
        all.extend(pump.history(t.id).await.unwrap());
    }
    (records, all, log)
}

/// The single process `main` of `body`, run: its thread's records and the call log.
async fn main(body: &str) -> (Vec<Record>, CallLog) {
    let (records, _, log) = tree(&doc("", body)).await;
    (records, log)
}

/// The codes `process check` finds in `text`, with their lines.
fn codes(text: &str) -> Vec<(Code, u32)> {
    check_source(text)
        .diagnostics
        .iter()
        .filter(|d| d.severity() == agentpump::process::Severity::Error)
        .map(|d| (d.code, d.span.line))
        .collect()
}

/// The `tools` attribute of each `par` event.
fn par_events(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.root.is(PROCESS_NS, "par"))
        .map(|r| {
            let (_, rest) = r.payload.split_once("tools=\"").unwrap();
            rest.split('"').next().unwrap().to_owned()
        })
        .collect()
}

/// 03: "`CAPTURE` order MUST follow the **lexical order** of the corresponding `USE`
/// statements" — a PAR abandoned by an error inside TRY is not what a later JOIN takes.
#[tokio::test]
async fn a_par_abandoned_by_an_error_in_try_is_not_joined_later() {
    let body = concat!(
        "  TRY:\n",
        "    PAR:\n",
        "      USE `echo` where: v=2\n",
        "    ASSERT 1 = 2\n",
        "    JOIN:\n",
        "      CAPTURE AA from `echo` map: \"v\"→AA\n",
        "  RECOVER (err):\n",
        "    TELL \"abandoned\"\n",
        "  PAR:\n",
        "    USE `echo` where: v=4\n",
        "  JOIN:\n",
        "    CAPTURE BB from `echo` map: \"v\"→BB\n",
        "  RETURN: BB\n",
    );
    let (records, _) = main(body).await;
    assert_eq!(fields(&records)["BB"], num("4"));
    // The second PAR's event names its own USE only.
    assert_eq!(par_events(&records), ["echo", "echo"]);
}

/// 03: "`CAPTURE` order MUST follow the **lexical order**" — a PAR inside FOREACH joined
/// after the loop would join every pass's children at once: `process check` refuses it, and
/// a JOIN outside its PAR's block.
#[test]
fn a_par_joined_outside_its_block_is_refused_by_check() {
    let after_loop = doc(
        "",
        "  SET NN := [1, 2]\n  FOREACH n IN NN:\n    PAR:\n      USE `echo` where: v=n\n  JOIN:\n    CAPTURE AA from `echo` map: \"v\"→AA\n  RETURN: AA\n",
    );
    let found = codes(&after_loop);
    assert!(found.contains(&(Code::ConcurrencyPolicy, 8)), "{found:?}");
    let after_if = doc(
        "",
        "  IF 1 = 1:\n    PAR:\n      USE `echo` where: v=1\n  JOIN:\n    CAPTURE AA from `echo`\n  RETURN: AA\n",
    );
    let found = codes(&after_if);
    assert!(found.contains(&(Code::ConcurrencyPolicy, 7)), "{found:?}");
    assert!(Program::parse(&after_loop).is_err());
    // Joined inside the loop: each pass's `par` event names that pass's USE only.
    let inside = "  SET NN := [1, 2, 3]\n  FOREACH n IN NN:\n    PAR:\n      USE `echo` where: v=n\n    JOIN:\n      CAPTURE AA from `echo` map: \"v\"→AA\n  RETURN: AA\n";
    assert!(codes(&doc("", inside)).is_empty());
}

/// 03: "`JOIN:` is the first legal point to `CAPTURE` results of prior PAR tools" — a
/// CAPTURE after the JOIN reads the tool's last answer in lexical order.
#[tokio::test]
async fn capture_after_join_reads_the_joined_answers() {
    let body = concat!(
        "  PAR:\n",
        "    USE `echo` where: ms=100, v=1\n",
        "    USE `echo` where: v=2\n",
        "  JOIN:\n",
        "    CAPTURE AA from `echo` map: \"v\"→AA\n",
        "  CAPTURE BB from `echo` map: \"v\"→BB\n",
        "  RETURN: AA, BB\n",
    );
    let (records, _) = main(body).await;
    let f = fields(&records);
    assert_eq!((&f["AA"], &f["BB"]), (&num("1"), &num("2")));
}

/// 03: "modifiers: [atomic, timeout_ms, retry]" and `USE … [(atomic[, timeout_ms=NUM][,
/// retry=NUM])]` — the same USE repeats as often inside PAR as outside.
#[tokio::test]
async fn retry_and_atomic_hold_inside_par_as_outside() {
    let outside = "  USE `flaky` where: fails=2, v=\"done\" (retry=2)\n  CAPTURE GOT from `flaky` map: \"v\"→GOT\n  RETURN: GOT\n";
    let inside = "  PAR:\n    USE `flaky` where: fails=2, v=\"done\" (retry=2)\n    USE `echo` where: v=1\n  JOIN:\n    CAPTURE GOT from `flaky` map: \"v\"→GOT\n  RETURN: GOT\n";
    for body in [outside, inside] {
        let (records, log) = main(body).await;
        assert_eq!(fields(&records)["GOT"], Value::from("done"), "{body}");
        let flaky = log.lock().unwrap().len() - usize::from(body.contains("echo"));
        assert_eq!(flaky, 3, "one call and two repeats: {body}");
    }
    // Atomic: repeated after `unavailable` only, inside PAR too.
    let atomic = concat!(
        "  TRY:\n",
        "    PAR:\n",
        "      USE `fail` where: type=\"timeout\" (atomic, retry=2)\n",
        "      USE `fail` where: type=\"unavailable\" (atomic, retry=2)\n",
        "    JOIN:\n",
        "      CAPTURE AA from `fail`\n",
        "  RECOVER (err):\n",
        "    SET KIND := err.type\n",
        "  RETURN: KIND\n",
    );
    let (records, log) = main(atomic).await;
    assert_eq!(fields(&records)["KIND"], Value::from("timeout"));
    let per_call = counts(&log);
    assert_eq!(per_call.len(), 1 + 3, "{per_call:?}");
}

/// The secret texts the tests hide.
const SECRETS: [&str; 2] = ["hunter22", "swordfish"];

/// Records (of any thread) that show a secret, other than the calls that carry it to the
/// tool or process that needs it (a child's call inside its `spawn-thread`) and a tool's own
/// answer: messages the engine does not write (docs/processes.md, Redaction).
fn leaks(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .filter(|r| !["call", "spawn-thread", "result"].contains(&r.root.local()))
        .filter(|r| SECRETS.iter().any(|s| r.payload.contains(s)))
        .map(|r| r.payload.to_string())
        .collect()
}

/// 06: "Secrets/PII MUST be redacted as `[REDACTED]`" and "If `TELL` uses `why:SYMBOL` and
/// `SYMBOL` is redacted, only the symbol name may appear" — through a FOREACH variable, a
/// WITH default, a tool that echoes it, and a RUN round trip (the child's events too).
#[tokio::test]
async fn a_secret_stays_redacted_through_loops_tools_and_runs() {
    let text = concat!(
        "<triggers>\n<trigger event=\"{urn:agentpump:demo:v1}go\" target=\"main\" />\n</triggers>\n",
        "<processes>\n<process id=\"main\">\n",
        "  SET KEYS := [\"hunter22\", \"swordfish\"]\n",
        "  IF 1 = 1:\n",
        "    SNAP [KEYS] redact=[KEYS]\n",
        "  FOREACH k IN KEYS:\n",
        "    SET KEY := k\n",
        "    TELL \"trying\" why:KEY\n",
        "  USE `echo` where: v=KEY\n",
        "  CAPTURE ECHO from `echo` map: \"v\"→ECHO\n",
        "  TELL \"echoed\" why:ECHO\n",
        "  WITH {\"p\": KEY}:\n",
        "    RUN `child`\n",
        "  TRY:\n",
        "    ASSERT KEY = 1\n",
        "  RECOVER (err):\n",
        "    TELL \"failed\" why:ECHO\n",
        "  RETURN: key=KEY, echo=ECHO, child=CHILD\n",
        "</process>\n<process id=\"child\" args=\"p: String\">\n",
        "  SET CHILD := p\n",
        "  TELL \"got\" why:CHILD\n",
        "  RETURN: CHILD\n",
        "</process>\n</processes>\n",
    );
    let (records, all, _) = tree(text).await;
    let f = fields(&records);
    for k in ["key", "echo", "child"] {
        assert_eq!(f[k], Value::from("[REDACTED]"), "{k}: {f:?}");
    }
    assert!(leaks(&all).is_empty(), "{:#?}", leaks(&all));
    let child_return = all
        .iter()
        .find(|r| r.root.is(PROCESS_NS, "return") && r.payload.contains("process=\"child\""))
        .expect("the child's return event");
    assert!(
        child_return.payload.contains("[REDACTED]"),
        "{child_return:?}"
    );
}

/// 06: "Secrets/PII MUST be redacted" — `process check` follows what the text shows: a
/// RETURN of a FOREACH variable over a redacted list, or of what a RUN given a redacted
/// symbol binds, is AG-032.
#[test]
fn check_flags_secrets_returned_through_a_loop_or_a_run() {
    let looped = doc(
        "",
        "  SET KEYS := [\"a\"]\n  SNAP [KEYS] redact=[KEYS]\n  FOREACH k IN KEYS:\n    RETURN: key=k\n",
    );
    assert!(
        codes(&looped).contains(&(Code::SensitiveInLog, 9)),
        "{:?}",
        codes(&looped)
    );
    let ran = concat!(
        "<processes>\n<process id=\"main\">\n",
        "  SET PW := \"a\"\n  SNAP [PW] redact=[PW]\n  RUN `child` where: p=PW\n  RETURN: CHILD\n",
        "</process>\n<process id=\"child\" args=\"p: String\">\n",
        "  SET CHILD := p\n  RETURN: CHILD\n</process>\n</processes>\n",
    );
    assert!(
        codes(ran).contains(&(Code::SensitiveInLog, 6)),
        "{:?}",
        codes(ran)
    );
}

/// 07 AG-001 "Symbol not defined in <constants> or <runtime>": a constant that refers to
/// itself or to a later one is refused by `process check` with the code the load gives.
#[test]
fn a_constant_referring_forward_or_to_itself_is_refused_by_check() {
    let text = "<constants>\nAA: BB\nBB: 1\nCC: [CC]\nDD: {\"x\": BB}\n</constants>\n<processes>\n<process id=\"main\">\n  RETURN: a=AA, c=CC, d=DD\n</process>\n</processes>\n";
    let found = codes(text);
    assert_eq!(
        found,
        [(Code::UndefinedSymbol, 2), (Code::UndefinedSymbol, 4)]
    );
    let at_load = Program::parse(text).unwrap_err().0;
    assert_eq!(at_load[0].code, Code::UndefinedSymbol);
}

/// 03: "Engines SHOULD expose the current index via a deterministic mechanism (e.g.,
/// `_INDEX` symbol)" — the engine's, so `SET _INDEX` is refused, and `_INDEX` outside a loop.
#[test]
fn index_is_read_only_and_only_inside_a_loop() {
    let set = doc("", "  SET _INDEX := 5\n  SET WW := _INDEX\n  RETURN: WW\n");
    let found = codes(&set);
    assert!(found.contains(&(Code::ReservedTokenMisuse, 6)), "{found:?}");
    assert!(found.contains(&(Code::UndefinedSymbol, 7)), "{found:?}");
    let inp = doc("", "  SET INP := 5\n  RETURN: x=1\n");
    assert!(codes(&inp).contains(&(Code::ReservedTokenMisuse, 6)));
}

/// 03: "numbers: grammar: JSON_number, thousands: forbidden".
#[tokio::test]
async fn numbers_are_json_numbers() {
    let text = "<constants>\nSMALL: 1.5e-2\n</constants>\n<triggers>\n<trigger event=\"{urn:agentpump:demo:v1}go\" target=\"main\" />\n</triggers>\n<processes>\n<process id=\"main\">\n  SET BIG := 1e3\n  SET NEG := -2.5E+1\n  RETURN: big=BIG, small=SMALL, neg=NEG\n</process>\n</processes>\n";
    assert!(codes(text).is_empty(), "{:?}", codes(text));
    let (records, _, _) = tree(text).await;
    let f = fields(&records);
    assert_eq!(
        (&f["big"], &f["small"], &f["neg"]),
        (&num("1000"), &num("0.015"), &num("-25"))
    );
    let refused = [
        ("  SET AA := 007\n  RETURN: AA\n", Code::BadJson),
        ("  SET AA := [1,000]\n  RETURN: AA\n", Code::BadJson),
        ("  SET AA := 1,000\n  RETURN: AA\n", Code::Syntax),
        ("  SET AA := 1 000\n  RETURN: AA\n", Code::Syntax),
    ];
    for (body, code) in refused {
        let found = codes(&doc("", body));
        assert!(found.contains(&(code, 6)), "{body}: {found:?}");
    }
}

/// 03: "choice_sets: {V1|V2|...} … engine turns into enum() at compile time", "enum(V1,V2,...)"
/// of UpperSyms, and "Reserved words cannot be used as IDs/keys/symbols (`AG-002`)".
#[tokio::test]
async fn choice_sets_are_enums_of_symbols_and_keys_are_not_reserved() {
    let body = "  SET COLORS := {RED|GREEN}\n  SET SAME := enum(RED, GREEN)\n  RETURN: colors=COLORS, same=COLORS = SAME, red=\"RED\" IN COLORS\n";
    assert!(codes(&doc("", body)).is_empty());
    let (records, _) = main(body).await;
    let f = fields(&records);
    assert_eq!(f["colors"].to_json(), r#"["RED","GREEN"]"#);
    assert_eq!(
        (&f["same"], &f["red"]),
        (&Value::Bool(true), &Value::Bool(true))
    );
    let refused = [
        (
            "  SET AA := enum(red, GREEN)\n  RETURN: AA\n",
            Code::InvalidId,
        ),
        (
            "  SET AA := enum(IF, GREEN)\n  RETURN: AA\n",
            Code::ReservedTokenMisuse,
        ),
        ("  SET AA := {RED|A}\n  RETURN: AA\n", Code::InvalidId),
        (
            "  SET AA := {\"if\": 1}\n  RETURN: AA\n",
            Code::ReservedTokenMisuse,
        ),
        (
            "  SET AA := [{\"set\": 1}]\n  RETURN: AA\n",
            Code::ReservedTokenMisuse,
        ),
    ];
    for (body, code) in refused {
        let found = codes(&doc("", body));
        assert!(found.contains(&(code, 6)), "{body}: {found:?}");
    }
}

/// 05 allows empty WITH/JOIN/FOREACH/TRY/RECOVER bodies; agentpump refuses them (listed in
/// docs/processes.md "Differences from 05"): each names the empty block.
#[test]
fn empty_bodies_are_refused_with_their_block_named() {
    let cases = [
        ("  WITH {\"a\": 1}:\n  RETURN: x=1\n", Code::WithScopeError),
        (
            "  SET NN := [1]\n  FOREACH n IN NN:\n  RETURN: x=1\n",
            Code::Syntax,
        ),
        (
            "  TRY:\n  RECOVER (err):\n    TELL \"x\"\n  RETURN: x=1\n",
            Code::Syntax,
        ),
        (
            "  TRY:\n    TELL \"x\"\n  RECOVER (err):\n  RETURN: x=1\n",
            Code::Syntax,
        ),
        (
            "  PAR:\n    USE `echo`\n  JOIN:\n  RETURN: x=1\n",
            Code::ConcurrencyPolicy,
        ),
    ];
    for (body, code) in cases {
        let d = check_source(&doc("", body)).diagnostics;
        assert!(
            d.iter()
                .any(|d| d.code == code && d.message == "empty block"),
            "{body}: {d:?}"
        );
    }
}

/// 07: "Engines MUST treat all `errors.hard` codes as fatal for the current compile/run",
/// beside 03's "TRY: … statements execute until completion or first hard error": RECOVER
/// catches what the world does (a tool's or a child's failure, an ASSERT that does not hold);
/// a code of 07 ends the run.
#[tokio::test]
async fn recover_does_not_catch_a_code_of_07() {
    let fatal = [
        (
            "  TRY:\n    SET AA := 1 / 0\n  RECOVER (err):\n    SET AA := 0\n  RETURN: AA\n",
            "AG-029",
        ),
        (
            "  TRY:\n    USE `echo` where: v=1\n    CAPTURE AA from `echo` map: \"nope\"→AA\n  RECOVER (err):\n    SET AA := 0\n  RETURN: AA\n",
            "AG-028",
        ),
    ];
    for (body, code) in fatal {
        let (records, _) = main(body).await;
        let e = failure(&records);
        assert!(e.message.starts_with(code), "{code}: {e:?}");
    }
    let caught = concat!(
        "<triggers>\n<trigger event=\"{urn:agentpump:demo:v1}go\" target=\"main\" />\n</triggers>\n",
        "<processes>\n<process id=\"main\">\n",
        "  TRY:\n    RUN `child`\n  RECOVER (err):\n    SET KIND := err.type\n",
        "  TRY:\n    ASSERT 1 = 2\n  RECOVER (err):\n    SET ASSERTED := err.type\n",
        "  RETURN: KIND, ASSERTED\n",
        "</process>\n<process id=\"child\">\n  SET AA := 1 / 0\n  RETURN: AA\n</process>\n</processes>\n",
    );
    let (records, _, _) = tree(caught).await;
    let f = fields(&records);
    assert_eq!(
        (&f["KIND"], &f["ASSERTED"]),
        (&Value::from("failed"), &Value::from("assert-failed"))
    );
}

/// 03: story statements "are not allowed to change program state": the same process with
/// and without TELL, SNAP and MILESTONE calls the same tools and returns the same.
#[tokio::test]
async fn story_statements_never_change_state() {
    let plain = "  SET AA := 1\n  USE `echo` where: v=AA\n  CAPTURE BB from `echo` map: \"v\"→BB\n  SET CC := BB + 1\n  RETURN: AA, BB, CC\n";
    let told = "  SET AA := 1\n  TELL \"a\" why:AA level=full outcome:\"o\"\n  MILESTONE \"m\"\n  SNAP [AA] delta=true\n  USE `echo` where: v=AA\n  SNAP [AA] delta=true\n  CAPTURE BB from `echo` map: \"v\"→BB\n  SNAP []\n  SET CC := BB + 1\n  TELL \"c\" why:CC\n  RETURN: AA, BB, CC\n";
    let (a, log_a) = main(plain).await;
    let (b, log_b) = main(told).await;
    assert_eq!(fields(&a), fields(&b));
    assert_eq!(*log_a.lock().unwrap(), *log_b.lock().unwrap());
}

/// 03: "Engines … MUST NOT perform speculative execution": a call leaves only when its
/// statement runs — after the answer it depends on, never in a branch not taken.
#[tokio::test]
async fn no_call_is_made_before_its_statement_runs() {
    let body = concat!(
        "  USE `echo` where: ms=100, v=1\n",
        "  CAPTURE AA from `echo` map: \"v\"→AA\n",
        "  IF AA = 2:\n",
        "    USE `echo` where: v=99\n",
        "  USE `echo` where: v=AA + 1\n",
        "  CAPTURE BB from `echo` map: \"v\"→BB\n",
        "  RETURN: BB\n",
    );
    let (records, log) = main(body).await;
    assert_eq!(fields(&records)["BB"], num("2"));
    assert_eq!(*log.lock().unwrap(), ["main-1", "main-2"]);
    // The second call is recorded after the first answer.
    let seq = |pred: &dyn Fn(&Record) -> bool| records.iter().position(pred).unwrap();
    let first_answer = seq(&|r| r.root.local() == "result");
    let second_call = seq(&|r| r.root.local() == "call" && r.payload.contains("main-2"));
    assert!(first_answer < second_call);
}

/// 03 safety_policy: "log_thresholds: true" — the thresholds the decision used are in the
/// log: the `return` event of listeners/processes/safety.aps records THR and HARM_THR.
#[tokio::test]
async fn the_safety_policy_logs_its_thresholds() {
    let text = std::fs::read_to_string("listeners/processes/safety.aps").unwrap();
    let log = CallLog::default();
    let pump = Setup::new(&text, &log).build();
    let call = agentpump::tool::Call::new("safety")
        .id("s")
        .arg("ts", num("0.95"))
        .arg("hsc", num("0.1"))
        .arg(
            "sty_json",
            Value::from_json(r#"{"policy_violation": false}"#).unwrap(),
        )
        .arg("npr", "");
    let thread = pump
        .post(None, Some("safety"), &call.to_xml())
        .await
        .unwrap()
        .thread();
    pump.settle(thread).await;
    let records = pump.history(thread).await.unwrap();
    let event = records
        .iter()
        .find(|r| r.root.is(PROCESS_NS, "return"))
        .expect("a return event");
    let logged: BTreeSet<&str> = ["thr", "harm_thr"]
        .into_iter()
        .filter(|k| event.payload.contains(&format!("name=\"{k}\"")))
        .collect();
    assert_eq!(logged.len(), 2, "{}", event.payload);
    assert!(
        event.payload.contains(">0.9<") && event.payload.contains(">0.4<"),
        "{}",
        event.payload
    );
}
