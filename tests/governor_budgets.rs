//! The governor's budgets, case by case from issue 13: a breach on the last turn, a limit reached
//! exactly, the spawner's floor under carve-outs, tool calls, and warnings that cost nothing.
//!
//! Ask-Loop v2 §3: "The host MUST enforce `MaxTurns`, `MaxWallClock`, and fuel/token budgets. If
//! a limit is breached, the host emits a `HALT` signal" and "If multiple or conflicting signals
//! appear, the host MUST resolve them in the order: `abort` > `halt` > `done` > `continue`."

mod support;

use agentpump::governor::{
    Budget, CertificateType, Control, Goal, GovernorPolicy, HaltingReport, Signal,
};
use agentpump::history::RecordKind;
use agentpump::system::Spawn;
use agentpump::{PumpHandle, Registration, Role, ThreadId, ThreadState, Usage};
use rust_decimal::Decimal;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::{Gate, Script, governed as pump_with, notices, number, p, q, start};

async fn reports(pump: &PumpHandle, thread: ThreadId) -> Vec<HaltingReport> {
    pump.reports(thread).await.unwrap()
}

async fn only_report(pump: &PumpHandle, thread: ThreadId) -> HaltingReport {
    let mut all = reports(pump, thread).await;
    assert_eq!(all.len(), 1, "{all:?}");
    all.pop().unwrap()
}

/// Reports `tokens` tokens and `cost` through `usage` (or `spend` when the body says so), then
/// signals done.
fn reporter(tokens: u64, cost: Decimal) -> Registration {
    Registration::new(
        "reporter",
        Script::new(move |msg, cx| {
            if msg.is_system() {
                return Ok(());
            }
            let usage = Usage {
                tokens_in: tokens,
                cost,
                ..Usage::default()
            };
            if msg.payload().as_str().contains("spend") {
                cx.spend(usage)
                    .expect("the budget has room for exactly this");
            } else {
                cx.usage(usage);
            }
            cx.signal(Signal::new(Control::Done));
            Ok(())
        }),
    )
    .accepts(q("work"))
    .role(Role::Agent)
}

fn limits(turns: u64, tokens: u64, cost: Option<Decimal>) -> Budget {
    Budget {
        turns: Some(turns),
        tokens: Some(tokens),
        cost,
        ..Budget::default()
    }
}

async fn class_of(pump: &PumpHandle, body: &str) -> (String, String, String) {
    let thread = start(pump, &p("work", body)).await;
    let report = only_report(pump, thread).await;
    let tokens = report.budget["max-tokens"].spent.clone();
    (report.class, report.stop_reason, tokens)
}

/// Case 1: "a listener reports 1 500 tokens and signals `done`" on the only turn it has.
#[tokio::test]
async fn a_breach_on_the_last_allowed_turn_outranks_done() {
    for turns in [1, 10] {
        let pump = pump_with(
            limits(turns, 1000, None),
            vec![reporter(1500, Decimal::ZERO)],
        );
        assert_eq!(
            class_of(&pump, "").await,
            ("TIMEOUT".into(), "max-tokens".into(), "1500".into()),
            "turns={turns}"
        );
    }
    // Every breached dimension is named, not only the first.
    let cost = Some(Decimal::ONE);
    let pump = pump_with(limits(1, 1000, cost), vec![reporter(1500, Decimal::TWO)]);
    let (class, reason, _) = class_of(&pump, "").await;
    assert_eq!(
        (class.as_str(), reason.as_str()),
        ("TIMEOUT", "max-tokens max-cost")
    );
}

/// Case 2: "Spending exactly the budget is allowed; only going past it halts."
#[tokio::test]
async fn spending_a_budget_exactly_is_not_a_breach() {
    for how in ["usage", "spend"] {
        let pump = pump_with(limits(10, 1000, None), vec![reporter(1000, Decimal::ZERO)]);
        assert_eq!(
            class_of(&pump, how).await,
            (
                "done-uncertified".into(),
                "no-criteria-declared".into(),
                "1000".into()
            ),
            "{how}"
        );
    }
    let pump = pump_with(limits(10, 1000, None), vec![reporter(1001, Decimal::ZERO)]);
    assert_eq!(class_of(&pump, "").await.0, "TIMEOUT");
}

