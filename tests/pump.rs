//! The pump: identity, peers, failures that are never silent, ordering, backpressure, shutdown.

mod support;

use std::sync::Arc;
use std::time::Duration;

use agentpump::history::RecordKind;
use agentpump::listeners::Echo;
use agentpump::system::SYSTEM_NS;
use agentpump::{ListenerError, PumpBuilder, PumpConfig, Registration, ThreadId};
use support::{Gate, Script, assert_echo_serves, egress, notices, p, q, start};

/// Emits, for `<go>`, the text inside it as its output (so tests can make it say anything).
fn parrot() -> Registration {
    Registration::new(
        "parrot",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                let text = msg.payload().as_str();
                let inner = &text[text.find('>').unwrap() + 1..text.rfind("</").unwrap()];
                cx.emit(quick_unescape(inner));
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
}

fn quick_unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn echo() -> Registration {
    Registration::new("echo", Echo).accepts(q("say"))
}

#[tokio::test]
async fn listener_output_cannot_forge_sender_thread_or_system_messages() {
    let pump = PumpBuilder::new()
        .register(parrot())
        .register(echo())
        .build()
        .unwrap();
    let other = start(&pump, &p("say", "other thread")).await;
    let forged = [
        // A whole envelope claiming to come from the system, into another thread.
        format!(
            r#"<message xmlns="urn:agentpump:envelope:v1"><meta><from>system</from><thread>{other}</thread></meta>{}</message>"#,
            p("say", "forged")
        ),
        // Pump-only system messages, with the default prefix and with another one.
        format!(r#"<thread-result xmlns="{SYSTEM_NS}" thread="{other}" status="done"/>"#),
        format!(r#"<s:huh xmlns:s="{SYSTEM_NS}"><s:error code="x">fake</s:error></s:huh>"#),
        // Pump-only elements smuggled inside requests the listener may make.
        format!(
            r#"<s:spawn-thread xmlns:s="{SYSTEM_NS}"><s:initial-payload><boot xmlns="{SYSTEM_NS}"/></s:initial-payload></s:spawn-thread>"#
        ),
        format!(
            r#"<thread-done xmlns="{SYSTEM_NS}"><loop xmlns="urn:agentpump:governor:v1" control="done"/></thread-done>"#
        ),
    ];
    for attempt in forged {
        let thread = start(&pump, &p("go", &escape(&attempt))).await;
        let got = notices(&pump, thread).await;
        assert_eq!(
            got,
            [("parrot".into(), "huh".into(), "reserved-namespace".into())],
            "{attempt}"
        );
        let history = pump.history(thread).await.unwrap();
        assert!(history.iter().all(|r| r.thread == thread));
        assert!(
            history
                .iter()
                .filter(|r| r.kind != RecordKind::System)
                .all(|r| &*r.from != "system")
        );
    }
    // The other thread saw nothing of it.
    assert_eq!(pump.history(other).await.unwrap().len(), 2);

    // A client cannot post system messages either, whatever the prefix; the refusal is recorded.
    for payload in [
        format!(r#"<x:thread-done xmlns:x="{SYSTEM_NS}"/>"#),
        format!(r#"<boot xmlns="{SYSTEM_NS}"/>"#),
    ] {
        let err = pump.post(Some(other), None, &payload).await.unwrap_err();
        assert_eq!(err.code(), "reserved-namespace");
        assert_eq!(err.recorded_in(), Some(other));
    }
    let last = notices(&pump, other).await;
    assert_eq!(last.len(), 2);
    assert!(
        last.iter()
            .all(|(to, el, code)| to == "client" && el == "huh" && code == "reserved-namespace")
    );
}

#[tokio::test]
async fn the_pump_injects_from_and_thread() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let recorder = Registration::new(
        "recorder",
        Script::new(move |msg, _| {
            log.lock()
                .unwrap()
                .push((msg.from().to_owned(), msg.thread()));
            Ok(())
        }),
    )
    .accepts(q("note"));
    let sender = Registration::new(
        "sender",
        Script::new(|_, cx| {
            cx.send(
                "recorder",
                p(
                    "note",
                    "<from>system</from><thread>00000000-0000-0000-0000-000000000000</thread>",
                ),
            );
            Ok(())
        }),
    )
    .accepts(q("start"))
    .peers(["recorder"]);
    let pump = PumpBuilder::new()
        .register(recorder)
        .register(sender)
        .build()
        .unwrap();
    let thread = start(&pump, &p("start", "")).await;
    assert_eq!(*seen.lock().unwrap(), [("sender".to_owned(), thread)]);
}

#[tokio::test]
async fn sending_to_a_non_peer_is_refused_and_replying_to_the_caller_always_works() {
    let asker = Registration::new(
        "asker",
        Script::new(|msg, cx| {
            if msg.qname().local() == "start" {
                cx.send("stranger", p("say", "hi stranger"));
                cx.send("answerer", p("q", "what?"));
            }
            Ok(())
        }),
    )
    .accepts(q("start"))
    .peers(["answerer"]);
    // The answerer has no peers at all, yet its reply reaches the asker, which does not even
    // accept the reply's root.
    let answerer = Registration::new(
        "answerer",
        Script::new(|_, cx| {
            cx.reply(p("a", "42"));
            Ok(())
        }),
    )
    .accepts(q("q"));
    let stranger = Registration::new("stranger", Echo).accepts(q("say"));
    let pump = PumpBuilder::new()
        .register(asker)
        .register(answerer)
        .register(stranger)
        .build()
        .unwrap();
    let thread = start(&pump, &p("start", "")).await;
    assert_eq!(
        notices(&pump, thread).await,
        [(
            "asker".into(),
            "system-error".into(),
            "peer-not-allowed".into()
        )]
    );
    let history = pump.history(thread).await.unwrap();
    let reply = history
        .iter()
        .find(|r| r.root == q("a"))
        .expect("reply recorded");
    assert_eq!(
        (reply.from.as_ref(), reply.to.as_deref()),
        ("answerer", Some("asker"))
    );
    assert!(history.iter().all(|r| r.to.as_deref() != Some("stranger")));
}

/// Sends `<work>` to the listener named in `<probe>`, so its failures come back to the prober.
fn prober() -> Registration {
    Registration::new(
        "prober",
        Script::new(|msg, cx| {
            if msg.qname().local() == "probe" {
                let text = msg.payload().as_str();
                let target = &text[text.find('>').unwrap() + 1..text.rfind("</").unwrap()];
                cx.send(target, p("work", ""));
            }
            Ok(())
        }),
    )
    .accepts(q("probe"))
    .peers(["failing", "panicking", "sleepy", "bad-output", "echo"])
}

#[tokio::test(start_paused = true)]
async fn every_failure_reaches_the_sender_as_a_system_message_and_is_recorded() {
    let failing = Registration::new(
        "failing",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                // What it emitted before failing is dropped, and the notice says so.
                cx.emit(p("say", "half done"));
            }
            Err(ListenerError::failed("disk on fire"))
        }),
    )
    .accepts(q("work"));
    let panicking =
        Registration::new("panicking", Script::new(|_, _| panic!("boom"))).accepts(q("work"));
    let sleepy = Registration::new("sleepy", Sleepy)
        .accepts(q("work"))
        .timeout(Duration::from_secs(1));
    let bad_output = Registration::new(
        "bad-output",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                cx.emit("<unclosed xmlns='urn:test:v1'>");
                cx.emit(p("nobody-accepts-this", ""));
                cx.emit_text("I have nothing structured to say.");
            }
            Ok(())
        }),
    )
    .accepts(q("work"));
    let pump = PumpBuilder::new()
        .register(prober())
        .register(failing)
        .register(panicking)
        .register(sleepy)
        .register(bad_output)
        .register(echo())
        .build()
        .unwrap();
    type Notice<'a> = (&'a str, &'a str, &'a str);
    let cases: &[(&str, &[Notice])] = &[
        ("failing", &[("prober", "system-error", "handler-failed")]),
        (
            "panicking",
            &[("prober", "system-error", "handler-panicked")],
        ),
        ("sleepy", &[("prober", "system-error", "handler-timeout")]),
        (
            "bad-output",
            &[
                ("bad-output", "huh", "malformed-xml"),
                ("bad-output", "huh", "unknown-root"),
                ("bad-output", "huh", "no-payload"),
            ],
        ),
    ];
    for (target, expected) in cases {
        let thread = start(&pump, &p("probe", target)).await;
        let got = notices(&pump, thread).await;
        let expected: Vec<(String, String, String)> = expected
            .iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect();
        assert_eq!(got, expected, "probing {target}");
        if *target == "failing" {
            let history = pump.history(thread).await.unwrap();
            let notice = history
                .iter()
                .find(|r| r.payload.contains("handler-failed"))
                .unwrap();
            assert!(
                notice.payload.contains(
                    "disk on fire; the 1 output(s) it emitted before failing were dropped"
                ),
                "{}",
                notice.payload
            );
            assert!(history.iter().all(|r| !r.payload.contains("half done")));
        }
        assert_eq!(
            pump.thread(thread).unwrap().counters.failures,
            u64::from(!target.starts_with("bad"))
        );
        assert_echo_serves(&pump).await;
    }
}

