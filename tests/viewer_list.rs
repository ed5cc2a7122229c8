//! The viewer as a new user first meets it (issue 47), in headless Chromium with axe-core on
//! each view: the thread list says what each thread is (its first message, the listener it
//! went to, how long it ran), filters the threads waiting for a person, and the header's Inbox
//! link counts the requests waiting, live.
//!
//! Needs `chromedriver`, `chromium` and axe-core, as `tests/viewer.rs` does.

mod support;

#[path = "viewer/browser.rs"]
#[allow(dead_code)] // the `agentpump view` helper is tests/viewer.rs's
mod browser;

use std::sync::Arc;

use agentpump::listeners::{CommandConfig, CommandTool, Echo};
use agentpump::tool::Call;
use agentpump::value::Value;
use agentpump::{
    Approval, InboxFilter, InboxPolicy, PumpBuilder, PumpConfig, PumpHandle, QName, Registration,
    ThreadId,
};
use browser::Browser;
use support::Scratch;

const TOKEN: &str = "viewer-list-test-token-0123456789";

/// A first message longer than the list shows of it.
const LONG: &str = "Summarise the quarterly report for the board: three short bullet points, \
                    a title, and the numbers that changed most since the last quarter";

/// A host on a SQLite history with an `echo` (accepting `{urn:example:say:v1}say`), a
/// `command` tool whose every call waits for a person's approval, and the `ask` tool.
fn host(scratch: &Scratch) -> PumpHandle {
    let command = CommandTool::new(CommandConfig {
        allow: vec!["echo".to_owned()],
        ..CommandConfig::default()
    });
    let inbox = InboxPolicy {
        approvals: [("command".to_owned(), Approval::Every)].into(),
        ..InboxPolicy::default()
    };
    let store = agentpump::history::SqliteHistory::open(scratch.db()).unwrap();
    PumpBuilder::new()
        .config(PumpConfig {
            inbox,
            ..PumpConfig::default()
        })
        .register(Registration::new("echo", Echo).accepts(QName::new("urn:example:say:v1", "say")))
        .register(command.registration())
        .register(agentpump::ask_tool())
        .history(Arc::new(store))
        .build()
        .unwrap()
}

/// Posts `payload` into a new thread and waits until it settles.
async fn start(pump: &PumpHandle, payload: &str) -> ThreadId {
    let thread = pump.post(None, None, payload).await.unwrap().thread();
    pump.settle(thread).await;
    thread
}

/// An `ask` call putting `question` to a person.
fn ask(id: &str, question: &str) -> String {
    Call::new("ask").id(id).arg("question", question).to_xml()
}

/// A `command` call (`echo WORD`) held for approval.
fn command(id: &str, word: &str) -> String {
    Call::new("command")
        .id(id)
        .arg("program", "echo")
        .arg("args", Value::List(vec![Value::Str(word.into())]))
        .to_xml()
}

/// The text of the list's row of `thread`, cell by cell (`data-label` → text).
fn row(thread: ThreadId) -> String {
    format!(
        "return Object.fromEntries([...document.querySelectorAll('#threads tr[data-thread=\"{thread}\"] td')].map(td => [td.dataset.label, td.textContent]))"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_says_what_each_thread_is_and_the_inbox_link_counts_the_waiting() {
    let scratch = Scratch::new("viewer-list");
    let pump = host(&scratch);
    let said = start(&pump, &support::say_v1(LONG)).await;
    let waits = start(&pump, &ask("q1", "Which colour should the chart be?")).await;
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/")).await;
    b.until(
        "both threads in the list",
        &format!("!!document.querySelector('#threads tr[data-thread=\"{said}\"]') && !!document.querySelector('#threads tr[data-thread=\"{waits}\"]')"),
    )
    .await;

    // Each row says what the thread is: its first message's root, the listener it went to,
    // the start of its text, and how long it ran.
    let cells = b.eval(&row(said)).await;
    let first = cells["First message"].as_str().unwrap();
    let shown: String = LONG.chars().take(79).collect();
    assert_eq!(
        first,
        format!("say → echo{}…", shown.trim_end()),
        "the echo thread's row: {cells}"
    );
    let took = cells["Duration"].as_str().unwrap();
    assert!(
        took.ends_with(" ms") || took.ends_with(" s"),
        "a duration in the echo thread's row: {cells}"
    );
    let cells = b.eval(&row(waits)).await;
    assert_eq!(
        cells["First message"], "call → askWhich colour should the chart be?",
        "the asking thread's row: {cells}"
    );
    assert_eq!(cells["State"], "waiting", "{cells}");

    // The Inbox link counts the requests waiting, and follows them live.
    b.until(
        "a count of 1 on the Inbox link",
        "!document.getElementById('inbox-count').hidden && document.getElementById('inbox-count-n').textContent === '1'",
    )
    .await;
    let name = b
        .eval("return document.getElementById('nav-inbox').textContent")
        .await;
    assert_eq!(name, "Inbox, 1 waiting", "the Inbox link as read aloud");
    b.axe("thread list").await;
    let held = start(&pump, &command("c1", "held")).await;
    b.until(
        "the count going to 2 as a call waits for approval",
        "document.getElementById('inbox-count-n').textContent === '2'",
    )
    .await;

    // The state filter offers `waiting`: the threads waiting for a person.
    b.eval("const s = document.getElementById('f-state'); s.value = 'waiting'; return s.value")
        .await;
    b.click("#filters button[type=submit]").await;
    b.until(
        "only the two waiting threads",
        &format!(
            "location.hash.includes('state=waiting') && document.querySelectorAll('#threads tbody tr').length === 2 && !document.querySelector('#threads tr[data-thread=\"{said}\"]') && !!document.querySelector('#threads tr[data-thread=\"{held}\"]')"
        ),
    )
    .await;

    // Answered elsewhere, a request leaves the count; with none left the count goes.
    for request in pump.inbox(&InboxFilter::default()).await.unwrap() {
        let decision = match request.request.kind {
            agentpump::pump::inbox::RequestKind::Ask => agentpump::pump::inbox::Decision::Answer {
                value: "teal".into(),
            },
            agentpump::pump::inbox::RequestKind::Approval => {
                agentpump::pump::inbox::Decision::Approve
            }
        };
        let reply = agentpump::Reply {
            decision,
            by: "elsewhere".into(),
        };
        pump.answer(request.id, reply).await.unwrap();
    }
    b.until(
        "no count once nothing waits",
        "document.getElementById('inbox-count').hidden",
    )
    .await;
    b.close_clean().await;
}
