//! Listeners: registration checks, typed listeners, broadcast order, and the AgentServer dialect.

mod support;

use agentpump::listener::RegistrationError;
use agentpump::listeners::Echo;
use agentpump::{
    BuildError, Context, Dialect, ListenerError, PumpBuilder, QName, Registration, Role, Typed,
    TypedListener,
};
use serde::{Deserialize, Serialize};
use support::{Script, egress, notices, p, q, start};

#[test]
fn the_builder_refuses_clashing_or_invalid_registrations() {
    let reg = |name: &str| Registration::new(name, Echo).accepts(q("say"));
    let cases: Vec<(Vec<Registration>, RegistrationError)> = vec![
        (
            vec![reg("a"), reg("a")],
            RegistrationError::DuplicateName("a".into()),
        ),
        (
            vec![reg("a").peers(["ghost"])],
            RegistrationError::UnknownPeer {
                listener: "a".into(),
                peer: "ghost".into(),
            },
        ),
        (
            vec![reg("x").role(Role::Agent), reg("y").role(Role::Agent)],
            RegistrationError::SharedAgentRoot {
                first: "x".into(),
                second: "y".into(),
                root: q("say").to_string(),
            },
        ),
        (
            vec![reg("sp ace")],
            RegistrationError::InvalidName("sp ace".into()),
        ),
        (
            vec![reg("system")],
            RegistrationError::InvalidName("system".into()),
        ),
        (
            vec![
                Registration::new("a", Echo).accepts(QName::new("urn:agentpump:system:v1", "huh")),
            ],
            RegistrationError::ReservedRoot {
                listener: "a".into(),
                root: "{urn:agentpump:system:v1}huh".into(),
            },
        ),
    ];
    for (registrations, expected) in cases {
        let builder = registrations
            .into_iter()
            .fold(PumpBuilder::new(), PumpBuilder::register);
        assert_eq!(
            builder.build().unwrap_err(),
            BuildError::Registration(expected)
        );
    }
    // Tools may share a root; an agent and a tool may too.
    let ok = PumpBuilder::new()
        .register(reg("t1"))
        .register(reg("t2"))
        .register(reg("agent").role(Role::Agent));
    assert!(ok.build().is_ok());
}

#[derive(Deserialize)]
struct Add {
    a: i64,
    b: i64,
}

#[derive(Serialize)]
struct Sum {
    value: i64,
}

struct Adder;

#[async_trait::async_trait]
impl TypedListener for Adder {
    type Input = Add;
    type Output = Sum;
    const OUTPUT_ROOT: (&'static str, &'static str) = ("urn:test:v1", "sum");

    async fn call(&self, add: Add, _: &mut Context) -> Result<Sum, ListenerError> {
        add.a
            .checked_add(add.b)
            .map(|value| Sum { value })
            .ok_or_else(|| ListenerError::failed("overflow"))
    }
}

#[tokio::test]
async fn a_typed_listener_reads_serde_types_and_refuses_what_does_not_fit() {
    let pump = PumpBuilder::new()
        .register(Registration::new("adder", Typed(Adder)).accepts(q("add")))
        .build()
        .unwrap();
    let cases = [
        (
            p("add", "<a>2</a><b>40</b>"),
            Some(p("sum", "<value>42</value>")),
            None,
        ),
        (
            r#"<t:add xmlns:t="urn:test:v1"><t:a>1</t:a><t:b>2</t:b></t:add>"#.to_owned(),
            Some(p("sum", "<value>3</value>")),
            None,
        ),
        (
            p("add", "<a>two</a><b>40</b>"),
            None,
            Some(("huh", "invalid-payload")),
        ),
        (p("add", "<a>2</a>"), None, Some(("huh", "invalid-payload"))),
        (
            p("add", &format!("<a>{}</a><b>1</b>", i64::MAX)),
            None,
            Some(("system-error", "handler-failed")),
        ),
    ];
    for (payload, answer, notice) in cases {
        let thread = start(&pump, &payload).await;
        assert_eq!(
            egress(&pump, thread).await,
            answer.into_iter().collect::<Vec<_>>(),
            "{payload}"
        );
        let expected: Vec<(String, String, String)> = notice
            .into_iter()
            .map(|(e, c)| ("client".to_owned(), e.to_owned(), c.to_owned()))
            .collect();
        assert_eq!(notices(&pump, thread).await, expected, "{payload}");
    }
}

#[tokio::test]
async fn broadcast_reaches_every_listener_of_a_root_in_registration_order_within_peers() {
    let note = |name: &str| Registration::new(name, Script::new(|_, _| Ok(()))).accepts(q("note"));
    let announcer = Registration::new(
        "announcer",
        Script::new(|msg, cx| {
            if msg.qname().local() == "announce" {
                cx.emit(p("note", "hello all"));
            }
            Ok(())
        }),
    )
    .accepts(q("announce"))
    .peers(["second", "third"]);
    let pump = PumpBuilder::new()
        .register(note("first"))
        .register(note("second"))
        .register(announcer)
        .register(note("third"))
        .build()
        .unwrap();
    // From outside: everyone who accepts the root, in registration order.
    let receipt = pump
        .post(None, None, &p("note", "from outside"))
        .await
        .unwrap();
    assert_eq!(receipt.ids().len(), 3);
    pump.settle(receipt.thread()).await;
    let to: Vec<String> = pump
        .history(receipt.thread())
        .await
        .unwrap()
        .iter()
        .filter_map(|r| r.to.as_deref().map(str::to_owned))
        .collect();
    assert_eq!(to, ["first", "second", "third"]);
    // From a listener: only the ones it may address.
    let thread = start(&pump, &p("announce", "")).await;
    let history = pump.history(thread).await.unwrap();
    let to: Vec<&str> = history
        .iter()
        .filter(|r| r.root == q("note"))
        .filter_map(|r| r.to.as_deref())
        .collect();
    assert_eq!(to, ["second", "third"]);
}

#[tokio::test]
async fn agentserver_envelopes_are_accepted_and_answered_in_kind() {
    let pump = PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap();
    let xml = format!(
        r#"<message xmlns="https://xml-pipeline.org/ns/envelope/v1"><meta><from>legacy</from><to>echo</to></meta>{}</message>"#,
        p("say", "hi")
    );
    let receipt = pump.send(&xml).await.unwrap();
    pump.settle(receipt.thread()).await;
    assert_eq!(
        pump.thread(receipt.thread()).unwrap().dialect,
        Dialect::AgentServer
    );
    assert_eq!(egress(&pump, receipt.thread()).await, [p("say", "hi")]);
    // The sender's own <from> is not trusted: the pump says who it was.
    let first = &pump.history(receipt.thread()).await.unwrap()[0];
    assert_eq!(&*first.from, "client");
    // A refusal answers in the AgentServer envelope.
    let bad = xml.replace("<to>echo</to>", "<to>nobody</to>");
    let err = pump.send(&bad).await.unwrap_err();
    assert!(
        err.to_xml().starts_with(
            r#"<message xmlns="https://xml-pipeline.org/ns/envelope/v1"><meta><from>system</from>"#
        ),
        "{}",
        err.to_xml()
    );
}