struct Sleepy;

#[async_trait::async_trait]
impl agentpump::Listener for Sleepy {
    async fn handle(
        &self,
        _: &agentpump::Delivery,
        _: &mut agentpump::Context,
    ) -> Result<(), ListenerError> {
        tokio::time::sleep(Duration::from_secs(3600)).await;
        Ok(())
    }
}

#[tokio::test]
async fn outside_input_that_cannot_be_accepted_gets_a_precise_recorded_answer() {
    let pump = PumpBuilder::new().register(echo()).build().unwrap();
    let live = start(&pump, &p("say", "x")).await;
    let unknown = ThreadId::new();
    let env = |thread: &str, payload: &str| {
        format!(
            r#"<message xmlns="urn:agentpump:envelope:v1"><meta><thread>{thread}</thread></meta>{payload}</message>"#
        )
    };
    let cases: Vec<(String, &str, &str, ThreadId)> = vec![
        (
            "<message xmlns='urn:agentpump:envelope:v1'><meta></message>".into(),
            "malformed-xml",
            "malformed XML",
            pump.system_thread(),
        ),
        (
            "<message><meta/></message>".into(),
            "malformed-xml",
            "root element is <message>, expected",
            pump.system_thread(),
        ),
        (
            "<message xmlns='urn:agentpump:envelope:v1'><meta/>\u{0}</message>".into(),
            "malformed-xml",
            "U+0000",
            pump.system_thread(),
        ),
        (
            env(&unknown.to_string(), &p("say", "")),
            "unknown-thread",
            "no such thread",
            pump.system_thread(),
        ),
        (
            env("sess-1", &p("say", "")),
            "malformed-thread-id",
            "a thread id is a UUID",
            pump.system_thread(),
        ),
        (
            env(&live.to_string(), "<say xmlns='urn:other'/>"),
            "unknown-root",
            "no listener accepts {urn:other}say",
            live,
        ),
        (
            env(&live.to_string(), "<!DOCTYPE x [<!ENTITY e 'boom'>]><x/>"),
            "forbidden-dtd",
            "DOCTYPE declarations are refused",
            pump.system_thread(),
        ),
        (
            format!(
                r#"<message xmlns="urn:agentpump:envelope:v1"><meta><to>nobody</to></meta>{}</message>"#,
                p("say", "")
            ),
            "no-route",
            "no listener is named `nobody`",
            pump.system_thread(),
        ),
        (
            env(&pump.system_thread().to_string(), &p("say", "")),
            "thread-closed",
            "system thread",
            pump.system_thread(),
        ),
    ];
    for (xml, code, words, recorded_in) in cases {
        let before = pump.history(recorded_in).await.unwrap().len();
        let err = pump.send(&xml).await.unwrap_err();
        assert_eq!(err.code(), code, "{xml}");
        assert!(
            err.to_string().contains(words),
            "{err} should say {words:?}"
        );
        assert_eq!(err.recorded_in(), Some(recorded_in), "{xml}");
        let after = pump.history(recorded_in).await.unwrap();
        assert_eq!(after.len(), before + 1, "{xml}: the answer is recorded");
        assert_eq!(after.last().unwrap().to.as_deref(), Some("client"));
        assert!(err.to_xml().contains(code));
        assert_echo_serves(&pump).await;
    }
}

