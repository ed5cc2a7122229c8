//! The history viewer in a real browser: headless Chromium driven over WebDriver (chromedriver)
//! against a host running the demo organism. Signs in, lists threads, opens the √2 thread (residual
//! plot, CONVERGED, its process events, tool calls and timeline) and the planner process (three
//! children, PAR and JOIN), searches through child threads, shows live budget bars, sees a
//! message posted through the API appear live, stops and resumes a thread from the page, shows
//! nothing for a wrong token, serves `agentpump view` over the same file, and logs no console
//! errors. Two smaller hosts: a thread of 100 000 records paged through its window, and carved
//! children's carve-outs in the tree and reservations on a live budget bar.
//!
//! Needs `chromedriver` and `chromium` (Debian: `apt-get install chromium chromium-driver`;
//! `.ci/run` installs them). Without them the test fails, saying so: a viewer test that skips
//! would let the page break unseen. `CHROMEDRIVER` and `CHROMIUM` override the paths.
//! With `AGENTPUMP_SCREENSHOTS=docs` the screenshots replace those in `docs/` (the README's);
//! otherwise they go to the scratch folder.

mod support;

#[path = "viewer/browser.rs"]
mod browser;

use std::sync::Arc;
use std::time::Duration;

use agentpump::{PumpHandle, ThreadId, ThreadState};
use browser::{Browser, shots};
use support::Scratch;

const TOKEN: &str = "viewer-test-token-0123456789";

