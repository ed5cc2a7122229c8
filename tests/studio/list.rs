//! The viewer as a new user first meets it (issue 47), in headless Chromium with axe-core on
//! each view: the thread list says what each thread is (its first message, the listener it
//! went to, how long it ran), filters the threads waiting for a person, and the header's Inbox
//! link counts the requests waiting, live.
//!
//! Needs `chromedriver`, `chromium` and axe-core, as `tests/viewer.rs` does.

use crate::support;

use crate::browser;

use std::sync::Arc;

use agentpump::governor::{Budget, GovernorPolicy};
use agentpump::listeners::{CommandConfig, CommandTool, Echo};
use agentpump::pump::inbox::Decision;
use agentpump::tool::Call;
use agentpump::value::Value;
use agentpump::{
    Approval, InboxFilter, InboxPolicy, PumpBuilder, PumpConfig, PumpHandle, QName, Registration,
    ThreadId,
};
use browser::Browser;
use serde_json::json;
use support::Scratch;

const TOKEN: &str = "viewer-list-test-token-0123456789";

/// A first message longer than the list shows of it.
const LONG: &str = "Summarise the quarterly report for the board: three short bullet points, \
                    a title, and the numbers that changed most since the last quarter";

/// A host on a SQLite history with an `echo` (accepting `{urn:example:say:v1}say`), a
/// `command` tool whose every call waits for a person's approval, the `ask` tool, and the
/// `looper` (halted after 30 turns, the root budget).
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
    let governor = GovernorPolicy {
        budget: Budget {
            turns: Some(30),
            ..GovernorPolicy::default_budget()
        },
        ..GovernorPolicy::default()
    };
    PumpBuilder::new()
        .config(PumpConfig {
            inbox,
            governor,
            ..PumpConfig::default()
        })
        .register(support::looper())
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

    // On a phone the row is a card: the first message stays whole, nothing scrolls sideways.
    b.resize(390, 844).await;
    b.until(
        "the list within 390 px",
        "document.documentElement.scrollWidth <= innerWidth && innerWidth <= 390",
    )
    .await;
    assert_eq!(
        b.eval(&row(waits)).await["First message"],
        "call → askWhich colour should the chart be?"
    );
    b.resize(1280, 900).await;

    // Answered elsewhere, a request leaves the count; with none left the count goes.
    for request in pump.inbox(&InboxFilter::default()).await.unwrap() {
        let decision = match request.request.kind {
            agentpump::pump::inbox::RequestKind::Ask => Decision::Answer {
                value: "teal".into(),
            },
            agentpump::pump::inbox::RequestKind::Approval => Decision::Approve,
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

/// Answers the open request of `thread` with `decision`, by `by`.
async fn answer(pump: &PumpHandle, thread: ThreadId, decision: Decision, by: &str) {
    let filter = InboxFilter {
        thread: Some(thread),
        ..InboxFilter::default()
    };
    let open = pump.inbox(&filter).await.unwrap();
    let reply = agentpump::Reply {
        decision,
        by: by.into(),
    };
    pump.answer(open[0].id, reply).await.unwrap();
    pump.settle(thread).await;
}

/// The inbox records of the thread shown, as a person reads them: each record's visible text
/// (its XML and exact bytes folded away), and whether anything in it scrolls sideways.
const INBOX_RECORDS: &str = "return [...document.querySelectorAll(\"li.rec[data-root='request'], li.rec[data-root='answer']\")].map(li => ({
    root: li.dataset.root,
    text: li.querySelector('.inbox-rec')?.innerText.replace(/\\n+/g, '\\n') ?? null,
    unfolded_xml: !!li.querySelector(':scope > pre'),
    sideways: [li, ...li.querySelectorAll('*')].filter(e => e.checkVisibility() && e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible').map(e => `${e.tagName}.${e.className}`),
    wider: li.scrollWidth > li.clientWidth + 1,
}))";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_and_its_answer_read_as_what_was_asked_and_decided() {
    let scratch = Scratch::new("viewer-list-requests");
    let pump = host(&scratch);
    let held = start(&pump, &command("c1", "held-for-a-person")).await;
    answer(&pump, held, Decision::Approve, "ana").await;
    let choices = Value::List(vec![Value::Str("teal".into()), Value::Str("amber".into())]);
    let question = Call::new("ask")
        .id("q1")
        .arg(
            "question",
            "Which colour should the chart of the quarterly numbers be?",
        )
        .arg("choices", choices)
        .to_xml();
    let asked = start(&pump, &question).await;
    answer(
        &pump,
        asked,
        Decision::Answer {
            value: "teal".into(),
        },
        "ben",
    )
    .await;
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;

    b.goto(&format!("{base}/?token={TOKEN}#/thread/{held}"))
        .await;
    b.until(
        "the approval's request and answer in the transcript",
        "document.querySelectorAll(\"li.rec[data-root='request'], li.rec[data-root='answer']\").length === 2",
    )
    .await;
    let records = b.eval(INBOX_RECORDS).await;
    let request = &records[0];
    assert_eq!(request["root"], "request", "{records}");
    let text = request["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a readable request: {records}"));
    for part in [
        "Approval asked",
        "calls command(",
        "program=\"echo\"",
        "args=[\"held-for-a-person\"]",
        "id c1",
    ] {
        assert!(text.contains(part), "`{part}` in the request: {text}");
    }
    let text = records[1]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("a readable answer: {records}"));
    assert!(
        text.starts_with("Approved\nby ana at 20"),
        "the decision, who and when: {text}"
    );
    for r in records.as_array().unwrap() {
        assert_eq!(r["unfolded_xml"], false, "its JSON folded away: {r}");
        assert_eq!(r["sideways"], json!([]), "nothing scrolls sideways: {r}");
        assert_eq!(r["wider"], false, "nothing wider than the record: {r}");
    }
    b.axe("thread with an approval").await;
    b.eval("document.querySelector(\"li.rec[data-root='request']\").scrollIntoView({block: 'start'}); return true")
        .await;
    b.screenshot(&browser::shots(&scratch), "viewer-inbox-records.png")
        .await;

    b.goto(&format!("{base}/#/thread/{asked}")).await;
    b.until(
        "the question's request and answer in the transcript",
        &format!("location.hash.includes('{asked}') && document.querySelectorAll(\"li.rec[data-root='answer']\").length === 1 && [...document.querySelectorAll(\"li.rec[data-root='request']\")].some(li => li.textContent.includes('Which colour'))"),
    )
    .await;
    let records = b.eval(INBOX_RECORDS).await;
    let text = records[0]["text"].as_str().unwrap();
    for part in [
        "Question",
        "Question client asks",
        "Which colour should the chart of the quarterly numbers be?",
        "choices teal amber",
    ] {
        assert!(text.contains(part), "`{part}` in the question: {text}");
    }
    let text = records[1]["text"].as_str().unwrap();
    assert!(
        text.starts_with("Answered teal\nby ben at 20"),
        "the answer, who and when: {text}"
    );
    b.axe("thread with a question").await;
    b.close_clean().await;
}

