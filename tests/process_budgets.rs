//! The governor's budgets over a whole process tree (issue 15: "The governor's budgets apply to
//! the whole process tree"): USEs count as tool calls, PAR children are threads of the tree,
//! and a RUN child's turns are charged to the tree its parent heads.

mod support;

use agentpump::governor::{Budget, HaltingReport};
use agentpump::history::{Record, RecordKind};
use agentpump::{PumpHandle, ThreadId};
use support::process::{CallLog, Setup, counts, doc, go, roots};

/// Runs `setup` from `<go>` until its tree is quiet: the root, its history, its halting report.
async fn run_governed(setup: &Setup) -> (PumpHandle, ThreadId, Vec<Record>, HaltingReport) {
    let pump = setup.build();
    let thread = pump.post(None, None, &go("")).await.unwrap().thread();
    pump.settle(thread).await;
    for t in pump.tree(thread) {
        pump.settle(t.id).await;
    }
    pump.settle(thread).await;
    let records = pump.history(thread).await.unwrap();
    let mut reports = pump.reports(thread).await.unwrap();
    assert_eq!(reports.len(), 1, "{:#?}", roots(&records));
    (pump, thread, records, reports.remove(0))
}

/// The spent amount of a budget line of `report`.
fn spent(report: &HaltingReport, line: &str) -> (String, Option<String>) {
    let l = &report.budget[line];
    (l.spent.clone(), l.limit.clone())
}

/// docs/processes.md: "tool calls count against `max_tool_calls`"; the governor halts the
/// thread TIMEOUT `max-tool-calls` when the k-th call is spent, and the next call reaches
/// no tool.
#[tokio::test]
async fn the_uses_of_a_foreach_halt_at_the_tool_call_budget() {
    let log = CallLog::default();
    let body = concat!(
        "  SET ITEMS := range(10)\n",
        "  FOREACH i IN ITEMS:\n",
        "    USE `echo` where: v=i\n",
        "    CAPTURE LAST from `echo` map: \"v\"→LAST\n",
        "  RETURN: LAST\n",
    );
    let mut setup = Setup::new(&doc("", body), &log);
    setup.budget = Some(Budget {
        tool_calls: Some(3),
        ..Budget::default()
    });
    let (_, _, records, report) = run_governed(&setup).await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("TIMEOUT", "max-tool-calls"),
        "{report:?}"
    );
    assert_eq!(
        spent(&report, "max-tool-calls"),
        ("3".to_owned(), Some("3".to_owned()))
    );
    assert_eq!(
        log.lock().unwrap().as_slice(),
        ["main-1", "main-2", "main-3"],
        "k calls reach the tool, no more"
    );
    assert!(
        !records.iter().any(|r| r.kind == RecordKind::Egress),
        "no RETURN: {:#?}",
        roots(&records)
    );
    assert!(
        records.iter().any(|r| r.root.local() == "halt"),
        "the halt is recorded"
    );
}

/// 03: "`PAR:` launches one-or-more `USE` statements concurrently" — each in a child thread
/// carved from the tree's budgets (docs/processes.md). With room for three threads, the
/// fourth and fifth spawns are refused: the process is told (`budget-exhausted`), the tree
/// halts TIMEOUT `max-threads`, and only three calls reach the tool.
#[tokio::test]
async fn a_par_wider_than_the_thread_budget_is_refused_visibly_and_halts() {
    let log = CallLog::default();
    let body = concat!(
        "  PAR:\n",
        "    USE `echo` where: v=1\n",
        "    USE `echo` where: v=2\n",
        "    USE `echo` where: v=3\n",
        "    USE `echo` where: v=4\n",
        "    USE `echo` where: v=5\n",
        "  JOIN:\n",
        "    CAPTURE AA from `echo` map: \"v\"→AA\n",
        "  RETURN: AA\n",
    );
    let mut setup = Setup::new(&doc("", body), &log);
    setup.budget = Some(Budget {
        threads: Some(3),
        ..Budget::default()
    });
    let (pump, thread, records, report) = run_governed(&setup).await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("TIMEOUT", "max-threads"),
        "{report:?}"
    );
    assert_eq!(
        spent(&report, "max-threads"),
        ("3".to_owned(), Some("3".to_owned()))
    );
    let refused = records
        .iter()
        .find(|r| r.kind == RecordKind::System && r.payload.contains("budget-exhausted"))
        .unwrap_or_else(|| panic!("the refusal is told: {:#?}", roots(&records)));
    assert_eq!(refused.to.as_deref(), Some("main"), "told to the process");
    assert!(
        refused.payload.contains("2 outputs") && refused.payload.contains("max-threads"),
        "{}",
        refused.payload
    );
    let mut called: Vec<String> = counts(&log).into_keys().collect();
    called.sort();
    assert_eq!(
        called,
        ["main-1", "main-2", "main-3"],
        "the first three, in source order"
    );
    assert_eq!(pump.tree(thread).len(), 1 + 3);
    assert!(!records.iter().any(|r| r.kind == RecordKind::Egress));
}

/// Issue 15: "The governor's budgets apply to the whole process tree" — the child's loop
/// would need some two hundred turns; the tree has forty, and the parent's report counts the
/// child's turns with its own.
#[tokio::test]
async fn a_run_child_spends_the_turn_budget_of_its_parent_tree() {
    let log = CallLog::default();
    let text = format!(
        "<triggers>\n<trigger event=\"{{{}}}go\" target=\"main\" />\n</triggers>\n<processes>\n<process id=\"main\">\n  RUN `child`\n  RETURN: TOTAL\n</process>\n<process id=\"child\">\n  SET TOTAL := 0\n  SET ITEMS := range(500)\n  FOREACH i IN ITEMS:\n    SET TOTAL := TOTAL + i\n  RETURN: TOTAL\n</process>\n</processes>\n",
        support::process::DEMO
    );
    let mut setup = Setup::new(&text, &log);
    setup.steps = 5;
    setup.budget = Some(Budget {
        turns: Some(40),
        ..Budget::default()
    });
    let (pump, thread, records, report) = run_governed(&setup).await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("TIMEOUT", "max-turns"),
        "{report:?}"
    );
    assert_eq!(
        spent(&report, "max-turns"),
        ("40".to_owned(), Some("40".to_owned()))
    );
    let tree = pump.tree(thread);
    let child = tree.iter().find(|t| t.parent == Some(thread)).unwrap();
    let root = tree.iter().find(|t| t.id == thread).unwrap();
    assert!(
        child.counters.deliveries > root.counters.deliveries,
        "most turns were the child's: {child:?} {root:?}"
    );
    assert_eq!(
        child.counters.deliveries + root.counters.deliveries,
        40,
        "the root's budget line counts both threads' turns"
    );
    // The parent hears the child halted; nothing is silent.
    let result = records
        .iter()
        .find(|r| r.root.local() == "thread-result")
        .unwrap();
    assert!(
        result.payload.contains(r#"status="halted""#) && result.payload.contains("max-turns"),
        "{}",
        result.payload
    );
}