/// The demo organism on a SQLite history in `scratch`, its six threads settled.
async fn demo(scratch: &Scratch) -> (PumpHandle, Vec<ThreadId>) {
    let origin = "listeners/demo/organism.toml";
    let agentpump = std::path::Path::new(env!("CARGO_BIN_EXE_agentpump"));
    let mut organism = agentpump::host::demo::organism(agentpump).unwrap();
    organism.set_base(&scratch.0); // the loop's workspace in the scratch folder
    let store = organism.open_store_at(&scratch.db()).unwrap();
    let pump = organism
        .start_builder(origin)
        .await
        .unwrap()
        .history(Arc::new(store))
        .build()
        .unwrap();
    let mut roots = Vec::new();
    for (_, to, payload) in agentpump::host::demo::STARTS {
        roots.push(pump.post(None, Some(to), payload).await.unwrap().thread());
    }
    for &root in &roots {
        tokio::time::timeout(Duration::from_secs(30), pump.settle(root))
            .await
            .expect("demo thread settles");
    }
    (pump, roots)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_works_in_a_real_browser() {
    let scratch = Scratch::new("viewer");
    let (pump, roots) = demo(&scratch).await;
    let (newton, planner) = (roots[0], roots[1]);
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let shots = shots(&scratch);
    let b = Browser::start(&scratch, false).await;

    // A wrong token shows no data, whether typed or in the address.
    b.goto(&format!("{base}/")).await;
    b.until(
        "the sign-in form",
        "!document.getElementById('login').hidden",
    )
    .await;
    b.type_into("#token", "not-the-token").await;
    b.click("#login-form button[type=submit]").await;
    b.until(
        "the wrong-token message",
        "document.getElementById('login-error').textContent.includes('Wrong token')",
    )
    .await;
    b.goto(&format!("{base}/?token=wrong")).await;
    b.until(
        "the refused address token",
        "document.getElementById('login-error').textContent.includes('not accepted')",
    )
    .await;
    assert_eq!(
        b.count("#threads tbody tr").await,
        0,
        "no data without the token"
    );
    let status = b
        .eval("return fetch('/view/threads').then(r => r.status)")
        .await;
    assert_eq!(status, 401, "the API refuses the page without the cookie");
    b.axe("sign-in").await;
    b.screenshot(&shots, "viewer-sign-in.png").await;

    // The token from the URL `agentpump run` prints: exchanged for the cookie, then dropped
    // from the address.
    b.goto(&format!("{base}/?token={TOKEN}")).await;
    b.until(
        "the thread list",
        "document.querySelectorAll('#threads tbody tr').length >= 5",
    )
    .await;
    let url = b.eval("return location.href").await;
    assert!(!url.as_str().unwrap().contains("token"), "{url}");
    let cookie = b.eval("return document.cookie").await;
    assert_eq!(cookie, "", "the session cookie is HttpOnly");
    for root in &roots {
        assert_eq!(b.count(&format!("tr[data-thread='{root}']")).await, 1);
    }
    b.axe("threads list").await;
    b.screenshot(&shots, "viewer-threads.png").await;

    // Filters and paging.
    b.goto(&format!("{base}/#/?class=CONVERGED")).await;
    b.until(
        "the CONVERGED filter (the √2 process and the phuc-loop)",
        &format!("document.querySelectorAll('#threads tbody tr').length === 2 && !!document.querySelector(\"tr[data-thread='{newton}']\") && !!document.querySelector(\"tr[data-thread='{}']\")", roots[5]),
    )
    .await;
    for (q, thread) in [("ruminate", roots[3]), ("scripted-PONG", roots[4])] {
        b.goto(&format!("{base}/#/?q={q}")).await;
        b.until(
            &format!("the search for {q}"),
            &format!("document.querySelectorAll('#threads tbody tr').length === 1 && !!document.querySelector(\"tr[data-thread='{thread}']\")"),
        )
        .await;
    }
    // The search form from the keyboard: type, press Enter.
    b.goto(&format!("{base}/#/")).await;
    b.until(
        "the full list",
        "document.querySelectorAll('#threads tbody tr').length >= 6",
    )
    .await;
    b.type_into("#f-q", "ruminate\u{E007}").await;
    b.until(
        "the search submitted with Enter",
        &format!("location.hash.includes('q=ruminate') && document.querySelectorAll('#threads tbody tr').length === 1 && !!document.querySelector(\"tr[data-thread='{}']\")", roots[3]),
    )
    .await;
    b.goto(&format!("{base}/#/?limit=2")).await;
    b.until("a page of two", "document.querySelectorAll('#threads tbody tr').length === 2 && !document.getElementById('older').hidden").await;
    b.click("#older").await;
    b.until("the older page", "document.querySelectorAll('#threads tbody tr').length === 2 && location.hash.includes('before=')").await;

    // The √2 thread: residual plot, CONVERGED, verified chain.
    b.goto(&format!("{base}/#/")).await;
    b.until(
        "the list again",
        &format!("!!document.querySelector(\"tr[data-thread='{newton}'] a\")"),
    )
    .await;
    b.click(&format!("tr[data-thread='{newton}'] a")).await;
    b.until(
        "the CONVERGED certificate",
        "document.getElementById('certificate')?.textContent === 'CONVERGED'",
    )
    .await;
    b.until(
        "the residual plot",
        "document.querySelectorAll('#residual-plot circle.pt').length >= 3",
    )
    .await;
    b.until(
        "the integrity badge",
        "document.getElementById('integrity').textContent.startsWith('chain verified')",
    )
    .await;
    let residuals = b.count("li.rec.gov-residual").await;
    assert!(
        residuals >= 3,
        "{residuals} residual records styled as governor messages"
    );
    assert!(
        b.count("li.rec.sys-halt").await >= 1,
        "the halt is styled as a system message"
    );
    assert!(
        b.count("#t-budgets .budget-bar[role=meter]").await >= 1,
        "budgets as bars"
    );
    // Newton runs as a process: its events and tool calls read as what they are.
    b.until(
        "a TELL with its message and why",
        "[...document.querySelectorAll('li.rec.proc-tell .ev-tell')].some(e => e.querySelector('q').textContent === 'residual after a Newton step' && /why: RESIDUAL=0\\.25/.test(e.textContent))",
    )
    .await;
    b.until(
        "the CONVERGED milestone as a marker",
        "[...document.querySelectorAll('li.rec.proc-milestone .ev-milestone[role=separator]')].some(e => e.textContent.includes('CONVERGED'))",
    )
    .await;
    b.until(
        "a tool call as tool(arg=value) with its id",
        "[...document.querySelectorAll(\"li.rec.tool-call[data-call-id^='newton-1-'] .ev-call\")].some(e => e.textContent.startsWith('calculator(expression=\"(1 + 2 / 1) / 2\")') && e.textContent.includes('id newton-1-'))",
    )
    .await;
    b.until(
        "RETURN's fields as a table",
        "[...document.querySelectorAll('li.rec.proc-return .ev-table tbody th')].map(t => t.textContent).join(',') === 'residual,root,steps'",
    )
    .await;
    // The process timeline: its milestones and TELLs in order, each a link to its record.
    b.until(
        "the process timeline",
        "[...document.querySelectorAll('#t-timeline li')].map(l => l.className).join(',') === 'tl tl-milestone,tl tl-tell,tl tl-tell,tl tl-tell,tl tl-tell,tl tl-milestone,tl tl-return' && document.querySelector('#t-timeline .tl-tell').textContent.includes('TELL residual after a Newton step (RESIDUAL=0.25)')",
    )
    .await;
    b.click("#t-timeline li:nth-child(6) a").await;
    b.until(
        "the CONVERGED milestone, focused from the timeline",
        "document.activeElement.matches('li.rec.proc-milestone') && document.activeElement.textContent.includes('CONVERGED')",
    )
    .await;
    // The answer links to its call.
    b.click("li.rec.tool-result a.call-link[data-call^='newton-2-']")
        .await;
    b.until(
        "the call the answer links to, focused",
        "document.activeElement.matches(\"li.rec.tool-call[data-call-id^='newton-2-']\")",
    )
    .await;
    let linked = b
        .eval("return fetch(document.getElementById('report-json').href).then(r => r.json()).then(j => j.halting_certificate.type)")
        .await;
    assert_eq!(linked, "CONVERGED", "the report's JSON link");
    b.eval("window.scrollTo(0, 0); return true").await;
    b.axe("thread").await;
    b.screenshot(&shots, "viewer-thread.png").await;
    b.eval("document.getElementById('records-title').scrollIntoView(); return true")
        .await;
    b.axe("transcript").await;
    b.screenshot(&shots, "viewer-transcript.png").await;

    // The planner process: its PAR children in the tree, PAR and JOIN in the transcript.
    let process = planner;
    b.goto(&format!("{base}/#/thread/{process}")).await;
    b.until(
        "the PAR children under the process",
        "document.querySelectorAll('.tree-node[data-depth=\"1\"]').length === 3",
    )
    .await;
    b.until(
        "PAR and JOIN",
        "document.querySelector('li.rec.proc-par .ev-par')?.textContent.includes('launched worker, worker, worker') && document.querySelector('li.rec.proc-join .ev-join')?.textContent.includes('3 children answered')",
    )
    .await;
    // Each child's answer, read from its thread-result, links to the child thread of its call.
    b.until(
        "the children's answers",
        "[...document.querySelectorAll('li.rec.sys-thread-result .ev-result a.child-link')].filter(a => document.querySelector(`.tree-node[data-depth=\"1\"] a[href=\"${a.getAttribute('href')}\"]`)).length === 3",
    )
    .await;
    b.eval("document.querySelector('li.rec.proc-par').scrollIntoView(); return true")
        .await;
    b.axe("process").await;
    b.screenshot(&shots, "viewer-process.png").await;

    // The search reads the records of the threads below a root: only the planner's children
    // speak with workers.
    b.goto(&format!("{base}/#/?q=worker")).await;
    b.until(
        "the search through child threads",
        &format!("document.querySelectorAll('#threads tbody tr').length === 1 && !!document.querySelector(\"tr[data-thread='{process}']\")"),
    )
    .await;

    // Live budget bars: a thread that has not halted shows the governor's ledger now.
    let started: serde_json::Value = support::http_client()
        .post(format!("{base}/threads?to=calculator"))
        .bearer_auth(TOKEN)
        .body(r#"<calc xmlns="urn:agentpump:calc:v1">6 * 7</calc>"#)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let calc: ThreadId = started["thread"].as_str().unwrap().parse().unwrap();
    pump.settle(calc).await;
    b.goto(&format!("{base}/#/thread/{calc}")).await;
    b.until(
        "live budget bars",
        "document.getElementById('budget-title').textContent === 'Budgets (live)' && Number(document.querySelector(\".budget-bar[data-budget='max-turns']\")?.dataset.spent) >= 1 && document.querySelector(\".budget-bar[data-budget='max-turns']\").dataset.reserved === '0'",
    )
    .await;

    // The planner: three children (their carve-outs are shown in the budget test below).
    b.goto(&format!("{base}/#/thread/{planner}")).await;
    b.until(
        "three children",
        "document.querySelectorAll('.tree-node[data-depth=\"1\"]').length === 3",
    )
    .await;

    // Live: a message posted through the API appears without a reload.
    b.until(
        "the live stream",
        "!document.getElementById('t-live').hidden",
    )
    .await;
    let posted: serde_json::Value = support::http_client()
        .post(format!("{base}/threads/{planner}/messages?to=calculator"))
        .bearer_auth(TOKEN)
        .body(r#"<calc xmlns="urn:agentpump:calc:v1">40 + 2</calc>"#)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = posted["ids"][0].as_str().unwrap().to_owned();
    b.until(
        "the posted message, live",
        &format!("!!document.querySelector(\"li.rec[data-id='{id}']\")"),
    )
    .await;
    b.until(
        "the calculator's answer, live",
        "[...document.querySelectorAll('li.rec.kind-egress pre.raw')].some(p => p.textContent.includes('>42<'))",
    )
    .await;
    b.axe("tree").await;
    b.screenshot(&shots, "viewer-tree.png").await;

    // Stop and resume from the page.
    b.click("#stop").await;
    b.until(
        "the stop",
        "document.getElementById('halt-class')?.textContent === 'BACKPRESSURE'",
    )
    .await;
    assert_eq!(pump.thread(planner).unwrap().state, ThreadState::Halted);
    b.click("#resume-open").await;
    b.until(
        "the resume form",
        "!document.getElementById('resume-form').hidden",
    )
    .await;
    b.type_into("#r-turns", "5").await;
    b.click("#resume").await;
    b.until(
        "the resumed thread",
        "!document.getElementById('stop').hidden && document.querySelector('#t-badges .badge').textContent === 'idle'",
    )
    .await;
    assert_eq!(pump.thread(planner).unwrap().state, ThreadState::Idle);

    let errors = b.eval("return window.viewerErrors").await;
    assert_eq!(
        errors,
        serde_json::json!([]),
        "console errors on the live host"
    );

    // `agentpump view` over the same file, read-only: no stop or resume, same threads.
    let view = browser::View::start(&scratch.db());
    b.goto(&view.url).await;
    b.until(
        "the read-only list",
        "document.querySelectorAll('#threads tbody tr').length >= 6 && document.getElementById('mode').textContent.includes('read-only')",
    )
    .await;
    b.goto(&format!("{}#/thread/{newton}", view.base)).await;
    b.until(
        "the √2 thread from the file",
        "document.getElementById('certificate')?.textContent === 'CONVERGED' && document.getElementById('t-actions').hidden",
    )
    .await;
    let errors = b.eval("return window.viewerErrors").await;
    assert_eq!(
        errors,
        serde_json::json!([]),
        "console errors on agentpump view"
    );
    b.close().await;

    // Dark: the page follows the system's colour scheme.
    let dark = Browser::start(&scratch, true).await;
    dark.goto(&view.url).await;
    dark.until(
        "the list, dark",
        "document.querySelectorAll('#threads tbody tr').length >= 6",
    )
    .await;
    dark.goto(&format!("{}#/thread/{newton}", view.base)).await;
    dark.until(
        "the √2 thread, dark",
        "matchMedia('(prefers-color-scheme: dark)').matches && document.querySelectorAll('#residual-plot circle.pt').length >= 3",
    )
    .await;
    let background = dark
        .eval("return getComputedStyle(document.body).backgroundColor")
        .await;
    assert_eq!(background, "rgb(13, 17, 23)", "the dark palette");
    dark.axe("dark thread").await;
    dark.screenshot(&shots, "viewer-thread-dark.png").await;
    let errors = dark.eval("return window.viewerErrors").await;
    assert_eq!(errors, serde_json::json!([]), "console errors in dark mode");
    dark.close().await;
}

/// Process events the demo does not write, appended as a process would: a SNAP with a redacted
/// symbol and a FAILED.
const CRAFTED: [&str; 2] = [
    r#"<snap xmlns="urn:agentpump:process:v1" process="vault" seq="1" line="7" delta="false"><symbol name="COUNT" type="number">3</symbol><symbol name="KEY" redacted="true"/></snap>"#,
    r#"<failed xmlns="urn:agentpump:process:v1" process="vault" seq="2" type="AG-008" line="9">the tool `vault` is not allowed here</failed>"#,
];

/// A thread of 100 000 records (a crafted SNAP and FAILED among the first), written through the
/// store's public `append`, read by `agentpump view`: the first page shows at once, the last
/// record is one click away, and the page never holds more than a window of records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_of_100_000_records_stays_responsive() {
    use agentpump::history::{Batch, HistoryStore as _, NewRecord, RecordKind, SqliteHistory};
    use agentpump::{Envelope, Limits, Payload, PumpBuilder, QName, Registration};
    const RECORDS: usize = 100_000;
    let scratch = Scratch::new("viewer-long");
    let store = Arc::new(SqliteHistory::open(scratch.db()).unwrap());
    let say = QName::new("urn:example:say:v1", "say");
    let pump = PumpBuilder::new()
        .register(Registration::new("echo", agentpump::listeners::Echo).accepts(say))
        .history(Arc::clone(&store) as Arc<dyn agentpump::history::HistoryStore>)
        .build()
        .unwrap();
    let thread = pump
        .post(
            None,
            Some("echo"),
            r#"<say xmlns="urn:example:say:v1">0</say>"#,
        )
        .await
        .unwrap()
        .thread();
    pump.settle(thread).await;
    pump.shutdown(Duration::from_secs(5)).await;
    let limits = Limits::default();
    let have = store.thread(thread, 0).await.unwrap().len();
    let mut n = have;
    while n < RECORDS {
        let mut records = Vec::new();
        while records.len() < 2_000 && n < RECORDS {
            let xml = match n - have {
                i @ 0..=1 => CRAFTED[i].to_owned(),
                _ if n % 10_000 == 5_000 => format!(
                    r#"<milestone xmlns="urn:agentpump:process:v1" process="long" seq="{n}">reached {n}</milestone>"#
                ),
                _ if n + 1 == RECORDS => {
                    r#"<tell xmlns="urn:agentpump:process:v1" process="long" seq="9">the last word</tell>"#
                        .to_owned()
                }
                _ => format!(r#"<say xmlns="urn:example:say:v1">{n}</say>"#),
            };
            let payload = Payload::parse(&xml, &limits).unwrap();
            records.push(NewRecord {
                envelope: Envelope::new("echo".into(), thread, payload),
                kind: RecordKind::Message,
                pending: false,
            });
            n += 1;
        }
        let batch = Batch {
            records,
            ..Default::default()
        };
        store.append(batch).unwrap().wait().await.unwrap();
    }
    let last = store.records_before(thread, u64::MAX, 1).await.unwrap()[0].seq;
    store.close().unwrap();

    let view = browser::View::start(&scratch.db());
    let b = Browser::start(&scratch, false).await;
    b.goto(&view.url).await;
    b.until(
        "the list",
        &format!("!!document.querySelector(\"tr[data-thread='{thread}']\")"),
    )
    .await;
    b.goto(&format!("{}#/thread/{thread}", view.base)).await;
    b.until(
        "the first page of the transcript",
        "document.querySelectorAll('#t-records li.rec').length === 200 && !document.getElementById('rec-latest').hidden",
    )
    .await;
    // "a long thread opens at its first record with “Latest ⇥” 17 000 px below" (issue 33): the
    // way to the latest records is also at the top of the transcript, on the first screen of it.
    b.eval("document.getElementById('records-title').scrollIntoView()")
        .await;
    let top = b
        .eval("const r = document.getElementById('rec-latest-top').getBoundingClientRect(); return r.height > 0 && r.bottom <= innerHeight")
        .await;
    assert_eq!(
        top,
        serde_json::json!(true),
        "Latest ⇥ at the top of a long transcript"
    );
    // The crafted events among the first: a SNAP table with the redacted value shown as such,
    // and FAILED with its type and line.
    b.until(
        "the SNAP table",
        "[...document.querySelectorAll('li.rec.proc-snap .ev-table tbody tr')].map(r => r.textContent).join('|') === 'COUNT3number|KEYredacted'",
    )
    .await;
    assert_eq!(b.count("li.rec.proc-snap .redacted").await, 1);
    b.until(
        "FAILED with its type and line",
        "document.querySelector('li.rec.proc-failed .ev-failed')?.textContent.startsWith('FAILED AG-008 line 9 the tool `vault` is not allowed here')",
    )
    .await;
    // The process timeline is the whole thread's, read from the API, not the window's: the
    // FAILED among the first records, the ten milestones, the TELL at the very end.
    b.until(
        "the whole thread's timeline",
        "document.querySelectorAll('#t-timeline li').length === 12 && document.querySelector('#t-timeline li:last-child')?.textContent.includes('TELL the last word')",
    )
    .await;
    assert_eq!(b.count("#t-timeline li.tl-milestone").await, 10);
    // An event far past the window: a click moves the window to it.
    b.click("#t-timeline li:nth-child(7) a").await;
    b.until(
        "the window moved to a milestone",
        "document.activeElement?.matches('li.rec.proc-milestone') && document.activeElement.textContent.includes('reached 55000')",
    )
    .await;

    // The last record, one click away; the window stays bounded.
    b.click("#rec-latest").await;
    b.until(
        "the last record",
        &format!("!!document.querySelector(\"li.rec[data-seq='{last}']\") && document.querySelectorAll('#t-records li.rec').length === 200 && !document.getElementById('rec-earlier').hidden"),
    )
    .await;
    for (shown, later_hidden) in [(400, true), (600, true), (600, false)] {
        let before = b
            .eval("return Number(document.querySelector('#t-records li.rec').dataset.seq)")
            .await;
        b.click("#rec-earlier").await;
        b.until(
            &format!("an earlier page, {shown} shown"),
            &format!("Number(document.querySelector('#t-records li.rec').dataset.seq) < {before} && document.querySelectorAll('#t-records li.rec').length === {shown} && document.getElementById('more').hidden === {later_hidden}"),
        )
        .await;
    }
    b.click("#rec-first").await;
    b.until(
        "back to the first record after the jump",
        "document.querySelector('#t-records li.rec')?.dataset.seq === String(Math.min(...[...document.querySelectorAll('#t-records li.rec')].map(l => Number(l.dataset.seq)))) && document.getElementById('rec-first').hidden && !!document.querySelector('li.rec.proc-snap')",
    )
    .await;
    b.close_clean().await;
}

/// Runs `agentpump tasks ARGS --root ROOT`; returns its output.
fn tasks_cli(root: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .arg("tasks")
        .args(args)
        .arg("--root")
        .arg(root)
        .output()
        .unwrap()
}

/// The status shown per task, by task id.
const STATUSES: &str = "return Object.fromEntries([...document.querySelectorAll('#tasks-table tbody tr')].map(r => [r.dataset.task, r.querySelector('.task-status').textContent]))";

/// The tasks demo (`listeners/tasks-demo`) worked by `agentpump tasks run`, then seen by
/// `agentpump view --db … --tasks ROOT` and by a running host with the ledger (what
/// `agentpump run` serves): every task's latest status with its summary, a link from each task
/// to its thread that lands on that task's thread, the view following new ledger lines live,
/// and a host with no ledger saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tasks_view_links_each_task_to_its_thread() {
    use agentpump::history::{HistoryStore as _, SqliteHistory};
    use agentpump::tasks::wire::{Assignment, decode};
    use agentpump::tasks::{Layout, Ledger, Line, Status};
    let scratch = Scratch::new("viewer-tasks");
    let root = scratch.0.join("project");
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("listeners/tasks-demo");
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(&demo)
        .arg(&root)
        .status()
        .unwrap();
    assert!(copied.success());
    assert!(tasks_cli(&root, &["init"]).status.success());
    let run = tasks_cli(&root, &["run"]);
    assert_eq!(run.status.code(), Some(1), "T-005 is blocked: {run:?}");
    let db = root.join("tasks-demo.db");
    let expected = serde_json::json!({
        "T-001": "completed", "T-002": "completed", "T-003": "completed",
        "T-004": "completed", "T-005": "blocked", "T-006": "pending",
    });

    let view = browser::View::start_with(&db, &["--tasks", root.to_str().unwrap()]);
    let shots = shots(&scratch);
    let b = Browser::start(&scratch, false).await;
    b.goto(&view.url).await;
    b.until(
        "the thread list",
        "document.querySelectorAll('#threads tbody tr').length >= 6",
    )
    .await;
    b.click("#nav-tasks").await;
    b.until(
        "six tasks",
        "document.querySelectorAll('#tasks-table tbody tr').length === 6",
    )
    .await;
    assert_eq!(b.eval(STATUSES).await, expected);
    let t005 = "tr[data-task='T-005']";
    let summary = b
        .eval(&format!(
            "return document.querySelector(\"{t005} .task-summary\").textContent"
        ))
        .await;
    assert!(
        summary.as_str().unwrap().contains("failed 2 attempt(s)"),
        "{summary}"
    );
    assert_eq!(b.count(&format!("{t005} time")).await, 1, "updated_at");
    assert_eq!(b.count(&format!("{t005} a")).await, 2, "two attempts");
    assert_eq!(
        b.count("tr[data-task='T-006'] a").await,
        0,
        "never started: no thread"
    );
    b.axe("tasks").await;
    b.screenshot(&shots, "viewer-tasks.png").await;

    // T-003 failed once and passed on its retry: its link opens the second attempt's thread.
    let link = "tr[data-task='T-003'] a.task-thread";
    let href = b
        .eval(&format!(
            "return document.querySelector(\"{link}\").getAttribute('href')"
        ))
        .await;
    let thread: ThreadId = href.as_str().unwrap()["#/thread/".len()..].parse().unwrap();
    b.click(link).await;
    b.until(
        "T-003's thread",
        &format!("location.hash === '#/thread/{thread}' && document.getElementById('certificate')?.textContent === 'EXACT' && document.querySelector('#t-records li.rec')?.textContent.includes('T-003')"),
    )
    .await;
    let store = SqliteHistory::open_read_only(&db).unwrap();
    let first = store.records_after(thread, 0, 1).await.unwrap().remove(0);
    let task: Assignment = decode(&first.payload).unwrap();
    assert_eq!((task.task.id.as_str(), task.attempt), ("T-003", 2));
    let errors = b.eval("return window.viewerErrors").await;
    assert_eq!(errors, serde_json::json!([]), "console errors");

    // A host with no ledger says so, with no error.
    let plain = browser::View::start(&db);
    b.goto(&plain.url).await;
    b.until(
        "the thread list",
        "document.querySelectorAll('#threads tbody tr').length >= 6",
    )
    .await;
    b.goto(&format!("{}#/tasks", plain.base)).await;
    b.until(
        "the no-ledger note",
        "!document.getElementById('tasks-note').hidden && document.getElementById('tasks-note').textContent.includes('no task ledger') && document.getElementById('tasks-table').hidden",
    )
    .await;

    // A running host with the ledger, as `agentpump run` serves it: the same view, live.
    let store = Arc::new(SqliteHistory::open(&db).unwrap());
    let pump = agentpump::PumpBuilder::new()
        .history(store as Arc<dyn agentpump::history::HistoryStore>)
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let extras = agentpump::host::server::Extras {
        tasks: Some(Layout::new(&root)),
        ..Default::default()
    };
    let host = pump.clone();
    tokio::spawn(async move {
        agentpump::host::server::serve_with(
            listener,
            host,
            TOKEN,
            1024 * 1024,
            extras,
            std::future::pending(),
        )
        .await
    });
    b.goto(&format!("{base}/?token={TOKEN}#/tasks")).await;
    b.until(
        "six tasks, live",
        "document.querySelectorAll('#tasks-table tbody tr').length === 6 && !document.getElementById('tasks-live').hidden",
    )
    .await;
    assert_eq!(b.eval(STATUSES).await, expected);
    let mut ledger = Ledger::open(Layout::new(&root).ledger()).unwrap();
    ledger
        .append(Line::now("T-006", Status::Blocked, "blocked by hand"))
        .unwrap();
    b.until(
        "the new line, without a reload",
        "document.querySelector(\"tr[data-task='T-006'] .task-status\")?.textContent === 'blocked'",
    )
    .await;
    b.close_clean().await;
    pump.shutdown(Duration::from_secs(5)).await;
}

/// Live budget bars on a running host: a spawner whose three carved children wait at a gate
/// shows the turns it holds for them as reserved; when they finish, the bar gives them back
/// without a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_bars_show_reservations_live() {
    use agentpump::governor::Budget;
    use agentpump::{PumpBuilder, Registration};
    let scratch = Scratch::new("viewer-budgets");
    let gate = support::Gate::new();
    let twenty = Budget {
        turns: Some(20),
        ..Budget::default()
    };
    let pump = PumpBuilder::new()
        .register(support::carving_spawner("spawner", 3, twenty))
        .register(Registration::new("gate", gate.clone()).accepts(support::q("wait")))
        .build()
        .unwrap();
    let root = pump
        .post(None, None, &support::p("go", ""))
        .await
        .unwrap()
        .thread();
    for _ in 0..3 {
        gate.entered().await;
    }
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/thread/{root}"))
        .await;
    let turns = "document.querySelector(\".budget-bar[data-budget='max-turns']\")";
    b.until(
        "the turns held for three children",
        &format!("Number({turns}?.dataset.reserved) > 50 && {turns}.querySelector('.reserved').getBoundingClientRect().width > 0 && {turns}.getAttribute('aria-valuetext').includes('reserved')"),
    )
    .await;
    b.until(
        "each child's carve-out in the tree",
        "document.querySelectorAll(\".tree-node[data-depth='1'] .carve\").length === 3",
    )
    .await;
    gate.open(10);
    b.until(
        "the reservation given back, live",
        &format!("{turns}.dataset.reserved === '0' && document.querySelectorAll('li.rec.sys-thread-result').length === 3"),
    )
    .await;
    b.close_clean().await;
}

/// Seed 003: `<todo-until>` "Enables self-reading, GUI rendering, explicit termination" — the
/// thread's latest plan shows as a checklist in its own panel (steps done, open, abandoned),
/// each plan in the transcript reads as one too, and on a running host the panel follows a
/// new plan without a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_shows_as_a_checklist() {
    use agentpump::todo::{Mark, Plan};
    use agentpump::{PumpBuilder, Registration, Role};
    let scratch = Scratch::new("viewer-plans");
    let planner = support::Script::new(|msg, cx| {
        if !msg.is_system() {
            let last = match support::body(msg) {
                "open" => Mark::Open,
                _ => Mark::Abandoned,
            };
            let plan = Plan::new("all sources checked")
                .step("Search web", Mark::Done)
                .step("Analyze results", last);
            cx.emit(plan.to_xml());
        }
        Ok(())
    });
    let pump = PumpBuilder::new()
        .register(
            Registration::new("planner", planner)
                .accepts(support::q("work"))
                .role(Role::Agent),
        )
        .build()
        .unwrap();
    let root = support::start(&pump, &support::p("work", "open")).await;
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/thread/{root}"))
        .await;
    let states = "return [...document.querySelectorAll('#t-plan .step')].map(s => s.dataset.state + ' ' + s.querySelector('.step-text').textContent)";
    b.until(
        "the plan panel",
        "!document.getElementById('t-plan').hidden && document.querySelectorAll('#t-plan .step').length === 2",
    )
    .await;
    assert_eq!(
        b.eval(states).await,
        serde_json::json!(["done Search web", "open Analyze results"])
    );
    let head = b
        .eval("return document.querySelector('#t-plan .plan-head').textContent")
        .await;
    assert_eq!(head, "until all sources checked 1 of 2 open");
    assert_eq!(
        b.count("li.rec.plan .checklist .step").await,
        2,
        "the plan record in the transcript reads as a checklist"
    );
    b.axe("plan").await;
    b.screenshot(&shots(&scratch), "viewer-plan.png").await;
    pump.post(Some(root), Some("planner"), &support::p("work", "close"))
        .await
        .unwrap();
    b.until(
        "the new plan, without a reload",
        "document.querySelector(\"#t-plan .step[data-state='abandoned']\")?.getAttribute('aria-label') === 'abandoned: Analyze results'",
    )
    .await;
    assert_eq!(b.count("li.rec.plan").await, 2);
    b.close_clean().await;
}

