//! The governor: budgets, loop signals, certificates, halts, carve-outs, warnings, resume.

mod support;

use std::time::Duration;

use agentpump::governor::{
    Budget, CertificateType, Control, Goal, GovernorPolicy, HaltingReport, Signal,
};
use agentpump::history::RecordKind;
use agentpump::system::Spawn;
use agentpump::{
    Delivery, Listener, ListenerError, PumpBuilder, PumpConfig, PumpHandle, Registration, Role,
    ThreadId, ThreadState, Usage,
};
use rust_decimal::Decimal;
use support::{Gate, Script, body, governed as pump_with, looper, notices, p, q, start};

fn turns(n: u64) -> Budget {
    Budget {
        turns: Some(n),
        ..Budget::default()
    }
}

async fn only_report(pump: &PumpHandle, thread: ThreadId) -> HaltingReport {
    let mut reports = pump.reports(thread).await.unwrap();
    assert_eq!(reports.len(), 1, "{reports:?}");
    reports.pop().unwrap()
}

#[tokio::test]
async fn a_runaway_loop_stops_at_exactly_the_turn_limit() {
    let pump = pump_with(turns(10), vec![looper()]);
    let thread = start(&pump, &p("tick", "0")).await;
    let info = pump.thread(thread).unwrap();
    assert_eq!(info.state, ThreadState::Halted);
    assert_eq!(info.counters.deliveries, 10);
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("TIMEOUT", "max-turns")
    );
    assert_eq!(
        (report.status.as_str(), report.iterations_completed),
        ("EXIT_BUDGET_EXCEEDED", 10)
    );
    assert_eq!(report.budget["max-turns"].spent, "10");
    let cert = report.halting_certificate.unwrap();
    assert_eq!((cert.kind.as_str(), cert.lane.as_str()), ("TIMEOUT", "C"));
    // The halt is in the thread, where agents see it, and the message it stopped stays pending.
    let history = pump.history(thread).await.unwrap();
    let halt = history.iter().rfind(|r| r.root.local() == "halt").unwrap();
    assert!(
        halt.payload
            .contains(r#"reason="max-turns" class="TIMEOUT" certificate="TIMEOUT""#),
        "{}",
        halt.payload
    );
    assert_eq!(pump.store().pending().await.unwrap().len(), 1);
    assert_eq!(
        pump.post(Some(thread), None, &p("tick", "0"))
            .await
            .unwrap_err()
            .code(),
        "thread-closed"
    );
}

struct Sleeper;

#[async_trait::async_trait]
impl Listener for Sleeper {
    async fn handle(&self, _: &Delivery, _: &mut agentpump::Context) -> Result<(), ListenerError> {
        tokio::time::sleep(Duration::from_secs(24 * 3600)).await;
        Ok(())
    }
}

#[tokio::test(start_paused = true)]
async fn a_wall_clock_budget_stops_a_thread_whose_handler_sleeps() {
    let budget = Budget {
        wall_clock: Some(Duration::from_secs(10)),
        ..Budget::default()
    };
    let sleeper = Registration::new("sleeper", Sleeper)
        .accepts(q("nap"))
        .timeout(Duration::from_secs(3600));
    let pump = pump_with(budget, vec![sleeper]);
    let thread = start(&pump, &p("nap", "")).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("TIMEOUT", "max-wall-clock")
    );
    assert_eq!(report.total_seconds_elapsed, "10");
    assert!(
        notices(&pump, thread)
            .await
            .iter()
            .all(|n| n.2 != "handler-timeout")
    );
}

/// Reports the residual it is given in `<r>…</r>`; declares r-p 0.1 on `<goal/>`.
fn optimizer() -> Registration {
    Registration::new(
        "optimizer",
        Script::new(|msg, cx| {
            match msg.qname().local() {
                "goal" => cx.goal(&Goal {
                    text: "approach zero".into(),
                    certificates: vec![CertificateType::Converged, CertificateType::Diverged],
                    r_p: Some(Decimal::new(1, 1)),
                    ..Goal::default()
                }),
                "r" => cx.residual(body(msg).parse().unwrap()),
                _ => {}
            }
            Ok(())
        }),
    )
    .accepts(q("r"))
    .accepts(q("goal"))
}

