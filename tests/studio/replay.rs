//! The replay form in a real browser (issue 47): the listener is a choice of the organism's
//! listeners, the message delivered again is shown and editable, an edit is what the fork
//! delivers, and a bad edit's problem is shown in the form. Headless Chromium, axe-core on the
//! form (see tests/viewer.rs for what the browser tests need).

use crate::support;

use crate::browser;

use std::time::Duration;

use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, Registration, ThreadId};
use browser::Browser;
use support::{Scratch, p, q};

const TOKEN: &str = "viewer-replay-token-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replay_form_picks_a_listener_and_delivers_an_edited_message() {
    let scratch = Scratch::new("viewer-replay");
    let pump = PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .register(Registration::new("parrot", Echo).accepts(q("say")))
        .build()
        .unwrap();
    let old = support::start(&pump, &p("say", "one")).await;
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let b = Browser::start(&scratch, false).await;
    b.goto(&format!("{base}/?token={TOKEN}#/thread/{old}"))
        .await;
    b.until(
        "the replay control",
        "!!document.querySelector('li.rec.kind-message button.replay')",
    )
    .await;
    b.click("li.rec.kind-message button.replay").await;
    b.until(
        "the replay form with the message",
        "!!document.querySelector('.replay-form textarea[name=payload]')",
    )
    .await;
    let form = b
        .eval(
            "const f = document.querySelector('.replay-form'); \
             return [[...f.elements.listener.options].map(o => o.value), f.elements.listener.value, \
                     f.elements.payload.value, f.elements.listener.labels.length, f.elements.payload.labels.length]",
        )
        .await;
    assert_eq!(
        form,
        serde_json::json!([["echo", "parrot"], "echo", p("say", "one"), 1, 1]),
        "the organism's listeners to choose from, the record's preselected, its message shown"
    );
    b.axe("replay form with the message").await;

    // A bad edit: the problem shows in the form, nothing starts.
    b.type_into(
        ".replay-form textarea[name=payload]",
        "<say xmlns=\"urn:test:v1\">two",
    )
    .await;
    b.click(".replay-form button[type=submit]").await;
    b.until(
        "the refusal's problem in the form",
        "document.querySelector('.replay-form .replay-error').textContent.includes('edited message')",
    )
    .await;
    assert!(
        b.eval("return location.hash")
            .await
            .as_str()
            .unwrap()
            .contains("/thread/"),
        "still on the thread"
    );

    // The edit, to the other listener: delivered as edited, marked in the comparison.
    let edit = p("say", "two");
    b.type_into(".replay-form textarea[name=payload]", &edit)
        .await;
    b.eval("const s = document.querySelector('.replay-form select[name=listener]'); s.value = 'parrot'; return true")
        .await;
    b.click(".replay-form button[type=submit]").await;
    b.until(
        "the compare view",
        "/^#\\/compare\\//.test(location.hash) && document.getElementById('c-summary').textContent.includes('edited')",
    )
    .await;
    let hash = b.eval("return location.hash").await;
    let fork: ThreadId = hash.as_str().unwrap()["#/compare/".len()..]
        .parse()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), pump.settle(fork))
        .await
        .expect("the fork settles");
    let records = pump.history(fork).await.unwrap();
    assert_eq!(
        (&*records[1].payload, records[1].to.as_deref()),
        (edit.as_str(), Some("parrot"))
    );
    b.until(
        "the edited message marked as differing",
        "document.querySelector('#c-fork li.rec')?.classList.contains('differs')",
    )
    .await;
    b.axe("compare, edited").await;
    b.close_clean().await;
}