/// Spawns three children asking 40 turns each; finishes when the third result is in.
fn planner() -> Registration {
    let results = Arc::new(AtomicUsize::new(0));
    Registration::new(
        "planner",
        Script::new(move |msg, cx| {
            let local = msg.qname().local();
            if local == "plan" {
                for part in 1..=3 {
                    let budget = Budget {
                        turns: Some(40),
                        ..Budget::default()
                    };
                    cx.spawn(
                        Spawn::new(p("part", "0"))
                            .sub_id(format!("part{part}"))
                            .budget(budget),
                    );
                }
            } else if local == "thread-result" && results.fetch_add(1, Ordering::SeqCst) == 2 {
                cx.done("<all xmlns=\"urn:test:v1\"/>");
            }
            Ok(())
        }),
    )
    .accepts(q("plan"))
    .peers(["worker"])
    .role(Role::Agent)
}

/// Iterates five times, then ends its thread.
fn worker() -> Registration {
    Registration::new(
        "worker",
        Script::new(|msg, cx| {
            if msg.is_system() {
                return Ok(());
            }
            let n: u32 = number(msg);
            if n < 5 {
                cx.emit(p("part", &(n + 1).to_string()));
            } else {
                cx.done(p("part", "finished"));
            }
            Ok(())
        }),
    )
    .accepts(q("part"))
    .role(Role::Agent)
}

/// Case 3: "a spawner that carves out all it has halts itself and its children" — no more: the
/// spawner keeps 2 turns per open child, so the plan runs to its end whatever the scheduling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawner_keeps_a_floor_for_its_notices_and_results() {
    for _ in 0..5 {
        let pump = pump_with(
            Budget {
                turns: Some(100),
                ..GovernorPolicy::default_budget()
            },
            vec![planner(), worker()],
        );
        let root = start(&pump, &p("plan", "")).await;
        let history = pump.history(root).await.unwrap();
        let grants: Vec<&str> = history
            .iter()
            .filter(|r| r.kind == RecordKind::Decision)
            .map(|r| {
                r.payload
                    .split("turns=\"")
                    .nth(1)
                    .unwrap()
                    .split('"')
                    .next()
                    .unwrap()
            })
            .collect();
        assert_eq!(grants, ["40", "40", "13"]);
        for thread in pump.tree(root) {
            assert_eq!(thread.state, ThreadState::Done, "{}", thread.path);
            assert!(
                reports(&pump, thread.id).await.is_empty(),
                "{}",
                thread.path
            );
        }
    }
}

/// A carve-out that can be granted nothing is refused with a system-error naming the floor.
#[tokio::test]
async fn a_carve_out_with_nothing_to_grant_is_refused_clearly() {
    let pump = pump_with(
        Budget {
            turns: Some(10),
            ..GovernorPolicy::default_budget()
        },
        vec![planner(), worker()],
    );
    let thread = pump
        .post(None, None, &p("plan", ""))
        .await
        .unwrap()
        .thread();
    pump.settle(thread).await;
    let history = pump.history(thread).await.unwrap();
    let refusal = history
        .iter()
        .find(|r| r.payload.contains("budget-exhausted"))
        .expect("a refusal");
    assert!(
        refusal.payload.contains(
            "spawn refused: the carve-out asks for 40 of max-turns but 0 can be granted \
             (the spawner keeps 4 turns for the notices and results of its open children)"
        ),
        "{}",
        refusal.payload
    );
    // The first child got 10 − 1 − 2 = 7 turns.
    assert!(
        history
            .iter()
            .any(|r| r.kind == RecordKind::Decision && r.payload.contains("turns=\"7\""))
    );
}

