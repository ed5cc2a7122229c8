//! The process language under hostile and careless input (issue 28): no text and no run can
//! overflow a stack or exhaust memory — every limit is named, with its code and place — and no
//! failure loses its cause or its answer. Each test quotes the line of issue 28 it checks.

mod support;

use std::sync::Arc;

use agentpump::history::{Record, RecordKind};
use agentpump::process::engine::{ProcessListener, Program};
use agentpump::process::{Code, Diagnostic, check_source};
use agentpump::tool::{Answer, TOOL_NS};
use agentpump::value::Value;
use agentpump::{Payload, PumpBuilder, PumpHandle, ThreadId};
use support::process::{DEMO, echo_or_fail, tool_of};

/// A document whose one process `main` starts on `<go>` of the demo namespace.
fn doc(constants: &str, body: &str) -> String {
    let constants = match constants {
        "" => String::new(),
        c => format!("<constants>\n{c}\n</constants>\n"),
    };
    format!(
        "{constants}<triggers>\n<trigger event=\"{{{DEMO}}}go\" target=\"main\" />\n</triggers>\n<processes>\n<process id=\"main\">\n{body}</process>\n</processes>\n"
    )
}

/// Runs `f` on a thread with a 1 MiB stack, half a tokio worker's (a debug build parses an
/// expression at the depth limit in under that), so a recursion the limits do not bound
/// overflows here.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(1024 * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// The AP-002 diagnostics of a check of `text`, on a small stack.
fn limit_errors(text: String) -> Vec<Diagnostic> {
    on_small_stack(move || {
        let checked = check_source(&text);
        checked
            .diagnostics
            .into_iter()
            .filter(|d| d.code == Code::LimitExceeded)
            .collect()
    })
}

/// A tool that answers its arguments as fields (`echo`) or fails (`fail`).
struct Echo;

#[agentpump::async_trait]
impl agentpump::Listener for Echo {
    async fn handle(
        &self,
        msg: &agentpump::Delivery,
        cx: &mut agentpump::Context,
    ) -> Result<(), agentpump::ListenerError> {
        if let Ok(call) = agentpump::tool::Call::parse(msg.payload()) {
            cx.reply(echo_or_fail(&call));
        }
        Ok(())
    }
}

/// A pump with every process of `text` (each as `tune` makes it) and the tool `echo`.
fn pump(text: &str, tune: impl Fn(ProcessListener) -> ProcessListener) -> PumpHandle {
    let program = Program::parse(text).unwrap_or_else(|e| panic!("{:#?}", e.0));
    let mut b = PumpBuilder::new().register(tool_of("echo", Echo));
    for id in program.process_ids() {
        let l = tune(ProcessListener::new(Arc::clone(&program), id).unwrap());
        b = b.register(l.registration());
    }
    b.build().unwrap()
}

/// Starts `main` with `<go/>` and waits until the tree settles: its thread and history.
async fn run(pump: &PumpHandle) -> (ThreadId, Vec<Record>) {
    let go = format!("<go xmlns=\"{DEMO}\"/>");
    let thread = support::start(pump, &go).await;
    (thread, pump.history(thread).await.unwrap())
}

/// The answer the starter got.
fn answer(records: &[Record]) -> Answer {
    let r = records
        .iter()
        .rev()
        .find(|r| r.kind == RecordKind::Egress && r.root.namespace() == TOOL_NS)
        .unwrap_or_else(|| panic!("no answer in {records:#?}"));
    let payload = Payload::parse(&r.payload, &Default::default()).unwrap();
    Answer::parse(&payload).unwrap().unwrap()
}

/// The error message the starter got.
fn failure(records: &[Record]) -> String {
    match answer(records) {
        Answer::Error(e) => e.message,
        Answer::Result(r) => panic!("returned {:?}", r.fields),
    }
}

/// The fields the starter got.
fn fields(records: &[Record]) -> std::collections::BTreeMap<String, Value> {
    match answer(records) {
        Answer::Result(r) => r.fields,
        Answer::Error(e) => panic!("failed: {}", e.message),
    }
}