#[tokio::test]
async fn a_full_queue_is_refused_never_dropped() {
    let gate = Gate::new();
    let config = PumpConfig {
        queue_capacity: 3,
        ..PumpConfig::default()
    };
    let pump = PumpBuilder::new()
        .config(config)
        .register(Registration::new("gate", gate.clone()).accepts(q("say")))
        .register(
            Registration::new(
                "flooder",
                Script::new(|msg, cx| {
                    if !msg.is_system() {
                        for i in 0..5 {
                            cx.send("sink", p("n", &i.to_string()));
                        }
                    }
                    Ok(())
                }),
            )
            .accepts(q("flood"))
            .peers(["sink"]),
        )
        .register(Registration::new("sink", Script::new(|_, _| Ok(()))).accepts(q("n")))
        .build()
        .unwrap();
    // Outside: the first message is taken by the (blocked) gate, three wait, the fifth is refused.
    let thread = pump
        .post(None, None, &p("say", "0"))
        .await
        .unwrap()
        .thread();
    gate.entered().await;
    let mut accepted = 1;
    let mut refused = 0;
    for i in 1..=4 {
        match pump
            .post(Some(thread), None, &p("say", &i.to_string()))
            .await
        {
            Ok(_) => accepted += 1,
            Err(e) => {
                assert_eq!(e.code(), "queue-full");
                refused += 1;
            }
        }
    }
    assert_eq!((accepted, refused), (4, 1));
    gate.open(10);
    pump.settle(thread).await;
    assert_eq!(
        egress(&pump, thread).await.len(),
        4,
        "every accepted message was delivered"
    );
    assert_eq!(
        notices(&pump, thread).await,
        [("client".into(), "system-error".into(), "queue-full".into())]
    );

    // A listener flooding its own thread: three fit, the other two are refused to it — in one
    // notice that counts them.
    let flood = start(&pump, &p("flood", "")).await;
    let got = notices(&pump, flood).await;
    assert_eq!(
        got,
        [(
            "flooder".to_string(),
            "system-error".to_string(),
            "queue-full".to_string()
        )]
    );
    let history = pump.history(flood).await.unwrap();
    assert!(
        history.iter().any(|r| r
            .payload
            .contains("2 outputs of this delivery were refused this way")),
        "the notice counts both"
    );
}