async fn residuals(pump: &PumpHandle, values: &[&str]) -> ThreadId {
    let thread = start(pump, &p("goal", "")).await;
    for v in values {
        pump.post(Some(thread), None, &p("r", v)).await.unwrap();
        pump.settle(thread).await;
    }
    thread
}

#[tokio::test]
async fn residuals_converge_only_below_r_p_and_diverge_on_a_rising_run() {
    let pump = pump_with(GovernorPolicy::default_budget(), vec![optimizer()]);
    let thread = residuals(&pump, &["0.5", "0.25", "0.1"]).await;
    assert_eq!(
        pump.thread(thread).unwrap().state,
        ThreadState::Idle,
        "0.1 is not below r-p 0.1"
    );
    pump.post(Some(thread), None, &p("r", "0.09"))
        .await
        .unwrap();
    pump.settle(thread).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (report.class.as_str(), report.status.as_str()),
        ("CONVERGED", "EXIT_CONVERGED")
    );
    let cert = report.halting_certificate.unwrap();
    assert_eq!(
        cert.residual_history_decimal_strings,
        ["0.5", "0.25", "0.1", "0.09"]
    );
    assert_eq!(
        (
            cert.final_residual_decimal_string.as_deref(),
            cert.r_p_decimal_string.as_str()
        ),
        (Some("0.09"), "0.1")
    );

    let rising = residuals(&pump, &["1", "2", "3"]).await;
    assert_eq!(only_report(&pump, rising).await.class, "DIVERGED");
    let wobble = residuals(&pump, &["1", "2", "1", "2"]).await;
    assert_eq!(
        pump.thread(wobble).unwrap().state,
        ThreadState::Idle,
        "a rise, a fall and a rise continue"
    );
    // phuc-loop §13: "comparison: Decimal(residual_str) < Decimal(R_p_str)", "forbidden:
    // float(residual) < float(R_p)". 28 digits survive: as f64 each of these is 0.1, so a
    // float compare would see neither the rise nor the fall below r-p 0.1.
    let fine = residuals(
        &pump,
        &[
            "0.1000000000000000000000000001",
            "0.1000000000000000000000000002",
        ],
    )
    .await;
    assert_eq!(pump.thread(fine).unwrap().state, ThreadState::Idle);
    for v in [
        "0.1000000000000000000000000003",
        "0.0999999999999999999999999999",
    ] {
        assert_eq!(v.parse::<f64>().unwrap(), 0.1, "{v} is 0.1 as a float");
    }
    pump.post(Some(fine), None, &p("r", "0.1000000000000000000000000003"))
        .await
        .unwrap();
    pump.settle(fine).await;
    assert_eq!(only_report(&pump, fine).await.class, "DIVERGED");
    let below = residuals(&pump, &["0.0999999999999999999999999999"]).await;
    let report = only_report(&pump, below).await;
    assert_eq!(report.class, "CONVERGED");
    assert_eq!(
        report
            .halting_certificate
            .unwrap()
            .residual_history_decimal_strings,
        ["0.0999999999999999999999999999"]
    );
}

/// `<work>abort done</work>` signals each word in one delivery; `<work>claim</work>` reports the
/// criterion itself and says done; `<work>verified</work>` says done.
fn agent() -> Registration {
    Registration::new(
        "agent",
        Script::new(|msg, cx| {
            if msg.is_system() {
                return Ok(());
            }
            match body(msg) {
                "goal" => cx.goal(&Goal {
                    text: "ship it".into(),
                    criteria: vec![("tests".into(), "all tests pass".into())],
                    certificates: vec![CertificateType::Exact],
                    ..Goal::default()
                }),
                "claim" => {
                    cx.criterion("tests", true, "trust me");
                    cx.signal(Signal::new(Control::Done));
                }
                words => {
                    for w in words.split_whitespace() {
                        let control = match w {
                            "abort" => Control::Abort,
                            "done" => Control::Done,
                            _ => Control::Continue,
                        };
                        cx.signal(Signal::new(control).reason("test"));
                    }
                }
            }
            Ok(())
        }),
    )
    .accepts(q("work"))
    .role(Role::Agent)
}

