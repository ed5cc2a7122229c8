//! Every construct of the 05 grammar run on the pump (issue 15: "Every construct of the 05
//! grammar has a test that runs it on the pump"), beyond what tests/processes.rs runs: the
//! all-constructs fixture end to end with stub tools, and one small case per form it leaves out.
//! Each test quotes the 03/05 line it checks.

mod support;

use std::sync::Arc;

use agentpump::envelope::PROCESS_NS;
use agentpump::history::Record;
use agentpump::process::engine::call_place;
use agentpump::process::engine::{ProcessListener, Program};
use agentpump::tool::{Call, Signature, Tool, ToolError, ToolResult, register};
use agentpump::value::Value;
use agentpump::{Context, PumpBuilder};
use support::process::{CallLog, Setup, counts, doc, failure, fields, go, num, roots, run};

/// `fetch`: answers `body` ("body of ID"), `status.code` 200, and the `endpoint` and `region`
/// it was called with ("none" when not given).
struct Fetch;

#[agentpump::async_trait]
impl Tool for Fetch {
    fn signature(&self) -> Signature {
        Signature::new("fetch", "fetches a document")
            .arg("id", "string", "what to fetch", true)
            .arg("limit", "object", "limits", false)
            .arg("endpoint", "string", "where from", false)
            .arg("region", "string", "which region", false)
    }

