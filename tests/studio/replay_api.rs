//! Replay with an edited message (issue 47): "what if the input had been …". The message
//! delivered again is the edited one, checked like any post; the fork decision names its
//! SHA-256, and `agentpump verify` still proves the fork against its source.

use crate::support;

use std::sync::Arc;

use agentpump::history::{HistoryStore, SqliteHistory};
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, PumpHandle, Registration, ThreadId};
use support::{p, q};

const TOKEN: &str = "fork-edit-token";

fn pump_on(store: Arc<dyn HistoryStore>) -> PumpHandle {
    PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .history(store)
        .build()
        .unwrap()
}

async fn post_fork(base: &str, thread: ThreadId, body: serde_json::Value) -> reqwest::Response {
    support::http_client()
        .post(format!("{base}/threads/{thread}/fork"))
        .bearer_auth(TOKEN)
        .json(&body)
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_replay_delivers_the_edit_and_verify_proves_it() {
    let dir = support::Scratch::new("fork-edit");
    let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let pump = pump_on(Arc::clone(&store) as Arc<dyn HistoryStore>);
    let old = support::start(&pump, &p("say", "one")).await;
    let at = pump.history(old).await.unwrap()[0].seq;
    let base = support::serve(&pump, TOKEN, 64 * 1024).await;

    // Bad edits are refused with a problem naming what is wrong, and start nothing.
    for (payload, status, code, names) in [
        (
            "<say xmlns=\"urn:test:v1\">two",
            400,
            "invalid-payload",
            "edited message",
        ),
        ("hello", 400, "invalid-payload", "edited message"),
        ("<shout xmlns=\"urn:test:v1\"/>", 422, "refused", "echo"),
        // Checked as a post is: an element only the pump emits is refused, not delivered.
        (
            "<say xmlns=\"urn:test:v1\"><halt xmlns=\"urn:agentpump:system:v1\"/></say>",
            422,
            "refused",
            "only the pump emits",
        ),
    ] {
        let body = serde_json::json!({ "at": at, "payload": payload });
        let (got, problem) = support::problem(post_fork(&base, old, body).await).await;
        assert_eq!(
            (got.as_u16(), problem["code"].as_str()),
            (status, Some(code)),
            "{payload}: {problem}"
        );
        assert!(
            problem["detail"].as_str().unwrap().contains(names),
            "{payload}: {problem}"
        );
    }

    // An unchanged message is no edit; a changed one is delivered and answered.
    let same = serde_json::json!({ "at": at, "payload": p("say", "one") });
    let same: serde_json::Value = post_fork(&base, old, same).await.json().await.unwrap();
    let same: ThreadId = same["thread"].as_str().unwrap().parse().unwrap();
    pump.settle(same).await;
    assert!(
        !pump.history(same).await.unwrap()[0]
            .payload
            .contains("edited=")
    );
    let edit = p("say", "two");
    let answer = post_fork(&base, old, serde_json::json!({ "at": at, "payload": edit })).await;
    assert_eq!(answer.status(), 201);
    let answer: serde_json::Value = answer.json().await.unwrap();
    let fork: ThreadId = answer["thread"].as_str().unwrap().parse().unwrap();
    pump.settle(fork).await;
    let records = pump.history(fork).await.unwrap();
    let sha = {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(edit.as_bytes()))
    };
    assert!(
        records[0].payload.contains(&format!("edited=\"{sha}\"")),
        "{}",
        records[0].payload
    );
    assert_eq!(&*records[1].payload, edit, "the edit is delivered");
    assert_eq!(
        support::egress(&pump, fork).await,
        std::slice::from_ref(&edit),
        "and answered"
    );
    pump.shutdown(std::time::Duration::from_secs(5)).await;
    store.close().unwrap();

    // verify proves both forks; a forged edit is named.
    let (ok, out, err) = support::agentpump_in(&dir.0, &["verify", "--db", "history.db"]);
    assert!(ok, "{err}");
    assert!(out.contains("2 forks verified"), "{out}");
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    conn.execute(
        "UPDATE records SET payload = ?1 WHERE seq = ?2",
        rusqlite::params![p("say", "three"), records[1].seq as i64],
    )
    .unwrap();
    drop(conn);
    support::reseal(&dir.db(), fork).await;
    let (ok, _, err) = support::agentpump_in(&dir.0, &["verify", "--db", "history.db"]);
    assert!(!ok, "a forged edit passed verify");
    assert!(
        err.contains(&format!(
            "fork {fork}: record {} is not the edited message the fork names",
            records[1].seq
        )),
        "{err}"
    );
}