/// Issue 36, done when: "the viewer shows a loop's iterations, roles and plans" — the demo's
/// phuc-loop thread lists each iteration with links to its Scout, Solver and Skeptic threads,
/// the residual, its direction, the criteria and the certificate; a role's link opens its thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_thread_shows_its_iterations_and_roles() {
    let scratch = Scratch::new("viewer-loop");
    let (pump, roots) = demo(&scratch).await;
    let phuc = roots[5];
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/thread/{phuc}"))
        .await;
    b.until(
        "the loop panel",
        "!document.getElementById('t-loop').hidden && document.querySelectorAll('#t-loop tbody tr').length === 3",
    )
    .await;
    let rows = b
        .eval("return [...document.querySelectorAll('#t-loop tbody tr')].map(r => [...r.querySelectorAll('td a')].map(a => a.textContent).join(' ') + ' | ' + r.querySelector('.residual').textContent + ' ' + r.querySelector('.direction').textContent + ' ' + r.querySelector('.criteria').textContent + ' ' + r.querySelector('.certificate').textContent)")
        .await;
    assert_eq!(
        rows,
        serde_json::json!([
            "scout solver skeptic | 0.25 STABLE ✘ close NONE",
            "scout solver skeptic | 0.006944444445 IMPROVING ✘ close NONE",
            "scout solver skeptic | 0.000006007306 IMPROVING ✔ close CONVERGED",
        ])
    );
    // Each link is a child thread of the loop, the role's own.
    let children: Vec<String> = pump
        .tree(phuc)
        .iter()
        .filter(|t| t.parent == Some(phuc))
        .map(|t| t.id.to_string())
        .collect();
    let linked = b
        .eval("return [...document.querySelectorAll('#t-loop td a')].map(a => a.dataset.thread)")
        .await;
    let mut linked: Vec<String> = serde_json::from_value(linked).unwrap();
    let mut expected = children.clone();
    linked.sort();
    expected.sort();
    assert_eq!(linked, expected, "nine role threads, each linked once");
    b.eval("document.getElementById('t-loop').scrollIntoView(); return true")
        .await;
    b.axe("loop").await;
    b.screenshot(&shots(&scratch), "viewer-loop.png").await;
    b.click("#t-loop tbody tr:last-child td[data-role='skeptic'] a")
        .await;
    b.until(
        "the Skeptic's thread, its capsule first",
        "document.getElementById('t-title').textContent.endsWith('iter2-skeptic') && document.getElementById('t-loop').hidden && !!document.querySelector(\"#t-records li[data-root='skeptic']\")",
    )
    .await;
    b.close_clean().await;
}