fn verifier() -> Registration {
    Registration::new(
        "verifier",
        Script::new(|_, cx| {
            cx.criterion("tests", true, "ci-run-42");
            Ok(())
        }),
    )
    .accepts(q("check"))
    .role(Role::Verifier)
}

async fn class_after(pump: &PumpHandle, steps: &[(&str, &str)]) -> (String, String) {
    let thread = pump
        .post(None, None, &p(steps[0].0, steps[0].1))
        .await
        .unwrap()
        .thread();
    pump.settle(thread).await;
    for (root, text) in &steps[1..] {
        pump.post(Some(thread), None, &p(root, text)).await.unwrap();
        pump.settle(thread).await;
    }
    let report = only_report(pump, thread).await;
    (report.class, report.stop_reason)
}

#[tokio::test]
async fn done_is_certified_only_by_independent_evidence_and_abort_wins() {
    let pump = pump_with(GovernorPolicy::default_budget(), vec![agent(), verifier()]);
    type Steps<'a> = &'a [(&'a str, &'a str)];
    let cases: Vec<(Steps, (&str, &str))> = vec![
        (&[("work", "abort done")], ("aborted", "test")),
        (
            &[("work", "done continue")],
            ("done-uncertified", "no-criteria-declared"),
        ),
        (
            &[("work", "goal"), ("check", ""), ("work", "done")],
            ("EXACT", "all-criteria-met"),
        ),
        (
            &[("work", "goal"), ("work", "claim")],
            ("done-uncertified", "criteria-self-certified"),
        ),
        (
            &[("work", "goal"), ("work", "done")],
            ("done-uncertified", "criteria-unmet"),
        ),
    ];
    for (steps, (class, reason)) in cases {
        assert_eq!(
            class_after(&pump, steps).await,
            (class.to_owned(), reason.to_owned()),
            "{steps:?}"
        );
    }
}

#[tokio::test]
async fn a_done_on_the_last_allowed_turn_is_not_a_timeout() {
    let pump = pump_with(turns(3), vec![agent(), verifier()]);
    let got = class_after(&pump, &[("work", "goal"), ("check", ""), ("work", "done")]).await;
    assert_eq!(got.0, "EXACT");
}

/// `<ball>` bounced between two listeners: the same payload each time, or a new one each time.
fn bouncer(name: &'static str, other: &'static str, vary: bool) -> Registration {
    Registration::new(
        name,
        Script::new(move |msg, cx| {
            if msg.is_system() {
                return Ok(());
            }
            let n: u64 = body(msg).parse().unwrap_or(0);
            if n < 20 {
                let next = if vary {
                    (n + 1).to_string()
                } else {
                    "0".to_owned()
                };
                cx.send(other, p("ball", &next));
            }
            Ok(())
        }),
    )
    .accepts(q("ball"))
    .peers([other])
}

#[tokio::test]
async fn ping_pong_of_the_same_payload_is_no_progress_and_a_real_rally_is_not() {
    let pump = pump_with(
        GovernorPolicy::default_budget(),
        vec![bouncer("a", "b", false), bouncer("b", "a", false)],
    );
    let thread = pump
        .post(None, Some("a"), &p("ball", "0"))
        .await
        .unwrap()
        .thread();
    pump.settle(thread).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("no-progress", "repeated-message")
    );
    assert!(
        report.iterations_completed <= 6,
        "caught within 2k deliveries: {}",
        report.iterations_completed
    );

    let pump = pump_with(
        GovernorPolicy::default_budget(),
        vec![bouncer("a", "b", true), bouncer("b", "a", true)],
    );
    let thread = pump
        .post(None, Some("a"), &p("ball", "0"))
        .await
        .unwrap()
        .thread();
    pump.settle(thread).await;
    assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Idle);
    assert!(pump.reports(thread).await.unwrap().is_empty());
}

