//! A person in the loop on MCP tools (issue 31): "an approval on an MCP tool once MCP tools
//! exist", against the MCP project's reference server. What the server is sent is logged (its
//! stdin copied to a file), so each test checks what reached the server, not only what came
//! back. A missing server fails under `AGENTPUMP_TESTS_NEED_MCP=1` and skips elsewhere.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentpump::host::organism::Organism;
use agentpump::pump::inbox::Decision;
use agentpump::tool::{Answer, ErrorType, ToolResult};
use agentpump::value::Value;
use agentpump::{InboxFilter, OpenRequest, PumpHandle, Reply, ThreadId, ThreadState};
use support::Scratch;
use support::mcp::everything;

/// An organism whose `ev.echo` (the reference server's `echo`) waits for approval; the
/// server's stdin is copied to `sent.log`.
async fn start(dir: &Scratch, server: &Path) -> PumpHandle {
    let log = dir.0.join("sent.log");
    let shell = format!("tee -a '{}' | exec '{}'", log.display(), server.display());
    let organism = format!(
        "[store]\npath = \"history.db\"\n\n[[mcp]]\nname = \"ev\"\ncommand = [\"sh\", \"-c\", {shell:?}]\n\n[inbox.approve]\n\"ev.echo\" = true\n"
    );
    let path = dir.write("organism.toml", &organism);
    let organism = Organism::load(&path).unwrap();
    let store = Arc::new(organism.open_store(&dir.0).unwrap());
    let mcp = organism.start_mcp("organism.toml").await.unwrap();
    organism
        .builder_with_mcp("organism.toml", mcp)
        .unwrap()
        .history(store as Arc<dyn agentpump::history::HistoryStore>)
        .build()
        .unwrap()
}

/// The `tools/call` requests the server was sent, as lines of JSON.
fn calls_sent(dir: &Scratch) -> Vec<String> {
    let sent = std::fs::read_to_string(dir.0.join("sent.log")).unwrap_or_default();
    sent.lines()
        .filter(|l| l.contains("\"tools/call\""))
        .map(str::to_owned)
        .collect()
}

/// Posts a call of `ev.echo` saying `message` and waits until its request is listed.
async fn held(pump: &PumpHandle, message: &str) -> (ThreadId, OpenRequest) {
    let call = agentpump::tool::Call::new("ev.echo")
        .id("e1")
        .arg("message", Value::Str(message.to_owned()))
        .to_xml();
    let thread = pump.post(None, None, &call).await.unwrap().thread();
    let filter = InboxFilter {
        thread: Some(thread),
        ..InboxFilter::default()
    };
    for _ in 0..500 {
        if let Some(request) = pump.inbox(&filter).await.unwrap().pop() {
            pump.settle(thread).await;
            assert_eq!(pump.thread(thread).unwrap().state, ThreadState::Waiting);
            return (thread, request);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the call of ev.echo in {thread} was never held for approval")
}

/// Answers `request`, settles its thread and returns the one tool answer its client got.
async fn answered(
    pump: &PumpHandle,
    thread: ThreadId,
    request: &OpenRequest,
    d: Decision,
) -> Answer {
    let reply = Reply {
        decision: d,
        by: "dana".to_owned(),
    };
    pump.answer(request.id, reply).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), pump.settle(thread))
        .await
        .expect("the thread settles");
    let limits = agentpump::Limits::default();
    let got: Vec<_> = support::egress(pump, thread)
        .await
        .iter()
        .map(|xml| {
            let payload = agentpump::Payload::parse(xml, &limits).unwrap();
            Answer::parse(&payload).unwrap().unwrap()
        })
        .collect();
    match <[Answer; 1]>::try_from(got) {
        Ok([answer]) => answer,
        Err(got) => panic!("one answer to the client, got {got:?}"),
    }
}

fn text(answer: &Answer) -> &Value {
    match answer {
        Answer::Result(ToolResult { fields, .. }) => &fields["text"],
        Answer::Error(e) => panic!("a result, got {e:?}"),
    }
}

/// "An organism marks tools … as needing approval … and the same on MCP servers. The pump
/// holds such a call, asks, and then forwards it (approve), forwards edited arguments (edit —
/// recorded as such), or answers the caller with `<error type=\"denied\">` and the reason
/// (deny)"; "an approval on an MCP tool once MCP tools exist".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_tool_call_waits_for_approval_and_is_approved_denied_or_edited() {
    let Some(server) = everything() else { return };
    let dir = Scratch::new("inbox-mcp-approval");
    let pump = start(&dir, &server).await;

    // Held: the server is not called while the thread waits.
    let (thread, request) = held(&pump, "first").await;
    assert_eq!(request.request.tool, "ev.echo");
    assert_eq!(
        request.request.arguments,
        Some(serde_json::json!({"message": "first"}))
    );
    assert!(
        calls_sent(&dir).is_empty(),
        "called before approval: {:?}",
        calls_sent(&dir)
    );
    // Approve: the server is called once, with the call's arguments, and answers.
    let answer = answered(&pump, thread, &request, Decision::Approve).await;
    assert_eq!(text(&answer), &Value::Str("Echo: first".into()));
    let sent = calls_sent(&dir);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].contains("\"first\""), "{sent:?}");

    // Deny: the caller gets the denial with the reason; the server never sees the call.
    let (thread, request) = held(&pump, "second").await;
    let deny = Decision::Deny {
        reason: "not this one".to_owned(),
    };
    match answered(&pump, thread, &request, deny).await {
        Answer::Error(e) => {
            assert_eq!(e.kind, ErrorType::Denied);
            assert!(e.message.contains("not this one"), "{e:?}");
            assert_eq!(e.call.as_deref(), Some("e1"));
        }
        other => panic!("a denial, got {other:?}"),
    }
    assert_eq!(
        calls_sent(&dir).len(),
        1,
        "the denied call reached the server"
    );

    // Edit: the server sees the edited arguments, never the held ones.
    let (thread, request) = held(&pump, "draft").await;
    let arguments = serde_json::json!({"message": "final"});
    let answer = answered(&pump, thread, &request, Decision::Edit { arguments }).await;
    assert_eq!(text(&answer), &Value::Str("Echo: final".into()));
    let sent = calls_sent(&dir);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert!(
        sent[1].contains("\"final\"") && !sent[1].contains("draft"),
        "{sent:?}"
    );
    pump.shutdown(Duration::from_secs(5)).await;
}