/// "the inbox in the viewer driven in Chromium (approve from the page, the thread continues
/// live)": an approval and a question wait in the Inbox view; the page approves one and
/// answers the other, each disappears, and the approved thread's result shows on its page.
/// "the viewer's Inbox view uses [the inbox stream]" (the seed of issue 31's last items): a
/// request made while the page is open appears on it, and goes when answered elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_view_approves_and_answers_and_the_thread_goes_on() {
    use agentpump::listeners::{CommandConfig, CommandTool};
    use agentpump::tool::Call;
    use agentpump::value::Value;
    use agentpump::{Approval, InboxFilter, InboxPolicy, PumpBuilder, PumpConfig};
    let scratch = Scratch::new("viewer-inbox");
    let command = CommandTool::new(CommandConfig {
        allow: vec!["echo".to_owned()],
        ..CommandConfig::default()
    });
    let inbox = InboxPolicy {
        approvals: [("command".to_owned(), Approval::Every)].into(),
        ..InboxPolicy::default()
    };
    let pump = PumpBuilder::new()
        .config(PumpConfig {
            inbox,
            ..PumpConfig::default()
        })
        .register(command.registration())
        .register(agentpump::ask_tool())
        .build()
        .unwrap();
    let call = Call::new("command")
        .id("c1")
        .arg("program", "echo")
        .arg(
            "args",
            Value::List(vec![Value::Str("approved-from-the-page".into())]),
        )
        .to_xml();
    let held = pump.post(None, None, &call).await.unwrap().thread();
    let question = Call::new("ask")
        .id("q1")
        .arg("question", "Which colour?")
        .to_xml();
    let asked = pump.post(None, None, &question).await.unwrap().thread();
    for t in [held, asked] {
        pump.settle(t).await;
    }
    assert_eq!(pump.inbox(&InboxFilter::default()).await.unwrap().len(), 2);
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/inbox")).await;
    b.until(
        "both requests in the inbox",
        "document.querySelectorAll('#inbox-list .inbox-item').length === 2",
    )
    .await;
    b.axe("inbox").await;
    // Issue 33, "the inbox for a person's answers": a thread that waits for one says so and
    // links to the Inbox.
    b.goto(&format!("{base}/#/thread/{held}")).await;
    b.until(
        "the waiting thread's way to the inbox",
        "!document.getElementById('t-waiting').hidden",
    )
    .await;
    b.click("#t-inbox-link").await;
    b.until(
        "the inbox again, from the thread",
        "location.hash === '#/inbox' && document.querySelectorAll('#inbox-list .inbox-item').length === 2",
    )
    .await;
    let later = Call::new("ask").id("q2").arg("question", "Later?").to_xml();
    let later = pump.post(None, None, &later).await.unwrap().thread();
    b.until(
        "a request made while the page is open, shown last",
        "[...document.querySelectorAll('#inbox-list .inbox-item')].pop()?.textContent.includes('Later?')",
    )
    .await;
    let filter = InboxFilter {
        thread: Some(later),
        ..InboxFilter::default()
    };
    let open = pump.inbox(&filter).await.unwrap();
    let value = agentpump::pump::inbox::Decision::Answer { value: "x".into() };
    let reply = agentpump::Reply {
        decision: value,
        by: "elsewhere".into(),
    };
    pump.answer(open[0].id, reply).await.unwrap();
    b.until(
        "the request answered elsewhere gone from the page",
        "document.querySelectorAll('#inbox-list .inbox-item').length === 2",
    )
    .await;
    b.click(".inbox-item[data-kind='approval'] .inbox-approve")
        .await;
    b.type_into(".inbox-item[data-kind='ask'] .inbox-value", "teal")
        .await;
    b.click(".inbox-item[data-kind='ask'] .inbox-answer").await;
    b.until(
        "the inbox emptied",
        "document.querySelectorAll('#inbox-list .inbox-item').length === 0",
    )
    .await;
    b.goto(&format!("{base}/#/thread/{held}")).await;
    b.until(
        "the approved command's result on the thread's page",
        "[...document.querySelectorAll('li.rec')].some(r => r.textContent.includes('approved-from-the-page') && r.textContent.includes('stdout'))",
    )
    .await;
    pump.settle(asked).await;
    let records = pump.history(asked).await.unwrap();
    assert!(
        records
            .iter()
            .any(|r| r.payload.contains("teal") && r.payload.contains("viewer")),
        "the answer reached the asker"
    );
    b.close_clean().await;
}

