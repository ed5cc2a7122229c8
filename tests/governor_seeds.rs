//! The governor against phuc-loop's exact rules (seed 002), each test next to the line it checks:
//! DIVERGED on three rising residuals, EXACT on a residual of zero, EXIT_NEED_INFO for a goal
//! without certificates, and the report fields phuc-loop requires.

mod support;

use agentpump::governor::{Goal, GovernorPolicy, HaltingReport};
use agentpump::{PumpHandle, Registration, Role, ThreadId, ThreadState};
use rust_decimal::Decimal;
use support::{Script, p, q, start};

fn pump(registration: Registration) -> PumpHandle {
    support::governed(GovernorPolicy::default_budget(), vec![registration])
}

/// On `<goal>CERTS</goal>` declares a goal with those certificates (none when empty, r-p 0.1);
/// on `<r>V</r>` reports residual V.
fn optimizer() -> Registration {
    Registration::new(
        "optimizer",
        Script::new(|msg, cx| {
            let body = support::body(msg);
            match msg.qname().local() {
                "goal" => cx.goal(&Goal {
                    text: "approach zero".into(),
                    certificates: body
                        .split_whitespace()
                        .map(|c| c.parse().unwrap())
                        .collect(),
                    r_p: Some(Decimal::new(1, 1)),
                    ..Goal::default()
                }),
                "r" => cx.residual(body.parse().unwrap()),
                _ => {}
            }
            Ok(())
        }),
    )
    .accepts(q("r"))
    .accepts(q("goal"))
    .role(Role::Agent)
}

/// Declares the goal, then reports each residual, settling after each.
async fn run(pump: &PumpHandle, certificates: &str, residuals: &[&str]) -> ThreadId {
    let thread = start(pump, &p("goal", certificates)).await;
    for r in residuals {
        if pump.thread(thread).unwrap().state.is_closed() {
            break;
        }
        pump.post(Some(thread), None, &p("r", r)).await.unwrap();
        pump.settle(thread).await;
    }
    thread
}

async fn report(pump: &PumpHandle, thread: ThreadId) -> HaltingReport {
    let mut reports = pump.reports(thread).await.unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    reports.pop().unwrap()
}

const ALL: &str = "EXACT CONVERGED DIVERGED";

/// phuc-loop §1: "IF len(residuals) >= 3 AND all_increasing(residuals[-3:]): … status =
/// EXIT_DIVERGED; BREAK" — three residuals, each larger than the one before, are enough.
#[tokio::test]
async fn three_rising_residuals_diverge() {
    let pump = pump(optimizer());
    let thread = run(&pump, ALL, &["5", "4", "6", "7", "8", "9"]).await;
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.status.as_str()),
        ("DIVERGED", "EXIT_DIVERGED")
    );
    let history = r
        .halting_certificate
        .unwrap()
        .residual_history_decimal_strings;
    assert_eq!(
        history,
        ["5", "4", "6", "7"],
        "halted on the third of 4 < 6 < 7"
    );
    // §3.1 DIVERGED "required_output: residual_history, divergence_start_iteration,
    // last_known_good_iteration": 4 (iteration 2) was the last good one, 6 (3) the first rise.
    assert_eq!(
        (r.last_known_good_iteration, r.divergence_start_iteration),
        (Some(2), Some(3))
    );
    let best = r.best_result_so_far.unwrap();
    assert_eq!(
        (best.iteration, best.residual_decimal_string.as_str()),
        (2, "4")
    );
    // Two rises are not three residuals rising.
    let thread = run(&pump, ALL, &["5", "6", "5", "6"]).await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
}

/// phuc-loop §3.1 EXACT: "residual: 0 (exact)", lane A; `IF certificate.type == EXACT: status =
/// EXIT_CONVERGED(lane=A)`.
#[tokio::test]
async fn a_residual_of_exactly_zero_is_exact_when_exact_applies() {
    let pump = pump(optimizer());
    let thread = run(&pump, ALL, &["0.5", "0"]).await;
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.stop_reason.as_str()),
        ("EXACT", "residual-zero")
    );
    let cert = r.halting_certificate.unwrap();
    assert_eq!((cert.kind.as_str(), cert.lane.as_str()), ("EXACT", "A"));
    assert_eq!(r.status, "EXIT_CONVERGED");
    assert_eq!(
        (r.divergence_start_iteration, r.last_known_good_iteration),
        (None, None)
    );
    // A goal that declares only CONVERGED gets CONVERGED (0 < r-p), never EXACT.
    let thread = run(&pump, "CONVERGED", &["0.5", "0"]).await;
    let r = report(&pump, thread).await;
    assert_eq!(
        (
            r.class.as_str(),
            r.halting_certificate.unwrap().lane.as_str()
        ),
        ("CONVERGED", "B")
    );
    // A goal that declares only EXACT is not ended by a residual below r-p that is not zero.
    let thread = run(&pump, "EXACT", &["0.5", "0.01"]).await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
}

/// phuc-loop §3.2: "If `halting_certificates_applicable` is missing or empty: `EXIT_NEED_INFO`
/// immediately."
#[tokio::test]
async fn a_goal_without_certificates_halts_at_once_needing_info() {
    let pump = pump(optimizer());
    let thread = run(&pump, "", &["0.5"]).await;
    let r = report(&pump, thread).await;
    assert_eq!(
        (r.class.as_str(), r.status.as_str(), r.stop_reason.as_str()),
        ("need-info", "EXIT_NEED_INFO", "no-certificates-declared")
    );
    assert!(r.halting_certificate.is_none());
    assert_eq!(
        r.iterations_completed, 1,
        "halted in the turn that declared the goal"
    );
}