/// "`process check` and `process run` abort on about 5 000 nested parentheses in an
/// expression, 50 000 chained `NOT` or unary `-`, or JSON constants nested 20 000–100 000
/// deep — a 10 KB line is enough"
#[test]
fn deep_expressions_are_refused_at_the_limit_not_overflowed() {
    let deep = |open: &str, inner: &str, close: &str, n: usize| {
        format!("{}{inner}{}", open.repeat(n), close.repeat(n))
    };
    let cases = [
        (
            "parentheses",
            doc("", &format!("  SET XX := {}\n", deep("(", "1", ")", 5_000))),
        ),
        (
            "NOT",
            doc(
                "",
                &format!("  SET XX := {}\n", deep("NOT ", "true", "", 50_000)),
            ),
        ),
        (
            "unary minus",
            doc("", &format!("  SET XX := {}\n", deep("-", "1", "", 50_000))),
        ),
        (
            "an operator chain",
            doc("", &format!("  SET XX := 1{}\n", " + 1".repeat(20_000))),
        ),
        (
            "a list",
            doc(
                "",
                &format!("  SET XX := {}\n", deep("[", "1", "]", 20_000)),
            ),
        ),
        (
            "a JSON constant",
            doc(&format!("XX: {}", deep("[", "", "]", 100_000)), "  TELL\n"),
        ),
        (
            "a JSON block",
            doc(
                &format!("XX: JSON<<\n{}\n>>", deep("{\"k\": ", "1", "}", 20_000)),
                "  TELL\n",
            ),
        ),
        (
            "calls and indexes",
            doc(
                "",
                &format!("  SET XX := {}\n", deep("len(", "[1]", ")[0]", 5_000)),
            ),
        ),
    ];
    for (what, text) in cases {
        let errors = limit_errors(text.clone());
        let [e] = errors.as_slice() else {
            panic!("{what}: {errors:#?}");
        };
        assert!(e.message.contains("deeper than 64 levels"), "{what}: {e:?}");
        let line = match what {
            "a JSON constant" => 2,
            "a JSON block" => 3,
            _ => 6,
        };
        assert_eq!(e.span.line, line, "{what}");
        assert!(e.span.column > 1, "{what}: {e:?}");
        let refused = on_small_stack(move || Program::parse(&text).map(|_| ()));
        let first = refused.expect_err(what).0.remove(0);
        assert_eq!(first.code, Code::LimitExceeded, "{what}");
    }
}

/// "every recursive parser, evaluator and printer in the crate (expressions, …, process
/// statements) gets an explicit depth limit with a precise error (code, line/column where there
/// is one), checked in `process check` where static"
#[test]
fn deep_blocks_are_refused_once_at_the_first_line_past_the_limit() {
    let body: String = (0..3_000)
        .map(|i| format!("{}IF true:\n", " ".repeat(2 + i)))
        .chain(std::iter::once(format!("{}TELL\n", " ".repeat(3_002))))
        .collect();
    let errors = limit_errors(doc("", &body));
    let [e] = errors.as_slice() else {
        panic!("{errors:#?}");
    };
    assert!(e.message.contains("deeper than 32 levels"), "{e:?}");
    // The process body is the first level: the 32nd IF opens the 33rd.
    assert_eq!((e.span.line, e.span.column), (6 + 32, 2 + 32 + 1));
}

/// The limits leave room: an expression 64 levels deep and blocks 32 levels deep check, run
/// and answer on a tokio worker's stack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expressions_and_blocks_at_the_limit_run() {
    let mut body = String::from("  SET XX := 0\n");
    for i in 1..32 {
        body.push_str(&format!("{}IF true:\n", " ".repeat(2 * i)));
    }
    let nots = format!("{}true", "NOT ".repeat(63));
    body.push_str(&format!(
        "{}SET XX := {}\n",
        " ".repeat(64),
        "(".repeat(63) + "1" + &")".repeat(63)
    ));
    body.push_str(&format!("{}SET YY := {nots}\n", " ".repeat(64)));
    body.push_str("  RETURN: x=XX, y=YY\n");
    let text = doc("", &body);
    assert!(
        !check_source(&text).has_errors(),
        "{:#?}",
        check_source(&text).diagnostics
    );
    let (_, records) = run(&pump(&text, |l| l)).await;
    let fields = fields(&records);
    assert_eq!(fields["x"], Value::Num(1.into()));
    assert_eq!(fields["y"], Value::Bool(false));
}