/// What the issue found trying the page as a new user would (issue 33, "these hurt"), each
/// checked where a user meets it: the wall clock among the budgets, a resumed thread that no
/// longer looks halted, a child's way to its parent, the live list, the icon, an unknown thread,
/// badges by halt class, the plot's axis against the report, and the list at 390 px.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_studio_fixes_what_a_new_user_tripped_on() {
    let scratch = Scratch::new("viewer-studio");
    let (pump, roots) = demo(&scratch).await;
    let (newton, planner) = (roots[0], roots[1]);
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;
    let http = support::http_client();

    // "The wall-clock budget is invisible. … neither “Budgets (live)” nor
    // `GET /threads/{id}/budget` shows a wall-clock line"
    let started = support::json(
        http.post(format!("{base}/threads?to=calculator"))
            .bearer_auth(TOKEN)
            .body(r#"<calc xmlns="urn:agentpump:calc:v1">6 * 7</calc>"#),
    )
    .await;
    let calc: ThreadId = started["thread"].as_str().unwrap().parse().unwrap();
    pump.settle(calc).await;
    let budget = get_json(&base, &format!("/threads/{calc}/budget")).await;
    let clock = &budget["max-wall-clock"];
    assert_eq!(clock["limit"], "60000", "the demo's wall clock: {budget}");
    let (spent, left): (u64, u64) = (
        clock["spent"].as_str().unwrap().parse().unwrap(),
        clock["remaining"].as_str().unwrap().parse().unwrap(),
    );
    assert!(spent < 60_000 && spent + left == 60_000, "{clock}");
    b.goto(&format!("{base}/?token={TOKEN}#/thread/{calc}"))
        .await;
    b.until(
        "the wall clock among the live budgets",
        "document.getElementById('budget-title').textContent === 'Budgets (live)' && document.querySelector(\".budget-bar[data-budget='max-wall-clock']\")?.dataset.limit === '60000'",
    )
    .await;

    // "After Resume the page still looks halted (old badges, old report, “Done.” never clears)"
    b.click("#stop").await;
    b.until(
        "the stop",
        "document.getElementById('halt-class')?.textContent === 'BACKPRESSURE' && document.getElementById('halt-class').classList.contains('warn')",
    )
    .await;
    b.click("#resume-open").await;
    b.type_into("#r-turns", "5").await;
    b.click("#resume").await;
    b.until(
        "the resumed thread, not looking halted",
        "!document.getElementById('stop').hidden && !document.getElementById('halt-class') && document.getElementById('report-title').textContent.includes('resumed since') && document.querySelector('#t-badges .badge').textContent === 'idle'",
    )
    .await;
    b.until(
        "“Done.” cleared",
        "document.getElementById('status').textContent === ''",
    )
    .await;

    // "a child thread has no link to its parent"
    let child = pump.thread(planner).unwrap().children[0];
    b.goto(&format!("{base}/#/thread/{child}")).await;
    b.until(
        "the link to the parent",
        &format!(
            "document.getElementById('parent-link')?.getAttribute('href') === '#/thread/{planner}'"
        ),
    )
    .await;
    b.click("#parent-link").await;
    b.until(
        "the parent, opened by the link",
        &format!("location.hash === '#/thread/{planner}' && document.querySelectorAll('.tree-node[data-depth=\"1\"]').length === 3"),
    )
    .await;

    // "an unknown thread shows an empty page"
    let unknown = ThreadId::new();
    b.goto(&format!("{base}/#/thread/{unknown}")).await;
    b.until(
        "the unknown thread said so",
        &format!("!document.getElementById('t-missing').hidden && document.getElementById('t-title').textContent === 'No such thread' && document.getElementById('t-missing-detail').textContent.includes('{unknown}') && document.getElementById('t-body').hidden"),
    )
    .await;
    b.axe("unknown thread").await;
    b.goto(&format!("{base}/#/thread/{newton}")).await;
    b.until(
        "a known thread after the unknown one",
        "!document.getElementById('t-body').hidden && document.getElementById('t-missing').hidden && document.getElementById('certificate')?.textContent === 'CONVERGED'",
    )
    .await;

    // "TIMEOUT gets the same green badge as EXACT while a CONVERGED thread shows a red “halted”"
    let tones = b
        .eval("return import('/dom.js').then(m => ['EXACT', 'CONVERGED', 'TIMEOUT', 'BACKPRESSURE', 'DIVERGED', 'aborted', 'no-progress'].map(m.tone))")
        .await;
    assert_eq!(
        tones,
        serde_json::json!(["ok", "ok", "warn", "warn", "bad", "bad", "bad"])
    );
    let halted = b
        .eval("const s = document.querySelector('#t-badges .state-halted'); return [s.classList.contains('ok'), getComputedStyle(s).color === getComputedStyle(document.getElementById('certificate')).color]")
        .await;
    assert_eq!(
        halted,
        serde_json::json!([true, true]),
        "a CONVERGED thread's “halted” reads as good news"
    );

    // "the residual plot's x-axis (1–4) disagrees with the report's “Iterations 17”"
    let plot = b
        .eval("const f = {}; const dl = document.getElementById('report-fields'); for (const dt of dl.querySelectorAll('dt')) f[dt.textContent] = dt.nextElementSibling.textContent; return [f['Residuals reported'], String(document.querySelectorAll('#residual-plot circle.pt').length), 'Iterations' in f, !!f['Deliveries'], document.querySelector('#residual-plot').textContent.includes('n-th residual reported')]")
        .await;
    assert_eq!(
        plot[0], plot[1],
        "the report and the plot count residuals alike: {plot}"
    );
    assert_eq!(
        plot.as_array().unwrap()[2..],
        [serde_json::json!(false), true.into(), true.into()],
        "{plot}"
    );

    // "every load logs a `favicon.ico` 404"
    let icon = b
        .eval("return Promise.all(['/favicon.ico', document.querySelector('link[rel=icon]').getAttribute('href')].map(u => fetch(u).then(r => r.status + ' ' + r.headers.get('content-type'))))")
        .await;
    assert_eq!(
        icon,
        serde_json::json!(["200 image/svg+xml", "200 image/svg+xml"])
    );

    // "the threads list of a live host never updates"
    b.goto(&format!("{base}/#/")).await;
    b.until(
        "the list",
        "document.querySelectorAll('#threads tbody tr').length >= 6",
    )
    .await;
    let later = pump
        .post(
            None,
            Some("calculator"),
            r#"<calc xmlns="urn:agentpump:calc:v1">1 + 1</calc>"#,
        )
        .await
        .unwrap()
        .thread();
    b.until(
        "a thread started after the list was shown, without a reload",
        &format!("!!document.querySelector(\"tr[data-thread='{later}']\")"),
    )
    .await;

    // "at 390 px the list is 849 px wide"
    b.resize(390, 844).await;
    b.until(
        "the list within 390 px",
        "document.documentElement.scrollWidth <= innerWidth && innerWidth <= 390",
    )
    .await;
    b.axe("threads list at 390 px").await;
    b.goto(&format!("{base}/#/thread/{newton}")).await;
    b.until(
        "the thread at 390 px",
        "document.getElementById('certificate')?.textContent === 'CONVERGED'",
    )
    .await;
    let wide = b
        .eval("return [...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 0.5 && !e.closest('pre, svg, .scroll, .wf-scroll')).slice(0, 8).map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))")
        .await;
    assert_eq!(wide, serde_json::json!([]), "elements past 390 px");
    b.axe("thread at 390 px").await;
    b.close_clean().await;

    // "opening a halted thread then an idle one shows “Budgets (at the halt)” for the idle one"
    // (read-only: no live lines, so only a report's lines show)
    let view = browser::View::start(&scratch.db());
    let b = Browser::start(&scratch, false).await;
    b.goto(&view.url).await;
    b.until(
        "the read-only list",
        "document.querySelectorAll('#threads tbody tr').length >= 6",
    )
    .await;
    b.goto(&format!("{}#/thread/{newton}", view.base)).await;
    b.until(
        "the halted thread's budgets",
        "document.getElementById('budget-title').textContent === 'Budgets (at the halt)'",
    )
    .await;
    b.goto(&format!("{}#/thread/{later}", view.base)).await;
    b.until(
        "an idle thread's budgets, not “at the halt”",
        "document.getElementById('budget-title').textContent === 'Budgets' && document.querySelector('#t-badges .badge')?.textContent === 'idle'",
    )
    .await;
    b.close().await;
}

