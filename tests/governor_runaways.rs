//! Runaways the governor must catch, taken from failures reported against other agent
//! runtimes: echo storms of three or more agents, one turn flooding refusals, a handler that
//! blocks its OS thread, and misspelled requests that were silently ignored.
//!
//! Ask-Loop v2 §3: "The host SHOULD track a digest of the control payload and halt the loop if
//! no progress is being made between turns."

mod support;

use std::time::Duration;

use agentpump::governor::GovernorPolicy;
use agentpump::history::RecordKind;
use agentpump::{PumpBuilder, PumpConfig, PumpHandle, Registration, Role, ThreadState};
use support::{Script, notices, p, q, start};

fn pump(registrations: Vec<Registration>) -> PumpHandle {
    support::governed(GovernorPolicy::default_budget(), registrations)
}

/// Posts the first ball to `a` (all of them accept `<ball>`: posted by root, it would start
/// one rally per listener, interleaved).
async fn serve_to(pump: &PumpHandle, first: &str) -> agentpump::ThreadId {
    let thread = pump
        .post(None, Some(first), &p("ball", "0"))
        .await
        .unwrap()
        .thread();
    pump.settle(thread).await;
    thread
}

/// Forwards `<ball>` to `next`: the same bytes, or the count plus one (`vary`), up to 60.
fn forwarder(name: &'static str, next: &'static str, vary: bool) -> Registration {
    Registration::new(
        name,
        Script::new(move |msg, cx| {
            if msg.is_system() {
                return Ok(());
            }
            let n: u64 = support::number(msg);
            if n < 60 {
                let next_n = if vary { n + 1 } else { n };
                cx.send(next, p("ball", &next_n.to_string()));
            }
            Ok(())
        }),
    )
    .accepts(q("ball"))
    .peers([next])
}

/// Case 7: A→B→C→A forwarding identical bytes was never seen as no progress and ran to the full
/// turn budget; a rally of three whose payloads change must run to its natural end.
#[tokio::test]
async fn a_three_agent_echo_storm_is_caught_and_a_real_rally_is_not() {
    let storm = pump(vec![
        forwarder("a", "b", false),
        forwarder("b", "c", false),
        forwarder("c", "a", false),
    ]);
    let thread = serve_to(&storm, "a").await;
    let report = storm.reports(thread).await.unwrap().pop().expect("a halt");
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("no-progress", "repeated-message")
    );
    // Three rounds of three, plus the client's delivery.
    assert!(
        report.iterations_completed <= 10,
        "{}",
        report.iterations_completed
    );

    let rally = pump(vec![
        forwarder("a", "b", true),
        forwarder("b", "c", true),
        forwarder("c", "a", true),
    ]);
    let thread = serve_to(&rally, "a").await;
    assert_eq!(rally.thread(thread).unwrap().state, ThreadState::Idle);
    assert!(rally.reports(thread).await.unwrap().is_empty());
    assert_eq!(rally.thread(thread).unwrap().counters.deliveries, 61);
}

/// A longer cycle (8 listeners) is caught too; one longer than the configured bound is left to
/// the budgets.
#[tokio::test]
async fn cycles_up_to_the_configured_period_are_caught() {
    let names = ["l0", "l1", "l2", "l3", "l4", "l5", "l6", "l7"];
    let ring = |n: usize| -> Vec<Registration> {
        (0..n)
            .map(|i| forwarder(names[i], names[(i + 1) % n], false))
            .collect()
    };
    let eight = pump(ring(8));
    let thread = serve_to(&eight, "l0").await;
    let report = eight.reports(thread).await.unwrap().pop().expect("a halt");
    assert_eq!(report.class, "no-progress");
    assert!(
        report.iterations_completed <= 25,
        "{}",
        report.iterations_completed
    );

    let bounded = PumpBuilder::new().config(PumpConfig {
        governor: GovernorPolicy {
            cycle_max_period: 7,
            budget: agentpump::governor::Budget {
                turns: Some(100),
                ..GovernorPolicy::default_budget()
            },
            ..GovernorPolicy::default()
        },
        ..PumpConfig::default()
    });
    let bounded = ring(8)
        .into_iter()
        .fold(bounded, PumpBuilder::register)
        .build()
        .unwrap();
    let thread = serve_to(&bounded, "l0").await;
    let report = bounded
        .reports(thread)
        .await
        .unwrap()
        .pop()
        .expect("a halt");
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("TIMEOUT", "max-turns")
    );
}