/// The halting report shows what a spawner holds for its carved children.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_shows_reservations() {
    let gate = Gate::new();
    let twenty = Budget {
        turns: Some(20),
        ..Budget::default()
    };
    let spawner = support::carving_spawner("spawner", 3, twenty);
    let pump = pump_with(
        Budget {
            turns: Some(100),
            ..GovernorPolicy::default_budget()
        },
        vec![
            spawner,
            Registration::new("gate", gate.clone()).accepts(q("wait")),
        ],
    );
    let root = pump.post(None, None, &p("go", "")).await.unwrap().thread();
    for _ in 0..3 {
        gate.entered().await;
    }
    // The spawner's own delivery and its three thread-spawned notices.
    while pump.thread(root).unwrap().counters.deliveries < 4 {
        tokio::task::yield_now().await;
    }
    while pump.thread(root).unwrap().state != ThreadState::Idle {
        tokio::task::yield_now().await;
    }
    pump.stop(root).await.unwrap();
    gate.open(10);
    let report = only_report(&pump, root).await;
    let turns = &report.budget["max-turns"];
    // 4 deliveries here + 1 in each child; 60 carved, 3 of it spent.
    assert_eq!(
        (
            turns.spent.as_str(),
            turns.reserved.as_str(),
            turns.remaining.as_deref()
        ),
        ("7", "57", Some("36"))
    );
}

/// Calls the `tool` listener once per delivery of `<again>`, `n` times.
fn caller() -> Registration {
    Registration::new(
        "caller",
        Script::new(|msg, cx| {
            match msg.qname().local() {
                "again" | "result" => cx.send("tool", p("call", "")),
                _ => {}
            }
            Ok(())
        }),
    )
    .accepts(q("again"))
    .accepts(q("result"))
    .peers(["tool"])
    .role(Role::Agent)
}

fn tool() -> Registration {
    Registration::new(
        "tool",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                cx.send("caller", p("result", ""));
            }
            Ok(())
        }),
    )
    .accepts(q("call"))
    .peers(["caller"])
    .role(Role::Tool)
}

/// Case 5: "A delivery to a listener registered with the tool role counts one tool call for the
/// caller's thread." A budget of 2 stops the third call before it runs.
#[tokio::test]
async fn tool_calls_are_charged_and_their_budget_halts() {
    let budget = Budget {
        tool_calls: Some(2),
        ..GovernorPolicy::default_budget()
    };
    let pump = pump_with(budget, vec![caller(), tool()]);
    let thread = start(&pump, &p("again", "")).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("TIMEOUT", "max-tool-calls")
    );
    assert_eq!(report.budget["max-tool-calls"].spent, "2");
    assert_eq!(pump.thread(thread).unwrap().counters.tool_calls, 2);
    let pending = pump.store().pending().await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        pending[0].to.as_deref(),
        Some("tool"),
        "the third call waits"
    );
}

/// Iterates, reporting a residual that reaches 0 on its tenth turn.
fn counter() -> Registration {
    Registration::new(
        "counter",
        Script::new(|msg, cx| {
            if msg.is_system() {
                return Ok(());
            }
            let n: i64 = number(msg);
            if n == 1 {
                cx.goal(&Goal {
                    text: "count to ten".into(),
                    certificates: vec![CertificateType::Converged],
                    ..Goal::default()
                });
            }
            cx.residual(Decimal::from(10 - n));
            if n < 10 {
                cx.emit(p("count", &(n + 1).to_string()));
            }
            Ok(())
        }),
    )
    .accepts(q("count"))
    .role(Role::Agent)
}

/// Case 6: "Notices the governor sends on its own initiative must not consume the budget they
/// warn about." Ten turns are ten turns of work; the 80% warning is delivered on top.
#[tokio::test]
async fn a_budget_warning_costs_no_turn() {
    let budget = Budget {
        turns: Some(10),
        ..GovernorPolicy::default_budget()
    };
    let pump = pump_with(budget, vec![counter()]);
    let thread = start(&pump, &p("count", "1")).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("CONVERGED", "residual-below-r-p")
    );
    let counters = pump.thread(thread).unwrap().counters;
    assert_eq!((counters.deliveries, counters.notices), (10, 1));
    assert_eq!(report.budget["max-turns"].spent, "10");
    let warned = notices(&pump, thread).await;
    assert!(
        warned.iter().any(|(_, _, code)| code == "budget-warning"),
        "{warned:?}"
    );
}