/// "a process can grow a value without bound (`SET L := L + L` sixty times, or
/// `concat(S, S)`): memory runs out and the process aborts; the step budget cannot help
/// because it takes only ~60 statements"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_growing_value_stops_at_max_value_bytes_and_recover_sees_it() {
    let grow = |init: &str, step: &str| {
        doc(
            "",
            &format!(
                "  SET VV := {init}\n  SET NN := range(60)\n  TRY:\n    FOREACH i IN NN:\n      SET VV := {step}\n  RECOVER (err):\n    RETURN: kind=err.type, message=err.message, line=err.line\n  RETURN: VV\n"
            ),
        )
    };
    let cases = [
        (
            "a list doubled",
            grow("[1]", "VV + VV"),
            "max_value_bytes = 8388608",
        ),
        (
            "a string doubled",
            grow("\"ab\"", "concat(VV, VV)"),
            "max_value_bytes = 8388608",
        ),
        (
            "a string added",
            grow("\"ab\"", "VV + VV"),
            "max_value_bytes = 8388608",
        ),
        (
            "a list of itself",
            grow("[1]", "[VV, VV]"),
            "max_value_bytes = 8388608",
        ),
        (
            "a list appended",
            grow("[1]", "append(VV, VV)"),
            "max_value_bytes = 8388608",
        ),
        (
            "an object",
            grow("{}", "{\"a\": VV, \"b\": VV}"),
            "max_value_bytes = 8388608",
        ),
        (
            "a join",
            grow("\"abcdefghij\"", "join(range(1000000), VV)"),
            "max_value_bytes = 8388608",
        ),
        (
            "a split",
            grow(
                "\"ab\"",
                "split(concat(VV, VV, VV, VV, VV, VV, VV, VV), \"\")",
            ),
            "max_value_bytes = 8388608",
        ),
    ];
    for (what, text, limit) in cases {
        let (_, records) = run(&pump(&text, |l| l)).await;
        let fields = fields(&records);
        assert_eq!(fields["kind"], Value::from("AP-002"), "{what}: {fields:?}");
        assert!(
            fields["message"].to_string().contains(limit),
            "{what}: {fields:?}"
        );
        assert_eq!(fields["line"], Value::Num(10.into()), "{what}");
    }
}

/// A value nested past 128 lists is refused where it would be built, before anything walks
/// it (a 100 000-deep list used to overflow the stack when it was dropped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_nested_past_the_limit_is_refused() {
    let text = doc(
        "",
        "  SET VV := [1]\n  SET NN := range(100000)\n  FOREACH i IN NN:\n    SET VV := [VV]\n  RETURN: VV\n",
    );
    let (_, records) = run(&pump(&text, |l| l)).await;
    let message = failure(&records);
    assert_eq!(
        message,
        "AP-002: value nested deeper than the limit of 128 lists and objects (line 9)"
    );
}

/// "every value the process language can build has a size limit (in the organism's limits,
/// with defaults)"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_value_limit_is_the_listeners_setting() {
    let text = doc("", "  SET VV := range(1000)\n  RETURN: n=len(VV)\n");
    let (_, records) = run(&pump(&text, |l| l)).await;
    assert_eq!(fields(&records)["n"], Value::Num(1000.into()));
    let (_, records) = run(&pump(&text, |l| l.max_value_bytes(1_000))).await;
    assert_eq!(
        failure(&records),
        "AP-002: value larger than the limit max_value_bytes = 1000 (bytes of its JSON text) (line 6)"
    );
}

