//! The HTTP API with a real client on loopback: every route, auth, limits, problem JSON, SSE,
//! and `agentpump run` stopping cleanly on SIGTERM under load.

mod support;

use std::sync::Arc;
use std::time::Duration;

use agentpump::governor::{Budget, GovernorPolicy};
use agentpump::history::{HistoryStore, MemoryHistory, SqliteHistory};
use agentpump::host::server;
use agentpump::listeners::Echo;
use agentpump::{PumpBuilder, PumpConfig, PumpHandle, Registration, Role, ThreadId};
use reqwest::StatusCode;
use support::{Script, p, problem, q};

const TOKEN: &str = "test-token-0123456789";

struct Api {
    base: String,
    client: reqwest::Client,
    pump: PumpHandle,
    store: Arc<dyn HistoryStore>,
}

impl Api {
    async fn start() -> Self {
        let store: Arc<dyn HistoryStore> = Arc::new(MemoryHistory::new());
        let looper = Registration::new(
            "looper",
            Script::new(|msg, cx| {
                if !msg.is_system() {
                    cx.emit(p("tick", &agentpump::MessageId::new().to_string()));
                }
                Ok(())
            }),
        )
        .accepts(q("tick"))
        .role(Role::Agent);
        let governor = GovernorPolicy {
            budget: Budget {
                turns: Some(6),
                ..GovernorPolicy::default_budget()
            },
            ..GovernorPolicy::default()
        };
        let pump = PumpBuilder::new()
            .history(Arc::clone(&store))
            .config(PumpConfig {
                governor,
                ..PumpConfig::default()
            })
            .register(Registration::new("echo", Echo).accepts(q("say")))
            .register(looper)
            .build()
            .unwrap();
        let base = support::serve(&pump, TOKEN, 64 * 1024).await;
        Self {
            base,
            client: support::http_client(),
            pump,
            store,
        }
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client
            .get(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
    }

    fn post(&self, path: &str, body: impl Into<reqwest::Body>) -> reqwest::RequestBuilder {
        self.client
            .post(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .body(body)
    }

    async fn records(&self) -> usize {
        let mut n = 0;
        for t in self.pump.threads() {
            n += self.store.thread(t.id, 0).await.unwrap().len();
        }
        n
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_route_works_with_the_token() {
    let api = Api::start().await;
    let created: serde_json::Value = api
        .post("/threads", p("say", "hello"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let thread: ThreadId = created["thread"].as_str().unwrap().parse().unwrap();
    api.pump.settle(thread).await;
    let r = api
        .post(&format!("/threads/{thread}/messages"), p("say", "again"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    api.pump.settle(thread).await;

    let history: Vec<agentpump::history::Record> = api
        .get(&format!("/threads/{thread}/history"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(history.len(), 4);
    let xml = api
        .get(&format!("/threads/{thread}/history?format=xml"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        xml.starts_with("<history xmlns=\"urn:agentpump:history:v1\">")
            && xml.matches("<record ").count() == 4
    );
    let listed: Vec<agentpump::ThreadInfo> = api
        .get("/threads?state=idle")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(listed.iter().any(|t| t.id == thread));
    let one: agentpump::ThreadInfo = api
        .get(&format!("/threads/{thread}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(one.counters.deliveries, 2);
    let tree: Vec<agentpump::ThreadInfo> = api
        .get(&format!("/threads/{thread}/tree"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(tree.len(), 1);
    // The governor's live budget lines: two turns spent so far.
    let budget: serde_json::Value = api
        .get(&format!("/threads/{thread}/budget"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(budget["max-turns"]["spent"], "2", "{budget}");
    assert_eq!(budget["max-turns"]["reserved"], "0", "{budget}");

    // An AgentServer envelope starts a thread too.
    let envelope = format!(
        r#"<message xmlns="https://xml-pipeline.org/ns/envelope/v1"><meta><to>echo</to></meta>{}</message>"#,
        p("say", "legacy")
    );
    assert_eq!(
        api.post("/threads", envelope)
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::CREATED
    );

    // Stop, report, resume.
    assert_eq!(
        api.post(&format!("/threads/{thread}/stop"), "")
            .send()
            .await
            .unwrap()
            .status(),
        StatusCode::ACCEPTED
    );
    let report: agentpump::governor::HaltingReport = api
        .get(&format!("/threads/{thread}/report"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("BACKPRESSURE", "stop-request")
    );
    let (status, body) = problem(
        api.post(&format!("/threads/{thread}/messages"), p("say", "x"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::CONFLICT, Some("thread-closed"))
    );
    let r = api
        .post(&format!("/threads/{thread}/resume"), r#"{"turns": 10}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    assert_eq!(
        api.pump.thread(thread).unwrap().state,
        agentpump::ThreadState::Idle
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_problem_json_and_the_unauthorized_leave_no_trace() {
    let api = Api::start().await;
    let before = api.records().await;
    for request in [
        api.client
            .post(format!("{}/threads", api.base))
            .body(p("say", "no token")),
        api.client
            .post(format!("{}/threads", api.base))
            .bearer_auth("wrong")
            .body(p("say", "bad token")),
        api.client.get(format!("{}/threads", api.base)),
    ] {
        let (status, body) = problem(request.send().await.unwrap()).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::UNAUTHORIZED, Some("unauthorized"))
        );
    }
    assert_eq!(
        api.records().await,
        before,
        "nothing recorded for unauthorized requests"
    );

    let (status, body) = problem(
        api.post("/threads", "x".repeat(65 * 1024))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");

    let system = api.pump.system_thread();
    let before = api.store.thread(system, 0).await.unwrap().len();
    let (status, body) = problem(
        api.post(
            "/threads",
            "<message xmlns='urn:agentpump:envelope:v1'><meta></message>",
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("malformed-xml"))
    );
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("malformed XML at line 1, column"),
        "{body}"
    );
    let recorded = api.store.thread(system, 0).await.unwrap();
    assert_eq!(recorded.len(), before + 1);
    assert_eq!(recorded.last().unwrap().root.local(), "huh");

    let unknown = ThreadId::new();
    let (status, body) = problem(
        api.get(&format!("/threads/{unknown}/history"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown-thread"))
    );
    let (status, _) = problem(
        api.post(&format!("/threads/{unknown}/messages"), p("say", "x"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, body) = problem(api.get("/threads/not-a-uuid").send().await.unwrap()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("malformed-thread-id"))
    );
    let (status, body) = problem(
        api.post("/threads", "<nobody xmlns='urn:none'/>")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("unknown-root"))
    );
    assert!(body["answer"].as_str().unwrap().contains("<huh"), "{body}");

    // A broken envelope posted into a thread is refused and recorded, not posted whole.
    let created: serde_json::Value = api
        .post("/threads", p("say", "hello"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let thread: ThreadId = created["thread"].as_str().unwrap().parse().unwrap();
    api.pump.settle(thread).await;
    let before_thread = api.pump.history(thread).await.unwrap();
    let before_system = api.store.thread(system, 0).await.unwrap().len();
    let (status, body) = problem(
        api.post(
            &format!("/threads/{thread}/messages"),
            "<message xmlns='urn:agentpump:envelope:v1'><meta></message>",
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("malformed-xml"))
    );
    assert_eq!(api.pump.history(thread).await.unwrap(), before_thread);
    let recorded = api.store.thread(system, 0).await.unwrap();
    assert_eq!(recorded.len(), before_system + 1);
    assert_eq!(recorded.last().unwrap().root.local(), "huh");

    // A method a route does not take and a query that does not parse are problem JSON too.
    let (status, body) = problem(
        api.client
            .delete(format!("{}/threads", api.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::METHOD_NOT_ALLOWED, Some("method-not-allowed"))
    );
    let (status, body) = problem(
        api.get("/threads?state=done&state=halted")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad-query")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_arrive_in_order_and_end_when_the_thread_halts() {
    let api = Api::start().await;
    let created: serde_json::Value = api
        .post("/threads", p("tick", "start"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let thread = created["thread"].as_str().unwrap().to_owned();
    let response = api
        .get(&format!("/threads/{thread}/events"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let body = tokio::time::timeout(Duration::from_secs(10), response.text())
        .await
        .expect("the stream ends")
        .unwrap();
    let records: Vec<agentpump::history::Record> = events(&body, "record")
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert!(records.windows(2).all(|w| w[0].seq < w[1].seq), "in order");
    let all = api.pump.history(thread.parse().unwrap()).await.unwrap();
    assert_eq!(records, all, "every record, once");
    assert_eq!(records.last().unwrap().root.local(), "halt");
    // The last event says the thread settled, and how.
    let settled = events(&body, "settled");
    assert_eq!(settled.len(), 1, "{body}");
    let settled: serde_json::Value = serde_json::from_str(settled[0]).unwrap();
    assert_eq!(
        (settled["state"].as_str(), settled["seq"].as_u64()),
        (Some("halted"), Some(records.last().unwrap().seq))
    );
    assert!(
        body.trim_end().ends_with('}')
            && body.trim_end().rfind("event: settled") > body.rfind("event: record")
    );
}

/// The data of each event named `name` in an event-stream body.
fn events<'a>(body: &'a str, name: &str) -> Vec<&'a str> {
    body.split("\n\n")
        .filter(|e| e.lines().any(|l| l == format!("event: {name}")))
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .collect()
}

/// Reads `response` until an event named `name` has arrived (or 10 s pass).
async fn read_until(response: &mut reqwest::Response, name: &str) -> String {
    let mut body = String::new();
    let wanted = format!("event: {name}");
    while !body.contains(&wanted) {
        let chunk = tokio::time::timeout(Duration::from_secs(10), response.chunk())
            .await
            .unwrap_or_else(|_| panic!("no {name} event in 10 s: {body}"))
            .unwrap()
            .unwrap_or_else(|| panic!("the stream ended before {name}: {body}"));
        body.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_say_when_the_thread_settles_and_resume_after_last_event_id() {
    let api = Api::start().await;
    let created: serde_json::Value = api
        .post("/threads", p("say", "hi"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let thread = created["thread"].as_str().unwrap().to_owned();
    let path = format!("/threads/{thread}/events");
    let mut response = api.get(&path).send().await.unwrap();
    let body = read_until(&mut response, "settled").await;
    let seqs: Vec<u64> = events(&body, "record")
        .iter()
        .map(|d| {
            serde_json::from_str::<agentpump::history::Record>(d)
                .unwrap()
                .seq
        })
        .collect();
    assert_eq!(seqs.len(), 2, "the say and its echo: {body}");
    let settled: serde_json::Value = serde_json::from_str(events(&body, "settled")[0]).unwrap();
    assert_eq!(settled["state"], "idle", "{body}");
    assert_eq!(settled["seq"], seqs[1], "{body}");
    // After another message, the stream goes on and settles again.
    api.post(&format!("/threads/{thread}/messages"), p("say", "again"))
        .send()
        .await
        .unwrap();
    let more = read_until(&mut response, "settled").await;
    assert_eq!(events(&more, "record").len(), 2, "{more}");
    drop(response);
    // A client that reconnects with Last-Event-ID gets only what came after it.
    let mut resumed = api
        .get(&path)
        .header("Last-Event-ID", seqs[0].to_string())
        .send()
        .await
        .unwrap();
    let body = read_until(&mut resumed, "settled").await;
    let again: Vec<u64> = events(&body, "record")
        .iter()
        .map(|d| {
            serde_json::from_str::<agentpump::history::Record>(d)
                .unwrap()
                .seq
        })
        .collect();
    assert_eq!(again.len(), 3, "{body}");
    assert!(again[0] == seqs[1] && again[0] > seqs[0], "{body}");
    let (status, problem) = support::problem(
        api.get(&path)
            .header("Last-Event-ID", "yesterday")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, problem["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad-last-event-id"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_after_a_seq_skip_what_a_page_already_shows() {
    let api = Api::start().await;
    let thread = support::start(&api.pump, &p("tick", "start")).await;
    let all = api.pump.history(thread).await.unwrap();
    assert!(all.len() > 4);
    let body = api
        .get(&format!("/threads/{thread}/events?after={}", all[2].seq))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let seqs: Vec<u64> = body
        .lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .map(|id| id.parse().unwrap())
        .collect();
    let expected: Vec<u64> = all[3..].iter().map(|r| r.seq).collect();
    assert_eq!(seqs, expected);
    let r = api
        .get(&format!("/threads/{thread}/events?after=x"))
        .send()
        .await
        .unwrap();
    let (status, body) = problem(r).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad-query"))
    );
}

/// The viewer's sign-in: the page itself needs no token, its data does; the token is exchanged
/// for an HttpOnly, SameSite=Strict cookie that the API then accepts like the bearer header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_viewer_trades_the_token_for_a_cookie_the_api_accepts() {
    let api = Api::start().await;
    let thread = support::start(&api.pump, &p("say", "hi")).await;
    let page = api
        .client
        .get(format!("{}/", api.base))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    assert!(
        page.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'self'")
    );
    assert!(
        page.text()
            .await
            .unwrap()
            .contains(r#"<script type="module" src="/viewer.js">"#)
    );
    for path in [
        "/viewer.js",
        "/dom.js",
        "/panels.js",
        "/process.js",
        "/tasks.js",
        "/xml.js",
        "/plot.js",
        "/viewer.css",
    ] {
        let r = api
            .client
            .get(format!("{}{path}", api.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
    }
    let anonymous = api
        .client
        .get(format!("{}/view/threads", api.base))
        .send()
        .await
        .unwrap();
    let (status, _) = problem(anonymous).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "no token, no data");

    let session = |token: &str| {
        api.client
            .post(format!("{}/session", api.base))
            .json(&serde_json::json!({ "token": token }))
            .send()
    };
    let (status, body) = problem(session("wrong").await.unwrap()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::UNAUTHORIZED, Some("unauthorized"))
    );
    let r = session(TOKEN).await.unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    for part in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    let pair = cookie.split(';').next().unwrap().to_owned();
    let with = |path: &str, cookie: &str| {
        api.client
            .get(format!("{}{path}", api.base))
            .header("cookie", format!("theme=dark; {cookie}"))
            .send()
    };
    for path in [
        "/view/threads",
        "/threads",
        &format!("/view/threads/{thread}"),
        &format!("/view/threads/{thread}/process"),
        "/view/tasks",
    ] {
        assert_eq!(
            with(path, &pair).await.unwrap().status(),
            StatusCode::OK,
            "{path}"
        );
    }
    let page: serde_json::Value = with("/view/threads", &pair)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        page["threads"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == thread.to_string())
    );
    let (status, _) = problem(
        with("/view/threads", "agentpump_token=guess")
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a wrong cookie is refused"
    );
    let r = api
        .client
        .delete(format!("{}/session", api.base))
        .send()
        .await
        .unwrap();
    assert!(
        r.headers()["set-cookie"]
            .to_str()
            .unwrap()
            .contains("Max-Age=0")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_open_event_streams_instead_of_waiting_for_them() {
    let pump = PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap();
    // An echo thread stays open after its echo: a follower of it would wait forever.
    let thread = support::start(&pump, &p("say", "hi")).await;
    pump.settle(thread).await;
    assert!(!pump.thread(thread).unwrap().state.is_closed());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(server::serve(listener, pump.clone(), TOKEN, 1024, async {
        let _ = stopped.await;
    }));
    let response = support::http_client()
        .get(format!("{base}/threads/{thread}/events"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    stop.send(()).unwrap();
    let body = tokio::time::timeout(Duration::from_secs(10), response.text())
        .await
        .expect("the stream ends at shutdown")
        .unwrap();
    assert_eq!(body.matches("event: record").count(), 2, "{body}");
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server stops")
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stream_whose_history_breaks_says_so_and_ends() {
    let dir = support::Scratch::new("events-broken");
    let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let pump = PumpBuilder::new()
        .history(store)
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap();
    let thread = support::start(&pump, &p("say", "hi")).await;
    pump.settle(thread).await;
    let base = support::serve(&pump, TOKEN, 1024).await;
    // The history becomes unreadable under the open stream.
    rusqlite::Connection::open(dir.db())
        .unwrap()
        .execute_batch("ALTER TABLE records RENAME TO gone;")
        .unwrap();
    let response = support::http_client()
        .get(format!("{base}/threads/{thread}/events"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    let body = tokio::time::timeout(Duration::from_secs(10), response.text())
        .await
        .expect("the stream ends")
        .unwrap();
    assert!(
        body.contains("event: error") && body.contains("\"code\":\"history-unavailable\""),
        "{body}"
    );
}

#[test]
fn sigterm_under_load_exits_cleanly_and_loses_nothing_acknowledged() {
    let dir = std::env::temp_dir().join(format!("agentpump-run-{}", ThreadId::new()));
    std::fs::create_dir_all(&dir).unwrap();
    let organism = dir.join("organism.toml");
    std::fs::write(
        &organism,
        "[store]\npath = \"history.db\"\n\
         [[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\naccepts = [\"{urn:test:v1}say\"]\n",
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .args(["run", organism.to_str().unwrap(), "--port", "0"])
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let ready = lines.next().unwrap().unwrap();
    let base = support::listening_on(&ready);
    let token = support::token_in(&dir);
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(dir.join("agentpump.token"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(
        mode & 0o777,
        0o600,
        "the generated token is readable only by its owner"
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let acked: Vec<String> = runtime.block_on(async {
        let client = support::http_client();
        let senders: Vec<_> = (0..8)
            .map(|i| {
                let (client, base, token) = (client.clone(), base.clone(), token.clone());
                tokio::spawn(async move {
                    let mut acked = Vec::new();
                    for n in 0..40 {
                        let sent = client
                            .post(format!("{base}/threads"))
                            .bearer_auth(&token)
                            .body(p("say", &format!("{i}-{n}")))
                            .send()
                            .await;
                        match sent {
                            Ok(r) if r.status() == StatusCode::CREATED => {
                                let v: serde_json::Value = r.json().await.unwrap();
                                acked.push(v["ids"][0].as_str().unwrap().to_owned());
                            }
                            _ => break, // the server is going away: fine, as long as acknowledged ones are kept
                        }
                    }
                    acked
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(150)).await;
        std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        let mut acked = Vec::new();
        for s in senders {
            acked.extend(s.await.unwrap());
        }
        acked
    });
    let mut logs = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut logs).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "exit status {status}");
    // Logs to a pipe: no colour codes, and one info line per request.
    assert!(!logs.contains('\u{1b}'), "{logs}");
    assert!(
        logs.lines()
            .filter(|l| l.contains("INFO")
                && l.contains("path=/threads")
                && l.contains("status=201"))
            .count()
            >= acked.len(),
        "{logs}"
    );
    assert!(!acked.is_empty());
    // Stopped by a signal, the host closed its store: the database file alone holds it all.
    let wal = std::fs::metadata(dir.join("history.db-wal")).map_or(0, |m| m.len());
    assert_eq!(wal, 0, "the write-ahead log was checkpointed into the file");
    std::fs::create_dir_all(dir.join("copy")).unwrap();
    std::fs::copy(dir.join("history.db"), dir.join("copy/history.db")).unwrap();
    let store = SqliteHistory::open_read_only(dir.join("copy/history.db")).unwrap();
    runtime.block_on(async {
        store.verify().await.unwrap();
        for id in &acked {
            assert!(
                store.record(id.parse().unwrap()).await.unwrap().is_some(),
                "acknowledged {id} is in history"
            );
        }
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_talks_to_a_running_host() {
    let api = Api::start().await;
    let dir = std::env::temp_dir().join(format!("agentpump-cli-{}", ThreadId::new()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("hello.xml");
    std::fs::write(&file, p("say", "from the cli")).unwrap();
    let base = api.base.clone();
    let cli = move |args: Vec<String>| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
            .args(&args)
            .args(["--url", &base, "--token", TOKEN])
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    };
    let run = |args: &[&str]| {
        let cli = cli.clone();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        async move {
            tokio::task::spawn_blocking(move || cli(args))
                .await
                .unwrap()
        }
    };
    let (ok, out, err) = run(&["send", file.to_str().unwrap()]).await;
    assert!(ok, "{err}");
    let sent: serde_json::Value = serde_json::from_str(&out).unwrap();
    let thread = sent["thread"].as_str().unwrap().to_owned();
    api.pump.settle(thread.parse().unwrap()).await;
    let (ok, out, _) = run(&["history", &thread]).await;
    assert!(
        ok && out.contains("echo -> client  [out]") && out.contains("from the cli"),
        "{out}"
    );
    let (ok, out, _) = run(&["threads"]).await;
    assert!(ok && out.contains(&thread));
    assert!(out.starts_with("ID "), "a table, as from a file: {out}");
    let (ok, out, _) = run(&["threads", "--format", "json"]).await;
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        ok && listed
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["id"] == thread.as_str())
    );
    let (ok, out, err) = run(&["history", &thread[..8], "--tree"]).await;
    assert!(
        ok && out.starts_with(&format!("== thread {} [idle]", &thread[..8])),
        "{out}{err}"
    );
    // One format name, one shape: json is an array, jsonl one object per line.
    let (_, json, _) = run(&["history", &thread, "--format", "json"]).await;
    let (_, jsonl, _) = run(&["history", &thread, "--format", "jsonl"]).await;
    let records: Vec<agentpump::history::Record> = serde_json::from_str(&json).unwrap();
    assert_eq!(records.len(), jsonl.lines().count());
    let (ok, _, _) = run(&["stop", &thread]).await;
    assert!(ok);
    let (ok, out, err) = run(&["report", &thread]).await;
    let reports: Vec<agentpump::governor::HaltingReport> =
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    assert!(
        ok && reports.len() == 1 && reports[0].stop_reason == "stop-request",
        "{out}"
    );
    let (_, out, _) = run(&["threads"]).await;
    let row = out.lines().find(|l| l.contains(&thread)).unwrap();
    assert!(
        out.starts_with("ID ") && out.contains(" CLASS ") && row.contains("BACKPRESSURE"),
        "{out}"
    );
    let (ok, out, _) = run(&["resume", &thread, "--turns", "5"]).await;
    assert!(ok && out.contains("resumed"), "{out}");
    // This host keeps its history in memory: pruning it is refused, saying so.
    let (ok, _, err) = run(&["history", "prune", "--keep-days", "0"]).await;
    assert!(
        !ok && err.contains("does not prune") && err.contains("(unsupported, HTTP 501)"),
        "{err}"
    );
    let (ok, _, err) = run(&["stop", &ThreadId::new().to_string()]).await;
    assert!(
        !ok && err.starts_with("agentpump: no thread")
            && err.contains("(unknown-thread, HTTP 404)"),
        "{err}"
    );
    // A `--to` with characters that mean something in a URL reaches the host intact.
    let (ok, _, err) = run(&["send", file.to_str().unwrap(), "--to", "no body&to=echo"]).await;
    assert!(
        !ok && err.contains("no body&to=echo") && err.contains("no-route"),
        "{err}"
    );
    // `send --wait` waits for the thread to settle and prints what came back.
    let (ok, out, err) = run(&["send", file.to_str().unwrap(), "--wait"]).await;
    assert!(
        ok && out.contains("echo -> client") && out.contains("from the cli"),
        "{out}{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_cli_says_to_start_a_host_that_is_not_running() {
    let file = std::env::temp_dir().join(format!("agentpump-nohost-{}.xml", ThreadId::new()));
    std::fs::write(&file, p("say", "anyone?")).unwrap();
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    for args in [vec!["send", file.to_str().unwrap()], vec!["threads"]] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
            .args(&args)
            .args(["--url", &url, "--token", TOKEN])
            .output()
            .unwrap();
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            !out.status.success() && err.contains("start it with `agentpump run`"),
            "{args:?}: {err}"
        );
    }
    std::fs::remove_file(&file).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_keys_and_urls_are_refused_by_name() {
    let api = Api::start().await;
    let created: serde_json::Value = api
        .post("/threads", p("say", "hi"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let thread = created["thread"].as_str().unwrap().to_owned();
    api.pump.settle(thread.parse().unwrap()).await;
    api.pump.stop(thread.parse().unwrap()).await.unwrap();
    api.pump.settle(thread.parse().unwrap()).await;
    let resume = format!("/threads/{thread}/resume");
    let cases = [
        (
            api.post(&resume, r#"{"turnz": 10}"#),
            400,
            "unknown-key",
            "turnz",
        ),
        (api.get("/threads?stat=idle"), 400, "unknown-key", "stat"),
        (
            api.get(&format!("/threads/{thread}/history?formt=xml")),
            400,
            "unknown-key",
            "formt",
        ),
        (
            api.get(&format!("/threads/{thread}/tree?depth=1")),
            400,
            "unknown-key",
            "depth",
        ),
        (
            api.post("/threads?to=echo&too=x", p("say", "x")),
            400,
            "unknown-key",
            "too",
        ),
        (api.get("/thread"), 404, "unknown-url", "/thread"),
        (
            api.post("/threads?to=nobody", p("say", "x")),
            422,
            "no-route",
            "nobody",
        ),
    ];
    for (request, status, code, words) in cases {
        let (got, body) = problem(request.send().await.unwrap()).await;
        assert_eq!(
            (got.as_u16(), body["code"].as_str()),
            (status, Some(code)),
            "{body}"
        );
        assert!(body["detail"].as_str().unwrap().contains(words), "{body}");
    }
    // The refused resume resumed nothing.
    let info = api.pump.thread(thread.parse().unwrap()).unwrap();
    assert_eq!(info.state, agentpump::ThreadState::Halted);
}

/// Issue 14, "one ingress door": the HTTP API hands the body and the URL's thread to the pump,
/// which parses once with its own limits. An organism that raises `max_bytes` takes an envelope
/// over the default limit posted to a thread's URL, into that thread — the URL's thread wins
/// over the envelope's `<thread>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_envelope_posted_to_a_threads_url_lands_in_that_thread() {
    let limits = agentpump::Limits {
        max_bytes: 4 * 1024 * 1024,
        ..agentpump::Limits::default()
    };
    let pump = PumpBuilder::new()
        .config(PumpConfig {
            limits,
            ..PumpConfig::default()
        })
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap();
    let base = support::serve(&pump, "t0ken", 8 * 1024 * 1024).await;
    let thread = support::start(&pump, &p("say", "first")).await;
    let other = support::start(&pump, &p("say", "other")).await;
    let big = "x".repeat(agentpump::Limits::default().max_bytes + 1);
    let envelope = format!(
        r#"<message xmlns="urn:agentpump:envelope:v1"><meta><thread>{other}</thread></meta>{}</message>"#,
        p("say", &big)
    );
    let response = support::http_client()
        .post(format!("{base}/threads/{thread}/messages"))
        .bearer_auth("t0ken")
        .body(envelope)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status(),
        StatusCode::CREATED,
        "{:?}",
        response.text().await
    );
    pump.settle(thread).await;
    let landed = |records: &[agentpump::history::Record]| {
        records.iter().any(|r| r.payload.len() > big.len())
    };
    assert!(
        landed(&pump.history(thread).await.unwrap()),
        "in the URL's thread"
    );
    assert!(
        !landed(&pump.history(other).await.unwrap()),
        "not in the envelope's"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prune_on_a_live_host_needs_the_token_and_a_cut_and_keeps_every_chain_provable() {
    let dir = support::Scratch::new("http-prune");
    let store = Arc::new(SqliteHistory::open(dir.db()).unwrap());
    let pump = PumpBuilder::new()
        .history(Arc::clone(&store) as Arc<dyn HistoryStore>)
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap();
    let halted = support::start(&pump, &p("say", "old")).await;
    let open = support::start(&pump, &p("say", "open")).await;
    pump.stop(halted).await.unwrap();
    pump.settle(halted).await;
    let base = support::serve(&pump, TOKEN, 64 * 1024).await;
    let client = support::http_client();
    let prune = |token: Option<&str>, body: &str| {
        let request = client
            .post(format!("{base}/history/prune"))
            .body(body.to_owned());
        match token {
            Some(t) => request.bearer_auth(t),
            None => request,
        }
    };

    for token in [None, Some("wrong")] {
        let (status, body) =
            problem(prune(token, r#"{"keep_days": 0}"#).send().await.unwrap()).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::UNAUTHORIZED, Some("unauthorized"))
        );
    }
    assert!(
        store.anchors().await.unwrap().is_empty(),
        "nothing pruned without the token"
    );

    for (body, words) in [
        (
            r#"{"before": "2026-01-01", "keep_days": 3}"#,
            "exactly one of",
        ),
        ("{}", "exactly one of"),
        (r#"{"before": "soon"}"#, "`soon` is not a date"),
        ("keep everything", "expected"),
    ] {
        let (status, problem) = problem(prune(Some(TOKEN), body).send().await.unwrap()).await;
        assert_eq!(
            (status, problem["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some("bad-cut")),
            "{body}"
        );
        assert!(
            problem["detail"].as_str().unwrap().contains(words),
            "{body}: {problem}"
        );
    }

    // Keeping more days than there have been removes nothing (and does not overflow).
    let response = prune(Some(TOKEN), r#"{"keep_days": 4294967295}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let none: agentpump::history::Pruned = response.json().await.unwrap();
    assert_eq!((none.records, none.anchors.len()), (0, 0));

    // Prune while clients keep posting: appends wait for the prune's transaction, none is lost.
    let posting = {
        let pump = pump.clone();
        tokio::spawn(async move {
            let mut threads = Vec::new();
            for i in 0..100 {
                let r = pump
                    .post(None, None, &p("say", &i.to_string()))
                    .await
                    .unwrap();
                threads.push(r.thread());
            }
            threads
        })
    };
    let response = prune(Some(TOKEN), r#"{"keep_days": 0}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let pruned: agentpump::history::Pruned = response.json().await.unwrap();
    assert_eq!(pruned.anchors.len(), 1, "{pruned:?}");
    assert_eq!(pruned.anchors[0].thread, halted);
    for thread in posting.await.unwrap() {
        pump.settle(thread).await;
        assert_eq!(support::egress(&pump, thread).await.len(), 1);
    }
    assert!(store.thread(halted, 0).await.unwrap().is_empty());
    assert_eq!(
        store.thread(open, 0).await.unwrap().len(),
        2,
        "the open thread is untouched"
    );
    store.verify().await.unwrap();

    // The CLI's `--url` goes through the same route: the thread stopped now loses its records
    // (the halted one has nothing left to lose).
    pump.stop(open).await.unwrap();
    pump.settle(open).await;
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
            .args([
                "history",
                "prune",
                "--keep-days",
                "0",
                "--url",
                &base,
                "--token",
                TOKEN,
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("records of 1 threads before"), "{stdout}");
    assert!(store.thread(open, 0).await.unwrap().is_empty());
    store.verify().await.unwrap();

    // `--db` on the live host's file is a second writer: refused, naming the file, nothing
    // pruned (the host's docs say to prune through its API).
    let db = dir.db();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
            .args(["history", "prune", "--keep-days", "0", "--db"])
            .arg(&db)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("already open for writing"),
        "{stderr}"
    );
    store.verify().await.unwrap();
    pump.shutdown(Duration::from_secs(1)).await;
}

/// Every code a problem can carry — those the server writes and those of the system messages
/// the pump answers refused input with — is listed in docs/http-api.md's problem types.
#[test]
fn every_problem_type_is_documented() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = std::fs::read_to_string(root.join("docs/http-api.md")).unwrap();
    let listed = &docs[docs
        .find("## Problem types")
        .expect("a problem types section")..];
    let mut sources = vec![root.join("src/system/codes.rs")];
    let mut dirs = vec![root.join("src/host/server")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                sources.push(path);
            }
        }
    }
    let mut codes = Vec::new();
    for path in sources {
        let text = std::fs::read_to_string(&path).unwrap();
        let marker = if path.ends_with("codes.rs") {
            "=> \""
        } else {
            "Problem::new("
        };
        for (at, _) in text.match_indices(marker) {
            let rest = &text[at + marker.len()..];
            let rest = if marker == "=> \"" {
                rest
            } else {
                &rest[rest.find('"').unwrap() + 1..]
            };
            let code = &rest[..rest.find('"').unwrap()];
            if !code.is_empty() && code.bytes().all(|b| b.is_ascii_lowercase() || b == b'-') {
                codes.push(code.to_owned());
            }
        }
    }
    assert!(codes.len() > 40, "{codes:?}");
    let missing: Vec<_> = codes
        .iter()
        .filter(|c| !listed.contains(&format!("`{c}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "undocumented problem codes: {missing:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_cuts_off_slow_requests_after_its_time_limit() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let pump = PumpBuilder::new()
        .register(Registration::new("echo", Echo).accepts(q("say")))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let limit = Duration::from_millis(400);
    let extras = server::Extras {
        shutdown_timeout: limit,
        ..server::Extras::default()
    };
    let server = tokio::spawn(server::serve_with(
        listener,
        pump.clone(),
        TOKEN,
        1 << 20,
        extras,
        async {
            let _ = stopped.await;
        },
    ));
    // A client that promises a body and sends a little of it, then stalls: its request is in
    // flight, and graceful shutdown alone would wait for it forever.
    let mut uploading = tokio::net::TcpStream::connect(addr).await.unwrap();
    uploading
        .write_all(
            format!("POST /threads HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {TOKEN}\r\ncontent-length: 1000\r\n\r\n<say xmlns='urn:test:v1'>")
                .as_bytes(),
        )
        .await
        .unwrap();
    // And one stalled in the middle of its headers.
    let mut heading = tokio::net::TcpStream::connect(addr).await.unwrap();
    heading
        .write_all(b"GET /threads HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;

    let began = std::time::Instant::now();
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server stops although its clients stall")
        .unwrap()
        .unwrap();
    let took = began.elapsed();
    assert!(
        took >= limit,
        "slow requests get their time first ({took:?})"
    );
    assert!(took < limit + Duration::from_secs(3), "{took:?}");
    // The stalled upload was answered 503 shutting-down, as problem JSON.
    let mut answer = String::new();
    tokio::time::timeout(
        Duration::from_secs(5),
        uploading.read_to_string(&mut answer),
    )
    .await
    .expect("the connection is closed")
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(
        answer.contains("urn:agentpump:problem:shutting-down"),
        "{answer}"
    );
    pump.shutdown(Duration::from_secs(1)).await;
}

/// Issue 28: "the calculator given a deeply parenthesised `expression` (about 16 000 levels)
/// overflows the stack and aborts — anyone who can reach the calculator (a client with the
/// token, an LLM agent, a remote worker's output) can take the host down". Done when "a test
/// posts the deep calculator expression over HTTP to `agentpump run` and the host keeps
/// answering": in its own protocol and as a tool call, each answered with the limit and where.
#[test]
fn a_deep_calculator_expression_over_http_is_answered_and_the_host_keeps_serving() {
    let dir = std::env::temp_dir().join(format!("agentpump-calc-{}", ThreadId::new()));
    std::fs::create_dir_all(&dir).unwrap();
    let organism = dir.join("organism.toml");
    std::fs::write(
        &organism,
        "[[listener]]\nname = \"calculator\"\nkind = \"builtin\"\nbuiltin = \"calculator\"\n",
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .args(["run", organism.to_str().unwrap(), "--port", "0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(child.stdout.take().unwrap()));
    let ready = lines.next().unwrap().unwrap();
    let base = support::listening_on(&ready);
    let token = support::token_in(&dir);
    let deep = "(".repeat(16_000) + "1" + &")".repeat(16_000);
    let calc = |e: &str| format!(r#"<calc xmlns="urn:agentpump:calc:v1">{e}</calc>"#);
    let call = format!(
        r#"<call xmlns="urn:agentpump:tool:v1" tool="calculator" id="c1"><arg name="expression">{deep}</arg></call>"#
    );
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let answers: Vec<String> = runtime.block_on(async {
        let client = support::http_client();
        let mut answers = Vec::new();
        for body in [calc(&deep), call, calc("6 * 7")] {
            let posted = client
                .post(format!("{base}/threads?to=calculator"))
                .bearer_auth(&token)
                .body(body)
                .send()
                .await
                .expect("the host answers");
            assert_eq!(posted.status(), StatusCode::CREATED);
            let thread = posted.json::<serde_json::Value>().await.unwrap()["thread"]
                .as_str()
                .unwrap()
                .to_owned();
            let mut answer = String::new();
            for _ in 0..100 {
                let records: Vec<serde_json::Value> = client
                    .get(format!("{base}/threads/{thread}/history"))
                    .bearer_auth(&token)
                    .send()
                    .await
                    .expect("the host answers")
                    .json()
                    .await
                    .unwrap();
                if let Some(r) = records.iter().find(|r| r["from"] == "calculator") {
                    answer = r["payload"].as_str().unwrap().to_owned();
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            answers.push(answer);
        }
        answers
    });
    assert!(
        answers[0].contains("<calc-error")
            && answers[0].contains("nested deeper than 64 levels at position 65"),
        "{}",
        answers[0]
    );
    assert!(
        answers[1].contains(r#"type="invalid-argument""#)
            && answers[1].contains("nested deeper than 64 levels"),
        "{}",
        answers[1]
    );
    assert!(answers[2].contains(">42</result>"), "{}", answers[2]);
    assert!(
        child.try_wait().unwrap().is_none(),
        "the host is still running"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Host edges (issue 28)
// ---------------------------------------------------------------------------------------------

/// Issue 28: "`Authorization: bearer TOKEN` (lower case) is refused; auth schemes are
/// case-insensitive (RFC 9110 §11.1)." — on the API and the viewer's routes alike; a header of
/// another scheme is refused naming its scheme, never its credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auth_scheme_is_read_in_any_case() {
    let api = Api::start().await;
    for path in ["/threads", "/view/threads", "/health"] {
        for value in [
            format!("bearer {TOKEN}"),
            format!("BEARER {TOKEN}"),
            format!("BeArEr   {TOKEN}"),
        ] {
            let r = api
                .client
                .get(format!("{}{path}", api.base))
                .header("authorization", &value)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{path} with `{value}`");
        }
    }
    for (value, words) in [
        ("Basic dXNlcjpwYXNz", "`Basic …` is not `Bearer <token>`"),
        (TOKEN, "(one word, no scheme)"),
        ("bearer", "`bearer (no token)`"),
        ("bearer wrong", "wrong bearer token"),
    ] {
        let r = api
            .client
            .get(format!("{}/threads", api.base))
            .header("authorization", value)
            .send()
            .await
            .unwrap();
        let (status, body) = problem(r).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{value}");
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains(words), "{value}: {detail}");
        assert!(
            !detail.contains("dXNlcjpwYXNz") && !detail.contains(TOKEN),
            "{detail}"
        );
    }
}

/// Issue 28: "an unknown key in the prune body gets `bad-cut`, not the `unknown-key` every other
/// route gives; keys are spelled `keep_days` here and `tool-calls` there — pick one convention
/// and accept the other with a precise error." Every JSON body (resume, prune, the viewer's
/// sign-in) and every query takes snake_case keys; the other spelling is refused naming the
/// right one, and a wrong value is named by its key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_body_key_is_snake_case_and_another_spelling_is_named() {
    let api = Api::start().await;
    let thread = support::start(&api.pump, &p("say", "hi")).await;
    api.pump.stop(thread).await.unwrap();
    api.pump.settle(thread).await;
    let resume = format!("/threads/{thread}/resume");
    let cases = [
        (
            api.post(&resume, r#"{"tool-calls": 5}"#),
            "unknown-key",
            "`tool-calls` is spelled `tool_calls`",
        ),
        (
            api.post(&resume, r#"{"wall-clock": 1000}"#),
            "unknown-key",
            "`wall-clock` is spelled `wall_clock_ms`",
        ),
        (
            api.post(&resume, r#"{"Turns": 1}"#),
            "unknown-key",
            "`Turns` is spelled `turns`",
        ),
        (
            api.post(&resume, r#"{"turns": "ten"}"#),
            "bad-budget",
            "`turns` in POST /threads/{id}/resume",
        ),
        (
            api.post(&resume, "[10]"),
            "bad-budget",
            "takes a JSON object with the keys",
        ),
        (
            api.post("/history/prune", r#"{"keep-days": 3}"#),
            "unknown-key",
            "`keep-days` is spelled `keep_days`",
        ),
        (
            api.post("/history/prune", r#"{"keep_days": 3, "dry": true}"#),
            "unknown-key",
            "unknown JSON key `dry` for POST /history/prune; it takes: before, keep_days",
        ),
        (
            api.post("/session", r#"{"tokn": "x"}"#),
            "unknown-key",
            "unknown JSON key `tokn` for POST /session",
        ),
        (
            api.post("/session", "{}"),
            "bad-body",
            "POST /session: missing field `token`",
        ),
        (
            api.get("/threads?State=idle"),
            "unknown-key",
            "query key `State` is spelled `state`",
        ),
    ];
    for (request, code, words) in cases {
        let (status, body) = problem(request.send().await.unwrap()).await;
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "{body}"
        );
        assert!(
            body["detail"].as_str().unwrap().contains(words),
            "{words}: {body}"
        );
    }
    assert_eq!(
        api.pump.thread(thread).unwrap().state,
        agentpump::ThreadState::Halted,
        "nothing resumed it"
    );
    let turns = |pump: &PumpHandle| -> u64 {
        pump.budget(thread).unwrap()["max-turns"]
            .limit
            .as_deref()
            .unwrap()
            .parse()
            .unwrap()
    };
    let before = turns(&api.pump);
    let r = api
        .post(
            &resume,
            r#"{"turns": 2, "tool_calls": 5, "wall_clock_ms": 60000}"#,
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::ACCEPTED);
    assert_eq!(turns(&api.pump), before + 2);
}

/// Issue 28: "the same thread answers under several spellings (`{uuid}`, no hyphens,
/// `urn:uuid:`, upper case): one canonical URL per thread (redirect or refuse the rest,
/// precisely)." Every route with a thread id refuses every other spelling, 400
/// `non-canonical-thread-id` naming the canonical URL, and reads nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_has_one_url() {
    let api = Api::start().await;
    let thread = support::start(&api.pump, &p("say", "hi")).await;
    let canonical = thread.to_string();
    let spellings = [
        canonical.to_uppercase(),
        canonical.replace('-', ""),
        format!("urn:uuid:{canonical}"),
        format!("%7B{canonical}%7D"),
        format!("%20{canonical}"),
    ];
    let gets = [
        "", "/history", "/answers", "/tree", "/report", "/reports", "/budget", "/events",
    ];
    let views = ["", "/records", "/process", "/report"];
    let posts = ["/messages", "/stop", "/resume"];
    for id in &spellings {
        let mut requests: Vec<(String, reqwest::RequestBuilder)> = Vec::new();
        for tail in gets {
            let path = format!("/threads/{id}{tail}");
            requests.push((path.clone(), api.get(&path)));
        }
        for tail in views {
            let path = format!("/view/threads/{id}{tail}");
            requests.push((path.clone(), api.get(&path)));
        }
        for tail in posts {
            let path = format!("/threads/{id}{tail}");
            requests.push((path.clone(), api.post(&path, p("say", "again"))));
        }
        for (path, request) in requests {
            let (status, body) = problem(request.send().await.unwrap()).await;
            assert_eq!(
                (status, body["code"].as_str()),
                (StatusCode::BAD_REQUEST, Some("non-canonical-thread-id")),
                "{path}: {body}"
            );
            let detail = body["detail"].as_str().unwrap();
            assert!(
                detail.contains(&format!("`{canonical}` (lower case, hyphenated)")),
                "{path}: {detail}"
            );
        }
    }
    let (_, body) = problem(
        api.get(&format!("/threads/{}/history", spellings[0]))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(
        body["detail"].as_str().unwrap().ends_with(&format!(
            "this thread's URL is `/threads/{canonical}/history`"
        )),
        "{body}"
    );
    assert_eq!(
        api.pump.history(thread).await.unwrap().len(),
        2,
        "nothing was posted under another spelling"
    );
    assert_eq!(
        api.pump.thread(thread).unwrap().state,
        agentpump::ThreadState::Idle
    );
    // A URL whose id is not even text is refused as problem JSON too.
    let (status, body) = problem(api.get("/threads/%FF/history").send().await.unwrap()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("malformed-thread-id")),
        "{body}"
    );
    let r = api
        .get(&format!("/threads/{canonical}/history"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

/// Issue 28: "413 and query errors pass axum/serde wording through (\"Failed to buffer the
/// request body\") and do not name the limit." Every refusal of a body, a query, a path or a
/// method — on the API's routes and the viewer's — is our problem JSON naming the limit in
/// bytes, or the parameter and what it takes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_query_path_and_method_refusals_name_what_was_expected() {
    let api = Api::start().await;
    let thread = support::start(&api.pump, &p("say", "hi")).await;
    let delete = |path: &str| {
        api.client
            .delete(format!("{}{path}", api.base))
            .bearer_auth(TOKEN)
    };
    let cases = [
        (
            api.post("/threads", "x".repeat(65 * 1024)),
            413,
            "too-large",
            "the body is over the limit of 65536 bytes (`[server] max_body_bytes`)",
        ),
        (
            api.post("/session", "x".repeat(5 * 1024)),
            413,
            "too-large",
            "the body is over the limit of 4096 bytes",
        ),
        (
            api.get(&format!("/threads/{thread}/events?after=abc")),
            400,
            "bad-query",
            "query parameter `after` takes a whole number from 0 to 18446744073709551615; got `abc`",
        ),
        (
            api.get("/view/threads?limit=-1"),
            400,
            "bad-query",
            "query parameter `limit` takes a whole number from 0 to 18446744073709551615; got `-1`",
        ),
        (
            api.get(&format!(
                "/view/threads/{thread}/records?before=99999999999999999999"
            )),
            400,
            "bad-query",
            "query parameter `before` takes a whole number",
        ),
        (
            api.get("/threads?state=idle&state=done"),
            400,
            "bad-query",
            "query parameter `state` is given more than once",
        ),
        (
            api.get("/view/threads?stat=halted"),
            400,
            "unknown-key",
            "unknown query key `stat` for /view/threads; it takes: state, class, q, before, limit",
        ),
        (
            api.post(&format!("/threads/{thread}/resume"), "{turns: 1}"),
            400,
            "bad-budget",
            "the body is not JSON",
        ),
        (
            delete("/view/threads"),
            405,
            "method-not-allowed",
            "route does not take that method",
        ),
        (
            api.get("/session"),
            405,
            "method-not-allowed",
            "route does not take that method",
        ),
    ];
    for (request, status, code, words) in cases {
        let (got, body) = problem(request.send().await.unwrap()).await;
        assert_eq!(
            (got.as_u16(), body["code"].as_str()),
            (status, Some(code)),
            "{words}: {body}"
        );
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains(words), "{words}: {detail}");
        assert!(
            !detail.contains("Failed to") && !detail.contains("deserialize"),
            "{detail}"
        );
    }
}

/// `GET /threads/{id}/settled?wait_ms=N` (what `/mcp`'s `post` waits with through a
/// partitioned organism's front): it waits for the thread to settle and says its state; a wait
/// over the limit, an unknown thread and a misspelt key are refused by name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settled_waits_for_a_thread_and_refuses_what_it_cannot_wait_for() {
    let api = Api::start().await;
    // The looper iterates until its turn budget halts the thread.
    let created: serde_json::Value = api
        .post("/threads", p("tick", "0"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let thread = created["thread"].as_str().unwrap().to_owned();
    let settled: serde_json::Value = api
        .get(&format!("/threads/{thread}/settled?wait_ms=20000"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        settled,
        serde_json::json!({"thread": thread, "settled": true, "state": "halted"})
    );
    let refused = |path: String| {
        let request = api.get(&path);
        async move { problem(request.send().await.unwrap()).await }
    };
    let (status, body) = refused(format!("/threads/{thread}/settled?wait_ms=600001")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "bad-wait");
    assert_eq!(
        body["detail"],
        "`wait_ms` 600001 is over the limit of 600000"
    );
    let (status, body) = refused(format!("/threads/{}/settled", ThreadId::new())).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["code"], "unknown-thread");
    let (status, body) = refused(format!("/threads/{thread}/settled?wait=5")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "unknown-key", "{body}");
}

/// `agentpump send --wait` waits through `GET /threads/{id}/settled`: a thread whose listener
/// is still working when the wait is over is a failure naming the thread and the wait (the
/// message was accepted: the host keeps it and goes on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_wait_says_when_the_thread_has_not_settled_in_time() {
    let gate = support::Gate::new();
    let pump = PumpBuilder::new()
        .register(Registration::new("gate", gate.clone()).accepts(q("held")))
        .build()
        .unwrap();
    let base = support::serve(&pump, TOKEN, 1 << 20).await;
    let scratch = support::Scratch::new("cli-send-wait");
    let file = scratch.write("held.xml", &p("held", "hold on"));
    let send = move |secs: &'static str| {
        let (file, base) = (file.clone(), base.clone());
        move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
                .args([
                    "send",
                    file.to_str().unwrap(),
                    "--wait",
                    "--wait-secs",
                    secs,
                ])
                .args(["--url", &base, "--token", TOKEN])
                .output()
                .unwrap()
        }
    };
    let out = tokio::task::spawn_blocking(send("1")).await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("has not settled after 1 s (it, or a thread below it, still has work)"),
        "{err}"
    );
    let threads = pump.threads();
    let thread = threads.iter().find(|t| &*t.path != "system").unwrap().id;
    assert!(err.contains(&thread.to_string()), "{err}");
    // Let through, the thread settles with the answer: the message sent and the gate's reply.
    gate.open(2);
    let out = tokio::task::spawn_blocking(send("60")).await.unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("gate -> client"), "{text}");
}