/// The page's scroll position and view: `[scrollY, hash, the view shown]`.
const WHERE: &str = "return [window.scrollY, location.hash, document.querySelector('main > section:not([hidden])')?.id]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_view_opens_at_its_top_and_an_anchor_stays_in_its_view() {
    let scratch = Scratch::new("viewer-list-scroll");
    let pump = host(&scratch);
    // A list and a thread each longer than the window.
    let mut threads = Vec::new();
    for i in 0..40 {
        threads.push(start(&pump, &support::say_v1(&format!("thread number {i}"))).await);
    }
    let long = threads[0];
    for i in 0..15 {
        let text = support::say_v1(&format!("message number {i}"));
        pump.post(Some(long), Some("echo"), &text).await.unwrap();
    }
    pump.settle(long).await;
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/")).await;
    b.until(
        "the oldest thread listed",
        &format!("!!document.querySelector('#threads tr[data-thread=\"{long}\"] a')"),
    )
    .await;
    b.axe("thread list").await;

    // Far down the list, a thread's link opens the thread at its top.
    b.eval("window.scrollTo(0, document.body.scrollHeight); return window.scrollY")
        .await;
    let down = b.eval(WHERE).await;
    assert!(down[0].as_f64().unwrap() > 500.0, "scrolled down: {down}");
    b.click(&format!("#threads tr[data-thread=\"{long}\"] a"))
        .await;
    b.until(
        "the long thread's transcript",
        "document.querySelectorAll('#t-records li.rec').length > 30",
    )
    .await;
    assert_eq!(
        b.eval(WHERE).await,
        json!([0, format!("#/thread/{long}"), "thread"]),
        "the thread opens at its top"
    );
    b.axe("thread").await;

    // Far down the transcript, the link back to all threads opens the list at its top.
    b.eval("window.scrollTo(0, document.body.scrollHeight); return window.scrollY")
        .await;
    assert!(b.eval(WHERE).await[0].as_f64().unwrap() > 500.0);
    b.eval("document.querySelector('#thread a[href=\"#/\"]').click(); return true")
        .await;
    b.until(
        "the list again",
        "location.hash === '#/' && !document.getElementById('list').hidden",
    )
    .await;
    assert_eq!(
        b.eval(WHERE).await,
        json!([0, "#/", "list"]),
        "the list opens at its top"
    );

    // The skip link targets an anchor: the view stays, the browser goes to it.
    b.click(&format!("#threads tr[data-thread=\"{long}\"] a"))
        .await;
    b.until(
        "the long thread again",
        "document.querySelectorAll('#t-records li.rec').length > 30",
    )
    .await;
    b.eval("document.querySelector('a.skip').click(); return true")
        .await;
    b.until("the skip link followed", "location.hash === '#main'")
        .await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let at = b.eval(WHERE).await;
    assert_eq!(
        at[2], "thread",
        "the thread still shown after the skip link: {at}"
    );
    b.close_clean().await;
}