/// Constants built from constants grow too: the document is refused when it loads.
#[test]
fn constants_that_multiply_are_refused_when_the_program_loads() {
    let ten = |of: &str| format!("[{}]", [of; 10].join(", "));
    let constants = format!(
        "AA: {}\nBB: {}\nCC: {}\nDD: {}\nEE: {}\nFF: {}\nGG: {}",
        ten("\"aaaaaaaaaaaaaaaaaaaaaaaa\""),
        ten("AA"),
        ten("BB"),
        ten("CC"),
        ten("DD"),
        ten("EE"),
        ten("FF")
    );
    let text = doc(&constants, "  RETURN: GG\n");
    let refused = Program::parse(&text).expect_err("grows past 8 MiB");
    assert_eq!(refused.0[0].code, Code::LimitExceeded);
    assert_eq!(refused.0[0].span.line, 7);
}

/// Starts `main` with `<go …attrs/>` (its arguments) and waits until the tree settles.
async fn run_with(pump: &PumpHandle, attrs: &str) -> Vec<Record> {
    let go = format!("<go xmlns=\"{DEMO}\" {attrs}/>");
    let thread = support::start(pump, &go).await;
    pump.history(thread).await.unwrap()
}

/// A document whose process `main` takes `n: Number`.
fn doc_n(body: &str) -> String {
    doc("", body).replace(
        "<process id=\"main\">",
        "<process id=\"main\" args=\"n: Number\">",
    )
}

/// "a process that RUNs itself recursively fails at depth 2 with `history-diverged` on a fresh
/// run (the child's first call id equals the parent's call id recorded as the first record of
/// the child's thread, so replay mistakes it for its own history)"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_runs_itself_recurses_to_its_base_case() {
    let text =
        doc_n("  SET DONE := n\n  IF n > 0:\n    RUN `main` where: n=n - 1\n  RETURN: DONE\n");
    for n in [1, 2, 5] {
        let records = run_with(&pump(&text, |l| l), &format!("n=\"{n}\"")).await;
        assert_eq!(fields(&records)["DONE"], Value::Num(0.into()), "n = {n}");
    }
}

/// "with no base case it stops at depth 1 \"ended idle without an answer\" instead of on the
/// depth budget" / "nested RUN failures read `failed: failed: … (line 3) (line 3)` and lose
/// the root cause (the depth budget that refused the spawn)"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_that_runs_itself_without_end_stops_on_the_depth_budget_once() {
    let text = doc("", "  RUN `main`\n  RETURN: done=true\n");
    let (_, records) = run(&pump(&text, |l| l)).await;
    assert_eq!(
        failure(&records),
        "not-allowed: budget-exhausted: spawn refused: depth 9 is over the max-depth budget (line 6)"
    );
}

/// "`ASSERT failed at line 4 (line 4)`"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_assert_names_its_line_once() {
    let text = doc("", "  SET AA := 1\n  ASSERT AA > 2\n  RETURN: AA\n");
    let (_, records) = run(&pump(&text, |l| l)).await;
    assert_eq!(
        failure(&records),
        "assert-failed: ASSERT does not hold (line 7)"
    );
}

/// "a run stopped by a budget ends with \"ended without answering (halted? see the
/// transcript)\" instead of the halt's class and reason"
#[cfg(feature = "host")]
#[test]
fn process_run_ends_with_the_halts_class_and_reason() {
    let dir = support::Scratch::new("process-run-halt");
    let aps = dir.write(
        "calls.aps",
        "<processes>\n<process id=\"calls\">\n  SET NN := range(100)\n  FOREACH i IN NN:\n    USE `calculator` where: expression=\"1 + 1\"\n  RETURN: done=true\n</process>\n</processes>\n",
    );
    let organism = dir.write(
        "organism.toml",
        "[governor.budget]\ntool_calls = 3\n\n[[listener]]\nname = \"calculator\"\nkind = \"builtin\"\nbuiltin = \"calculator\"\n",
    );
    let (ok, _, stderr) = support::agentpump_in(
        &std::env::temp_dir(),
        &[
            "process",
            "run",
            aps.to_str().unwrap(),
            "--organism",
            organism.to_str().unwrap(),
        ],
    );
    assert!(!ok);
    assert!(
        stderr.contains("the process was halted: TIMEOUT max-tool-calls"),
        "{stderr}"
    );
}

/// The huh notices recorded in `thread`: (code, payload).
async fn huhs(pump: &PumpHandle, thread: ThreadId) -> Vec<(String, String)> {
    let records = pump.history(thread).await.unwrap();
    records
        .iter()
        .filter(|r| r.kind == RecordKind::System && r.root.local() == "huh")
        .map(|r| (support::notice(r).1, r.payload.to_string()))
        .collect()
}