/// "assets are sent uncompressed and uncached" (issue 33): each file is gzip to a browser that
/// accepts it, plain to one that does not, and a reload with its tag is a `304`; and "the page
/// stays under 150 KB of assets".
#[tokio::test]
async fn the_pages_files_are_compressed_and_cacheable() {
    use std::io::Read as _;
    let scratch = Scratch::new("viewer-assets");
    let (pump, _) = demo(&scratch).await;
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let http = reqwest::Client::builder().no_gzip().build().unwrap();
    let mut total = 0;
    for path in [
        "/",
        "/viewer.css",
        "/viewer.js",
        "/panels.js",
        "/dom.js",
        "/xml.js",
        "/plot.js",
        "/process.js",
        "/tasks.js",
        "/plan.js",
        "/loop.js",
        "/inbox.js",
        "/request.js",
        "/fork.js",
        "/totals.js",
        "/timing.js",
        "/organism.js",
        "/favicon.svg",
    ] {
        let plain = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(plain.status(), 200, "{path}");
        assert!(plain.headers().get("content-encoding").is_none(), "{path}");
        let etag = plain.headers()["etag"].clone();
        assert_eq!(
            plain.headers()["cache-control"],
            "no-cache",
            "{path}: revalidated, never stale"
        );
        assert_eq!(plain.headers()["vary"], "Accept-Encoding", "{path}");
        let plain = plain.bytes().await.unwrap();
        total += plain.len();
        let zipped = http
            .get(format!("{base}{path}"))
            .header("accept-encoding", "gzip, deflate, br")
            .send()
            .await
            .unwrap();
        assert_eq!(zipped.headers()["content-encoding"], "gzip", "{path}");
        let zipped = zipped.bytes().await.unwrap();
        assert!(zipped.len() < plain.len(), "{path} compresses");
        let mut unzipped = Vec::new();
        flate2::read::GzDecoder::new(&zipped[..])
            .read_to_end(&mut unzipped)
            .unwrap();
        assert_eq!(unzipped, plain, "{path}: the same bytes");
        let again = http
            .get(format!("{base}{path}"))
            .header("if-none-match", etag.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(again.status(), 304, "{path}: a reload costs a 304");
        assert_eq!(again.headers()["etag"], etag);
    }
    assert!(total < 150 * 1024, "the page's files are {total} bytes");
}
/// Issue 33: "Replay: start a new thread from any record of an old one — the history up to that
/// record as its context (or the same first message), optionally with a different listener or
/// budget — and compare the two side by side."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_from_a_middle_record_with_another_budget_and_compare_side_by_side() {
    let scratch = Scratch::new("viewer-fork");
    let (pump, roots) = demo(&scratch).await;
    let runaway = roots[3]; // halted by its turn budget
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let shots = shots(&scratch);
    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/thread/{runaway}"))
        .await;
    b.until(
        "a replay control on each message record",
        "document.querySelectorAll('li.rec.kind-message button.replay').length >= 6 && !document.querySelector('li.rec.kind-decision button.replay')",
    )
    .await;
    let seq = b
        .eval("const r = document.querySelectorAll('li.rec.kind-message')[4]; r.querySelector('button.replay').click(); return Number(r.dataset.seq)")
        .await;
    b.until(
        "the replay form",
        "document.querySelector('.replay-form select') === document.activeElement",
    )
    .await;
    b.axe("replay form").await;
    b.type_into(".replay-form input[name=turns]", "2").await;
    b.click(".replay-form button[type=submit]").await;
    b.until(
        "the compare view",
        "/^#\\/compare\\//.test(location.hash) && !document.getElementById('compare').hidden",
    )
    .await;
    let hash = b.eval("return location.hash").await;
    let fork: ThreadId = hash.as_str().unwrap()["#/compare/".len()..]
        .parse()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), pump.settle(fork))
        .await
        .expect("the fork settles");
    assert_eq!(
        pump.thread(fork).unwrap().state,
        ThreadState::Halted,
        "halted by its own budget of 2 turns"
    );
    let records = pump.history(fork).await.unwrap();
    assert!(
        records[0]
            .payload
            .contains(&format!("source=\"{runaway}\" at=\"{seq}\"")),
        "{}",
        records[0].payload
    );
    b.goto(&format!("{base}/#/compare/{fork}")).await;
    b.until(
        "both columns from the fork point, the same first record, later ones marked",
        &format!("document.getElementById('c-title').textContent.includes('#{seq}') && document.querySelector('#c-source li.rec')?.dataset.seq === '{seq}' && !document.querySelector('#c-source li.rec').classList.contains('differs') && document.querySelectorAll('#c-fork li.rec.differs').length > 0 && document.getElementById('c-count').textContent.includes('differ')"),
    )
    .await;
    b.axe("compare").await;
    b.screenshot(&shots, "viewer-fork.png").await;
    // The fork's decision links back to this view; a read-only viewer offers no control.
    b.goto(&format!("{base}/#/thread/{fork}")).await;
    b.until(
        "the link to the comparison",
        "document.querySelector('li.rec.kind-decision a.compare-link')",
    )
    .await;
    let errors = b.eval("return window.viewerErrors").await;
    assert_eq!(errors, serde_json::json!([]), "console errors");
    let view = browser::View::start(&scratch.db());
    b.goto(&format!("{}#/thread/{runaway}", view.url)).await;
    b.until(
        "the read-only transcript",
        "document.querySelectorAll('li.rec.kind-message').length >= 6",
    )
    .await;
    assert_eq!(
        b.count("button.replay").await,
        0,
        "no replay control read-only"
    );
    b.close().await;
}
/// What the usage host's listeners report for a delivery of body `n`: `alpha` reads 10 tokens
/// per unit, `beta` 100; each writes `n`, makes one tool call and costs `n` ten-thousandths.
fn reported(listener: &str, n: u64) -> agentpump::Usage {
    let per = if listener == "alpha" { 10 } else { 100 };
    agentpump::Usage {
        tokens_in: n * per,
        tokens_out: n,
        cost: rust_decimal::Decimal::new(i64::try_from(n).unwrap(), 4),
        tool_calls: 1,
        ..agentpump::Usage::default()
    }
}

/// A host whose `alpha` answers `<work>n</work>` by spawning a child thread with `<job>n</job>`
/// for `beta`; both report [`reported`] usage (system messages report none). Three roots, on
/// `store`. Both are agents: a tool's delivery would add the tool call the pump counts itself.
async fn usage_host(
    store: Arc<dyn agentpump::history::HistoryStore>,
) -> (PumpHandle, Vec<ThreadId>) {
    use agentpump::{PumpBuilder, Registration, Role, Spawn};
    let listener = |name: &'static str| {
        support::Script::new(move |msg, cx| {
            if msg.is_system() {
                return Ok(());
            }
            cx.usage(reported(name, support::number(msg)));
            if name == "alpha" {
                cx.spawn(Spawn::new(support::p("job", support::body(msg))).sub_id("job"));
            }
            Ok(())
        })
    };
    let pump = PumpBuilder::new()
        .history(store)
        .register(
            Registration::new("alpha", listener("alpha"))
                .accepts(support::q("work"))
                .peers(["beta"])
                .role(Role::Agent),
        )
        .register(
            Registration::new("beta", listener("beta"))
                .accepts(support::q("job"))
                .role(Role::Agent),
        )
        .build()
        .unwrap();
    let mut roots = Vec::new();
    for n in [3, 5, 8] {
        roots.push(support::start(&pump, &support::p("work", &n.to_string())).await);
    }
    for &root in &roots {
        tokio::time::timeout(Duration::from_secs(10), pump.settle(root))
            .await
            .expect("usage host settles");
    }
    (pump, roots)
}

/// Totals computed from the history alone: every record addressed to a listener was delivered
/// once, and its handler reported [`reported`] for its body (system messages, nothing).
async fn expected_totals(
    pump: &PumpHandle,
    threads: &[ThreadId],
) -> std::collections::BTreeMap<String, serde_json::Value> {
    let mut sums: std::collections::BTreeMap<String, agentpump::Usage> = Default::default();
    let mut count: std::collections::BTreeMap<String, u64> = Default::default();
    for &t in threads {
        for r in pump.history(t).await.unwrap() {
            let Some(to) = r.to.as_deref().filter(|to| ["alpha", "beta"].contains(to)) else {
                continue;
            };
            *count.entry(to.to_owned()).or_default() += 1;
            let sum = sums.entry(to.to_owned()).or_default();
            if ["work", "job"].contains(&r.root.local()) {
                let body = r
                    .payload
                    .split('>')
                    .nth(1)
                    .unwrap()
                    .split('<')
                    .next()
                    .unwrap();
                sum.add(&reported(to, body.parse().unwrap()));
            }
        }
    }
    sums.into_iter()
        .map(|(listener, u)| {
            let totals = serde_json::json!({
                "deliveries": count[&listener], "tokens_in": u.tokens_in, "tokens_out": u.tokens_out,
                "cost": u.cost.to_string(), "tool_calls": u.tool_calls, "estimated": 0,
            });
            (listener, totals)
        })
        .collect()
}

/// Every thread of the usage host's trees.
fn all_threads(pump: &PumpHandle, roots: &[ThreadId]) -> Vec<ThreadId> {
    roots
        .iter()
        .flat_map(|&r| pump.tree(r).into_iter().map(|t| t.id))
        .collect()
}

/// Sums per-listener totals into one (what a tree or a day adds up to).
fn summed(parts: impl IntoIterator<Item = serde_json::Value>) -> serde_json::Value {
    let mut total = serde_json::json!({"deliveries": 0, "tokens_in": 0, "tokens_out": 0, "cost": "0", "tool_calls": 0, "estimated": 0});
    let mut cost = rust_decimal::Decimal::ZERO;
    for p in parts {
        for k in [
            "deliveries",
            "tokens_in",
            "tokens_out",
            "tool_calls",
            "estimated",
        ] {
            total[k] = (total[k].as_u64().unwrap() + p[k].as_u64().unwrap()).into();
        }
        cost += p["cost"]
            .as_str()
            .unwrap()
            .parse::<rust_decimal::Decimal>()
            .unwrap();
    }
    total["cost"] = cost.to_string().into();
    total
}