/// Emits `n` outputs per delivery, `bad` ones malformed.
fn flooder(n: usize, bad: bool) -> Registration {
    Registration::new(
        "flooder",
        Script::new(move |msg, cx| {
            if msg.qname().local() == "go" {
                for i in 0..n {
                    if bad {
                        cx.emit(format!("<broken{i}>"));
                    } else {
                        cx.send("sink", p("drop", &i.to_string()));
                    }
                }
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .peers(["sink"])
    .role(Role::Agent)
}

/// Case 8: "A listener that emits 10 000 outputs in one handler gets 64 delivered and 9 936
/// separate `huh` deliveries, each costing a turn." One handler's refused outputs now make one
/// notice that counts them.
#[tokio::test]
async fn one_turn_of_ten_thousand_outputs_makes_one_notice() {
    let sink = Registration::new("sink", Script::new(|_, _| Ok(()))).accepts(q("drop"));
    for bad in [false, true] {
        let pump = pump(vec![flooder(10_000, bad), sink.clone()]);
        let thread = start(&pump, &p("go", "")).await;
        let history = pump.history(thread).await.unwrap();
        let refusals: Vec<_> = history
            .iter()
            .filter(|r| r.kind == RecordKind::System && r.root.local() == "huh")
            .collect();
        assert_eq!(refusals.len(), 1, "bad={bad}");
        let expected = if bad {
            "10000 outputs of this delivery were refused this way"
        } else {
            "9936 outputs of this delivery were refused this way; the first: more than 64 payloads"
        };
        assert!(
            refusals[0].payload.contains(expected),
            "{}",
            refusals[0].payload
        );
        let delivered = if bad { 0 } else { 64 };
        // The go, the deliveries to the sink, and the one notice.
        assert_eq!(history.len(), 1 + delivered + 1, "bad={bad}");
        assert!(pump.reports(thread).await.unwrap().is_empty());
    }
}

/// Blocks its OS thread for 1.5 s, then answers.
fn sleeper(blocking: bool) -> Registration {
    let r = Registration::new(
        "sleeper",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                std::thread::sleep(Duration::from_millis(1500));
                cx.reply(p("late", ""));
            }
            Ok(())
        }),
    )
    .accepts(q("nap"))
    .timeout(Duration::from_millis(300));
    if blocking { r.blocking() } else { r }
}

/// Case 9: a handler that blocks its OS thread escaped its timeout and its late outputs were
/// accepted. Now they are refused and `handler-timeout` recorded; registered as blocking, it
/// runs on the blocking pool and other threads keep being served while it sleeps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_blocks_past_its_timeout_has_its_outputs_refused() {
    let echo = Registration::new(
        "echo",
        Script::new(|msg, cx| {
            cx.reply(msg.payload().as_str());
            Ok(())
        }),
    )
    .accepts(q("say"));
    for blocking in [false, true] {
        let pump = pump(vec![sleeper(blocking), echo.clone()]);
        let thread = start(&pump, &p("nap", "")).await;
        let got = notices(&pump, thread).await;
        assert_eq!(
            got,
            [(
                "client".into(),
                "system-error".into(),
                "handler-timeout".into()
            )],
            "blocking={blocking}"
        );
        let history = pump.history(thread).await.unwrap();
        assert!(
            history.iter().all(|r| r.root.local() != "late"),
            "blocking={blocking}"
        );
    }
    // On the blocking pool, two sleepers do not stall the echo.
    let pump = pump(vec![sleeper(true), echo]);
    let naps = [
        pump.post(None, None, &p("nap", "")).await.unwrap().thread(),
        pump.post(None, None, &p("nap", "")).await.unwrap().thread(),
    ];
    let started = std::time::Instant::now();
    let said = start(&pump, &p("say", "hi")).await;
    assert!(
        started.elapsed() < Duration::from_millis(1000),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(support::egress(&pump, said).await, [p("say", "hi")]);
    for nap in naps {
        pump.settle(nap).await;
    }
}

/// Case 10: `<clear-context keep_messages="10"/>` (seed 003's spelling) kept 0 messages, and any
/// other unknown attribute or element in a pump-owned namespace was silently ignored.
#[tokio::test]
async fn misspelled_requests_are_refused_by_name_and_seed_spellings_work() {
    let sys = "urn:agentpump:system:v1";
    let gov = "urn:agentpump:governor:v1";
    let cases = [
        (
            format!(r#"<clear-context xmlns="{sys}" keep_messages="10"/>"#),
            None,
        ),
        (
            format!(r#"<clear-context xmlns="{sys}" keep_mesages="10"/>"#),
            Some(
                "unknown attribute `keep_mesages` on <clear-context>, expected `keep-messages`, `keep_messages`",
            ),
        ),
        (
            format!(r#"<thread-done xmlns="{sys}" status="ok"/>"#),
            Some("unknown attribute `status` on <thread-done>, expected none"),
        ),
        (
            format!(r#"<residual xmlns="{gov}" value="1" unit="m"/>"#),
            Some("unknown attribute `unit` on <residual>"),
        ),
        (
            format!(r#"<goal xmlns="{gov}" certificates="EXACT"><text>t</text><criteria/></goal>"#),
            Some("unknown element <criteria> in <goal>, expected <text>, <criterion>, <budget>"),
        ),
        (
            format!(r#"<loop xmlns="{gov}" control="continue" plan_digest="sha256:abc"/>"#),
            None,
        ),
    ];
    for (request, refusal) in cases {
        let emit = request.clone();
        let listener = Registration::new(
            "asker",
            Script::new(move |msg, cx| {
                if msg.qname().local() == "go" {
                    cx.emit(emit.as_str());
                }
                Ok(())
            }),
        )
        .accepts(q("go"))
        .role(Role::Agent);
        let pump = pump(vec![listener]);
        let thread = start(&pump, &p("go", "")).await;
        let huh: Vec<_> = pump
            .history(thread)
            .await
            .unwrap()
            .into_iter()
            .filter(|r| r.root.local() == "huh")
            .collect();
        match refusal {
            None => assert!(huh.is_empty(), "{request}: {huh:?}"),
            Some(message) => {
                assert_eq!(huh.len(), 1, "{request}");
                assert!(
                    huh[0]
                        .payload
                        .contains(&quick_xml::escape::escape(message).to_string()),
                    "{request}: {}",
                    huh[0].payload
                );
            }
        }
    }
    // `suggested_sub_id` names the child.
    let spawner = Registration::new(
        "spawner",
        Script::new(move |msg, cx| {
            if msg.qname().local() == "go" {
                cx.emit(format!(
                    r#"<spawn-thread xmlns="{sys}" suggested_sub_id="research"><initial-payload>{}</initial-payload></spawn-thread>"#,
                    p("go", "child")
                ));
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .role(Role::Agent);
    let pump = pump(vec![spawner]);
    let root = start(&pump, &p("go", "")).await;
    let tree = pump.tree(root);
    assert!(tree[1].path.ends_with(".research"), "{}", tree[1].path);
}