/// "a `<result>` for a call id no run made, posted to a process, gets 201 and then silence: no
/// `huh`, the thread idles (the README promises nothing fails silently)"
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_to_a_call_no_run_made_gets_a_huh_naming_why() {
    let text = doc(
        "",
        "  USE `echo` where: aa=1\n  CAPTURE EE from `echo`\n  RETURN: EE\n",
    );
    let pump = pump(&text, |l| l);
    let forged = format!(
        "<result xmlns=\"{TOOL_NS}\" tool=\"echo\" call=\"main-7-000000000000\"><field name=\"x\">1</field></result>"
    );
    // A thread with no run of the process.
    let fresh = pump
        .post(None, Some("main"), &forged)
        .await
        .unwrap()
        .thread();
    pump.settle(fresh).await;
    let found = huhs(&pump, fresh).await;
    assert!(
        found.iter().any(|(code, text)| code == "invalid-payload"
            && text.contains("has no run in this thread")
            && text.contains("main-7-000000000000")),
        "{found:?}"
    );
    // A thread whose run made other calls.
    let (thread, _) = run(&pump).await;
    pump.post(Some(thread), Some("main"), &forged)
        .await
        .unwrap();
    pump.settle(thread).await;
    let found = huhs(&pump, thread).await;
    assert!(
        found.iter().any(|(code, text)| code == "invalid-payload"
            && text.contains("made no call `main-7-000000000000`")),
        "{found:?}"
    );
}

/// "a UTF-8 byte-order mark before `<processes>` gives one AG-009 per line and never names
/// the BOM"
#[test]
fn a_byte_order_mark_before_the_document_is_skipped() {
    let text = format!("\u{feff}{}", doc("", "  RETURN: done=true\n"));
    let checked = check_source(&text);
    assert!(checked.diagnostics.is_empty(), "{:#?}", checked.diagnostics);
    assert!(Program::parse(&text).is_ok());
}

/// "a missing tool (`USE `nosuchtool``) passes `process check` and fails at run time without
/// a line"
#[test]
fn a_use_of_a_tool_the_host_does_not_register_is_an_error_at_its_line() {
    use agentpump::process::check::Policy;
    let text = doc(
        "",
        "  USE `echo`\n  USE `nosuchtool` where: aa=1\n  RETURN: done=true\n",
    );
    let policy = Policy {
        registered: Some(vec!["echo".into()]),
        ..Policy::default()
    };
    let checked = agentpump::process::check_source_with(&text, &policy);
    let errors: Vec<_> = checked
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::ToolPolicy)
        .collect();
    let [e] = errors.as_slice() else {
        panic!("{:#?}", checked.diagnostics);
    };
    assert_eq!((e.span.line, e.span.column), (7, 7));
    assert!(
        e.message.contains("`nosuchtool` is not registered"),
        "{e:?}"
    );
    // Without knowing the host's tools, nothing is said.
    assert!(
        check_source(&text)
            .diagnostics
            .iter()
            .all(|d| d.code != Code::ToolPolicy)
    );
}

/// The same at `process run`: the error names the line, nothing runs.
#[cfg(feature = "host")]
#[test]
fn process_run_names_the_line_of_a_missing_tool() {
    let dir = support::Scratch::new("process-run-missing-tool");
    let aps = dir.write(
        "missing.aps",
        "<processes>\n<process id=\"missing\">\n  USE `nosuchtool` where: aa=1\n  RETURN: done=true\n</process>\n</processes>\n",
    );
    let (ok, stdout, stderr) = support::agentpump_in(
        &std::env::temp_dir(),
        &["process", "run", aps.to_str().unwrap()],
    );
    assert!(!ok);
    assert!(
        stdout.contains("AG-017") && stdout.contains("missing.aps:3:7"),
        "{stdout}"
    );
    assert!(stderr.contains("nothing ran"), "{stderr}");
}