async fn get_json(base: &str, path: &str) -> serde_json::Value {
    let response = support::http_client()
        .get(format!("{base}{path}"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response.json().await.unwrap()
}

/// Issue 33: "Totals: tokens, cost and tool calls per thread and per tree, and across threads
/// (by listener, by day)" — the Totals page and a thread's totals equal the sums of the usage
/// each delivery in the history reported (computed here from `pump.history` alone), on a SQLite
/// history; costs are exact decimals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn totals_add_up_the_history_by_thread_tree_listener_and_day() {
    let scratch = Scratch::new("viewer-totals");
    let store = agentpump::history::SqliteHistory::open(scratch.db()).unwrap();
    let (pump, roots) = usage_host(Arc::new(store)).await;
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let threads = all_threads(&pump, &roots);
    let expected = expected_totals(&pump, &threads).await;
    let by_listener = get_json(&base, "/view/totals?by=listener").await;
    let groups: Vec<(String, serde_json::Value)> = by_listener["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let mut totals = g.clone();
            totals.as_object_mut().unwrap().remove("key");
            (g["key"].as_str().unwrap().to_owned(), totals)
        })
        .collect();
    assert_eq!(groups, expected.clone().into_iter().collect::<Vec<_>>());
    assert_eq!(
        expected["beta"]["cost"], "0.0016",
        "exact decimals: 3 + 5 + 8 ten-thousandths"
    );
    let first_us = pump.history(roots[0]).await.unwrap()[0].time_us;
    let day = std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{}", first_us / 1_000_000), "+%F"])
        .output()
        .unwrap();
    let day = String::from_utf8(day.stdout).unwrap().trim().to_owned();
    let by_day = get_json(&base, "/view/totals?by=day&limit=5").await;
    let mut today = by_day["groups"][0].clone();
    assert_eq!(
        today.as_object_mut().unwrap().remove("key").unwrap(),
        day.as_str()
    );
    assert_eq!(today, summed(expected.values().cloned()));
    // A thread alone, and its tree (the root's alpha delivery and its child's beta delivery).
    let tree = pump
        .tree(roots[1])
        .into_iter()
        .map(|t| t.id)
        .collect::<Vec<_>>();
    let own = expected_totals(&pump, &roots[1..2]).await;
    let all = expected_totals(&pump, &tree).await;
    let totals = get_json(&base, &format!("/view/threads/{}/totals", roots[1])).await;
    assert_eq!(totals["thread"], summed(own.into_values()));
    assert_eq!(totals["tree"], summed(all.into_values()));
    assert_eq!(totals["threads"], 2);
    assert_eq!(totals["tree"]["tokens_in"], 50 + 500);

    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/totals")).await;
    let cells = "return [...document.querySelectorAll('#totals-body tbody tr')].map(r => [...r.children].map(c => c.textContent))";
    b.until(
        "the totals by listener",
        "document.querySelectorAll('#totals-body tbody tr').length === 2",
    )
    .await;
    let shown = b.eval(cells).await;
    let beta = &expected["beta"];
    assert_eq!(
        shown[1],
        serde_json::json!([
            "beta",
            beta["deliveries"].to_string(),
            beta["tokens_in"].to_string(),
            beta["tokens_out"].to_string(),
            beta["tool_calls"].to_string(),
            "0.0016"
        ])
    );
    b.axe("totals").await;
    b.screenshot(&shots(&scratch), "viewer-totals.png").await;
    b.click("#totals-by-day").await;
    b.until(
        "the totals by day",
        &format!("document.querySelector('#totals-body tbody th')?.textContent === '{day}'"),
    )
    .await;
    b.goto(&format!("{base}/?token={TOKEN}#/thread/{}", roots[1]))
        .await;
    b.until(
        "the thread's totals",
        "document.querySelectorAll('#t-totals tbody tr').length === 2",
    )
    .await;
    let tree_row = b.eval("return document.querySelector('#t-totals tbody tr:nth-child(2) [data-col=tokens_in]').textContent").await;
    assert_eq!(tree_row, "550");
    b.axe("thread totals").await;
    b.close_clean().await;
}

/// Issue 33 (Time and Totals), bad input: an unknown thread is a 404 problem (totals and
/// timing), a grouping other than
/// `listener` or `day` a 400 naming both, a limit out of range a 400 naming the range — and over
/// the in-memory history the sums are the history's too.
#[tokio::test]
async fn totals_routes_refuse_bad_input_with_problems() {
    let (pump, roots) = usage_host(Arc::new(agentpump::history::MemoryHistory::new())).await;
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let client = support::http_client();
    let get = |path: String| {
        client
            .get(format!("{base}{path}"))
            .bearer_auth(TOKEN)
            .send()
    };
    let (status, body) = support::problem(
        get(format!("/view/threads/{}/totals", uuid::Uuid::new_v4()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (404, Some("unknown-thread"))
    );
    let (status, body) = support::problem(
        get(format!("/view/threads/{}/timing", uuid::Uuid::new_v4()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (404, Some("unknown-thread"))
    );
    let (status, body) = support::problem(get("/view/totals?by=week".into()).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (400, Some("bad-grouping"))
    );
    assert!(
        body["detail"].as_str().unwrap().contains("listener, day"),
        "{body}"
    );
    for limit in ["0", "367"] {
        let (status, body) = support::problem(
            get(format!("/view/totals?by=day&limit={limit}"))
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            (status.as_u16(), body["code"].as_str()),
            (400, Some("bad-limit")),
            "{body}"
        );
        assert!(
            body["detail"].as_str().unwrap().contains("1 to 366"),
            "{body}"
        );
    }
    let (status, _) = support::problem(get("/view/totals?group=day".into()).await.unwrap()).await;
    assert_eq!(status.as_u16(), 400, "an unknown query key");
    let unauthorized = client
        .get(format!("{base}/view/totals"))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);
    let expected = expected_totals(&pump, &all_threads(&pump, &roots)).await;
    let by_listener = get_json(&base, "/view/totals").await;
    assert_eq!(by_listener["by"], "listener");
    assert_eq!(
        by_listener["groups"][0]["tokens_in"],
        expected["alpha"]["tokens_in"]
    );
    assert_eq!(by_listener["groups"][1]["cost"], expected["beta"]["cost"]);
}

/// Issue 33: "Time: a waterfall of a thread (and its children) with each delivery's queue wait,
/// handler time, commit time and LLM latency, from what the history records (add what it
/// lacks)" — every handled delivery of a thread and its child has its acceptance (the record's
/// stamp), handler start and end, and commit instants, in that order; the waterfall's segments
/// add up to each delivery's span; a delivery recorded without timings reads "not recorded".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_waterfall_shows_each_deliverys_queue_handler_and_commit_time() {
    let scratch = Scratch::new("viewer-waterfall");
    let store = agentpump::history::SqliteHistory::open(scratch.db()).unwrap();
    let (pump, roots) = usage_host(Arc::new(store)).await;
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let root = roots[2];
    let timing = get_json(&base, &format!("/view/threads/{root}/timing")).await;
    let lanes = timing["lanes"].as_array().unwrap();
    assert_eq!(lanes.len(), 2, "the thread and its child: {timing}");
    assert_eq!(
        (lanes[0]["id"].as_str(), lanes[0]["depth"].as_u64()),
        (Some(root.to_string().as_str()), Some(0))
    );
    assert_eq!(
        (lanes[1]["parent"].as_str(), lanes[1]["depth"].as_u64()),
        (Some(root.to_string().as_str()), Some(1))
    );
    let mut spans = Vec::new();
    for lane in lanes {
        let thread: ThreadId = lane["id"].as_str().unwrap().parse().unwrap();
        let records = pump.history(thread).await.unwrap();
        for d in lane["deliveries"].as_array().unwrap() {
            let seq = d["seq"].as_u64().unwrap();
            let record = records
                .iter()
                .find(|r| r.seq == seq)
                .expect("a delivered record");
            assert_eq!(d["accepted_us"].as_i64(), Some(record.time_us));
            assert_eq!(d["listener"].as_str(), record.to.as_deref());
            let at = |k: &str| d[k].as_i64().unwrap_or_else(|| panic!("{k} recorded: {d}"));
            assert!(
                at("accepted_us") <= at("started_us")
                    && at("started_us") <= at("handled_us")
                    && at("handled_us") <= at("committed_us"),
                "instants in order: {d}"
            );
            spans.push((seq, at("committed_us") - at("accepted_us")));
        }
    }
    assert_eq!(
        spans.len(),
        4,
        "alpha's work and the two system messages about its child, beta's job"
    );

    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/thread/{root}"))
        .await;
    b.until(
        "the waterfall",
        "document.querySelectorAll('#t-timing .wf-row').length === 4",
    )
    .await;
    let drawn = b
        .eval("return [...document.querySelectorAll('#t-timing .wf-row')].map(r => [Number(r.dataset.seq), [...r.querySelectorAll('rect:not(.wf-llm)')].reduce((s, x) => s + Number(x.dataset.us), 0), r.querySelectorAll('rect:not(.wf-llm)').length])")
        .await;
    for (seq, span) in &spans {
        let row = drawn
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r[0] == *seq)
            .expect("a drawn row");
        assert_eq!(
            (row[1].as_i64(), row[2].as_u64()),
            (Some(*span), Some(3)),
            "segments add up to the span of #{seq}"
        );
    }
    assert_eq!(b.count("#t-timing .wf-legend li").await, 4);
    assert_eq!(
        b.count("#t-timing table tbody tr").await,
        4,
        "the text alternative"
    );
    b.axe("waterfall").await;
    b.screenshot(&shots(&scratch), "viewer-waterfall.png").await;

    // A delivery committed before timings were kept: its instants are NULL in the file.
    let (first, _) = spans[0];
    let conn = rusqlite::Connection::open(scratch.db()).unwrap();
    conn.execute(
        "UPDATE records SET started_us = NULL, handled_us = NULL, committed_us = NULL WHERE seq = ?1",
        [first as i64],
    )
    .unwrap();
    drop(conn);
    let timing = get_json(&base, &format!("/view/threads/{root}/timing")).await;
    let old = &timing["lanes"][0]["deliveries"][0];
    assert_eq!(
        (old["started_us"].is_null(), old["committed_us"].is_null()),
        (true, true),
        "{old}"
    );
    b.goto(&format!("{base}/?token={TOKEN}#/")).await;
    b.goto(&format!("{base}/?token={TOKEN}#/thread/{root}"))
        .await;
    b.until(
        "the old delivery not recorded",
        &format!("document.querySelector('#t-timing .wf-row[data-seq=\"{first}\"] .wf-none')?.textContent === 'not recorded'"),
    )
    .await;
    let cells = b.eval(&format!("return [...document.querySelectorAll('#t-timing tr[data-seq=\"{first}\"] td.num')].slice(1).map(c => c.textContent)")).await;
    assert_eq!(
        cells,
        serde_json::json!([
            "not recorded",
            "not recorded",
            "not recorded",
            "not recorded",
            "not recorded"
        ])
    );
    b.close_clean().await;
}

/// Issue 33 (Time and Totals) on the demo: every handled delivery of every demo tree is timed,
/// its instants in order from the record's acceptance; and each tree's totals equal the
/// governor's counters of its threads (deliveries and notices, tokens, cost, tool calls) — the
/// marks and the ledger agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_trees_are_timed_and_their_totals_match_the_counters() {
    let scratch = Scratch::new("viewer-demo-timing");
    let (pump, roots) = demo(&scratch).await;
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    for root in roots {
        let timing = get_json(&base, &format!("/view/threads/{root}/timing")).await;
        let tree = pump.tree(root);
        assert_eq!(
            timing["lanes"].as_array().unwrap().len(),
            tree.len(),
            "{root}"
        );
        for lane in timing["lanes"].as_array().unwrap() {
            let thread: ThreadId = lane["id"].as_str().unwrap().parse().unwrap();
            let records = pump.history(thread).await.unwrap();
            for d in lane["deliveries"].as_array().unwrap() {
                let record = records
                    .iter()
                    .find(|r| Some(r.seq) == d["seq"].as_u64())
                    .unwrap();
                let at = |k: &str| d[k].as_i64().unwrap_or_else(|| panic!("{k} recorded: {d}"));
                assert_eq!(at("accepted_us"), record.time_us);
                assert!(
                    at("accepted_us") <= at("started_us")
                        && at("started_us") <= at("handled_us")
                        && at("handled_us") <= at("committed_us"),
                    "{d}"
                );
            }
        }
        let totals = get_json(&base, &format!("/view/threads/{root}/totals")).await;
        let mut expected = agentpump::Counters::default();
        for t in &tree {
            let c = &t.counters;
            expected.deliveries += c.deliveries + c.notices;
            expected.tokens_in += c.tokens_in;
            expected.tokens_out += c.tokens_out;
            expected.tool_calls += c.tool_calls;
            expected.cost += c.cost;
        }
        let got = &totals["tree"];
        assert_eq!(
            (
                got["deliveries"].as_u64(),
                got["tokens_in"].as_u64(),
                got["tokens_out"].as_u64(),
                got["tool_calls"].as_u64()
            ),
            (
                Some(expected.deliveries),
                Some(expected.tokens_in),
                Some(expected.tokens_out),
                Some(expected.tool_calls)
            ),
            "{root}: {totals}"
        );
        assert_eq!(
            got["cost"].as_str(),
            Some(expected.cost.to_string().as_str()),
            "{root}"
        );
    }
}