/// Spawns 50 spenders; each spends 7 tokens per turn, withdrawing before it spends.
fn fan() -> Registration {
    Registration::new(
        "fan",
        Script::new(|msg, cx| {
            if msg.qname().local() == "go" {
                for i in 0..50 {
                    cx.spawn(Spawn::new(p("spend", "")).sub_id(format!("s{i}")));
                }
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .peers(["spender"])
}

fn spender() -> Registration {
    Registration::new(
        "spender",
        Script::new(|msg, cx| {
            if msg.is_system() {
                return Ok(());
            }
            if cx
                .spend(Usage {
                    tokens_in: 5,
                    tokens_out: 2,
                    ..Usage::default()
                })
                .is_ok()
            {
                cx.emit(p("spend", &uuid_like(cx.delivery_id())));
            }
            Ok(())
        }),
    )
    .accepts(q("spend"))
    .role(Role::Agent)
}

fn uuid_like(id: agentpump::MessageId) -> String {
    id.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_concurrent_children_never_spend_more_than_the_parents_budget() {
    let budget = Budget {
        tokens: Some(1000),
        turns: Some(100_000),
        threads: Some(100),
        ..Budget::default()
    };
    let pump = pump_with(budget, vec![fan(), spender()]);
    let root = start(&pump, &p("go", "")).await;
    let tree = pump.tree(root);
    assert_eq!(tree.len(), 51);
    let spent: u64 = tree[1..]
        .iter()
        .map(|t| t.counters.tokens_in + t.counters.tokens_out)
        .sum();
    assert!(spent <= 1000, "children spent {spent}");
    assert!(
        spent > 1000 - 7,
        "they stopped only when no 7 tokens were left: {spent}"
    );
    // The parent is charged with what its children spent.
    pump.stop(root).await.unwrap();
    let report = only_report(&pump, root).await;
    assert_eq!(report.budget["max-tokens"].spent, spent.to_string());
    assert_eq!(
        report.budget["max-tokens"].remaining.as_deref(),
        Some((1000 - spent).to_string().as_str())
    );
}

#[tokio::test]
async fn carve_outs_are_reserved_and_halting_a_parent_halts_every_child() {
    let gate = Gate::new();
    let thirty = Budget {
        tokens: Some(30),
        ..Budget::default()
    };
    let parent = support::carving_spawner("parent", 50, thirty);
    let budget = Budget {
        tokens: Some(1000),
        ..GovernorPolicy::default_budget()
    };
    let pump = pump_with(
        budget,
        vec![
            parent,
            Registration::new("gate", gate.clone()).accepts(q("wait")),
        ],
    );
    let root = pump.post(None, None, &p("go", "")).await.unwrap().thread();
    gate.entered().await;
    // 33 carve-outs of 30 fit in 1000; the 34th gets the 10 left; the other 16 could be
    // granted nothing and are refused, in one notice that counts them.
    let history = pump.history(root).await.unwrap();
    let carves: Vec<String> = history
        .iter()
        .filter(|r| r.kind == RecordKind::Decision)
        .map(|r| r.payload.to_string())
        .collect();
    assert_eq!(carves.len(), 34);
    let refusals: Vec<_> = history
        .iter()
        .filter(|r| r.payload.contains("budget-exhausted"))
        .collect();
    assert_eq!(refusals.len(), 1);
    assert!(
        refusals[0].payload.contains(
            "16 outputs of this delivery were refused this way; the first: spawn refused: \
             the carve-out asks for 30 of max-tokens but 0 can be granted"
        ),
        "{}",
        refusals[0].payload
    );
    assert_eq!(
        carves
            .iter()
            .filter(|c| c.contains(r#"tokens="30""#))
            .count(),
        33
    );
    assert_eq!(
        carves
            .iter()
            .filter(|c| c.contains(r#"tokens="10""#))
            .count(),
        1
    );
    pump.stop(root).await.unwrap();
    gate.open(100);
    pump.settle(root).await;
    let tree = pump.tree(root);
    assert_eq!(tree.len(), 35);
    let mut classes = std::collections::BTreeMap::new();
    for child in &tree[1..] {
        assert_eq!(child.state, ThreadState::Halted, "{}", child.path);
        let report = only_report(&pump, child.id).await;
        *classes
            .entry(format!("{} {}", report.class, report.stop_reason))
            .or_insert(0) += 1;
    }
    // The 34 children ran until the parent halted.
    let expected = [("BACKPRESSURE parent-halted".to_owned(), 34)];
    assert_eq!(classes, expected.into_iter().collect());
    let results = pump
        .history(root)
        .await
        .unwrap()
        .iter()
        .filter(|r| r.root.local() == "thread-result")
        .count();
    assert_eq!(results, 34, "each child's halt is reported to the parent");
}

#[tokio::test]
async fn the_budget_warning_comes_once_before_the_halt_and_names_the_budget() {
    let pump = pump_with(turns(10), vec![looper()]);
    let thread = start(&pump, &p("tick", "0")).await;
    let history = pump.history(thread).await.unwrap();
    let warnings: Vec<_> = history
        .iter()
        .filter(|r| r.payload.contains("budget-warning"))
        .collect();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0]
            .payload
            .contains("budget max-turns: 8 of 10 used, 2 remain"),
        "{}",
        warnings[0].payload
    );
    let halt = history.iter().find(|r| r.root.local() == "halt").unwrap();
    assert!(warnings[0].seq < halt.seq);
}

#[tokio::test]
async fn resume_adds_budget_continues_the_same_thread_and_halts_again() {
    let pump = pump_with(turns(10), vec![looper()]);
    let thread = start(&pump, &p("tick", "0")).await;
    let waiting = pump.store().pending().await.unwrap();
    assert_eq!(waiting.len(), 1);
    pump.resume(thread, &turns(5)).await.unwrap();
    pump.settle(thread).await;
    let info = pump.thread(thread).unwrap();
    assert_eq!(
        (info.state, info.counters.deliveries),
        (ThreadState::Halted, 15)
    );
    let reports = pump.reports(thread).await.unwrap();
    assert_eq!(reports.len(), 2);
    assert_eq!(reports[1].budget["max-turns"].limit.as_deref(), Some("15"));
    let history = pump.history(thread).await.unwrap();
    let decisions: Vec<&str> = history
        .iter()
        .filter(|r| r.kind == RecordKind::Decision)
        .map(|r| {
            r.payload
                .split("action=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(decisions, ["halt", "resume", "halt"]);
    // The message the first halt stopped was the first delivered after the resume: the next
    // record is the tick it produced.
    let stopped_at: u64 = waiting[0]
        .payload
        .split('>')
        .nth(1)
        .unwrap()
        .split('<')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let resume_at = history
        .iter()
        .position(|r| r.payload.contains("action=\"resume\""))
        .unwrap();
    assert_eq!(
        *history[resume_at + 1].payload,
        p("tick", &(stopped_at + 1).to_string())
    );
    let still = pump.store().pending().await.unwrap();
    assert!(still.iter().all(|r| r.id != waiting[0].id));
    // Only a halted thread can be resumed.
    let unknown = ThreadId::new();
    let err = pump.resume(unknown, &turns(1)).await.unwrap_err();
    assert_eq!(err.to_string(), format!("no thread {unknown}"));
    let err = pump.stop(thread).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("is halted; stop needs a running or idle thread"),
        "{err}"
    );
}

#[tokio::test]
async fn a_listener_without_loop_permission_cannot_message_itself() {
    let tool = Registration::new(
        "tool",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                cx.emit(msg.payload().as_str());
            }
            Ok(())
        }),
    )
    .accepts(q("again"));
    let pump = pump_with(GovernorPolicy::default_budget(), vec![tool]);
    let thread = start(&pump, &p("again", "")).await;
    let got = notices(&pump, thread).await;
    assert_eq!(
        got,
        [(
            "tool".into(),
            "system-error".into(),
            "loop-not-permitted".into()
        )]
    );
    assert_eq!(
        pump.thread(thread).unwrap().counters.deliveries,
        2,
        "the input and the notice"
    );
}

#[tokio::test]
async fn backpressure_from_upstream_the_stop_file_or_a_full_queue_halts_the_thread() {
    // An upstream rate limit the listener could not retry away.
    let limited = Registration::new(
        "limited",
        Script::new(|_, _| Err(ListenerError::Backpressure("HTTP 429".into()))),
    )
    .accepts(q("call"));
    let pump = pump_with(GovernorPolicy::default_budget(), vec![limited]);
    let thread = start(&pump, &p("call", "")).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("BACKPRESSURE", "upstream")
    );

    // The stop file: while it exists, every delivery halts its thread.
    let stop = std::env::temp_dir().join(format!("agentpump-stop-{}", ThreadId::new()));
    let governor = GovernorPolicy {
        stop_file: Some(stop.clone()),
        ..GovernorPolicy::default()
    };
    let pump = PumpBuilder::new()
        .config(PumpConfig {
            governor,
            ..PumpConfig::default()
        })
        .register(looper())
        .build()
        .unwrap();
    std::fs::write(&stop, "").unwrap();
    let thread = start(&pump, &p("tick", "0")).await;
    std::fs::remove_file(&stop).unwrap();
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (report.stop_reason.as_str(), report.iterations_completed),
        ("stop-file", 0)
    );

    // A listener that keeps flooding a full queue.
    let flooder = Registration::new(
        "flooder",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                for _ in 0..4 {
                    cx.emit(p("flood", &agentpump::MessageId::new().to_string()));
                }
            }
            Ok(())
        }),
    )
    .accepts(q("flood"))
    .role(Role::Agent);
    let governor = GovernorPolicy {
        queue_full_limit: 3,
        ..GovernorPolicy::default()
    };
    let pump = PumpBuilder::new()
        .config(PumpConfig {
            governor,
            queue_capacity: 2,
            ..PumpConfig::default()
        })
        .register(flooder)
        .build()
        .unwrap();
    let thread = start(&pump, &p("flood", "")).await;
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("BACKPRESSURE", "queue-full")
    );
}

#[test]
fn a_halt_renders_in_the_ask_loop_text_form() {
    let verdict = agentpump::governor::Verdict {
        class: agentpump::governor::HaltClass::Timeout(agentpump::governor::BudgetName::Turns),
        reason: "max-turns".into(),
    };
    assert_eq!(
        agentpump::governor::halt_magic(&verdict),
        r#"<<<NSENVELOPE_MAGIC_9E3B6F2D:V2:HALT:{"class":"TIMEOUT","reason":"max-turns"}>>>"#
    );
}

#[tokio::test(start_paused = true)]
async fn the_report_shows_how_long_the_thread_sat_idle() {
    let pump = pump_with(GovernorPolicy::default_budget(), vec![agent()]);
    let thread = start(&pump, &p("work", "continue")).await;
    tokio::time::sleep(Duration::from_secs(90)).await;
    pump.stop(thread).await.unwrap();
    let report = only_report(&pump, thread).await;
    assert_eq!(
        (
            report.total_seconds_idle.as_str(),
            report.total_seconds_elapsed.as_str()
        ),
        ("90", "90")
    );
}