#[tokio::test]
async fn per_thread_order_is_fifo_and_a_slow_thread_does_not_block_others() {
    let gate = Gate::new();
    let pump = PumpBuilder::new()
        .register(echo())
        .register(Registration::new("gate", gate.clone()).accepts(q("wait")))
        .build()
        .unwrap();
    let slow = pump
        .post(None, None, &p("wait", ""))
        .await
        .unwrap()
        .thread();
    let fast = pump
        .post(None, None, &p("say", "0"))
        .await
        .unwrap()
        .thread();
    for i in 1..200 {
        pump.post(Some(fast), None, &p("say", &i.to_string()))
            .await
            .unwrap();
    }
    // The slow thread is stuck in its handler; the fast one finishes anyway.
    tokio::time::timeout(Duration::from_secs(10), pump.settle(fast))
        .await
        .expect("fast thread settles");
    let expected: Vec<String> = (0..200).map(|i| p("say", &i.to_string())).collect();
    assert_eq!(egress(&pump, fast).await, expected);
    assert!(egress(&pump, slow).await.is_empty());
    gate.open(1);
    pump.settle(slow).await;
    assert_eq!(egress(&pump, slow).await, [p("wait", "")]);
}

#[tokio::test]
async fn shutdown_drains_or_reports_every_queued_message() {
    let gate = Gate::new();
    let pump = PumpBuilder::new()
        .register(Registration::new("gate", gate.clone()).accepts(q("wait")))
        .build()
        .unwrap();
    let thread = pump
        .post(None, None, &p("wait", "0"))
        .await
        .unwrap()
        .thread();
    let mut ids = Vec::new();
    for i in 1..5 {
        ids.extend_from_slice(
            pump.post(Some(thread), None, &p("wait", &i.to_string()))
                .await
                .unwrap()
                .ids(),
        );
    }
    let stopping = {
        let pump = pump.clone();
        tokio::spawn(async move { pump.shutdown(Duration::from_millis(50)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let late = pump
        .post(Some(thread), None, &p("wait", "late"))
        .await
        .unwrap_err();
    assert_eq!(late.code(), "shutting-down");
    gate.open(1); // lets the one running delivery finish
    let report = stopping.await.unwrap();
    assert!(!report.drained);
    assert_eq!(report.undelivered, 4);
    let history = pump.history(thread).await.unwrap();
    for id in ids {
        let reported = history.iter().any(|r| {
            r.in_reply_to == Some(id)
                && r.kind == RecordKind::System
                && r.payload.contains("shutting-down")
        });
        assert!(reported, "queued message {id} is reported as not delivered");
    }
    assert_eq!(egress(&pump, thread).await, [p("wait", "0")]);
    let system = pump.history(pump.system_thread()).await.unwrap();
    assert!(
        system
            .last()
            .unwrap()
            .payload
            .contains(r#"<shutdown xmlns="urn:agentpump:system:v1" undelivered="4"/>"#)
    );
}

#[tokio::test]
async fn shutdown_with_enough_grace_delivers_everything() {
    let pump = PumpBuilder::new().register(echo()).build().unwrap();
    let thread = pump
        .post(None, None, &p("say", "0"))
        .await
        .unwrap()
        .thread();
    for i in 1..50 {
        pump.post(Some(thread), None, &p("say", &i.to_string()))
            .await
            .unwrap();
    }
    let report = pump.shutdown(Duration::from_secs(10)).await;
    assert!(report.drained);
    assert_eq!(report.undelivered, 0);
    assert_eq!(egress(&pump, thread).await.len(), 50);
}

#[tokio::test]
async fn pump_elements_smuggled_inside_a_payload_or_spawned_to_the_client_are_refused() {
    let smuggler = Registration::new(
        "smuggler",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                cx.reply(
                    r#"<x xmlns="urn:test:v1"><s:halt xmlns:s="urn:agentpump:system:v1"/></x>"#,
                );
                cx.spawn(agentpump::system::Spawn::new(p("go", "")).to("client"));
            }
            Ok(())
        }),
    )
    .accepts(q("go"));
    let pump = PumpBuilder::new().register(smuggler).build().unwrap();
    let thread = start(&pump, &p("go", "")).await;
    let codes: Vec<String> = notices(&pump, thread)
        .await
        .into_iter()
        .map(|n| n.2)
        .collect();
    assert_eq!(codes, ["reserved-namespace", "no-route"]);
    assert!(egress(&pump, thread).await.is_empty());
    // The client cannot either.
    let err = pump
        .post(
            Some(thread),
            None,
            r#"<go xmlns="urn:test:v1"><huh xmlns="urn:agentpump:system:v1"/></go>"#,
        )
        .await;
    assert_eq!(err.unwrap_err().code(), "reserved-namespace");
}

#[tokio::test]
async fn an_ingress_error_renders_the_recorded_answer() {
    let pump = PumpBuilder::new().register(echo()).build().unwrap();
    let err = pump
        .post(None, None, &p("nobody-takes-this", ""))
        .await
        .unwrap_err();
    let recorded = pump
        .history(err.recorded_in().unwrap())
        .await
        .unwrap()
        .pop()
        .unwrap();
    assert!(
        err.to_xml().contains(&format!("<id>{}</id>", recorded.id)),
        "{}",
        err.to_xml()
    );
}

#[tokio::test]
async fn a_configuration_that_cannot_work_is_refused() {
    for config in [
        PumpConfig {
            batch: 0,
            ..PumpConfig::default()
        },
        PumpConfig {
            queue_capacity: 0,
            ..PumpConfig::default()
        },
    ] {
        let err = PumpBuilder::new().config(config).build().unwrap_err();
        assert!(
            err.to_string().starts_with("invalid configuration: "),
            "{err}"
        );
    }
}

#[tokio::test]
async fn a_listener_sees_history_up_to_its_own_delivery_only() {
    let gate = Gate::new();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = std::sync::Arc::clone(&seen);
    struct Viewer(std::sync::Arc<std::sync::Mutex<Vec<usize>>>, Gate);
    #[async_trait::async_trait]
    impl agentpump::Listener for Viewer {
        async fn handle(
            &self,
            msg: &agentpump::Delivery,
            cx: &mut agentpump::Context,
        ) -> Result<(), ListenerError> {
            if msg.payload().as_str().contains("first") {
                self.1.entered.add_permits(1);
                self.1.permits.acquire().await.unwrap().forget();
            }
            let n = cx.history().await.map_err(ListenerError::failed)?.len();
            self.0.lock().unwrap().push(n);
            Ok(())
        }
    }
    let pump = PumpBuilder::new()
        .register(Registration::new("viewer", Viewer(log, gate.clone())).accepts(q("look")))
        .build()
        .unwrap();
    let thread = pump
        .post(None, None, &p("look", "first"))
        .await
        .unwrap()
        .thread();
    gate.entered().await;
    pump.post(Some(thread), None, &p("look", "second"))
        .await
        .unwrap();
    gate.open(1);
    pump.settle(thread).await;
    assert_eq!(
        *seen.lock().unwrap(),
        [1, 2],
        "the first delivery does not see the second message"
    );
}

#[tokio::test]
async fn a_settle_waiting_when_shutdown_starts_returns() {
    let gate = Gate::new();
    let pump = PumpBuilder::new()
        .register(Registration::new("gate", gate.clone()).accepts(q("wait")))
        .build()
        .unwrap();
    let thread = pump
        .post(None, None, &p("wait", "0"))
        .await
        .unwrap()
        .thread();
    pump.post(Some(thread), None, &p("wait", "1"))
        .await
        .unwrap();
    gate.entered().await;
    let waiting = {
        let pump = pump.clone();
        tokio::spawn(async move { pump.settle(thread).await })
    };
    let stopping = {
        let pump = pump.clone();
        tokio::spawn(async move { pump.shutdown(Duration::from_millis(20)).await })
    };
    tokio::time::sleep(Duration::from_millis(60)).await;
    gate.open(1);
    assert_eq!(stopping.await.unwrap().undelivered, 1);
    tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("settle returns")
        .unwrap();
}