/// The routes of `thread`'s tree counted from its history, as `GET /view/organism` must count
/// them: (from, to) → how many records, governor decisions left out.
async fn routes_of(pump: &PumpHandle, thread: ThreadId) -> Vec<(String, String, u64)> {
    use agentpump::history::RecordKind;
    let mut counts = std::collections::BTreeMap::new();
    let mut todo = vec![thread];
    while let Some(t) = todo.pop() {
        todo.extend(pump.thread(t).unwrap().children);
        for r in pump.history(t).await.unwrap() {
            if r.kind != RecordKind::Decision {
                let to = r.to.as_deref().unwrap_or("(any)").to_owned();
                *counts.entry((r.from.to_string(), to)).or_insert(0u64) += 1;
            }
        }
    }
    counts.into_iter().map(|((f, t), n)| (f, t, n)).collect()
}

/// Issue 33, "A way in: post a message into a thread (or start one) from the page, with the
/// organism's listeners and their example payloads to pick from" and "The organism: a graph of
/// listeners and the routes messages actually took".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_is_started_and_sent_into_from_the_page_and_the_organism_shows_its_routes() {
    let scratch = Scratch::new("viewer-way-in");
    let (pump, roots) = demo(&scratch).await;
    let newton = roots[0];
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let shots = shots(&scratch);
    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/")).await;
    b.until(
        "the start form",
        "!document.getElementById('start').hidden && !!document.getElementById('start-to')",
    )
    .await;
    b.click("#start > summary").await;
    b.eval("const s = document.getElementById('start-to'); s.value = 'calculator'; s.dispatchEvent(new Event('change'))")
        .await;
    let example = b
        .eval("return document.getElementById('start-payload').value")
        .await;
    // The newest payload the history sent the calculator (a process's tool call, here).
    let example = example.as_str().unwrap();
    assert!(
        example.contains("tool=\"calculator\"") || example.contains("urn:agentpump:calc:v1"),
        "the calculator's example, from history: {example}"
    );
    b.axe("threads list with the start form").await;
    b.screenshot(&shots, "viewer-compose.png").await;
    b.type_into(
        "#start-payload",
        r#"<calc xmlns="urn:agentpump:calc:v1">6 * 7</calc>"#,
    )
    .await;
    b.click("#start-submit").await;
    b.until(
        "the started thread, with the calculator's answer",
        "/^#\\/thread\\//.test(location.hash) && [...document.querySelectorAll('li.rec pre.raw')].some(p => p.textContent.includes('>42<'))",
    )
    .await;
    let started: ThreadId = b
        .eval("return location.hash.split('/')[2]")
        .await
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        pump.history(started).await.unwrap()[0].to.as_deref(),
        Some("calculator")
    );

    // Into the thread now open: a message, then a refused one whose problem is shown.
    b.until(
        "the send form",
        "!document.getElementById('send').hidden && !!document.getElementById('send-to')",
    )
    .await;
    b.click("#send > summary").await;
    b.eval("const s = document.getElementById('send-to'); s.value = 'calculator'; s.dispatchEvent(new Event('change'))")
        .await;
    b.type_into(
        "#send-payload",
        r#"<calc xmlns="urn:agentpump:calc:v1">40 + 2.5</calc>"#,
    )
    .await;
    b.click("#send-submit").await;
    b.until(
        "the sent message's answer, live",
        "[...document.querySelectorAll('li.rec pre.raw')].some(p => p.textContent.includes('>42.5<'))",
    )
    .await;
    b.type_into("#send-payload", "<calc xmlns=\"urn:agentpump:calc:v1\">1 +")
        .await;
    b.click("#send-submit").await;
    b.until(
        "the refusal's problem next to the form",
        "document.getElementById('send-error').textContent.length > 10",
    )
    .await;
    let refusal = b
        .eval("return document.getElementById('send-error').textContent")
        .await;
    assert!(
        refusal.as_str().unwrap().contains("XML") || refusal.as_str().unwrap().contains("xml"),
        "the problem's detail: {refusal}"
    );
    b.axe("thread with the send form").await;

    // The organism: the routes of the √2 thread's tree, counted as the history says.
    b.goto(&format!("{base}/#/organism/{newton}")).await;
    b.until(
        "the organism's graph",
        "document.querySelectorAll('#org-svg .org-node').length > 2",
    )
    .await;
    let shown = b
        .eval("return [...document.querySelectorAll('#org-routes li')].map(li => [li.dataset.from, li.dataset.to, Number(li.dataset.count)])")
        .await;
    let expected: Vec<serde_json::Value> = routes_of(&pump, newton)
        .await
        .into_iter()
        .map(|(f, t, n)| serde_json::json!([f, t, n]))
        .collect();
    assert_eq!(shown, serde_json::Value::Array(expected));
    let edges = b.count("#org-svg .org-edge").await;
    assert_eq!(edges, b.count("#org-routes li").await, "one edge per route");
    assert!(
        b.count("#org-listeners tbody tr[data-name='calculator']")
            .await
            == 1
    );
    b.axe("organism").await;
    b.eval("window.scrollTo(0, 0)").await;
    b.screenshot(&shots, "viewer-organism.png").await;
    b.close_clean().await;
}

/// Issue 33: "with the live thread's current listener highlighted" — a thread whose delivery to
/// a slow listener is running shows that listener as the one holding its next delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_organism_highlights_the_listener_a_live_thread_waits_on() {
    use agentpump::listeners::Sleep;
    use agentpump::{PumpBuilder, QName, Registration};
    let scratch = Scratch::new("viewer-organism-live");
    let nap = QName::new("urn:example:v1", "nap");
    let pump = PumpBuilder::new()
        .register(Registration::new("sleepy", Sleep).accepts(nap))
        .register(
            Registration::new("echo", agentpump::listeners::Echo)
                .accepts(QName::new("urn:example:v1", "say")),
        )
        .build()
        .unwrap();
    let thread = pump
        .post(
            None,
            Some("sleepy"),
            r#"<nap xmlns="urn:example:v1" ms="20000"/>"#,
        )
        .await
        .unwrap()
        .thread();
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/organism/{thread}"))
        .await;
    b.until(
        "sleepy highlighted as holding the next delivery",
        "!!document.querySelector(\"#org-svg .org-node.current[data-name='sleepy']\") && document.querySelectorAll('#org-svg .org-node.current').length === 1 && !!document.querySelector(\"#org-listeners tr.current[data-name='sleepy'] [aria-current]\")",
    )
    .await;
    b.axe("organism, live").await;
    b.close().await;
    pump.shutdown(Duration::from_millis(100)).await;
}

/// `GET /view/organism`'s refusals are problems naming what is wrong.
#[tokio::test]
async fn the_organism_route_refuses_bad_input_with_problems() {
    use agentpump::{PumpBuilder, QName, Registration};
    let pump = PumpBuilder::new()
        .register(
            Registration::new("echo", agentpump::listeners::Echo)
                .accepts(QName::new("urn:example:v1", "say")),
        )
        .build()
        .unwrap();
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let http = support::http_client();
    let get = |query: String| {
        http.get(format!("{base}/view/organism{query}"))
            .bearer_auth(TOKEN)
            .send()
    };
    let unknown = ThreadId::new();
    let (status, body) = support::problem(get(format!("?thread={unknown}")).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (404, Some("unknown-thread"))
    );
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains(&unknown.to_string())
    );
    let (status, body) = support::problem(get("?thread=x".into()).await.unwrap()).await;
    assert_eq!(
        (status.as_u16(), body["code"].as_str()),
        (400, Some("bad-query")),
        "{body}"
    );
    let (status, body) = support::problem(get("?who=x".into()).await.unwrap()).await;
    assert_eq!(status.as_u16(), 400, "{body}");
    assert!(body["detail"].as_str().unwrap().contains("who"), "{body}");
    let listed = get_json(&base, "/view/organism").await;
    assert_eq!(listed["listeners"][0]["name"], "echo");
    assert_eq!(
        listed["listeners"][0]["example"], r#"<say xmlns="urn:example:v1"/>"#,
        "a skeleton of its root when the history sent it nothing"
    );
}
