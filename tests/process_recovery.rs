//! Crash recovery of processes (issue 15): "after kill -9 and restart, a running process
//! continues where it was, no completed USE is invoked again …, and the final RETURN equals that
//! of an uninterrupted run. Test it at several points, including mid-PAR."
//!
//! The first pump runs on a runtime of its own, dropped at the crash point (every task of the
//! pump ends where it was, as in a kill); a second pump on the same store finishes the run. Tool
//! calls are counted over both pumps. One test kills a real OS process on a SQLite file.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;

use agentpump::Delivery;
use agentpump::envelope::PROCESS_NS;
use agentpump::history::{HistoryStore, Record};
use agentpump::tool::Answer;
use agentpump::value::Value;
use support::process::{
    CallLog, Doomed, HangOn, Setup, counts, doc, go, returned, roots, run, settle_tree, wait_for,
};

/// What an uninterrupted run of `text` returns, and the calls it makes.
async fn uninterrupted(text: &str, steps: u64) -> (Answer, BTreeMap<String, usize>) {
    let log = CallLog::default();
    let mut setup = Setup::new(text, &log);
    setup.steps = steps;
    let pump = setup.build();
    let thread = pump.post(None, None, &go("")).await.unwrap().thread();
    let records = settle_tree(&pump, thread).await;
    (returned(&records), counts(&log))
}

