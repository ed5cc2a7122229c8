//! Errors with a way forward (issue 47): each names what to do next, through the CLI or the
//! HTTP API as a user meets it.

use crate::support;

use std::sync::Arc;

use agentpump::history::MemoryHistory;
use reqwest::StatusCode;
use support::{Scratch, agentpump_in, echo_pump, problem, serve};

const TOKEN: &str = "errors-token";

/// `agentpump run ARGS` in `dir`, expected to fail: its stderr.
fn run_fails(dir: &Scratch, args: &[&str]) -> String {
    let mut all = vec!["run"];
    all.extend_from_slice(args);
    let (ok, _, err) = agentpump_in(&dir.0, &all);
    assert!(!ok, "agentpump {all:?} must fail: {err}");
    err
}

#[test]
fn a_port_in_use_names_port_and_server_bind() {
    let dir = Scratch::new("errors-port");
    dir.write("organism.toml", "[store]\npath = \"history.db\"\n");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let err = run_fails(&dir, &["organism.toml", "--port", &port]);
    for words in ["cannot listen", "--port N", "--bind", "[server] bind"] {
        assert!(err.contains(words), "`{words}` missing: {err}");
    }
}

#[test]
fn a_missing_organism_points_to_demo_and_run_help() {
    let dir = Scratch::new("errors-no-organism");
    let err = run_fails(&dir, &[]);
    for words in [
        "organism.toml: no such organism file",
        "`agentpump demo`",
        "`agentpump run --help`",
    ] {
        assert!(err.contains(words), "`{words}` missing: {err}");
    }
}

/// A task project's organism names the orchestrator `tasks`; another names a peer nobody is.
#[test]
fn an_unknown_peer_names_its_line_and_a_task_project_says_tasks_run() {
    let dir = Scratch::new("errors-peer");
    let organism = |peer: &str| {
        format!(
            "[store]\npath = \"history.db\"\n\n[[listener]]\nname = \"worker\"\nkind = \"builtin\"\nbuiltin = \"echo\"\naccepts = [\"{{urn:example:say:v1}}say\"]\npeers = [\"{peer}\"]\n"
        )
    };
    let cases = [
        ("tasks", "run it with `agentpump tasks run --root DIR`"),
        ("nobody", "a peer is a listener of this organism (worker)"),
    ];
    for (peer, words) in cases {
        dir.write("organism.toml", &organism(peer));
        let err = run_fails(&dir, &["organism.toml", "--port", "0"]);
        let first = format!("organism.toml:9: listener `worker` names unknown peer `{peer}`");
        assert!(err.contains(&first), "{err}");
        assert!(err.contains(words), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_says_what_to_post_instead() {
    let pump = echo_pump(Arc::new(MemoryHistory::new()));
    let base = serve(&pump, TOKEN, 1 << 20).await;
    let post = |body: &'static str| {
        support::http_client()
            .post(format!("{base}/threads"))
            .bearer_auth(TOKEN)
            .body(body)
            .send()
    };
    // A payload without its namespace: the root of that name a listener accepts, and how.
    let (status, body) = problem(post("<say>hi</say>").await.unwrap()).await;
    let detail = body["detail"].as_str().unwrap();
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{detail}");
    assert!(
        detail.contains("no listener accepts say;")
            && detail.contains("{urn:example:say:v1}say (by echo)")
            && detail.contains("xmlns=\"urn:example:say:v1\""),
        "{detail}"
    );
    // JSON: the API takes XML, with an example.
    let (status, body) = problem(post(r#"{"say": "hi"}"#).await.unwrap()).await;
    let detail = body["detail"].as_str().unwrap();
    assert_eq!(status, StatusCode::BAD_REQUEST, "{detail}");
    assert!(
        detail.contains("the API takes XML, not JSON")
            && detail.contains("<say xmlns=\"urn:example:say:v1\">hello</say>"),
        "{detail}"
    );
}