/// Found last stop: "`agentpump process run FILE --organism O` fails “registered twice” when O
/// already registers that file's process". The organism's own process runs; a different
/// process of that name is refused naming the clash.
#[cfg(feature = "host")]
#[test]
fn process_run_with_the_organism_that_registers_its_process_runs_it() {
    let dir = support::Scratch::new("process-run-own-organism");
    let body =
        "<processes>\n<process id=\"main\">\n  RETURN: done=true\n</process>\n</processes>\n";
    let aps = dir.write("p.aps", body);
    let other = dir.write("q.aps", body);
    let organism = dir.write(
        "organism.toml",
        "[organism]\nname = \"o\"\n\n[[listener]]\nname = \"main\"\nkind = \"process\"\nfile = \"p.aps\"\n",
    );
    let run = |file: &std::path::Path| {
        let args = [
            "process",
            "run",
            file.to_str().unwrap(),
            "--organism",
            organism.to_str().unwrap(),
        ];
        support::agentpump_in(&dir.0, &args)
    };
    let (ok, stdout, stderr) = run(&aps);
    assert!(ok, "{stdout}\n{stderr}");
    assert!(stdout.contains("done"), "{stdout}");
    let (ok, _, stderr) = run(&other);
    assert!(!ok);
    assert!(
        stderr.contains("the process `main` has the name of the organism's listener `main`"),
        "{stderr}"
    );
}

/// The events of `main` recorded in `thread`.
async fn events(pump: &PumpHandle, thread: ThreadId, local: &str) -> usize {
    let records = pump.history(thread).await.unwrap();
    records
        .iter()
        .filter(|r| {
            r.root.namespace() == agentpump::envelope::PROCESS_NS && r.root.local() == local
        })
        .count()
}

/// "a PAR wider than 64 children fails at its JOIN with \"more than 64 payloads in one delivery
/// (line 504)\" — `process check` accepts a PAR that can never run, and the limit is not the
/// documented thread budget"
#[test]
fn a_par_wider_than_its_delivery_can_carry_is_refused_by_the_check() {
    let uses: String = (0..70)
        .map(|i| format!("    USE `echo` where: aa={i}\n"))
        .collect();
    let text = doc(
        "",
        &format!("  PAR:\n{uses}  JOIN:\n    CAPTURE EE from `echo`\n  RETURN: EE\n"),
    );
    let errors = limit_errors(text);
    let [e] = errors.as_slice() else {
        panic!("{errors:#?}");
    };
    assert_eq!(e.span.line, 6);
    assert!(
        e.message.contains("PAR launches 70 USEs; at most 25"),
        "{e:?}"
    );
}

/// The widest PAR the check allows runs and joins, even under the time policy (a warning per
/// child) and after a loop of events in the same turn.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_widest_par_runs_and_joins() {
    let uses: String = (0..25)
        .map(|i| format!("    USE `echo` where: aa={i}\n"))
        .collect();
    let text = doc(
        "",
        &format!(
            "  SET NN := range(50)\n  FOREACH i IN NN:\n    TELL \"before\"\n  PAR:\n{uses}  JOIN:\n    CAPTURE EE from `echo`\n  RETURN: EE\n"
        ),
    );
    let pump = pump(&text, |l| l.require_timeout(true));
    let (thread, records) = run(&pump).await;
    assert_eq!(
        fields(&records)["EE"],
        Value::Object([("aa".to_owned(), Value::Num(0.into()))].into())
    );
    assert_eq!(events(&pump, thread, "tell").await, 50);
    assert!(huhs(&pump, thread).await.is_empty());
}

/// The same class: a turn of 100 TELLs used to lose 38 of them to `max_outputs`
/// (`limit-exceeded`); every event is recorded now, the turn going on in the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_never_emits_more_than_a_delivery_carries() {
    let text = doc(
        "",
        "  SET NN := range(100)\n  FOREACH i IN NN:\n    TELL \"step\"\n  RETURN: done=true\n",
    );
    let pump = pump(&text, |l| l);
    let (thread, records) = run(&pump).await;
    assert_eq!(fields(&records)["done"], Value::Bool(true));
    assert_eq!(events(&pump, thread, "tell").await, 100);
    assert!(huhs(&pump, thread).await.is_empty());
}
