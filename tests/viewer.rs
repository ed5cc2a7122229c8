//! The history viewer in a real browser: headless Chromium driven over WebDriver (chromedriver)
//! against a host running the demo organism. Signs in, lists threads, opens the √2 thread (residual
//! plot, CONVERGED) and the planner (three children), sees a message posted through the API
//! appear live, stops and resumes a thread from the page, shows nothing for a wrong token, serves
//! `agentpump view` over the same file, and logs no console errors.
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
use browser::Browser;
use support::Scratch;

const TOKEN: &str = "viewer-test-token-0123456789";

/// The demo's starting messages (as `agentpump demo` posts them): addressee and payload.
const STARTS: [(&str, &str); 5] = [
    (
        "newton",
        r#"<sqrt xmlns="urn:agentpump:demo:v1" target="2"/>"#,
    ),
    (
        "scripted-planner",
        "<plan xmlns=\"urn:agentpump:demo:v1\">12.5 * 4; (1 + 2 + 3) / 4; 0.1 + 0.2</plan>",
    ),
    (
        "scripted-author",
        r#"<claim xmlns="urn:agentpump:demo:v1" expr="6 * 7" equals="42"/>"#,
    ),
    (
        "scripted-runaway",
        "<ruminate xmlns=\"urn:agentpump:demo:v1\">0</ruminate>",
    ),
    ("scripted-ping", r#"<ball xmlns="urn:agentpump:demo:v1"/>"#),
];

/// The demo organism on a SQLite history in `scratch`, its five threads settled.
async fn demo(scratch: &Scratch) -> (PumpHandle, Vec<ThreadId>) {
    let origin = "listeners/demo/organism.toml";
    let organism = agentpump::host::demo::organism().unwrap();
    let store = organism.open_store_at(&scratch.db()).unwrap();
    let pump = organism
        .builder(origin)
        .unwrap()
        .history(Arc::new(store))
        .build()
        .unwrap();
    let mut roots = Vec::new();
    for (to, payload) in STARTS {
        roots.push(pump.post(None, Some(to), payload).await.unwrap().thread());
    }
    for &root in &roots {
        tokio::time::timeout(Duration::from_secs(30), pump.settle(root))
            .await
            .expect("demo thread settles");
    }
    (pump, roots)
}

/// Where screenshots go: `docs/` when asked, else the scratch folder.
fn shots(scratch: &Scratch) -> std::path::PathBuf {
    if std::env::var("AGENTPUMP_SCREENSHOTS").as_deref() == Ok("docs") {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs")
    } else {
        scratch.0.clone()
    }
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
    b.screenshot(&shots, "viewer-sign-in.png").await;

    // The token from the URL `agentpump run` prints: exchanged for the cookie, then dropped
    // from the address.
    b.goto(&format!("{base}/?token={TOKEN}")).await;
    b.until(
        "the thread list",
        "document.querySelectorAll('#threads tbody tr').length >= 6",
    )
    .await;
    let url = b.eval("return location.href").await;
    assert!(!url.as_str().unwrap().contains("token"), "{url}");
    let cookie = b.eval("return document.cookie").await;
    assert_eq!(cookie, "", "the session cookie is HttpOnly");
    for root in &roots {
        assert_eq!(b.count(&format!("tr[data-thread='{root}']")).await, 1);
    }
    b.screenshot(&shots, "viewer-threads.png").await;

    // Filters and paging.
    b.goto(&format!("{base}/#/?class=CONVERGED")).await;
    b.until(
        "the CONVERGED filter",
        &format!("document.querySelectorAll('#threads tbody tr').length === 1 && !!document.querySelector(\"tr[data-thread='{newton}']\")"),
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
    assert!(b.count("#t-budgets meter").await >= 1, "budgets as bars");
    let linked = b
        .eval("return fetch(document.getElementById('report-json').href).then(r => r.json()).then(j => j.halting_certificate.type)")
        .await;
    assert_eq!(linked, "CONVERGED", "the report's JSON link");
    b.screenshot(&shots, "viewer-thread.png").await;
    b.eval("document.getElementById('records-title').scrollIntoView(); return true")
        .await;
    b.screenshot(&shots, "viewer-transcript.png").await;

    // The planner: three children with their carve-outs.
    b.goto(&format!("{base}/#/thread/{planner}")).await;
    b.until(
        "three children",
        "document.querySelectorAll('.tree-node[data-depth=\"1\"]').length === 3",
    )
    .await;
    let carved = b.count(".tree-node[data-depth='1'] .carve").await;
    assert_eq!(carved, 3, "each child shows its carve-out");

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
    dark.screenshot(&shots, "viewer-thread-dark.png").await;
    let errors = dark.eval("return window.viewerErrors").await;
    assert_eq!(errors, serde_json::json!([]), "console errors in dark mode");
    dark.close().await;
}
