//! The viewer's ways in (issue 47): every example the compose form offers is one its listener
//! accepts, on a fresh demo host and on one with history.

use crate::{demo, support};

use std::time::Duration;

use agentpump::ThreadId;
use support::Scratch;

const TOKEN: &str = "viewer-compose-token-0123456789";

async fn every_example_is_accepted(used: bool) {
    let scratch = Scratch::new(if used {
        "viewer-compose-used"
    } else {
        "viewer-compose-fresh"
    });
    let pump = demo(&scratch, used).await;
    let base = support::serve(&pump, TOKEN, 1024 * 1024).await;
    let http = support::http_client();
    let organism =
        support::json(http.get(format!("{base}/view/organism")).bearer_auth(TOKEN)).await;
    let mut wrong = Vec::new();
    for l in organism["listeners"].as_array().unwrap() {
        let name = l["name"].as_str().unwrap();
        let example = l["example"].as_str().unwrap();
        let answer = http
            .post(format!("{base}/threads?to={name}"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/xml")
            .body(example.to_owned())
            .send()
            .await
            .unwrap();
        let status = answer.status();
        let body: serde_json::Value = answer.json().await.unwrap();
        if !status.is_success() {
            wrong.push(format!("{name}: {example} → {status} {}", body["detail"]));
            continue;
        }
        let thread: ThreadId = body["thread"].as_str().unwrap().parse().unwrap();
        let _ = tokio::time::timeout(Duration::from_secs(20), pump.settle(thread)).await;
        let notices = support::notices(&pump, thread).await;
        if let Some(huh) = notices.iter().find(|(_, element, _)| element == "huh") {
            wrong.push(format!("{name}: {example} → huh {huh:?}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "examples the page offers and the listener refuses:\n{}",
        wrong.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_is_accepted_on_a_fresh_host() {
    every_example_is_accepted(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_is_accepted_after_the_demo() {
    every_example_is_accepted(true).await;
}