    async fn call(&self, call: &Call, _cx: &mut Context) -> Result<ToolResult, ToolError> {
        let given = |k: &str| call.args.get(k).cloned().unwrap_or(Value::from("none"));
        Ok(call
            .result()
            .field("body", format!("body of {}", call.args["id"]))
            .field("status", Value::from_json(r#"{"code": 200}"#).unwrap())
            .field("endpoint", given("endpoint"))
            .field("region", given("region")))
    }
}

/// `summarize`: answers `items: [{"text": "summary: TEXT"}]`.
struct Summarize;

#[agentpump::async_trait]
impl Tool for Summarize {
    fn signature(&self) -> Signature {
        Signature::new("summarize", "summarizes a text").arg("text", "string", "the text", true)
    }

    async fn call(&self, call: &Call, _cx: &mut Context) -> Result<ToolResult, ToolError> {
        let text = format!("summary: {}", call.args["text"]);
        let item = Value::Object([("text".to_owned(), Value::from(text))].into());
        Ok(call.result().field("items", Value::List(vec![item])))
    }
}

/// `dice`: a deterministic "roll", `value` = seed + sides.
struct Dice;

#[agentpump::async_trait]
impl Tool for Dice {
    fn signature(&self) -> Signature {
        Signature::new("dice", "rolls deterministically")
            .arg("seed", "number", "the seed", true)
            .arg("sides", "number", "the sides", true)
    }

    async fn call(&self, call: &Call, _cx: &mut Context) -> Result<ToolResult, ToolError> {
        let n = |k: &str| match &call.args[k] {
            Value::Num(n) => *n,
            _ => rust_decimal::Decimal::ZERO,
        };
        Ok(call
            .result()
            .field("value", Value::Num(n("seed") + n("sides"))))
    }
}

/// `oracle`: the Agent Inference tool, answering `value` = "guessed QUESTION".
struct Oracle;

#[agentpump::async_trait]
impl Tool for Oracle {
    fn signature(&self) -> Signature {
        Signature::new("oracle", "infers a value")
            .arg("symbol", "string", "", true)
            .arg("question", "string", "", true)
            .arg("process", "string", "", true)
            .arg("input_hash", "string", "", true)
    }

    async fn call(&self, call: &Call, _cx: &mut Context) -> Result<ToolResult, ToolError> {
        Ok(call
            .result()
            .field("value", format!("guessed {}", call.args["question"])))
    }
}

fn json(v: &Value) -> String {
    v.to_json()
}

/// 05: "Statement = RunStmt | UseStmt | CaptureStmt | SetStmt | UnsetStmt | ReturnStmt |
/// AssertStmt | TellStmt | MileStmt | WithBlock | ParBlock | JoinBlock | ForEachStmt |
/// TryBlock | IfStmt | ElseIfStmt | ElseStmt | GivenStmt | WhenStmt | ThenStmt | SnapStmt".
#[tokio::test]
async fn the_all_constructs_fixture_runs_on_the_pump() {
    let text = std::fs::read_to_string("tests/fixtures/processes/all_constructs.aps").unwrap();
    let program = Program::parse(&text).unwrap();
    let mut b = PumpBuilder::new()
        .register(register(Fetch))
        .register(register(Summarize))
        .register(register(Dice))
        .register(register(Oracle));
    for id in program.process_ids() {
        let l = ProcessListener::new(Arc::clone(&program), id)
            .unwrap()
            .infer_with("oracle");
        b = b.register(l.registration());
    }
    let pump = b.build().unwrap();
    let call = Call::new("main")
        .id("c1")
        .arg("items", Value::from_json("[3, 6]").unwrap())
        .arg("seed", num("7"));
    let thread = pump
        .post(None, Some("main"), &call.to_xml())
        .await
        .unwrap()
        .thread();
    pump.settle(thread).await;
    let records = pump.history(thread).await.unwrap();
    let f = fields(&records);
    assert_eq!(
        f["REC"],
        Value::from("PROCEED"),
        "IF SCORE >= THRESHOLD AND CODE = 200"
    );
    assert_eq!((&f["SCORE"], &f["COPY"]), (&num("0.95"), &num("0.95")));
    assert_eq!(f["ORIGINAL"], num("7"), "<SEED> (from INP)");
    // The PAR's fetch is outside the WITH block: no defaults reach it; CAPTURE without a map
    // binds the whole result.
    assert_eq!(
        json(&f["SECOND"]),
        r#"{"body":"body of b","endpoint":"none","region":"none","status":{"code":200}}"#
    );
    // 03: "const_refs: UpperSym MAY appear inside JSON objects/arrays and are resolved from
    // <constants>."
    assert_eq!(
        json(&f["SETTINGS"]),
        r#"{"endpoint":"https://example.org","limits":{"max":3,"min":1}}"#
    );
    // A TEXT block is its lines verbatim (indentation kept), joined by newlines.
    assert_eq!(f["NOTE"], Value::from("  kept verbatim"));
    // The first fetch ran inside WITH {"endpoint": …, "region": REGION}: the defaults reached
    // it (the runtime value REGION included).
    let first_call = records
        .iter()
        .find(|r| r.root.local() == "call" && r.payload.contains(r#"id="main-1-"#))
        .unwrap();
    assert!(
        first_call.payload.contains("https://example.org") && first_call.payload.contains(">eu<"),
        "{}",
        first_call.payload
    );
    let count = |local: &str| {
        records
            .iter()
            .filter(|r| r.root.is(PROCESS_NS, local))
            .count()
    };
    // GIVEN's TELL; the snap per item; MILESTONE under WHEN; PAR, JOIN; AG-W03 for GUESSED.
    assert_eq!(
        (
            count("tell"),
            count("milestone"),
            count("snap"),
            count("par"),
            count("join")
        ),
        (1, 1, 2, 1, 1),
        "{:#?}",
        roots(&records)
    );
    assert_eq!(count("warning"), 1);
    // SNAP [ROLL, _INDEX] redact=[ROLL]: the roll is never shown.
    for snap in records.iter().filter(|r| r.root.is(PROCESS_NS, "snap")) {
        assert!(
            snap.payload
                .contains(r#"<symbol name="ROLL" redacted="true"/>"#),
            "{}",
            snap.payload
        );
    }
    // FOREACH item IN ITEMS_LIST: one dice call per item, in index order.
    let dice: Vec<&str> = records
        .iter()
        .filter(|r| r.root.local() == "call" && r.payload.contains(r#"tool="dice""#))
        .map(|r| if r.payload.contains(">3<") { "3" } else { "6" })
        .collect();
    assert_eq!(dice, ["3", "6"]);
    // RUN `helper`: a child thread whose RETURN carries the artifact reference.
    let children: Vec<_> = pump
        .tree(thread)
        .into_iter()
        .filter(|t| t.id != thread)
        .collect();
    assert_eq!(children.len(), 1 + 2, "the helper and the two PAR children");
    let mut artifact = false;
    for child in children {
        let h = pump.history(child.id).await.unwrap();
        artifact |= h
            .iter()
            .any(|r| r.root.is(PROCESS_NS, "return") && r.payload.contains("$artifact"));
    }
    assert!(artifact, "the helper's RETURN with {{\"$artifact\": …}}");
}

/// The fields of a process of `body` (args `args`) run on a test pump with input `input`.
async fn returns(args: &str, body: &str, input: &str) -> (Vec<Record>, CallLog) {
    let log = CallLog::default();
    let pump = Setup::new(&doc(args, body), &log).build();
    let (_, records) = run(&pump, &go(input)).await;
    (records, log)
}

/// 03: "SNAP [SYM1, SYM2 ...] [delta=true|false] [redact=[SYM_A, SYM_B ...]]" and "`SNAP`:
/// snapshots selected symbols; supports delta and redact lists."
#[tokio::test]
async fn snap_with_delta_records_only_the_symbols_that_changed() {
    let body = concat!(
        "  SET AA := 1\n",
        "  SET BB := 2\n",
        "  SNAP [AA, BB] delta=true\n",
        "  SET AA := 3\n",
        "  SNAP [AA, BB] delta=true\n",
        "  SNAP [AA, BB] delta=true\n",
        "  SNAP [AA, BB] delta=false\n",
        "  RETURN: AA\n",
    );
    let (records, _) = returns("", body, "").await;
    let snaps: Vec<(bool, bool, bool)> = records
        .iter()
        .filter(|r| r.root.is(PROCESS_NS, "snap"))
        .map(|r| {
            let p = &r.payload;
            (
                p.contains(r#"name="AA""#),
                p.contains(r#"name="BB""#),
                p.contains(r#"delta="true""#),
            )
        })
        .collect();
    assert_eq!(
        snaps,
        [
            (true, true, true),
            (true, false, true),
            (false, false, true),
            (true, true, false)
        ],
        "{:#?}",
        roots(&records)
    );
}

/// 03: "CAPTURE S1[, S2 ...] from `tool_name` [map: "path1"→S1, "path2?"→S2 ...]"; 05:
/// "`CAPTURE` is the binding point; `USE` does not mutate the symbol table by itself."
#[tokio::test]
async fn capture_binds_one_symbol_or_several_with_and_without_a_map() {
    let body = concat!(
        "  USE `echo` where: deep={\"list\": [10, 20]}, vv=1, ww=\"x\"\n",
        "  CAPTURE WHOLE from `echo`\n",
        "  CAPTURE VV, WW from `echo`\n",
        "  CAPTURE FIRST, SECOND from `echo` map: \"deep.list[0]\"→FIRST, \"deep.list[1]\"→SECOND\n",
        "  RETURN: WHOLE, VV, WW, FIRST, SECOND\n",
    );
    let (records, _) = returns("", body, "").await;
    let f = fields(&records);
    assert_eq!(
        json(&f["WHOLE"]),
        r#"{"deep":{"list":[10,20]},"vv":1,"ww":"x"}"#
    );
    assert_eq!((&f["VV"], &f["WW"]), (&num("1"), &Value::from("x")));
    assert_eq!((&f["FIRST"], &f["SECOND"]), (&num("10"), &num("20")));
}

/// 03: "SET SYMBOL := VALUE [(from SOURCE)]" and "SOURCE ∈ { `tool`, INP, UpperSym, "Agent
/// Inference" }" — the source is provenance; the value is VALUE.
#[tokio::test]
async fn set_from_a_tool_inp_or_a_symbol_binds_its_value() {
    let body = concat!(
        "  USE `echo` where: v=5\n",
        "  SET AA := 5 (from `echo`)\n",
        "  SET BB := AA + 1 (from AA)\n",
        "  SET CC := <N> (from INP)\n",
        "  RETURN: AA, BB, CC\n",
    );
    let (records, log) = returns(" args=\"n: Number\"", body, "<n>4</n>").await;
    assert_eq!(
        json(&Value::Object(fields(&records))),
        r#"{"AA":5,"BB":6,"CC":4}"#
    );
    assert_eq!(
        log.lock().unwrap().len(),
        1,
        "(from `echo`) calls nothing more"
    );
}

/// 03: "VALUE may be an artifact reference: {"$artifact":"SYMBOL","hash":"sha256:..."}."
#[tokio::test]
async fn return_carries_an_artifact_reference() {
    let body = concat!(
        "  SET TOTAL := 4\n",
        "  RETURN: total=TOTAL, report={\"$artifact\": \"TOTAL\", \"hash\": \"sha256:00\"}\n",
    );
    let (records, _) = returns("", body, "").await;
    let f = fields(&records);
    assert_eq!(f["total"], num("4"));
    assert_eq!(
        json(&f["report"]),
        r#"{"$artifact":"TOTAL","hash":"sha256:00"}"#
    );
}

/// 05: "WhenStmt = "WHEN", Space, <condition-text-no-colon>, ":"" and "ThenStmt"; 03:
/// "Recovery statements MAY access the error variable to inspect type, message, or context"
/// and "engines MUST expose `err.type` and `err.message`".
#[tokio::test]
async fn when_that_holds_runs_its_body_and_then_that_fails_is_a_postcondition_failure() {
    let body = concat!(
        "  SET RAN := false\n",
        "  WHEN n > 1:\n",
        "    SET RAN := true\n",
        "  TRY:\n",
        "    THEN n > 100:\n",
        "      MILESTONE \"never\"\n",
        "  RECOVER (err):\n",
        "    SET KIND := err.type\n",
        "    SET WHY := err.message\n",
        "  TRY:\n",
        "    USE `fail` where: type=\"invalid-argument\"\n",
        "  RECOVER (err):\n",
        "    SET TOOL_WHY := err.message\n",
        "  RETURN: RAN, KIND, WHY, TOOL_WHY\n",
    );
    let (records, _) = returns(" args=\"n: Number\"", body, "<n>5</n>").await;
    let f = fields(&records);
    assert_eq!(f["RAN"], Value::Bool(true));
    assert_eq!(f["KIND"], Value::from("postcondition-failed"));
    assert_eq!(f["WHY"], Value::from("THEN does not hold"));
    assert!(
        f["TOOL_WHY"].to_string().starts_with("asked to fail"),
        "{:?}",
        f["TOOL_WHY"]
    );
    assert!(!records.iter().any(|r| r.root.is(PROCESS_NS, "milestone")));
    // Not recovered: the starter gets the failure.
    let body = "  THEN n > 100:\n    MILESTONE \"never\"\n  RETURN: n=n\n";
    let (records, _) = returns(" args=\"n: Number\"", body, "<n>5</n>").await;
    assert!(
        failure(&records)
            .message
            .starts_with("postcondition-failed"),
        "{:?}",
        failure(&records)
    );
}

/// 05: "BlockValue = BlockType, "<<", EOL, { <any line except BlockClose>, EOL },
/// BlockClose" and 03: "placeholder_resolution: order: [INP, CONSTANTS, RUNTIME, …]".
#[tokio::test]
async fn json_and_text_blocks_and_runtime_values_are_read_at_run_time() {
    let text = format!(
        "<constants>\nLIMITS: {{\"max\": 3}}\nCONF: JSON<<\n{{\n  \"deep\": {{\"n\": 2}},\n  \"limits\": LIMITS\n}}\n>>\nBANNER: TEXT<<\nline one\nline two\n>>\n</constants>\n<runtime>\nREGION: \"eu\"\n</runtime>\n{}",
        doc(
            "",
            concat!(
                "  SET SUM := CONF.deep.n + CONF.limits.max\n",
                "  USE `echo` where: banner=BANNER, region=REGION, zone=<REGION>\n",
                "  CAPTURE ECHOED from `echo`\n",
                "  RETURN: SUM, ECHOED\n",
            )
        )
    );
    let log = CallLog::default();
    let pump = Setup::new(&text, &log).build();
    let (_, records) = run(&pump, &go("")).await;
    let f = fields(&records);
    assert_eq!(f["SUM"], num("5"));
    let echoed = match &f["ECHOED"] {
        Value::Object(m) => m.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(echoed["region"], Value::from("eu"));
    assert_eq!(echoed["zone"], Value::from("eu"));
    assert_eq!(echoed["banner"], Value::from("line one\nline two"));
}

/// 03: "enums: "enum(A,B,...) becomes a choice set for validation."" and 05: "Value = … |
/// EnumLit".
#[tokio::test]
async fn enum_values_are_choice_sets_at_run_time() {
    let body = concat!(
        "  SET COLORS := enum(RED, GREEN)\n",
        "  SET PICK := \"GREEN\"\n",
        "  ASSERT PICK IN COLORS\n",
        "  SET OUTSIDE := \"BLUE\" IN COLORS\n",
        "  USE `echo` where: choice=enum(RED, GREEN)\n",
        "  CAPTURE SENT from `echo` map: \"choice\"→SENT\n",
        "  RETURN: COLORS, OUTSIDE, SENT\n",
    );
    let (records, _) = returns("", body, "").await;
    let f = fields(&records);
    assert_eq!(json(&f["COLORS"]), r#"["RED","GREEN"]"#);
    assert_eq!(f["OUTSIDE"], Value::Bool(false));
    assert_eq!(json(&f["SENT"]), r#"["RED","GREEN"]"#);
}

/// 03: "RUN `process_id` [where: k1=V1, ...]".
#[tokio::test]
async fn run_without_where_starts_a_process_without_arguments() {
    let text = format!(
        "<triggers>\n<trigger event=\"{{{}}}go\" target=\"main\" />\n</triggers>\n<processes>\n<process id=\"main\">\n  RUN `helper`\n  RETURN: FIXED\n</process>\n<process id=\"helper\">\n  SET FIXED := \"from the helper\"\n  RETURN: FIXED\n</process>\n</processes>\n",
        support::process::DEMO
    );
    let log = CallLog::default();
    let pump = Setup::new(&text, &log).build();
    let (thread, records) = run(&pump, &go("")).await;
    assert_eq!(fields(&records)["FIXED"], Value::from("from the helper"));
    assert_eq!(pump.tree(thread).len(), 2);
}

/// 03: "USE `tool_name` [where: k1=V1, ...] [(atomic[, timeout_ms=NUM][, retry=NUM])]";
/// docs/processes.md: "an `atomic` USE is repeated only after `unavailable` (the tool says it
/// did nothing)".
#[tokio::test]
async fn an_atomic_use_is_retried_after_unavailable_only() {
    let body = concat!(
        "  USE `flaky` where: fails=1, v=\"done\" (atomic, retry=2)\n",
        "  CAPTURE GOT from `flaky` map: \"v\"→GOT\n",
        "  TRY:\n",
        "    USE `flaky` where: fails=100 (atomic, retry=2)\n",
        "  RECOVER (err):\n",
        "    SET KIND := err.type\n",
        "  RETURN: GOT, KIND\n",
    );
    let (records, log) = returns("", body, "").await;
    let f = fields(&records);
    assert_eq!(f["GOT"], Value::from("done"), "the second try answered");
    assert_eq!(
        f["KIND"],
        Value::from("unavailable"),
        "three tries, all unavailable"
    );
    assert_eq!(
        log.lock().unwrap().as_slice(),
        ["main-1", "main-2", "main-3", "main-4", "main-5"]
    );
}

/// 03: "If any child fails hard, `JOIN` raises a composite error including the first hard
/// error and aggregates others as `suppressed`" — first in lexical order: here the first
/// listed failure is the slowest child.
#[tokio::test]
async fn the_composite_par_error_is_the_lexically_first_failure_even_when_it_finishes_last() {
    let body = concat!(
        "  TRY:\n",
        "    PAR:\n",
        "      USE `fail` where: ms=400, type=\"not-allowed\"\n",
        "      USE `echo` where: v=1\n",
        "      USE `fail` where: ms=0, type=\"timeout\"\n",
        "    JOIN:\n",
        "      CAPTURE AA from `echo` map: \"v\"→AA\n",
        "  RECOVER (err):\n",
        "    SET KIND := err.type\n",
        "    SET MORE := err.suppressed\n",
        "  RETURN: KIND, MORE\n",
    );
    let (records, _) = returns("", body, "").await;
    let f = fields(&records);
    // The timeout finished first: its result is recorded before the not-allowed one.
    let finished: Vec<&str> = records
        .iter()
        .filter(|r| r.root.local() == "thread-result")
        .filter_map(|r| {
            if r.payload.contains("not-allowed") || r.payload.contains("NotAllowed") {
                Some("not-allowed")
            } else if r.payload.contains("timeout") || r.payload.contains("Timeout") {
                Some("timeout")
            } else {
                None
            }
        })
        .collect();
    assert_eq!(
        finished,
        ["timeout", "not-allowed"],
        "{:#?}",
        roots(&records)
    );
    assert_eq!(
        f["KIND"],
        Value::from("not-allowed"),
        "the first in lexical order"
    );
    match &f["MORE"] {
        Value::List(more) => {
            assert_eq!(more.len(), 1, "{more:?}");
            assert!(json(&more[0]).contains(r#""type":"timeout""#), "{more:?}");
        }
        other => panic!("{other:?}"),
    }
}

/// 03: "`PAR:` launches one-or-more `USE` statements concurrently in **lexical order**; each
/// child gets index `[0..n-1]`."
#[tokio::test]
async fn par_launches_its_children_in_lexical_order() {
    let body = concat!(
        "  PAR:\n",
        "    USE `fail` where: type=\"invalid-argument\", v=0\n",
        "    USE `echo` where: v=1\n",
        "    USE `flaky` where: v=2\n",
        "    USE `echo` where: v=3\n",
        "  JOIN:\n",
        "    CAPTURE AA from `echo` map: \"v\"→AA\n",
        "  RETURN: AA\n",
    );
    let log = CallLog::default();
    let pump = Setup::new(&doc("", body), &log).build();
    let thread = pump.post(None, None, &go("")).await.unwrap().thread();
    pump.settle(thread).await;
    let records = pump.history(thread).await.unwrap();
    let par = records
        .iter()
        .find(|r| r.root.is(PROCESS_NS, "par"))
        .unwrap();
    assert!(
        par.payload.contains(r#"tools="fail echo flaky echo""#),
        "{}",
        par.payload
    );
    // The spawns, in the order the process asked for them: call ids and tools in source order.
    let spawned: Vec<(String, String)> = records
        .iter()
        .filter(|r| r.root.local() == "spawn-thread")
        .map(|r| {
            let p = &r.payload;
            let after = |key: &str| {
                p.split(key)
                    .nth(1)
                    .and_then(|s| s.split('"').next())
                    .unwrap_or_default()
                    .to_owned()
            };
            (after("tool=\""), call_place(&after(" id=\"")).to_owned())
        })
        .collect();
    assert_eq!(
        spawned,
        [
            ("fail".to_owned(), "main-1".to_owned()),
            ("echo".to_owned(), "main-2".to_owned()),
            ("flaky".to_owned(), "main-3".to_owned()),
            ("echo".to_owned(), "main-4".to_owned())
        ],
        "{:#?}",
        roots(&records)
    );
    // The pump opened the child threads in that order (its `thread-spawned` notices), each
    // child's first record the call of its USE.
    let opened: Vec<String> = records
        .iter()
        .filter(|r| r.root.local() == "thread-spawned")
        .map(|r| {
            r.payload
                .split("path=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .and_then(|p| p.rsplit('.').next())
                .map(|sub| call_place(sub).to_owned())
                .unwrap_or_default()
        })
        .collect();
    assert_eq!(opened, ["main-1", "main-2", "main-3", "main-4"]);
    for child in pump.tree(thread).iter().filter(|t| t.id != thread) {
        let first = pump.history(child.id).await.unwrap().remove(0);
        let sub = child.path.rsplit('.').next().unwrap();
        assert!(
            first.root.local() == "call" && first.payload.contains(&format!(r#"id="{sub}""#)),
            "{sub}: {}",
            first.payload
        );
    }
    // Every call was made once; the failing first child makes JOIN fail.
    assert_eq!(counts(&log).values().sum::<usize>(), 4);
    assert!(
        failure(&records).message.starts_with("invalid-argument"),
        "{:?}",
        failure(&records)
    );
}