/// What is clipped in the view shown: each visible element of `main` that hides part of its
/// content behind a scroll bar or a cut (transcript payloads, which scroll by design, aside),
/// and whether the page itself scrolls sideways.
const CLIPPED: &str = "return [...document.querySelectorAll('main *')].filter(e => e.checkVisibility()
    && !e.closest('#t-records, .records, pre')
    && ['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(e).overflowX)
    && e.scrollWidth > e.clientWidth + 1)
  .map(e => `${e.tagName}#${e.id}.${e.className}[${e.getAttribute('aria-label') || ''}] ${e.scrollWidth}>${e.clientWidth}`)
  .concat(document.documentElement.scrollWidth > window.innerWidth ? [`the page: ${document.documentElement.scrollWidth}>${window.innerWidth}`] : [])";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_clipped_at_1400_px() {
    let scratch = Scratch::new("viewer-list-wide");
    let pump = host(&scratch);
    let said = start(&pump, &support::say_v1(LONG)).await;
    start(&pump, &ask("q1", "Which colour should the chart be?")).await;
    let halted = start(&pump, &support::p("tick", "0")).await;
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;
    b.resize(1400, 900).await;
    b.goto(&format!("{base}/?token={TOKEN}#/")).await;
    let views = [
        (
            "#/".to_owned(),
            "list",
            "document.querySelectorAll('#threads tbody tr').length >= 2",
        ),
        (
            format!("#/thread/{said}"),
            "thread",
            "!!document.querySelector('#t-totals table') && !!document.querySelector('#t-timing svg, #t-timing table')",
        ),
        (
            format!("#/thread/{halted}"),
            "thread",
            "!!document.querySelector('#t-report dl, #t-report table') && !!document.querySelector('#t-totals table')",
        ),
        (
            "#/inbox".to_owned(),
            "inbox",
            "document.querySelectorAll('#inbox-list .inbox-item').length === 1",
        ),
        (
            "#/totals".to_owned(),
            "totals",
            "!!document.querySelector('#totals-body table')",
        ),
        (
            "#/organism".to_owned(),
            "organism",
            "!!document.querySelector('#org-graph svg')",
        ),
    ];
    let mut clipped = Vec::new();
    for (hash, view, ready) in views {
        b.eval(&format!("location.hash = '{hash}'; return true"))
            .await;
        b.until(
            &format!("the {view} view drawn"),
            &format!("!document.getElementById('{view}').hidden && {ready}"),
        )
        .await;
        let found = b.eval(CLIPPED).await;
        if found != json!([]) {
            clipped.push(format!("{view}: {found}"));
        }
        b.axe(view).await;
    }
    assert!(clipped.is_empty(), "clipped at 1400 px: {clipped:#?}");
    b.close_clean().await;
}
