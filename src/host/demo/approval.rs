//! The demo's person in the loop: a `command` call that needs approval (the demo organism's
//! `[tools.command] approve = true`) waits in the inbox; the demo prints the request, answers
//! it itself as a person would (`agentpump answer ID --approve`), and shows what followed.

use std::fmt::Write as _;
use std::time::Duration;

use crate::host::HostError;
use crate::pump::inbox::Decision;
use crate::tool::Call;
use crate::value::Value;
use crate::{InboxFilter, PumpHandle, Reply, ThreadId};

/// What the demo shows of this thread.
pub(super) const WHAT: &str =
    "a command that waits for a person's approval, approved by the demo itself";

/// Starts the thread whose call waits, prints its request, approves it and waits for the
/// thread to settle; returns the thread and the text to print.
pub(super) async fn run(pump: &PumpHandle) -> Result<(ThreadId, String), HostError> {
    let args = vec![Value::Str("deploying".into()), Value::Str("v1.2".into())];
    let call = Call::new("command")
        .id("deploy")
        .arg("program", "echo")
        .arg("args", Value::List(args))
        .to_xml();
    let thread = pump.post(None, Some("command"), &call).await?.thread();
    settle(pump, thread).await?;
    let filter = InboxFilter {
        thread: Some(thread),
        ..InboxFilter::default()
    };
    let open = pump.inbox(&filter).await?;
    let mut out = format!("\nA thread that waits for a person ({WHAT}):\n");
    for request in open {
        let _ = writeln!(
            out,
            "  inbox: {}  {}  (thread {}, state {})",
            request.id,
            request.request.question,
            &thread.to_string()[..8],
            pump.thread(thread)
                .map_or("?".into(), |t| t.state.to_string()),
        );
        let _ = writeln!(
            out,
            "  the demo answers: agentpump answer {} --approve",
            request.id
        );
        let reply = Reply {
            decision: Decision::Approve,
            by: "demo".to_owned(),
        };
        pump.answer(request.id, reply).await?;
    }
    settle(pump, thread).await?;
    let records = pump.history(thread).await?;
    if let Some(last) = records.last() {
        let _ = writeln!(out, "  then the command ran: {}", last.payload);
    }
    Ok((thread, out))
}

async fn settle(pump: &PumpHandle, thread: ThreadId) -> Result<(), HostError> {
    tokio::time::timeout(Duration::from_secs(30), pump.settle(thread))
        .await
        .map_err(|_| HostError::Unsettled(format!("thread {thread} did not settle within 30 s")))
}
