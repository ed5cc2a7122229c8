//! The process engine on the pump (issue 15, seed 001): each construct of the 05 grammar run
//! by a real pump, tools called over the tool protocol, crash recovery without re-invocation,
//! budgets. Each test quotes the line of `seeds/aps-references/` it checks.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentpump::history::{Record, RecordKind};
use agentpump::process::engine::{ProcessListener, Program};
use agentpump::tool::{Answer, Call, ErrorType, TOOL_NS};
use agentpump::value::Value;
use agentpump::{
    Context, Delivery, Listener, ListenerError, PumpBuilder, PumpHandle, QName, Registration, Role,
    ThreadId,
};

/// A tool for the tests: `calc` evaluates `expression` exactly; `echo` answers its args as
/// fields; `fail` answers an error of the type in `type`. Counts its calls.
#[derive(Default, Clone)]
struct TestTool {
    calls: Arc<AtomicUsize>,
}

#[agentpump::async_trait]
impl Listener for TestTool {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        let call = Call::parse(msg.payload()).map_err(|e| ListenerError::failed(e.to_string()))?;
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(Value::Num(ms)) = call.args.get("ms") {
            let ms = u64::try_from(ms.mantissa()).unwrap_or(0);
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        let answer = match call.tool.as_str() {
            "calculator" => {
                let expr = call
                    .args
                    .get("expression")
                    .map(ToString::to_string)
                    .unwrap_or_default();
                match agentpump::listeners::calculator::evaluate(&expr) {
                    Ok(v) => call.result().field("value", Value::Num(v)).to_xml(),
                    Err(e) => call
                        .error(ErrorType::InvalidArgument, e.to_string())
                        .to_xml(),
                }
            }
            "oracle" => {
                let q = call
                    .args
                    .get("question")
                    .map(ToString::to_string)
                    .unwrap_or_default();
                let v = agentpump::listeners::calculator::evaluate(&q).unwrap_or_default();
                call.result().field("value", Value::Num(v)).to_xml()
            }
            _ => support::process::echo_or_fail(&call),
        };
        cx.reply(answer);
        Ok(())
    }
}

fn tool_of(name: &str, t: TestTool) -> Registration {
    Registration::new(name, t)
        .role(Role::Tool)
        .accepts(QName::new(TOOL_NS, "call"))
}

const DEMO: &str = "urn:agentpump:demo:v1";

/// A pump with every process of `text` and the test tools `calculator`, `echo`, `fail`.
fn pump_with(text: &str, calls: &Arc<AtomicUsize>) -> PumpHandle {
    let t = TestTool {
        calls: Arc::clone(calls),
    };
    builder(text, &t, 10_000).build().unwrap()
}

fn builder(text: &str, t: &TestTool, steps: u64) -> PumpBuilder {
    let program = Program::parse(text).unwrap_or_else(|e| panic!("{:#?}", e.0));
    let mut b = PumpBuilder::new();
    for id in program.process_ids() {
        let l = ProcessListener::new(Arc::clone(&program), id).unwrap();
        b = b.register(l.steps_per_turn(steps).registration());
    }
    for name in ["calculator", "echo", "fail"] {
        b = b.register(tool_of(name, t.clone()));
    }
    b
}

/// The single process of `body` wrapped in a document, started by `<go>` in the demo namespace.
fn doc(args: &str, body: &str) -> String {
    format!(
        "<triggers>\n<trigger event=\"{{{DEMO}}}go\" target=\"main\" />\n</triggers>\n<processes>\n<process id=\"main\"{args}>\n{body}</process>\n</processes>\n"
    )
}

async fn run(pump: &PumpHandle, start: &str) -> (ThreadId, Vec<Record>) {
    let thread = pump.post(None, None, start).await.unwrap().thread();
    pump.settle(thread).await;
    (thread, pump.history(thread).await.unwrap())
}

/// The RETURN the starter got (the tool result egressed to the client).
fn returned(records: &[Record]) -> Answer {
    let r = records
        .iter()
        .rev()
        .find(|r| r.kind == RecordKind::Egress)
        .unwrap_or_else(|| panic!("no answer to the client in {:#?}", roots(records)));
    let payload = agentpump::Payload::parse(&r.payload, &Default::default()).unwrap();
    Answer::parse(&payload).unwrap().unwrap()
}

fn fields(records: &[Record]) -> std::collections::BTreeMap<String, Value> {
    match returned(records) {
        Answer::Result(r) => r.fields,
        Answer::Error(e) => panic!("the process failed: {e:?}"),
    }
}

fn roots(records: &[Record]) -> Vec<String> {
    records
        .iter()
        .map(|r| format!("{} {}→{:?}: {}", r.kind, r.from, r.to, r.payload))
        .collect()
}

fn num(s: &str) -> Value {
    Value::Num(s.parse().unwrap())
}

