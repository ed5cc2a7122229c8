//! AgentServer v2.1 interop over the HTTP API, with envelopes built exactly as the Python
//! AgentServer builds them (`make_envelope` in its pump tests: a fresh uuid4 `<thread>` for a new
//! conversation, a payload in no namespace marked `xmlns=""`; its own handlers' answers carry no
//! `xmlns` at all), answered in its dialect.

mod support;

use std::time::Duration;

use agentpump::{AgentServerConfig, PumpBuilder, PumpConfig, PumpHandle, QName, Registration};
use reqwest::StatusCode;
use support::{Script, problem};

const TOKEN: &str = "agentserver-token-0123456789";
const AS_NS: &str = "https://xml-pipeline.org/ns/envelope/v1";
const HELLO: &str = "urn:example:hello:v1";

/// The Python AgentServer's `make_envelope(payload_xml, from_id, to_id, thread_id)`.
fn make_envelope(payload_xml: &str, from_id: &str, to_id: &str, thread_id: &str) -> String {
    let mut payload_xml = payload_xml.to_owned();
    if !payload_xml.contains("xmlns=") {
        let mut idx = payload_xml.find('>').unwrap();
        if payload_xml.as_bytes()[idx - 1] == b'/' {
            idx -= 1;
        }
        payload_xml.insert_str(idx, " xmlns=\"\"");
    }
    format!(
        "<message xmlns=\"{AS_NS}\">\n  <meta>\n    <from>{from_id}</from>\n    <to>{to_id}</to>\n    <thread>{thread_id}</thread>\n  </meta>\n  {payload_xml}\n</message>"
    )
}

/// A greeter like the AgentServer's `handle_greeting`, registered under the organism's
/// namespace for AgentServer payloads.
fn greeter() -> Registration {
    Registration::new(
        "greeter",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                let text = msg.payload().as_str();
                let name = text
                    .split("<Name>")
                    .nth(1)
                    .and_then(|rest| rest.split("</Name>").next())
                    .unwrap_or("stranger");
                cx.reply(format!(
                    r#"<GreetingResponse xmlns="{HELLO}"><message>Hello, {name}!</message></GreetingResponse>"#
                ));
            }
            Ok(())
        }),
    )
    .accepts(QName::new(HELLO, "Greeting"))
}

async fn start(namespace: Option<&str>) -> (PumpHandle, String) {
    let pump = PumpBuilder::new()
        .config(PumpConfig {
            agentserver: AgentServerConfig {
                namespace: namespace.map(str::to_owned),
            },
            ..PumpConfig::default()
        })
        .register(greeter())
        .build()
        .unwrap();
    let base = support::serve(&pump, TOKEN, 64 * 1024).await;
    (pump, base)
}

