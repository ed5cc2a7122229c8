//! A USE's `timeout_ms` on the pump, whatever answers the call: a tool registered through the
//! adapter answers `timeout` itself; the pump holds any other listener's handling of the call
//! to it; a process called like a tool runs in a child thread with it as its wall clock. In
//! each case the process sees `err.type = "timeout"` in its RECOVER, and nothing waits on.

mod support;

use std::time::{Duration, Instant};

use agentpump::history::RecordKind;
use agentpump::process::engine::Program;
use agentpump::tool::{self, Answer, Call, Signature, TOOL_NS, Tool, ToolError, ToolResult};
use agentpump::value::Value;
use agentpump::{
    Context, Delivery, Listener, ListenerError, Payload, PumpBuilder, QName, Registration, Role,
};

const NS: &str = "urn:test:timeouts:v1";

/// A bare tool listener that never finishes its handler.
struct Stuck;

#[agentpump::async_trait]
impl Listener for Stuck {
    async fn handle(&self, msg: &Delivery, _cx: &mut Context) -> Result<(), ListenerError> {
        if !msg.is_system() {
            std::future::pending::<()>().await;
        }
        Ok(())
    }
}

/// The same, written as a tool through the adapter.
struct StuckTool;

#[agentpump::async_trait]
impl Tool for StuckTool {
    fn signature(&self) -> Signature {
        Signature::new("stuck", "never answers").arg("v", "number", "anything", true)
    }

    async fn call(&self, _call: &Call, _cx: &mut Context) -> Result<ToolResult, ToolError> {
        std::future::pending().await
    }
}

/// Runs `main` (with the other processes of `processes`) against `tool`; returns the fields of
/// its RETURN and how long the run took.
async fn run(processes: &str, tool: Registration) -> (Answer, Duration) {
    let text = format!(
        "<triggers>\n<trigger event=\"{{{NS}}}go\" target=\"main\" />\n</triggers>\n<processes>\n{processes}</processes>\n"
    );
    let program = Program::parse(&text).unwrap_or_else(|e| panic!("{:#?}", e.0));
    let pump = support::process::with_processes(PumpBuilder::new().register(tool), &program)
        .build()
        .unwrap();
    let started = Instant::now();
    let thread = pump
        .post(None, None, &format!("<go xmlns=\"{NS}\"/>"))
        .await
        .unwrap()
        .thread();
    // Bounded: a timeout that does not fire fails the test instead of hanging it.
    tokio::time::timeout(Duration::from_secs(20), pump.settle(thread))
        .await
        .expect("the process ended within its timeout_ms");
    let took = started.elapsed();
    let records = pump.history(thread).await.unwrap();
    let egress = records
        .iter()
        .rev()
        .find(|r| r.kind == RecordKind::Egress)
        .expect("an answer to the starter");
    let payload = Payload::parse(&egress.payload, &Default::default()).unwrap();
    (Answer::parse(&payload).unwrap().unwrap(), took)
}

const RECOVERS: &str = "<process id=\"main\">\n  TRY:\n    USE `stuck` where: v=1 (timeout_ms=200)\n    SET KIND := \"answered\"\n  RECOVER (err):\n    SET KIND := err.type\n  RETURN: KIND\n</process>\n";

fn kind(answer: &Answer) -> &Value {
    match answer {
        Answer::Result(r) => &r.fields["KIND"],
        Answer::Error(e) => panic!("the process failed: {e:?}"),
    }
}

/// 03: "`timeout_ms` and `retry` per USE" (the issue: "`timeout_ms` and `retry` per USE"); a
/// bare listener cannot answer `timeout` itself, so the pump ends its handling of the call.
#[tokio::test]
async fn a_bare_listener_tool_is_held_to_the_use_timeout() {
    let tool = Registration::new("stuck", Stuck)
        .role(Role::Tool)
        .accepts(QName::new(TOOL_NS, "call"));
    let (answer, took) = run(RECOVERS, tool).await;
    assert_eq!(kind(&answer), &Value::from("timeout"));
    // Well before the registration's own timeout (30 s by default).
    assert!(took < Duration::from_secs(10), "{took:?}");
}

/// A tool written through the adapter answers the `timeout` error itself.
#[tokio::test]
async fn an_adapter_tool_answers_the_use_timeout_itself() {
    let (answer, _) = run(RECOVERS, tool::register(StuckTool)).await;
    assert_eq!(kind(&answer), &Value::from("timeout"));
}

/// A process called like a tool runs in a child thread whose wall clock is the USE's
/// `timeout_ms`: the governor halts it, and the caller's RECOVER sees `timeout`.
#[tokio::test]
async fn a_process_called_like_a_tool_is_held_to_the_use_timeout() {
    let processes = "<process id=\"main\">\n  TRY:\n    USE `inner` where: v=1 (timeout_ms=300)\n    SET KIND := \"answered\"\n  RECOVER (err):\n    SET KIND := err.type\n  RETURN: KIND\n</process>\n<process id=\"inner\" args=\"v: Number\">\n  USE `stuck` where: v=v\n  RETURN: v=v\n</process>\n";
    let tool = Registration::new("stuck", Stuck)
        .role(Role::Tool)
        .accepts(QName::new(TOOL_NS, "call"));
    let (answer, took) = run(processes, tool).await;
    assert_eq!(kind(&answer), &Value::from("timeout"));
    assert!(took < Duration::from_secs(10), "{took:?}");
}