#[tokio::test]
async fn newton_runs_on_the_pump_with_the_calculator_tool() {
    let calls = Arc::new(AtomicUsize::new(0));
    let text = std::fs::read_to_string("listeners/processes/newton.aps").unwrap();
    let pump = pump_with(&text, &calls);
    let (_, records) = run(&pump, &format!(r#"<sqrt xmlns="{DEMO}" target="2"/>"#)).await;
    let f = fields(&records);
    let root = match &f["root"] {
        Value::Num(n) => *n,
        other => panic!("{other:?}"),
    };
    assert!((root * root - rust_decimal::Decimal::TWO).abs() < "0.0000000001".parse().unwrap());
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2 * usize::try_from(match &f["steps"] {
            Value::Num(n) => n.mantissa(),
            _ => 0,
        })
        .unwrap()
    );
    let tells = records.iter().filter(|r| r.root.local() == "tell").count();
    assert!(tells >= 4, "{:#?}", roots(&records));
}

fn go(body: &str) -> String {
    format!(r#"<go xmlns="{DEMO}">{body}</go>"#)
}

#[tokio::test]
async fn join_captures_in_lexical_order_whatever_finishes_first() {
    // 03: "`CAPTURE` order MUST follow the **lexical order** of the corresponding `USE`
    // statements, regardless of completion time."
    let calls = Arc::new(AtomicUsize::new(0));
    let body = "  PAR:\n    USE `echo` where: ms=300, v=\"first\"\n    USE `echo` where: ms=150, v=\"second\"\n    USE `echo` where: ms=0, v=\"third\"\n  JOIN:\n    CAPTURE AA from `echo` map: \"v\"→AA\n    CAPTURE BB from `echo` map: \"v\"→BB\n    CAPTURE CC from `echo` map: \"v\"→CC\n  RETURN: AA, BB, CC\n";
    let pump = pump_with(&doc("", body), &calls);
    let (thread, records) = run(&pump, &go("")).await;
    let f = fields(&records);
    assert_eq!(
        (&f["AA"], &f["BB"], &f["CC"]),
        (
            &Value::from("first"),
            &Value::from("second"),
            &Value::from("third")
        )
    );
    // 03: "`PAR:` launches one-or-more `USE` statements concurrently in **lexical order**" —
    // each in its own child thread, visible in the thread tree; they finished in reverse.
    let results: Vec<&str> = records
        .iter()
        .filter(|r| r.root.local() == "thread-result")
        .map(|r| {
            if r.payload.contains("third") {
                "third"
            } else if r.payload.contains("second") {
                "second"
            } else {
                "first"
            }
        })
        .collect();
    assert_eq!(
        results,
        ["third", "second", "first"],
        "completion order is reversed"
    );
    let children = pump
        .threads()
        .iter()
        .filter(|t| t.parent == Some(thread))
        .count();
    assert_eq!(children, 3);
}

#[tokio::test]
async fn a_hard_failure_in_par_is_one_composite_error_at_join() {
    // 03: "If any child fails hard, `JOIN` raises a composite error including the first hard
    // error and aggregates others as `suppressed`."
    let calls = Arc::new(AtomicUsize::new(0));
    let body = "  TRY:\n    PAR:\n      USE `echo` where: v=1\n      USE `fail` where: type=\"not-allowed\"\n      USE `fail` where: ms=50, type=\"timeout\"\n    JOIN:\n      CAPTURE AA from `echo` map: \"v\"→AA\n  RECOVER (err):\n    SET KIND := err.type\n    SET TOOL := err.tool\n    SET MORE := err.suppressed\n  RETURN: KIND, TOOL, MORE\n";
    let pump = pump_with(&doc("", body), &calls);
    let (_, records) = run(&pump, &go("")).await;
    let f = fields(&records);
    assert_eq!(
        f["KIND"],
        Value::from("not-allowed"),
        "the first in lexical order"
    );
    assert_eq!(f["TOOL"], Value::from("fail"));
    match &f["MORE"] {
        Value::List(more) => {
            assert_eq!(more.len(), 1);
            assert!(more[0].to_string().contains("timeout"), "{more:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn local_statements_follow_the_03_semantics() {
    let calls = Arc::new(AtomicUsize::new(0));
    let body = concat!(
        "  GIVEN n > 0:\n",
        "    MILESTONE \"start\"\n",
        "  SET ITEMS := [\"a\", \"b\", \"c\"]\n",
        "  SET SEEN := []\n",
        "  FOREACH item IN ITEMS:\n",
        "    SET SEEN := append(SEEN, concat(_INDEX, item))\n",
        "  SET EMPTY := []\n",
        "  SET RAN := false\n",
        "  FOREACH x IN EMPTY:\n",
        "    SET RAN := true\n",
        "  IF n > 10:\n",
        "    SET SIZE := \"big\"\n",
        "  ELSE IF n > 2:\n",
        "    SET SIZE := \"middle\"\n",
        "  ELSE:\n",
        "    SET SIZE := \"small\"\n",
        "  WITH {\"unit\": \"m\"}:\n",
        "    WITH {\"unit\": \"km\"}:\n",
        "      USE `echo` where: v=1\n",
        "      CAPTURE INNER from `echo` map: \"unit\"→INNER\n",
        "    USE `echo` where: v=2\n",
        "    CAPTURE OUTER from `echo` map: \"unit\"→OUTER\n",
        "  SET AFTER := \"none\"\n",
        "  USE `echo` where: v=3\n",
        "  CAPTURE AFTER from `echo` map: \"unit?\"→AFTER\n",
        "  SET TEMP := 1\n",
        "  UNSET TEMP\n",
        "  SNAP []\n",
        "  WHEN n > 100:\n",
        "    SET SIZE := \"never\"\n",
        "  TRY:\n",
        "    TRY:\n",
        "      ASSERT n > 100\n",
        "    RECOVER (inner):\n",
        "      SET CAUGHT := concat(\"inner:\", inner.type)\n",
        "  RECOVER (outer):\n",
        "    SET CAUGHT := \"outer\"\n",
        "  ASSERT ALL: [len(SEEN) = 3, RAN = false]\n",
        "  SET PASSWORD := \"hunter22\"\n",
        "  SNAP [SIZE, PASSWORD] redact=[PASSWORD]\n",
        "  TELL \"done\" why:PASSWORD level=full\n",
        "  THEN SIZE = \"middle\":\n",
        "    MILESTONE \"end\"\n",
        "  RETURN: seen=SEEN, size=SIZE, inner=INNER, outer=OUTER, after=AFTER, caught=CAUGHT\n",
    );
    let pump = pump_with(&doc(" args=\"n: Number\"", body), &calls);
    let (_, records) = run(&pump, &go("<n>5</n>")).await;
    let f = fields(&records);
    // 03: "`FOREACH item IN ITEMS:` iterates over each element in the `ITEMS` array in
    // **index order**" and "If `ITEMS` is empty, the loop body is skipped entirely."
    assert_eq!(f["seen"].to_json(), r#"["0a","1b","2c"]"#);
    assert_eq!(f["size"], Value::from("middle"));
    // 03: "Nested `WITH` blocks shadow outer defaults; scope does not leak across the closing
    // boundary."
    assert_eq!(
        (&f["inner"], &f["outer"]),
        (&Value::from("km"), &Value::from("m"))
    );
    assert_eq!(
        f["after"],
        Value::from("none"),
        "no unit outside WITH: the optional path left it unchanged"
    );
    // 03: "Nested `TRY` blocks are permitted; inner handlers take precedence."
    assert_eq!(f["caught"], Value::from("inner:assert-failed"));
    // 06: "For `SNAP` with `redact=[SYMS]`, engines MUST zeroize the listed symbols" and "If
    // `TELL` uses `why:SYMBOL` and `SYMBOL` is redacted, only the symbol name may appear".
    // 03: "UNSET SYMBOL" — a SNAP of every bound symbol right after it does not hold it.
    let all = records.iter().find(|r| r.root.local() == "snap").unwrap();
    assert!(
        all.payload.contains(r#"name="ITEMS""#) && !all.payload.contains("TEMP"),
        "{}",
        all.payload
    );
    let snap = records
        .iter()
        .filter(|r| r.root.local() == "snap")
        .nth(1)
        .unwrap();
    assert!(
        snap.payload
            .contains(r#"<symbol name="PASSWORD" redacted="true"/>"#),
        "{}",
        snap.payload
    );
    assert!(!snap.payload.contains("hunter22"), "{}", snap.payload);
    let tell = records.iter().find(|r| r.root.local() == "tell").unwrap();
    assert!(
        tell.payload
            .contains(r#"<why name="PASSWORD" redacted="true"/>"#),
        "{}",
        tell.payload
    );
    let milestones = records
        .iter()
        .filter(|r| r.root.local() == "milestone")
        .count();
    assert_eq!(milestones, 2, "GIVEN held and THEN held");
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_failed_given_is_a_hard_error_answered_to_the_starter() {
    let calls = Arc::new(AtomicUsize::new(0));
    // GIVEN that does not hold: the process fails, its starter gets a tool error.
    let body = "  GIVEN n > 10:\n    TELL \"never\"\n  RETURN: n=n\n";
    let pump = pump_with(&doc(" args=\"n: Number\"", body), &calls);
    let (thread, records) = run(&pump, &go("<n>5</n>")).await;
    let e = support::process::failure(&records);
    assert!(e.message.starts_with("precondition-failed"), "{e:?}");
    let report = &pump.reports(thread).await.unwrap()[0];
    assert_eq!(report.stop_reason, "process-failed", "{report:?}");
}

#[tokio::test]
async fn run_starts_a_process_in_a_child_thread_and_binds_its_return() {
    // 00: "Variables defined via `SET` inside a process are local to that process unless
    // explicitly `RETURN`ed."
    let calls = Arc::new(AtomicUsize::new(0));
    let text = format!(
        "<triggers>\n<trigger event=\"{{{DEMO}}}go\" target=\"main\" />\n</triggers>\n<processes>\n<process id=\"main\">\n  RUN `double` where: x=21\n  RETURN: got=TWICE\n</process>\n<process id=\"double\" args=\"x: Number\">\n  SET TWICE := x * 2\n  SET HIDDEN := 1\n  RETURN: TWICE\n</process>\n</processes>\n"
    );
    let pump = pump_with(&text, &calls);
    let (thread, records) = run(&pump, &go("")).await;
    let f = fields(&records);
    assert_eq!(f["got"], num("42"));
    assert_eq!(
        pump.threads()
            .iter()
            .filter(|t| t.parent == Some(thread))
            .count(),
        1
    );
}

#[tokio::test]
async fn retry_repeats_what_may_be_repeated_and_atomic_does_not() {
    let calls = Arc::new(AtomicUsize::new(0));
    let body = "  TRY:\n    USE `fail` where: type=\"unavailable\" (retry=2)\n  RECOVER (err):\n    SET AA := err.type\n  TRY:\n    USE `fail` where: type=\"timeout\" (atomic, retry=2)\n  RECOVER (err):\n    SET BB := err.type\n  RETURN: AA, BB\n";
    let pump = pump_with(&doc("", body), &calls);
    let (_, records) = run(&pump, &go("")).await;
    let f = fields(&records);
    assert_eq!(
        (&f["AA"], &f["BB"]),
        (&Value::from("unavailable"), &Value::from("timeout"))
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        3 + 1,
        "three tries, then one atomic try"
    );
}

#[tokio::test]
async fn runtime_codes_name_their_line() {
    let calls = Arc::new(AtomicUsize::new(0));
    let cases = [
        // AG-006: "Unresolved placeholder"; AG-028: "CAPTURE map path invalid or type
        // coercion failed"; AG-044: "RUN statement arguments do not match".
        (
            "  SET AA := \"guess\" (from \"Agent Inference\")\n  RETURN: AA\n",
            "",
            "AG-006",
            1,
        ),
        (
            "  USE `echo` where: v=1\n  CAPTURE AA from `echo` map: \"nope\"→AA\n  RETURN: AA\n",
            "",
            "AG-028",
            2,
        ),
        ("  RETURN: n=n\n", " args=\"n: Number\"", "AG-044", 0),
        // AG-014: "Non-ISO 8601 time/offset where required" — a value from the trigger.
        ("  RETURN: at=at\n", " args=\"at: ISO8601\"", "AG-014", 0),
        // (AG-018, a JOIN after a PAR in a branch not taken, is static now: a PAR and its JOIN
        // are statements of one block; tests/process_exact.rs.)
        ("  SET AA := 1 / 0\n  RETURN: AA\n", "", "AG-029", 1),
        // AG-001: "Symbol not defined" — bound only in a branch not taken (static analysis
        // lets a binding inside IF count for what follows).
        (
            "  IF n > 10:\n    SET AA := 1\n  RETURN: AA\n",
            " args=\"n: Number\"",
            "AG-001",
            3,
        ),
        // AG-008: "CAPTURE references unknown/never-executed tool" — its USE was skipped.
        (
            "  IF n > 10:\n    USE `echo` where: v=1\n  CAPTURE AA from `echo`\n  RETURN: AA\n",
            " args=\"n: Number\"",
            "AG-008",
            3,
        ),
    ];
    for (body, args, code, line) in cases {
        let pump = pump_with(&doc(args, body), &calls);
        let start = match code {
            "AG-044" => go("<n>five</n>"),
            "AG-014" => go("<at>24/11/2026</at>"),
            "AG-001" | "AG-008" => go("<n>1</n>"),
            _ => go(""),
        };
        let (_, records) = run(&pump, &start).await;
        match returned(&records) {
            Answer::Error(e) => {
                assert!(e.message.starts_with(code), "{code}: {e:?}");
                if line > 0 {
                    assert!(
                        e.message.ends_with(&format!("(line {})", line + 5)),
                        "{code}: {e:?}"
                    );
                }
            }
            other => panic!("{code}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_loop_of_a_million_items_halts_at_its_turn_budget() {
    // Issue 15: "a FOREACH over a million items halts at its turn budget with a certificate
    // like any agent."
    let budget = agentpump::governor::Budget {
        turns: Some(20),
        ..Default::default()
    };
    let body = "  SET ITEMS := range(1000000)\n  SET TOTAL := 0\n  FOREACH i IN ITEMS:\n    SET TOTAL := TOTAL + i\n  RETURN: TOTAL\n";
    let program = Program::parse(&doc("", body)).unwrap();
    let l = ProcessListener::new(program, "main")
        .unwrap()
        .steps_per_turn(1000);
    let pump = support::governed(budget, vec![l.registration()]);
    let (thread, records) = run(&pump, &go("")).await;
    let report = &pump.reports(thread).await.unwrap()[0];
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("TIMEOUT", "max-turns"),
        "{report:?}"
    );
    let continues = records
        .iter()
        .filter(|r| r.root.local() == "continue")
        .count();
    assert!((18..=21).contains(&continues), "{continues}");
    assert!(
        !records.iter().any(|r| r.kind == RecordKind::Egress),
        "no RETURN"
    );
}

/// Runs `before` on a first pump until the tool hangs on call `hang`, kills that pump (its
/// runtime dropped), and finishes on a second pump running `after` over the same history:
/// the answer, how many calls the second pump's tool answered, and the root's history.
async fn crash_and_edit(
    before: &str,
    after: &str,
    start: &str,
    hang: &str,
) -> (Answer, usize, Vec<Record>) {
    use support::process::{CallLog, Doomed, Setup, settle_tree};
    let first_log = CallLog::default();
    let mut first = Setup::new(before, &first_log);
    first.tool = first.tool.hang_on_call(hang);
    let entered = Arc::clone(&first.tool.entered);
    let store = Arc::clone(&first.store);
    let (doomed, thread) = Doomed::start(first, start.to_owned()).await;
    tokio::time::timeout(std::time::Duration::from_secs(10), entered.notified())
        .await
        .expect("the first pump reaches the hung call");
    doomed.crash().await;
    let second_log = CallLog::default();
    let mut second = Setup::new(after, &second_log);
    second.store = store;
    let pump = second.build();
    let records = settle_tree(&pump, thread).await;
    let calls = second_log.lock().unwrap().len();
    (returned(&records), calls, records)
}

/// 03: "engines MAY deduplicate based on a stable hash of inputs" — a call id carries the hash
/// of its tool and arguments, so a restart whose process asks for something else at a place
/// history already holds fails the run (no answer reused, no call repeated, no RECOVER).
#[tokio::test]
async fn a_restart_whose_calls_changed_fails_with_the_divergence() {
    let body = |first: &str, second: &str| {
        format!(
            "  TRY:\n    USE `echo` where: v={first}\n    CAPTURE AA from `echo` map: \"v\"→AA\n    USE `echo` where: v={second}\n    CAPTURE BB from `echo` map: \"v\"→BB\n  RECOVER (err):\n    SET AA := 0\n    SET BB := 0\n  RETURN: AA, BB\n"
        )
    };
    let before = doc("", &body("1", "2"));
    let cases = [
        ("an answered call's argument", body("10", "2"), "main-1"),
        ("the call in flight's argument", body("1", "20"), "main-2"),
    ];
    for (what, after, place) in cases {
        let (answer, second_calls, records) =
            crash_and_edit(&before, &doc("", &after), &go(""), "main-2").await;
        let Answer::Error(e) = answer else {
            panic!("{what}: the run went on: {answer:?}");
        };
        let expected = format!("history diverged from the process: call {place} was `echo`");
        assert!(e.message.contains(&expected), "{what}: {}", e.message);
        assert_eq!(
            second_calls, 1,
            "{what}: only the call in flight, as sent before the crash, is delivered again (by the pump's recovery)"
        );
        let failed: Vec<_> = records
            .iter()
            .filter(|r| r.root.local() == "failed")
            .collect();
        assert_eq!(failed.len(), 1, "{what}: {:#?}", roots(&records));
        assert!(
            failed[0].payload.contains(r#"type="history-diverged""#),
            "{what}: {}",
            failed[0].payload
        );
    }
    // The same file after the restart: the answered call is read back, not repeated.
    let (answer, second_calls, _) = crash_and_edit(&before, &before, &go(""), "main-2").await;
    match answer {
        Answer::Result(r) => assert_eq!(Value::Object(r.fields).to_json(), r#"{"AA":1,"BB":2}"#),
        other => panic!("{other:?}"),
    }
    assert_eq!(second_calls, 1, "only the call in flight runs again");
}

/// Runs the safety policy of listeners/processes/safety.aps on the pump.
async fn safety(ts: &str, hsc: &str, violation: bool, npr: &str) -> (Value, Value) {
    let calls = Arc::new(AtomicUsize::new(0));
    let text = std::fs::read_to_string("listeners/processes/safety.aps").unwrap();
    let pump = pump_with(&text, &calls);
    let call = Call::new("safety")
        .id("s")
        .arg("ts", num(ts))
        .arg("hsc", num(hsc))
        .arg(
            "sty_json",
            Value::from_json(&format!(r#"{{"policy_violation": {violation}}}"#)).unwrap(),
        )
        .arg("npr", npr);
    let (_, records) = {
        let thread = pump
            .post(None, Some("safety"), &call.to_xml())
            .await
            .unwrap()
            .thread();
        pump.settle(thread).await;
        (thread, pump.history(thread).await.unwrap())
    };
    let f = fields(&records);
    (f["rec"].clone(), f["harm"].clone())
}

#[tokio::test]
async fn the_safety_policy_decides_at_its_boundaries() {
    // 03 safety_policy: "defaults: { THR: 0.90, HARM_THR: 0.40 }", "HARM := (HSC ≥ HARM_THR)
    // OR (STY_JSON.policy_violation = true)", "IF TS ≥ THR AND HARM=false: REC := \"PROCEED\"
    // ELSE IF NPR != \"\": REC := \"PROCEED_WITH_CAUTION\" ELSE: REC := \"HOLD_FOR_REVIEW\"".
    let cases = [
        (("0.90", "0.39", false, ""), ("PROCEED", false)),
        (("0.89", "0.39", false, ""), ("HOLD_FOR_REVIEW", false)),
        (
            ("0.89", "0.39", false, "note"),
            ("PROCEED_WITH_CAUTION", false),
        ),
        (("0.95", "0.40", false, ""), ("HOLD_FOR_REVIEW", true)),
        (
            ("0.95", "0.40", false, "note"),
            ("PROCEED_WITH_CAUTION", true),
        ),
        (("0.95", "0.10", true, ""), ("HOLD_FOR_REVIEW", true)),
    ];
    for ((ts, hsc, violation, npr), (rec, harm)) in cases {
        let got = safety(ts, hsc, violation, npr).await;
        assert_eq!(
            got,
            (Value::from(rec), Value::Bool(harm)),
            "TS={ts} HSC={hsc} violation={violation} NPR={npr:?}"
        );
    }
}

#[tokio::test]
async fn the_planner_fans_out_to_worker_processes_with_the_real_calculator() {
    // The demo's planner: PAR over three `worker` processes (child threads), each USEing the
    // calculator tool (the real one, through the tool adapter), JOINed in lexical order.
    let text = std::fs::read_to_string("listeners/processes/planner.aps").unwrap();
    let program = Program::parse(&text).unwrap();
    let calculator = agentpump::tool::register(agentpump::listeners::calculator::Calculator);
    let b = PumpBuilder::new().register(calculator);
    let pump = support::process::with_processes(b, &program)
        .build()
        .unwrap();
    let start = format!(
        r#"<plan xmlns="{DEMO}"><left>12.5 * 4</left><middle>1 / 0</middle><right>0.1 + 0.2</right></plan>"#
    );
    let (thread, records) = run(&pump, &start).await;
    let f = fields(&records);
    // The middle part divides by zero: its worker RECOVERs (TELL, SET VALUE := 0).
    assert_eq!(f["parts"].to_json(), "[50,0,0.3]");
    assert_eq!(f["total"], num("50.3"));
    assert_eq!(
        pump.tree(thread).len(),
        1 + 3,
        "the planner and one child thread per worker"
    );
}

#[tokio::test]
async fn agent_inference_asks_the_allowed_tool_and_records_ag_w03() {
    // 03: "Placeholder resolution … order: [INP, CONSTANTS, RUNTIME, Agent Inference (only if
    // allowed)]" and "If inference occurs under a non-strict policy, the engine MUST emit
    // `AG-W03` with the inferred value and a deterministic input hash in the invocation log."
    let calls = Arc::new(AtomicUsize::new(0));
    let body =
        "  SET ANSWER := \"six times seven?\" (from \"Agent Inference\")\n  RETURN: ANSWER\n";
    let program = Program::parse(&doc("", body)).unwrap();
    let tool = TestTool {
        calls: Arc::clone(&calls),
    };
    let allowed = PumpBuilder::new()
        .register(
            ProcessListener::new(Arc::clone(&program), "main")
                .unwrap()
                .infer_with("echo")
                .registration(),
        )
        .register(tool_of("echo", tool.clone()))
        .build()
        .unwrap();
    let (_, records) = run(&allowed, &go("")).await;
    // The echo tool answers its arguments: `value` is missing, so it is asked with one.
    let call = records.iter().find(|r| r.root.local() == "call").unwrap();
    for arg in ["symbol", "question", "process", "input_hash"] {
        assert!(
            call.payload.contains(&format!(r#"name="{arg}""#)),
            "{}",
            call.payload
        );
    }
    match returned(&records) {
        Answer::Error(e) => assert!(e.message.starts_with("AG-028"), "{e:?}"),
        other => panic!("{other:?}"),
    }
    // With a tool that answers `value`: bound, and AG-W03 recorded with the hash.
    let body = "  SET ANSWER := \"6 * 7\" (from \"Agent Inference\")\n  RETURN: ANSWER\n";
    let program = Program::parse(&doc("", body)).unwrap();
    let pump = PumpBuilder::new()
        .register(
            ProcessListener::new(Arc::clone(&program), "main")
                .unwrap()
                .infer_with("oracle")
                .registration(),
        )
        .register(tool_of("oracle", tool))
        .build()
        .unwrap();
    let (_, records) = run(&pump, &go("")).await;
    assert_eq!(fields(&records)["ANSWER"], num("42"));
    let warning = records
        .iter()
        .find(|r| r.root.local() == "warning")
        .unwrap();
    // The SET is body line 1: file line 6.
    assert!(
        warning.payload.contains(r#"code="AG-W03""#)
            && warning.payload.contains(r#"line="6""#)
            && warning.payload.contains(r#"input-hash="sha256:"#),
        "{}",
        warning.payload
    );
    assert!(
        warning
            .payload
            .contains(r#"<symbol name="ANSWER" type="number">42</symbol>"#),
        "{}",
        warning.payload
    );
    // Not allowed (03's default): AG-006.
    let pump = pump_with(&doc("", body), &calls);
    let (_, records) = run(&pump, &go("")).await;
    match returned(&records) {
        Answer::Error(e) => assert!(e.message.starts_with("AG-006"), "{e:?}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_call_that_does_not_start_the_process_is_refused_not_ignored() {
    // The product bar: "Nothing is silent." A call naming another tool, sent to a process by
    // name, gets an answer saying why.
    let calls = Arc::new(AtomicUsize::new(0));
    let pump = pump_with(&doc("", "  RETURN: ok=true\n"), &calls);
    let call = Call::new("someone-else").id("x").to_xml();
    let thread = pump.post(None, Some("main"), &call).await.unwrap().thread();
    pump.settle(thread).await;
    let notices = support::notices(&pump, thread).await;
    assert_eq!(
        notices,
        [(
            "client".to_owned(),
            "huh".to_owned(),
            "invalid-payload".to_owned()
        )]
    );
    let history = pump.history(thread).await.unwrap();
    let huh = history.iter().find(|r| r.root.local() == "huh").unwrap();
    assert!(
        huh.payload
            .contains("process `main` does not start on this"),
        "{}",
        huh.payload
    );
}

/// 00: `<trigger event="EVENT_TYPE" [pattern="REGEX"] target="PROCESS_ID" />` — the pattern is
/// matched against the payload's text: a match starts the process, anything else does not, and
/// the sender hears why ("Nothing is silent"). Two processes of one file on one root share it
/// out by pattern: the one whose pattern matches starts, the other stays quiet.
#[tokio::test]
async fn a_trigger_pattern_decides_which_payloads_start_the_process() {
    let text = format!(
        "<triggers>\n<trigger event=\"{{{DEMO}}}go\" pattern=\"^deploy [a-z]+$\" target=\"main\" />\n<trigger event=\"{{{DEMO}}}go\" pattern=\"^status$\" target=\"status\" />\n</triggers>\n<processes>\n<process id=\"main\" args=\"text: String\">\n  RETURN: started=text\n</process>\n<process id=\"status\">\n  RETURN: up=true\n</process>\n</processes>\n"
    );
    let calls = Arc::new(AtomicUsize::new(0));
    let pump = pump_with(&text, &calls);
    let (thread, records) = run(&pump, &go("deploy <![CDATA[web]]>")).await;
    assert_eq!(fields(&records)["started"], Value::from("deploy web"));
    assert!(
        support::notices(&pump, thread).await.is_empty(),
        "{:#?}",
        roots(&records)
    );
    let (thread, records) = run(&pump, &go("status")).await;
    assert_eq!(fields(&records)["up"], Value::Bool(true));
    assert!(
        support::notices(&pump, thread).await.is_empty(),
        "{:#?}",
        roots(&records)
    );
    let (thread, records) = run(&pump, &go("deploy &amp; pray")).await;
    assert!(
        !records.iter().any(|r| r.root.local() == "return"),
        "{:#?}",
        roots(&records)
    );
    let notices = support::notices(&pump, thread).await;
    assert_eq!(
        notices,
        [
            (
                "client".to_owned(),
                "huh".to_owned(),
                "invalid-payload".to_owned()
            ),
            (
                "client".to_owned(),
                "huh".to_owned(),
                "invalid-payload".to_owned()
            )
        ],
        "each process of the file says why: {:#?}",
        roots(&records)
    );
    let told = |process: &str, pattern: &str| {
        let expected = format!(
            "process `{process}` does not start on this {{{DEMO}}}go: its text does not match the trigger pattern `{pattern}`"
        );
        records
            .iter()
            .any(|r| r.root.local() == "huh" && r.payload.contains(&expected))
    };
    assert!(told("main", "^deploy [a-z]+$"), "{:#?}", roots(&records));
    assert!(told("status", "^status$"), "{:#?}", roots(&records));
}

/// "Nothing is silent": a process stays quiet on a payload another process of its file starts
/// on, so a pump that registers one without the other would leave that payload unanswered;
/// it does not build, naming the missing process.
#[test]
fn a_process_sharing_a_trigger_root_needs_its_sibling_registered() {
    let text = format!(
        "<triggers>\n<trigger event=\"{{{DEMO}}}go\" pattern=\"^deploy\" target=\"main\" />\n<trigger event=\"{{{DEMO}}}go\" pattern=\"^status$\" target=\"status\" />\n</triggers>\n<processes>\n<process id=\"main\">\n  RETURN: started=true\n</process>\n<process id=\"status\">\n  RETURN: up=true\n</process>\n</processes>\n"
    );
    let program = Program::parse(&text).unwrap();
    let alone = ProcessListener::new(Arc::clone(&program), "main").unwrap();
    let err = PumpBuilder::new()
        .register(alone.registration())
        .build()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("process `main` shares a trigger root with process `status`")
            && err.contains("register `status` too"),
        "{err}"
    );
    let both = support::process::with_processes(PumpBuilder::new(), &program);
    assert!(both.build().is_ok());
}

#[tokio::test]
async fn a_computed_time_that_is_not_iso_8601_fails_the_run_with_ag_014() {
    // 07: "AG-014, name: TimeFormat, desc: Non-ISO 8601 time/offset where required." A literal
    // is checked statically; a computed one when the process it is passed to starts.
    let calls = Arc::new(AtomicUsize::new(0));
    let text = |time: &str| {
        format!(
            "<triggers>\n<trigger event=\"{{{DEMO}}}go\" target=\"main\" />\n</triggers>\n<processes>\n<process id=\"main\">\n  RUN `stamp` where: moment=concat(\"2026-11-24\", \"{time}\")\n  RETURN: got=GOT\n</process>\n<process id=\"stamp\" args=\"moment: ISO8601\">\n  SET GOT := moment\n  RETURN: GOT\n</process>\n</processes>\n"
        )
    };
    let pump = pump_with(&text("T16:50:00+01:00"), &calls);
    let (_, records) = run(&pump, &go("")).await;
    assert_eq!(
        fields(&records)["got"],
        Value::from("2026-11-24T16:50:00+01:00")
    );
    let pump = pump_with(&text(" 16:50"), &calls);
    let (_, records) = run(&pump, &go("")).await;
    let e = support::process::failure(&records);
    assert!(
        e.message.contains("AG-014: TimeFormat: argument `moment`")
            && e.message.ends_with("(line 6)"),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_redacted_symbol_never_reaches_an_event_an_answer_or_an_error() {
    // 06: "Secrets/PII MUST be redacted as `[REDACTED]` (`AG-032`)." The redaction sits in a
    // branch, so the static check lets the RETURN through and the engine redacts it.
    let calls = Arc::new(AtomicUsize::new(0));
    let body = concat!(
        "  SET KEY := \"hunter22\"\n",
        "  IF true:\n",
        "    SNAP [KEY] redact=[KEY]\n",
        "  SET COPY := concat(\"pw:\", KEY)\n",
        "  RETURN: KEY, COPY\n",
    );
    let pump = pump_with(&doc("", body), &calls);
    let (_, records) = run(&pump, &go("")).await;
    let f = fields(&records);
    assert_eq!(
        (&f["KEY"], &f["COPY"]),
        (&Value::from("[REDACTED]"), &Value::from("[REDACTED]"))
    );
    for r in &records {
        assert!(!r.payload.contains("hunter22"), "{}", r.payload);
    }
    let ret = records.iter().find(|r| r.root.local() == "return").unwrap();
    assert!(
        ret.payload
            .contains(r#"<field name="KEY">[REDACTED]</field>"#),
        "{}",
        ret.payload
    );
    // A tool's error that repeats the secret: cut out of the failed event and the answer
    // (the call itself carries it: the tool needs it).
    let body = concat!(
        "  SET PIN := -98765\n",
        "  IF true:\n",
        "    SNAP [PIN] redact=[PIN]\n",
        "  USE `calculator` where: expression=concat(\"sqrt(\", PIN, \")\")\n",
        "  RETURN: ok=true\n",
    );
    let pump = pump_with(&doc("", body), &calls);
    let (_, records) = run(&pump, &go("")).await;
    let failed = records.iter().find(|r| r.root.local() == "failed").unwrap();
    assert!(
        failed
            .payload
            .contains("square root of negative [REDACTED]")
            && !failed.payload.contains("98765"),
        "{}",
        failed.payload
    );
    let e = support::process::failure(&records);
    assert!(
        e.message.contains("[REDACTED]") && !e.message.contains("98765"),
        "{e:?}"
    );
}

#[tokio::test]
async fn the_time_policy_records_ag_w02_once_per_use_without_timeout() {
    // 07: "AG-W02, name: LaxTime, desc: Step without explicit time where policy requires."
    // and "Engines MAY continue on `warnings`, but MUST surface them to the caller."
    let calls = Arc::new(AtomicUsize::new(0));
    let body = concat!(
        "  SET ITEMS := [1, 2, 3]\n",
        "  FOREACH i IN ITEMS:\n",
        "    USE `echo` where: v=i\n",
        "  USE `echo` where: v=0 (timeout_ms=5000)\n",
        "  RETURN: ok=true\n",
    );
    let program = Program::parse(&doc("", body)).unwrap();
    let tool = TestTool {
        calls: Arc::clone(&calls),
    };
    for require in [true, false] {
        let pump = PumpBuilder::new()
            .register(
                ProcessListener::new(Arc::clone(&program), "main")
                    .unwrap()
                    .require_timeout(require)
                    .registration(),
            )
            .register(tool_of("echo", tool.clone()))
            .build()
            .unwrap();
        let (_, records) = run(&pump, &go("")).await;
        assert_eq!(
            fields(&records)["ok"],
            Value::Bool(true),
            "a warning is not fatal"
        );
        let warnings: Vec<&str> = records
            .iter()
            .filter(|r| r.root.local() == "warning")
            .map(|r| r.payload.as_ref())
            .collect();
        if !require {
            assert!(warnings.is_empty(), "{warnings:?}");
            continue;
        }
        // The USE in the loop is body line 3 (file line 8), warned once for three calls; the
        // USE with a timeout is not warned.
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains(r#"line="8" code="AG-W02" name="LaxTime" tool="echo""#),
            "{}",
            warnings[0]
        );
    }
}

#[tokio::test]
async fn a_process_called_by_a_name_a_tool_has_is_refused_at_build() {
    // 07: "AG-034, name: PredefinedToolCollision, desc: Conflicting tool signatures across
    // host and predefinedTools.json." A RUN of `double` with a tool registered as `double`
    // would reach the tool: the pump refuses to build.
    let text = "<processes>\n<process id=\"main\">\n  RUN `double` where: x=1\n  RETURN: TWICE\n</process>\n<process id=\"double\" args=\"x: Number\">\n  SET TWICE := x * 2\n  RETURN: TWICE\n</process>\n</processes>\n";
    let program = Program::parse(text).unwrap();
    let main = || {
        ProcessListener::new(Arc::clone(&program), "main")
            .unwrap()
            .registration()
    };
    let refused = PumpBuilder::new()
        .register(main())
        .register(tool_of("double", TestTool::default()))
        .build()
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "AG-034 PredefinedToolCollision: process `main` calls `double` as a process of its file, but the pump registers `double` with role tool; rename the process or that listener"
    );
    let double = ProcessListener::new(Arc::clone(&program), "double").unwrap();
    assert!(
        PumpBuilder::new()
            .register(main())
            .register(double.registration())
            .build()
            .is_ok()
    );
}

#[cfg(feature = "host")]
#[tokio::test]
async fn an_organism_sets_the_time_policy_and_refuses_a_tool_named_like_a_called_process() {
    // 07: "AG-W02 … Step without explicit time where policy requires" — the policy is the
    // organism's `require_timeout`; and AG-034 at the organism's start.
    use agentpump::host::organism::Organism;
    const TIMED: &str = "<triggers>\n<trigger event=\"{urn:agentpump:demo:v1}go\" target=\"main\" />\n</triggers>\n<processes>\n<process id=\"main\">\n  USE `calculator` where: expression=\"1 + 1\"\n  CAPTURE AA from `calculator` map: \"value\"→AA\n  RETURN: AA\n</process>\n</processes>\n";
    const CLASH: &str = "<processes>\n<process id=\"main\">\n  RUN `calculator` where: x=1\n  RETURN: TWICE\n</process>\n<process id=\"calculator\" args=\"x: Number\">\n  SET TWICE := x * 2\n  RETURN: TWICE\n</process>\n</processes>\n";
    let toml = "[[listener]]\nname = \"calculator\"\nkind = \"builtin\"\nbuiltin = \"calculator\"\n\n[[listener]]\nname = \"main\"\nkind = \"process\"\nfile = \"main.aps\"\nrequire_timeout = true\n";
    let mut organism = Organism::parse(toml, "organism.toml").unwrap();
    organism.embed("main.aps", TIMED);
    let pump = organism.builder("organism.toml").unwrap().build().unwrap();
    let (_, records) = run(&pump, &go("")).await;
    assert_eq!(fields(&records)["AA"], num("2"));
    let warning = records
        .iter()
        .find(|r| r.root.local() == "warning")
        .unwrap();
    assert!(
        warning
            .payload
            .contains(r#"line="6" code="AG-W02" name="LaxTime" tool="calculator""#),
        "{}",
        warning.payload
    );
    let mut organism = Organism::parse(toml, "organism.toml").unwrap();
    organism.embed("main.aps", CLASH);
    let refused = organism
        .builder("organism.toml")
        .unwrap()
        .build()
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .starts_with("AG-034 PredefinedToolCollision: process `main` calls `calculator`"),
        "{refused}"
    );
}
