//! phuc-loop's (seed 002) status and stop-reason names: one table in code
//! (`agentpump::governor::{seed_stop_reason, from_seed}`), the one docs/governor.md shows, read
//! both ways.

mod support;

use agentpump::governor::{
    Control, GovernorPolicy, HaltingReport, Signal, from_seed, seed_stop_reason,
};
use agentpump::{PumpHandle, Registration, Role, ThreadId};
use support::{body, governed, p, q, start};

/// One row of docs/governor.md's table: the seed's stop reason (`None` for "—"), our class and
/// our reasons.
struct Row {
    seed: Option<String>,
    class: String,
    reasons: Vec<String>,
}

/// The words in backticks of a table cell.
fn ticked(cell: &str) -> Vec<String> {
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

fn docs_table() -> Vec<Row> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/governor.md");
    let text = std::fs::read_to_string(path).unwrap();
    let header = "| phuc-loop status | phuc-loop `stop_reason` |";
    let start = text
        .find(header)
        .expect("docs/governor.md has the names table");
    text[start..]
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let seed = cells[2].split_whitespace().next().unwrap();
            Row {
                seed: (seed != "—").then(|| seed.to_owned()),
                class: ticked(cells[3]).remove(0),
                reasons: ticked(cells[4]),
            }
        })
        .collect()
}

/// Seed 002 §16.3: "stop_reason: MAX_ITERS or MAX_TOOL_CALLS"; §16.5: "stop_reason:
/// NULL_INPUT or HALTING_CRITERIA_MISSING"; §16.2: "stop_reason: SILENT_DIVERGENCE_DETECTED".
#[test]
fn the_docs_table_is_the_table_in_code_both_ways() {
    let rows = docs_table();
    assert!(rows.len() >= 12, "{} rows", rows.len());
    for row in &rows {
        for reason in &row.reasons {
            assert_eq!(
                seed_stop_reason(&row.class, reason),
                row.seed.as_deref(),
                "{} / {reason}",
                row.class
            );
        }
        if let Some(seed) = &row.seed {
            let (class, reason) = from_seed(seed).unwrap();
            assert_eq!(
                (class, reason),
                (row.class.as_str(), row.reasons[0].as_str()),
                "{seed}"
            );
        }
    }
    // Every seed name the code knows is on the page.
    for seed in [
        "SILENT_DIVERGENCE_DETECTED",
        "MAX_ITERS",
        "MAX_TOOL_CALLS",
        "BACKPRESSURE_SIGNAL",
        "INVARIANT_VIOLATION",
        "NULL_INPUT",
        "HALTING_CRITERIA_MISSING",
        "CONVERGENCE_CLAIM_WITHOUT_R_P_CERTIFICATE",
    ] {
        assert!(
            rows.iter().any(|r| r.seed.as_deref() == Some(seed)),
            "{seed} is not in docs/governor.md"
        );
    }
    assert_eq!(from_seed("max-turns"), None);
}

/// Aborts with the reason its payload names.
fn quitter() -> Registration {
    Registration::new(
        "quitter",
        support::Script::new(|msg, cx| {
            if msg.is_system() {
                return Ok(());
            }
            let reason = body(msg).to_owned();
            cx.signal(Signal::new(Control::Abort).reason(reason));
            Ok(())
        }),
    )
    .accepts(q("quit"))
    .role(Role::Agent)
}

async fn only_report(pump: &PumpHandle, thread: ThreadId) -> HaltingReport {
    let mut all = pump.reports(thread).await.unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    all.pop().unwrap()
}

/// Seed 002 §1 step 8: "IF certificate.type == BACKPRESSURE: status =
/// EXIT_BLOCKED(stop_reason=BACKPRESSURE_SIGNAL)".
#[tokio::test]
async fn an_abort_giving_backpressure_signal_is_the_seeds_backpressure_exit() {
    let pump = governed(GovernorPolicy::default_budget(), vec![quitter()]);
    let thread = start(&pump, &p("quit", "BACKPRESSURE_SIGNAL")).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (
            report.status.as_str(),
            report.class.as_str(),
            report.stop_reason.as_str(),
            report.seed_stop_reason.as_deref()
        ),
        (
            "EXIT_BLOCKED",
            "BACKPRESSURE",
            "upstream",
            Some("BACKPRESSURE_SIGNAL")
        )
    );
    let certificate = report.halting_certificate.as_ref().unwrap();
    assert_eq!(
        (certificate.kind.as_str(), certificate.lane.as_str()),
        ("BACKPRESSURE", "A")
    );
    let records = pump.history(thread).await.unwrap();
    assert_eq!(agentpump::history::audit(&records, &report), Ok(()));
}

/// Seed 002 §16.4: "stop_reason: one of Loop_Control.termination.stop_reasons" — an abort
/// giving another seed name keeps it, and the report names it as the seed's.
#[tokio::test]
async fn an_abort_giving_another_seed_name_keeps_it() {
    let pump = governed(GovernorPolicy::default_budget(), vec![quitter()]);
    let thread = start(&pump, &p("quit", "MAX_ITERS")).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (
            report.class.as_str(),
            report.stop_reason.as_str(),
            report.seed_stop_reason.as_deref()
        ),
        ("aborted", "MAX_ITERS", Some("MAX_ITERS"))
    );
    let thread = start(&pump, &p("quit", "gave-up")).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (report.stop_reason.as_str(), report.seed_stop_reason),
        ("gave-up", None)
    );
}