async fn post(base: &str, path: &str, body: String) -> reqwest::Response {
    support::http_client()
        .post(format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn answers(base: &str, thread: &str) -> Vec<String> {
    let response = support::http_client()
        .get(format!("{base}/threads/{thread}/answers"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    response.json().await.unwrap()
}

async fn settle(pump: &PumpHandle, thread: &str) {
    let id = thread.parse().unwrap();
    tokio::time::timeout(Duration::from_secs(10), pump.settle(id))
        .await
        .expect("the thread settles");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_agentserver_conversation_opens_its_thread_and_is_answered_in_kind() {
    let (pump, base) = start(Some(HELLO)).await;
    let thread = uuid::Uuid::new_v4().to_string();
    let envelope = make_envelope(
        "<Greeting><Name>World</Name></Greeting>",
        "user",
        "greeter",
        &thread,
    );
    let response = post(&base, "/threads", envelope).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        body["thread"],
        thread.as_str(),
        "the thread has the client's id"
    );
    settle(&pump, &thread).await;
    let expected = |name: &str| {
        format!(
            r#"<message xmlns="{AS_NS}"><meta><from>greeter</from><to>client</to><thread>{thread}</thread></meta><GreetingResponse xmlns=""><message>Hello, {name}!</message></GreetingResponse></message>"#
        )
    };
    assert_eq!(answers(&base, &thread).await, [expected("World")]);

    // The same conversation goes on under the same id; a payload that declares no namespace
    // at all (as the AgentServer's own handlers write them) is in no namespace too.
    let again = format!(
        "<message xmlns=\"{AS_NS}\"><meta><from>user</from><to>greeter</to><thread>{thread}</thread></meta><Greeting><Name>again</Name></Greeting></message>"
    );
    assert_eq!(
        post(&base, "/threads", again).await.status(),
        StatusCode::CREATED
    );
    settle(&pump, &thread).await;
    assert_eq!(
        answers(&base, &thread).await,
        [expected("World"), expected("again")]
    );
    // Posted to the thread's own route, an AgentServer envelope's payload is taken in alike.
    let path = format!("/threads/{thread}/messages");
    let third = make_envelope(
        "<Greeting><Name>third</Name></Greeting>",
        "user",
        "greeter",
        &thread,
    );
    assert_eq!(
        post(&base, &path, third).await.status(),
        StatusCode::CREATED
    );
    settle(&pump, &thread).await;
    assert_eq!(answers(&base, &thread).await.len(), 3);
    // History keeps the payload in the organism's namespace; the chain verifies.
    let history = pump.history(thread.parse().unwrap()).await.unwrap();
    assert!(
        history[0].root.is(HELLO, "Greeting"),
        "{:?}",
        history[0].root
    );
    assert!(pump.verify().await.unwrap() >= 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentserver_input_the_organism_cannot_take_is_refused_in_kind_and_explained() {
    // No namespace declared for AgentServer payloads: the refusal says how to declare one.
    let (_pump, base) = start(None).await;
    let thread = uuid::Uuid::new_v4().to_string();
    let envelope = make_envelope(
        "<Greeting><Name>W</Name></Greeting>",
        "user",
        "greeter",
        &thread,
    );
    let (status, body) = problem(post(&base, "/threads", envelope).await).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        body["detail"].as_str().unwrap().contains("[agentserver]"),
        "{body}"
    );
    assert!(
        body["answer"].as_str().unwrap().starts_with(&format!(
            r#"<message xmlns="{AS_NS}"><meta><from>system</from>"#
        )),
        "{body}"
    );

    let (_pump, base) = start(Some(HELLO)).await;
    // A thread id that is not a UUID is still refused.
    let envelope = make_envelope(
        "<Greeting><Name>W</Name></Greeting>",
        "user",
        "greeter",
        "sess-1",
    );
    let (status, body) = problem(post(&base, "/threads", envelope).await).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("malformed-thread-id"))
    );
    // The agentpump dialect still refuses a thread it does not know.
    let unknown = format!(
        "<message xmlns=\"urn:agentpump:envelope:v1\"><meta><thread>{}</thread></meta><Greeting xmlns=\"{HELLO}\"/></message>",
        uuid::Uuid::new_v4()
    );
    let (status, body) = problem(post(&base, "/threads", unknown).await).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown-thread"))
    );
    // An AgentServer payload that already has a namespace is routed by it, unchanged.
    let thread = uuid::Uuid::new_v4().to_string();
    let envelope = make_envelope(
        &format!(r#"<Greeting xmlns="{HELLO}"><Name>ns</Name></Greeting>"#),
        "user",
        "greeter",
        &thread,
    );
    assert_eq!(
        post(&base, "/threads", envelope).await.status(),
        StatusCode::CREATED
    );
}

#[test]
fn organism_toml_declares_the_namespace_of_agentserver_payloads() {
    let text = format!(
        "[agentserver]\nnamespace = \"{HELLO}\"\n\n[[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\naccepts = [\"{{{HELLO}}}Greeting\"]\n"
    );
    let organism = agentpump::host::organism::Organism::parse(&text, "organism.toml").unwrap();
    let config = organism.config("organism.toml").unwrap();
    assert_eq!(config.agentserver.namespace.as_deref(), Some(HELLO));
    let bad = "[agentserver]\nnamespace = \"\"\n";
    let err = agentpump::host::organism::Organism::parse(bad, "organism.toml")
        .and_then(|o| o.config("organism.toml").map(|_| ()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("organism.toml:2") && err.contains("namespace"),
        "{err}"
    );
    // The builder refuses a namespace that cannot be declared, or that the pump owns.
    for bad in ["urn:a b", "urn:\"q\"", "urn:a&b", "urn:agentpump:system:v1"] {
        let config = PumpConfig {
            agentserver: AgentServerConfig {
                namespace: Some(bad.into()),
            },
            ..PumpConfig::default()
        };
        let err = PumpBuilder::new().config(config).build().unwrap_err();
        assert!(
            err.to_string().contains("agentserver.namespace"),
            "{bad}: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agentserver_thread_answers_in_kind_after_a_restart() {
    let dir = support::Scratch::new("agentserver");
    let config = PumpConfig {
        agentserver: AgentServerConfig {
            namespace: Some(HELLO.into()),
        },
        ..PumpConfig::default()
    };
    let build = |store| {
        PumpBuilder::new()
            .history(store)
            .config(config.clone())
            .register(greeter())
            .build()
            .unwrap()
    };
    let thread = uuid::Uuid::new_v4().to_string();
    let hello = |name: &str| {
        make_envelope(
            &format!("<Greeting><Name>{name}</Name></Greeting>"),
            "user",
            "greeter",
            &thread,
        )
    };
    {
        let store = std::sync::Arc::new(agentpump::history::SqliteHistory::open(dir.db()).unwrap());
        let pump = build(store.clone());
        pump.send(hello("before")).await.unwrap();
        settle(&pump, &thread).await;
        pump.shutdown(Duration::from_secs(1)).await;
        store.close().unwrap();
    }
    let store = std::sync::Arc::new(agentpump::history::SqliteHistory::open(dir.db()).unwrap());
    let pump = build(store);
    pump.send(hello("after")).await.unwrap();
    settle(&pump, &thread).await;
    let answers = pump.answers(thread.parse().unwrap()).await.unwrap();
    assert_eq!(answers.len(), 2, "{answers:?}");
    assert!(
        answers
            .iter()
            .all(|a| a.starts_with(&format!(r#"<message xmlns="{AS_NS}">"#))
                && a.contains(r#"<GreetingResponse xmlns="">"#)),
        "{answers:?}"
    );
}