/// Where the first pump dies.
enum At {
    /// While the tool handles the call with this id.
    Call(&'static str),
    /// While the process handles a delivery `hang` picks (it is recorded, not yet handled).
    Process(HangOn),
}

/// Runs `text` on a first pump until it hangs at `at` (and the root thread holds `also`: `n`
/// records of a local name), kills that pump, and finishes on a second pump over the same store:
/// the second pump's history of the root thread, and every call over both pumps.
async fn crash(
    text: &str,
    steps: u64,
    at: At,
    also: Option<(&str, usize)>,
) -> (Vec<Record>, BTreeMap<String, usize>) {
    let log = CallLog::default();
    let mut first = Setup::new(text, &log);
    first.steps = steps;
    let entered = Arc::new(tokio::sync::Notify::new());
    match at {
        At::Call(id) => {
            first.tool = first.tool.hang_on_call(id);
            first.tool.entered = Arc::clone(&entered);
        }
        At::Process(hang) => first.stall = Some((hang, Arc::clone(&entered))),
    }
    let store: Arc<dyn HistoryStore> = Arc::clone(&first.store);
    let mut second = Setup::new(text, &log);
    second.steps = steps;
    second.store = Arc::clone(&store);

    let (doomed, thread) = Doomed::start(first, go("")).await;
    tokio::time::timeout(std::time::Duration::from_secs(10), entered.notified())
        .await
        .expect("the first pump reaches the crash point");
    if let Some((local, n)) = also {
        wait_for(&store, thread, local, n).await;
    }
    doomed.crash().await;
    let before = store.thread(thread, 0).await.unwrap();
    assert!(
        support::process::answer(&before).is_none(),
        "the crash came before the RETURN: {:#?}",
        roots(&before)
    );

    let pump = second.build();
    let records = settle_tree(&pump, thread).await;
    let returns = records
        .iter()
        .filter(|r| r.root.is(PROCESS_NS, "return"))
        .count();
    assert_eq!(returns, 1, "one RETURN event: {:#?}", roots(&records));
    (records, counts(&log))
}

/// Every call of the uninterrupted run was made; each once, but `again` (in flight at the
/// crash: the pump delivers it again, 03: "engines MAY deduplicate based on a stable hash of
/// inputs") twice; no other call.
fn assert_calls(
    got: &BTreeMap<String, usize>,
    want: &BTreeMap<String, usize>,
    again: Option<&str>,
) {
    let mut expected = want.clone();
    if let Some(id) = again {
        *expected
            .get_mut(id)
            .expect("the call in flight is a call of the run") += 1;
    }
    assert_eq!(got, &expected, "calls over both pumps");
    let total: usize = got.values().sum();
    let uninterrupted: usize = want.values().sum();
    assert_eq!(total, uninterrupted + usize::from(again.is_some()));
}

/// Hangs on the answer to the call `id` reaching the process.
fn answer_to(id: &'static str) -> HangOn {
    Arc::new(move |msg: &Delivery| {
        Answer::parse(msg.payload())
            .and_then(Result::ok)
            .is_some_and(|a| a.call().map(agentpump::process::engine::call_place) == Some(id))
    })
}

const CHAIN: &str = concat!(
    "  USE `echo` where: v=1\n",
    "  CAPTURE AA from `echo` map: \"v\"→AA\n",
    "  TELL \"first\" why:AA\n",
    "  USE `echo` where: v=AA + 10\n",
    "  CAPTURE BB from `echo` map: \"v\"→BB\n",
    "  MILESTONE \"half\"\n",
    "  USE `echo` where: v=BB * 2\n",
    "  CAPTURE CC from `echo` map: \"v\"→CC\n",
    "  RETURN: AA, BB, CC\n",
);

/// DESIGN §8b: "state is a fold of the thread's history, so a restart continues without
/// invoking a completed USE again".
#[tokio::test]
async fn a_process_killed_mid_use_reinvokes_only_the_call_in_flight() {
    let text = doc("", CHAIN);
    let (want, calls) = uninterrupted(&text, 10_000).await;
    assert_eq!(calls.len(), 3);
    let (records, got) = crash(&text, 10_000, At::Call("main-2"), None).await;
    assert_eq!(returned(&records), want);
    assert_calls(&got, &calls, Some("main-2"));
    // The events before the crash are not recorded twice.
    for local in ["tell", "milestone"] {
        let n = records
            .iter()
            .filter(|r| r.root.is(PROCESS_NS, local))
            .count();
        assert_eq!(n, 1, "{local}: {:#?}", roots(&records));
    }
}

/// Issue 15: "no completed USE is invoked again … and the final RETURN equals that of an
/// uninterrupted run" — here the answer to call 2 is recorded, the process has not read it.
#[tokio::test]
async fn a_process_killed_between_an_answer_and_its_next_step_invokes_nothing_again() {
    let text = doc("", CHAIN);
    let (want, calls) = uninterrupted(&text, 10_000).await;
    let (records, got) = crash(&text, 10_000, At::Process(answer_to("main-2")), None).await;
    assert_eq!(returned(&records), want);
    assert_calls(&got, &calls, None);
}

/// 03: "RUN `process_id`" — the child process runs in a child thread; the crash comes while
/// the child's second USE is in flight.
#[tokio::test]
async fn a_process_killed_mid_run_finishes_the_child_without_rerunning_its_answered_calls() {
    let text = format!(
        "<triggers>\n<trigger event=\"{{{}}}go\" target=\"main\" />\n</triggers>\n<processes>\n<process id=\"main\">\n  USE `echo` where: v=5\n  CAPTURE AA from `echo` map: \"v\"→AA\n  RUN `child` where: x=AA\n  USE `echo` where: v=TWICE + 1\n  CAPTURE BB from `echo` map: \"v\"→BB\n  RETURN: AA, TWICE, BB\n</process>\n<process id=\"child\" args=\"x: Number\">\n  USE `echo` where: v=x\n  CAPTURE ONE from `echo` map: \"v\"→ONE\n  USE `echo` where: v=ONE * 2\n  CAPTURE TWICE from `echo` map: \"v\"→TWICE\n  RETURN: TWICE\n</process>\n</processes>\n",
        support::process::DEMO
    );
    let (want, calls) = uninterrupted(&text, 10_000).await;
    assert_eq!(
        calls.keys().map(String::as_str).collect::<Vec<_>>(),
        ["child-1", "child-2", "main-1", "main-3"],
        "main-2 is the RUN"
    );
    let (records, got) = crash(&text, 10_000, At::Call("child-2"), None).await;
    assert_eq!(returned(&records), want);
    match want {
        Answer::Result(r) => assert_eq!(
            Value::Object(r.fields).to_json(),
            r#"{"AA":5,"BB":11,"TWICE":10}"#
        ),
        other => panic!("{other:?}"),
    }
    assert_calls(&got, &calls, Some("child-2"));
}

/// 03: "`JOIN:` waits for all children" — the first and third children answered before the
/// crash, the second was in its tool.
#[tokio::test]
async fn a_process_killed_mid_par_reinvokes_only_the_child_in_flight() {
    let body = concat!(
        "  PAR:\n",
        "    USE `echo` where: v=1\n",
        "    USE `echo` where: v=2\n",
        "    USE `echo` where: v=3\n",
        "  JOIN:\n",
        "    CAPTURE AA from `echo` map: \"v\"→AA\n",
        "    CAPTURE BB from `echo` map: \"v\"→BB\n",
        "    CAPTURE CC from `echo` map: \"v\"→CC\n",
        "  USE `echo` where: v=AA + BB + CC\n",
        "  CAPTURE SUM from `echo` map: \"v\"→SUM\n",
        "  RETURN: AA, BB, CC, SUM\n",
    );
    let text = doc("", body);
    let (want, calls) = uninterrupted(&text, 10_000).await;
    assert_eq!(calls.len(), 4);
    let (records, got) = crash(
        &text,
        10_000,
        At::Call("main-2"),
        Some(("thread-result", 2)),
    )
    .await;
    assert_eq!(returned(&records), want);
    assert_calls(&got, &calls, Some("main-2"));
    let results = records
        .iter()
        .filter(|r| r.root.local() == "thread-result")
        .count();
    assert_eq!(results, 3, "one result per child: {:#?}", roots(&records));
}

/// 03: "modifiers: [atomic, timeout_ms, retry]", inside PAR and outside, across a crash: a
/// repeat gets the same id after the restart (a PAR's repeats leave once every child answered,
/// in lexical order), the one in flight is not sent again by the engine, and a repeat whose
/// answer history holds is read back (a restart that stopped there waited forever).
#[tokio::test]
async fn a_process_killed_during_a_repeat_resumes_with_the_same_calls() {
    let body = concat!(
        "  TRY:\n",
        "    PAR:\n",
        "      USE `fail` where: type=\"timeout\" (retry=2)\n",
        "      USE `echo` where: v=1\n",
        "    JOIN:\n",
        "      CAPTURE AA from `echo` map: \"v\"→AA\n",
        "  RECOVER (err):\n",
        "    SET KIND := err.type\n",
        "  RETURN: KIND\n",
    );
    let text = doc("", body);
    let (want, calls) = uninterrupted(&text, 10_000).await;
    assert_eq!(calls.len(), 4, "two children and two repeats: {calls:?}");
    let (records, got) = crash(&text, 10_000, At::Call("main-3"), None).await;
    assert_eq!(returned(&records), want);
    assert_calls(&got, &calls, Some("main-3"));
    // The same outside PAR: the restart reads the repeats' answers and goes on.
    let single = "  TRY:\n    USE `fail` where: type=\"timeout\" (retry=2)\n  RECOVER (err):\n    SET KIND := err.type\n  RETURN: KIND\n";
    let text = doc("", single);
    let (want, calls) = uninterrupted(&text, 10_000).await;
    assert_eq!(calls.len(), 3, "a call and two repeats: {calls:?}");
    let (records, got) = crash(&text, 10_000, At::Call("main-2"), None).await;
    assert_eq!(returned(&records), want);
    assert_calls(&got, &calls, Some("main-2"));
}

/// A FOREACH that takes several turns at 3 statements a turn, with a USE at item 8.
const LONG_LOOP: &str = concat!(
    "  SET TOTAL := 0\n",
    "  SET ITEMS := range(12)\n",
    "  FOREACH i IN ITEMS:\n",
    "    SET TOTAL := TOTAL + i\n",
    "    IF i = 8:\n",
    "      USE `echo` where: v=TOTAL\n",
    "      CAPTURE MID from `echo` map: \"v\"→MID\n",
    "  USE `echo` where: v=TOTAL\n",
    "  CAPTURE LAST from `echo` map: \"v\"→LAST\n",
    "  RETURN: TOTAL, MID, LAST\n",
);

/// Hangs on the `n`-th `continue` the process sends itself.
fn continue_number(n: usize) -> HangOn {
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    Arc::new(move |msg: &Delivery| {
        msg.qname().is(PROCESS_NS, "continue")
            && seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1 == n
    })
}

/// Issue 15: "a running process continues where it was"; docs/processes.md: a process runs
/// at most `steps_per_turn` statements per delivery, "then sends itself a `continue`".
#[tokio::test]
async fn a_long_foreach_killed_after_continue_turns_finishes_where_it_was() {
    let text = doc("", LONG_LOOP);
    let (want, calls) = uninterrupted(&text, 3).await;
    match &want {
        Answer::Result(r) => assert_eq!(
            Value::Object(r.fields.clone()).to_json(),
            r#"{"LAST":66,"MID":36,"TOTAL":66}"#
        ),
        other => panic!("{other:?}"),
    }
    // Killed while a `continue` is recorded but not handled (before the loop's USE) …
    let (records, got) = crash(&text, 3, At::Process(continue_number(4)), None).await;
    assert_eq!(returned(&records), want);
    assert_calls(&got, &calls, None);
    // … and with the loop's USE in flight, after several `continue` turns.
    let (records, got) = crash(&text, 3, At::Call("main-1"), Some(("continue", 3))).await;
    assert_eq!(returned(&records), want);
    assert_calls(&got, &calls, Some("main-1"));
    assert!(
        records
            .iter()
            .filter(|r| r.root.is(PROCESS_NS, "continue"))
            .count()
            >= 3
    );
}

/// The reference the crash tests compare with is itself a run on a pump: it makes each call
/// once and answers the RETURN (a check that `uninterrupted` is not trivially empty).
#[tokio::test]
async fn the_uninterrupted_reference_runs_are_what_the_tests_compare_with() {
    let log = CallLog::default();
    let pump = Setup::new(&doc("", CHAIN), &log).build();
    let (_, records) = run(&pump, &go("")).await;
    match returned(&records) {
        Answer::Result(r) => assert_eq!(
            Value::Object(r.fields).to_json(),
            r#"{"AA":1,"BB":11,"CC":22}"#
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        log.lock().unwrap().as_slice(),
        ["main-1", "main-2", "main-3"]
    );
}

/// The child process of [`a_process_killed_by_sigkill_on_sqlite_resumes_without_rerunning_calls`]:
/// a pump on the SQLite file `AGENTPUMP_PROCESS_DB` runs [`CHAIN`], its tool appending each call
/// id to `AGENTPUMP_PROCESS_CALLS` and never answering call `main-2`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by a_process_killed_by_sigkill_on_sqlite_resumes_without_rerunning_calls as its child process"]
async fn process_crash_child() {
    use std::io::Write as _;
    let db =
        std::env::var("AGENTPUMP_PROCESS_DB").expect("AGENTPUMP_PROCESS_DB names the database");
    let calls = std::env::var("AGENTPUMP_PROCESS_CALLS").expect("AGENTPUMP_PROCESS_CALLS");
    let log = CallLog::default();
    let mut setup = Setup::new(&doc("", CHAIN), &log);
    setup.store = Arc::new(agentpump::history::SqliteHistory::open(&db).unwrap());
    setup.tool = setup.tool.hang_on_call("main-2");
    setup.tool.file = Some(calls.into());
    let pump = setup.build();
    let thread = pump.post(None, None, &go("")).await.unwrap().thread();
    writeln!(std::io::stdout(), "thread {thread}").unwrap();
    std::io::stdout().flush().unwrap();
    // Killed long before this; the bound only keeps an orphan from living on.
    tokio::time::sleep(std::time::Duration::from_secs(60)).await;
}

/// A child process, killed (SIGKILL) and reaped when dropped: a failing test leaves no orphan.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Issue 15: "after kill -9 and restart, a running process continues where it was, no
/// completed USE is invoked again …, and the final RETURN equals that of an uninterrupted
/// run."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_killed_by_sigkill_on_sqlite_resumes_without_rerunning_calls() {
    use std::io::BufRead as _;
    let (want, _) = uninterrupted(&doc("", CHAIN), 10_000).await;
    let scratch = support::Scratch::new("process-sigkill");
    let (db, calls) = (scratch.db(), scratch.0.join("calls.txt"));
    let mut child = Child(
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "process_crash_child",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("AGENTPUMP_PROCESS_DB", &db)
            .env("AGENTPUMP_PROCESS_CALLS", &calls)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let thread: agentpump::ThreadId = std::io::BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|l| {
            l.rsplit_once("thread ")
                .map(|(_, t)| t.trim().parse().unwrap())
        })
        .expect("the child started the process");
    let lines = |path: &std::path::Path| -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !lines(&calls).iter().any(|l| l == "main-2") {
        assert!(
            std::time::Instant::now() < deadline,
            "call main-2 never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.0.kill().unwrap(); // SIGKILL
    child.0.wait().unwrap();
    assert_eq!(
        lines(&calls),
        ["main-1", "main-2"],
        "killed with main-2 in flight"
    );

    let log = CallLog::default();
    let store = Arc::new(agentpump::history::SqliteHistory::open(&db).unwrap());
    let mut setup = Setup::new(&doc("", CHAIN), &log);
    setup.store = Arc::clone(&store) as Arc<dyn HistoryStore>;
    setup.tool.file = Some(calls.clone());
    let pump = setup.build();
    let records = settle_tree(&pump, thread).await;
    assert_eq!(returned(&records), want);
    // main-1 answered before the kill: not invoked again; main-2 was in flight: delivered again.
    assert_eq!(lines(&calls), ["main-1", "main-2", "main-2", "main-3"]);
    pump.verify().await.unwrap();
    pump.shutdown(std::time::Duration::from_secs(1)).await;
    store.close().unwrap();
}
