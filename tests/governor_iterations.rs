//! Per-iteration budgets (phuc-loop §6.1) for threads whose iterations are self-messages: the
//! tool calls and the handler time of one delivery of a listener's own message to itself.

mod support;

use std::time::Duration;

use agentpump::governor::{GovernorPolicy, HaltingReport, IterationBudget};
use agentpump::host::organism::Organism;
use agentpump::{PumpBuilder, PumpConfig, PumpHandle, Registration, Role, ThreadId, Usage};
use support::{number, p, q, start};

/// Iterates on `<step>n</step>` up to step 5; step n reports n tool calls, and sleeps `nap`
/// from step `slow` on. The first step (from the client) reports `first_calls` instead.
fn stepper(first_calls: u64, slow: u64, nap: Duration) -> Registration {
    Registration::new(
        "stepper",
        support::Script::new(move |msg, cx| {
            if msg.is_system() {
                return Ok(());
            }
            let n: u64 = number(msg);
            let tool_calls = if n == 1 { first_calls } else { n };
            cx.usage(Usage {
                tool_calls,
                ..Usage::default()
            });
            if n >= slow {
                std::thread::sleep(nap);
            }
            if n < 5 {
                cx.emit(p("step", &(n + 1).to_string()));
            }
            Ok(())
        }),
    )
    .accepts(q("step"))
    .role(Role::Agent)
}

fn pump(iteration: IterationBudget, stepper: Registration) -> PumpHandle {
    let config = PumpConfig {
        governor: GovernorPolicy {
            iteration,
            ..GovernorPolicy::default()
        },
        ..PumpConfig::default()
    };
    PumpBuilder::new()
        .config(config)
        .register(stepper)
        .build()
        .unwrap()
}

async fn only_report(pump: &PumpHandle, thread: ThreadId) -> HaltingReport {
    let mut all = pump.reports(thread).await.unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    all.pop().unwrap()
}

/// Seed 002 §6.1: "max_tool_calls_per_iteration: 80".
#[tokio::test]
async fn an_iteration_past_its_tool_calls_halts_timeout_naming_the_limit() {
    let limits = IterationBudget {
        tool_calls: Some(3),
        ..IterationBudget::default()
    };
    // The client's message is not an iteration: its 50 tool calls are not held to the limit;
    // step 3 spends the limit exactly, step 4 goes past it.
    let pump = pump(limits, stepper(50, u64::MAX, Duration::ZERO));
    let thread = start(&pump, &p("step", "1")).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (
            report.status.as_str(),
            report.class.as_str(),
            report.stop_reason.as_str()
        ),
        (
            "EXIT_BUDGET_EXCEEDED",
            "TIMEOUT",
            "max-tool-calls-per-iteration"
        )
    );
    assert_eq!(report.iterations_completed, 4);
    let line = &report.budget["max-tool-calls-per-iteration"];
    assert_eq!(
        (line.limit.as_deref(), line.spent.as_str()),
        (Some("3"), "4")
    );
    assert!(!report.budget.contains_key("max-wall-clock-per-iteration"));
    // `verify --certificates` re-derives it from the recorded history.
    let records = pump.history(thread).await.unwrap();
    assert_eq!(agentpump::history::audit(&records, &report), Ok(()));
}

/// Seed 002 §6.1: "max_seconds_per_iteration: 1800".
#[tokio::test]
async fn an_iteration_past_its_wall_clock_halts_timeout_naming_the_limit() {
    let limits = IterationBudget {
        wall_clock: Some(Duration::from_millis(100)),
        ..IterationBudget::default()
    };
    let pump = pump(limits, stepper(0, 3, Duration::from_millis(250)));
    let thread = start(&pump, &p("step", "1")).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("TIMEOUT", "max-wall-clock-per-iteration")
    );
    assert_eq!(report.iterations_completed, 3);
    let line = &report.budget["max-wall-clock-per-iteration"];
    assert_eq!(line.limit.as_deref(), Some("100"));
    assert!(line.spent.parse::<u64>().unwrap() >= 250, "{line:?}");
}

/// An iteration past both limits names both, as a breach of whole budgets does.
#[tokio::test]
async fn an_iteration_past_both_limits_names_both() {
    let limits = IterationBudget {
        tool_calls: Some(1),
        wall_clock: Some(Duration::from_millis(50)),
    };
    let pump = pump(limits, stepper(0, 2, Duration::from_millis(120)));
    let thread = start(&pump, &p("step", "1")).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        report.stop_reason,
        "max-tool-calls-per-iteration max-wall-clock-per-iteration"
    );
}

/// Without per-iteration limits (the default) the same loop runs to its end.
#[tokio::test]
async fn without_limits_iterations_are_not_held() {
    let pump = pump(
        IterationBudget::default(),
        stepper(50, u64::MAX, Duration::ZERO),
    );
    let thread = start(&pump, &p("step", "1")).await;
    assert!(pump.reports(thread).await.unwrap().is_empty());
}

/// `[governor.budget]` takes the seed's two per-iteration limits, spelled as its other keys.
#[test]
fn organism_toml_sets_the_per_iteration_limits() {
    let text =
        "[governor.budget]\ntool_calls_per_iteration = 80\nwall_clock_ms_per_iteration = 1800000\n";
    let config = Organism::parse(text, "organism.toml")
        .unwrap()
        .config("organism.toml")
        .unwrap();
    assert_eq!(
        config.governor.iteration,
        IterationBudget {
            tool_calls: Some(80),
            wall_clock: Some(Duration::from_secs(1800)),
        }
    );
    let bad = "[governor.budget]\nseconds_per_iteration = 5\n";
    let err = Organism::parse(bad, "organism.toml")
        .unwrap_err()
        .to_string();
    assert!(err.contains("seconds_per_iteration"), "{err}");
}
