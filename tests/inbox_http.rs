//! A person in the loop (issue 31) against a real `agentpump run`: the organism's `ask` tool and
//! approvals, `GET /inbox` and `POST /inbox/{id}` with problem JSON, the `inbox` event, the
//! `inbox` and `answer` commands, and kill -9 between the request and the answer and between
//! the answer and the forwarded call.

mod support;

use std::io::BufRead as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use agentpump::tool::Call;
use agentpump::value::Value;
use reqwest::StatusCode;
use serde_json::{Value as Json, json};
use support::{Scratch, problem};

/// An organism whose `command` tool runs `echo` freely, and `rm`, `tee` and `flock` after
/// approval.
const ORGANISM: &str = "[store]\npath = \"history.db\"\n\n[tools.command]\nenabled = true\nallow = [\"rm\", \"echo\", \"tee\", \"flock\"]\napprove = [\"rm *\", \"tee *\", \"flock *\"]\n";

/// A running `agentpump run` on a loopback port, killed (SIGKILL) when dropped.
struct Host {
    child: Child,
    base: String,
    token: String,
    dir: PathBuf,
    client: reqwest::Client,
}

impl Host {
    /// Starts `agentpump run` on `dir/organism.toml`.
    fn start(dir: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentpump"))
            .args(["run", "organism.toml", "--port", "0"])
            .current_dir(dir)
            // Its own process group: kill -9 takes the commands it runs with it.
            .process_group(0)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let ready = lines.next().unwrap().unwrap();
        let base = support::listening_on(&ready);
        // Keep reading stdout so the host never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let token = support::token_in(dir);
        Self {
            child,
            base,
            token,
            dir: dir.to_owned(),
            client: support::http_client(),
        }
    }

    /// Kills the host and every command it runs (its process group) with SIGKILL.
    fn kill9(mut self) {
        let group = format!("-{}", self.child.id());
        let killed = Command::new("kill").args(["-9", "--", &group]).status();
        assert!(killed.unwrap().success());
        self.child.wait().unwrap();
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.client
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    fn post(&self, path: &str, body: impl Into<reqwest::Body>) -> reqwest::RequestBuilder {
        self.client
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .body(body)
    }

    /// Posts `payload` into a new thread; its id.
    async fn start_thread(&self, payload: &str) -> String {
        let r = self
            .post("/threads", payload.to_owned())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        let body: Json = r.json().await.unwrap();
        body["thread"].as_str().unwrap().to_owned()
    }

    /// `GET /inbox{query}` as JSON.
    async fn inbox(&self, query: &str) -> Vec<Json> {
        let r = self.get(&format!("/inbox{query}")).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        r.json().await.unwrap()
    }

    /// Waits until `thread` has `n` open requests; returns them.
    async fn open(&self, thread: &str, n: usize) -> Vec<Json> {
        for _ in 0..200 {
            let open = self.inbox(&format!("?thread={thread}")).await;
            if open.len() == n {
                return open;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("thread {thread} never had {n} open requests");
    }

    /// Waits until the thread is in `state`; fails naming the last state seen.
    async fn reaches(&self, thread: &str, state: &str) {
        let mut seen = String::new();
        for _ in 0..200 {
            let r = self
                .get(&format!("/threads/{thread}"))
                .send()
                .await
                .unwrap();
            let body: Json = r.json().await.unwrap();
            seen = body["state"].as_str().unwrap_or_default().to_owned();
            if seen == state {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("thread {thread} stayed {seen}, never {state}");
    }

    /// Waits until `thread`'s history holds a record whose payload contains `text`.
    async fn wait_for(&self, thread: &str, text: &str) -> Vec<Json> {
        for _ in 0..200 {
            let r = self.get(&format!("/threads/{thread}/history")).send().await;
            let records: Vec<Json> = r.unwrap().json().await.unwrap();
            if records
                .iter()
                .any(|r| r["payload"].as_str().unwrap_or_default().contains(text))
            {
                return records;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("thread {thread} never recorded `{text}`");
    }

    /// `POST /inbox/{id}` with `body`: the status and the JSON answer.
    async fn answer(&self, id: &str, body: Json) -> (StatusCode, Json) {
        let r = self
            .post(&format!("/inbox/{id}"), body.to_string())
            .send()
            .await
            .unwrap();
        if r.status().is_success() {
            (r.status(), r.json().await.unwrap())
        } else {
            problem(r).await
        }
    }

    /// Runs the `agentpump` CLI against this host: (exit 0?, stdout, stderr).
    fn cli(&self, args: &[&str]) -> (bool, String, String) {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--url", &self.base, "--token", &self.token]);
        support::agentpump_in(&self.dir, &all)
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `command` call running `program` with `args`.
fn command(program: &str, args: &[&str]) -> String {
    let args = args.iter().map(|a| Value::Str((*a).to_owned())).collect();
    Call::new("command")
        .id("c1")
        .arg("program", program)
        .arg("args", Value::List(args))
        .to_xml()
}

/// A `command` call running `program args…` with one line on stdin, which `tee -a runs.log`
/// appends: each run adds one line.
fn count_run(program: &str, args: &[&str]) -> String {
    let args = args.iter().map(|a| Value::Str((*a).to_owned())).collect();
    Call::new("command")
        .id("c1")
        .arg("program", program)
        .arg("args", Value::List(args))
        .arg("stdin", "ran\n")
        .to_xml()
}

/// How many times the counting command ran.
fn runs(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("runs.log")).map_or(0, |t| t.lines().count())
}

/// An `ask` call.
fn ask(question: &str, extra: &[(&str, Value)]) -> String {
    extra
        .iter()
        .fold(
            Call::new("ask").id("q1").arg("question", question),
            |call, (name, value)| call.arg(*name, value.clone()),
        )
        .to_xml()
}

fn scratch(test: &str) -> Scratch {
    let dir = Scratch::new(test);
    dir.write("organism.toml", ORGANISM);
    dir
}

/// "An organism marks tools (or a tool's calls matching a pattern of arguments) as needing
/// approval: `[tools.command] approve = true`, `approve = [\"rm *\", \"git push*\"]`" — and
/// every organism has the `ask` tool, unregistered by hand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentpump_run_holds_a_matching_command_and_has_the_ask_tool() {
    let dir = scratch("inbox-run");
    dir.write("victim", "keep me until approved");
    let host = Host::start(&dir.0);
    let held = host.start_thread(&command("rm", &["victim"])).await;
    let open = host.open(&held, 1).await;
    assert_eq!(open[0]["request"]["kind"], "approval");
    assert_eq!(open[0]["request"]["tool"], "command");
    host.reaches(&held, "waiting").await;
    assert!(dir.0.join("victim").exists(), "rm ran before approval");
    // A call no pattern matches is not held.
    let free = host.start_thread(&command("echo", &["hi"])).await;
    host.wait_for(&free, "hi").await;
    assert!(host.inbox(&format!("?thread={free}")).await.is_empty());
    // The organism's `ask` tool: a question waits in the inbox.
    let asked = host.start_thread(&ask("Deploy?", &[])).await;
    let open = host.open(&asked, 1).await;
    assert_eq!(open[0]["request"]["kind"], "ask");
    assert_eq!(open[0]["request"]["question"], "Deploy?");
}

/// "`POST /inbox/{id}` with the decision" — approve, edit and deny on the `command` tool, and
/// an answer to a question; "a second answer to the same request is refused (409, naming who
/// answered and when)".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_decision_over_http_is_applied_once() {
    let dir = scratch("inbox-decisions");
    for f in ["approved", "edited", "instead", "denied"] {
        dir.write(f, f);
    }
    let host = Host::start(&dir.0);
    // Approve: rm runs, once.
    let t = host.start_thread(&command("rm", &["approved"])).await;
    let id = host.open(&t, 1).await[0]["id"].as_str().unwrap().to_owned();
    let (status, body) = host
        .answer(&id, json!({"decision": "approve", "by": "alice"}))
        .await;
    assert_eq!(
        (status, body["by"].as_str()),
        (StatusCode::OK, Some("alice"))
    );
    host.wait_for(&t, "<result").await;
    assert!(!dir.0.join("approved").exists());
    let (status, body) = host
        .answer(&id, json!({"decision": "deny", "reason": "too late"}))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::CONFLICT, Some("already-answered"))
    );
    let detail = body["detail"].as_str().unwrap();
    // When, as RFC 3339 UTC (issue 47: not epoch milliseconds).
    let when = detail
        .split("`alice` at ")
        .nth(1)
        .and_then(|rest| rest.split(" (approve)").next())
        .unwrap_or_else(|| panic!("no `alice` at … (approve) in {detail}"));
    assert!(
        agentpump::history::export::parse_rfc3339(when).is_ok() && when.ends_with('Z'),
        "{detail}"
    );
    host.reaches(&t, "idle").await;
    // Edit: the tool runs with the person's arguments, not the caller's.
    let t = host.start_thread(&command("rm", &["edited"])).await;
    let id = host.open(&t, 1).await[0]["id"].as_str().unwrap().to_owned();
    let edit = json!({"decision": "edit", "arguments": {"program": "rm", "args": ["instead"]}});
    assert_eq!(host.answer(&id, edit).await.0, StatusCode::OK);
    host.wait_for(&t, "<result").await;
    assert!(dir.0.join("edited").exists() && !dir.0.join("instead").exists());
    // Deny: the caller gets `denied` with the reason; the file stays.
    let t = host.start_thread(&command("rm", &["denied"])).await;
    let id = host.open(&t, 1).await[0]["id"].as_str().unwrap().to_owned();
    let deny = json!({"decision": "deny", "reason": "not on a Friday"});
    assert_eq!(host.answer(&id, deny).await.0, StatusCode::OK);
    let records = host.wait_for(&t, "not on a Friday").await;
    assert!(dir.0.join("denied").exists());
    assert!(
        records
            .iter()
            .any(|r| r["payload"].as_str().unwrap().contains("type=\"denied\"")),
        "{records:#?}"
    );
    // A question answered with a value.
    let t = host.start_thread(&ask("Which colour?", &[])).await;
    let id = host.open(&t, 1).await[0]["id"].as_str().unwrap().to_owned();
    let (status, _) = host
        .answer(
            &id,
            json!({"decision": "answer", "value": "teal", "by": "bob"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    host.wait_for(&t, "teal").await;
    host.reaches(&t, "idle").await;
}

/// "One call is one call" (issue 47): a `command` call held for approval and then forwarded
/// costs the thread one tool call — in its budget (`tool_calls = 1` lets the approved call
/// run) and in the totals the API and the viewer show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_call_costs_one_tool_call() {
    let dir = Scratch::new("inbox-one-call");
    dir.write(
        "organism.toml",
        "[store]\npath = \"history.db\"\n\n[tools.command]\nenabled = true\nallow = [\"echo\"]\napprove = true\n\n[governor.budget]\ntool_calls = 1\n",
    );
    let host = Host::start(&dir.0);
    let t = host
        .start_thread(&command("echo", &["approved-once"]))
        .await;
    let id = host.open(&t, 1).await[0]["id"].as_str().unwrap().to_owned();
    let (status, _) = host.answer(&id, json!({"decision": "approve"})).await;
    assert_eq!(status, StatusCode::OK);
    let records = host.wait_for(&t, "approved-once\n").await;
    assert!(
        records
            .iter()
            .any(|r| r["payload"].as_str().unwrap().contains("<result")),
        "the approved call did not run: {records:#?}"
    );
    host.reaches(&t, "idle").await;
    let r = host.get(&format!("/view/threads/{t}/totals")).send().await;
    let totals: Json = r.unwrap().json().await.unwrap();
    assert_eq!(totals["thread"]["tool_calls"], 1, "{totals}");
    assert_eq!(totals["tree"]["tool_calls"], 1, "{totals}");
}

/// "problem JSON: 404 unknown, 409 already answered, 410 or 409 expired, 422 invalid" — and
/// the inbox is "behind the same token as the rest of the API".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_answers_are_problem_json_naming_why() {
    let dir = scratch("inbox-refusals");
    let host = Host::start(&dir.0);
    let unknown = agentpump::MessageId::new().to_string();
    let (status, body) = host.answer(&unknown, json!({"decision": "approve"})).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("unknown-request"))
    );
    assert!(body["detail"].as_str().unwrap().contains(&unknown));
    let (status, body) = host
        .answer("not-an-id", json!({"decision": "approve"}))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("malformed-request-id"))
    );
    // Outside the choices: 422, and the question stays open.
    let choices = Value::List(vec![Value::Str("yes".into()), Value::Str("no".into())]);
    let t = host
        .start_thread(&ask("Ship?", &[("choices", choices)]))
        .await;
    let id = host.open(&t, 1).await[0]["id"].as_str().unwrap().to_owned();
    let (status, body) = host
        .answer(&id, json!({"decision": "answer", "value": "maybe"}))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("invalid-answer"))
    );
    assert_eq!(host.open(&t, 1).await.len(), 1);
    // A body that states no decision, or a key the decision does not take: 400, named.
    for (body, says) in [
        (json!({"by": "x"}), "give `decision`"),
        (
            json!({"decision": "approve", "reason": "r"}),
            "`reason` does not go with decision `approve`",
        ),
        (json!({"decision": "edit"}), "needs `arguments`"),
        (json!({"decision": "maybe"}), "unknown decision `maybe`"),
        (json!({"decison": "approve"}), "unknown JSON key `decison`"),
    ] {
        let (status, problem) = host.answer(&id, body.clone()).await;
        let detail = problem["detail"].as_str().unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {detail}");
        assert!(detail.contains(says), "{body}: {detail}");
    }
    // Expired: its default applied, and a late answer is 410 `expired`.
    let late = [
        ("default", Value::Str("no".into())),
        ("timeout_seconds", Value::from_json("0.5").unwrap()),
    ];
    let t = host.start_thread(&ask("Quick?", &late)).await;
    let id = host.open(&t, 1).await[0]["id"].as_str().unwrap().to_owned();
    host.open(&t, 0).await;
    let (status, body) = host
        .answer(&id, json!({"decision": "answer", "value": "yes"}))
        .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::GONE, Some("expired")),
        "{body}"
    );
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("its default applied")
    );
    // Without the token: 401, for the list and for an answer.
    let anonymous = host
        .client
        .get(format!("{}/inbox", host.base))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let anonymous = host
        .client
        .post(format!("{}/inbox/{id}", host.base))
        .body(json!({"decision": "approve"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
}

/// "`GET /inbox` (open requests, oldest first, filterable by thread and listener) … an `inbox`
/// event on the event streams".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_lists_oldest_first_filters_and_streams_events() {
    let dir = scratch("inbox-list");
    let host = Host::start(&dir.0);
    let first = host.start_thread(&ask("First?", &[])).await;
    host.open(&first, 1).await;
    let second = host.start_thread(&ask("Second?", &[])).await;
    host.open(&second, 1).await;
    let all = host.inbox("").await;
    let questions: Vec<&str> = all
        .iter()
        .map(|r| r["request"]["question"].as_str().unwrap())
        .collect();
    assert_eq!(questions, ["First?", "Second?"]);
    assert_eq!(host.inbox("?listener=client").await.len(), 2);
    assert!(host.inbox("?listener=nobody").await.is_empty());
    assert_eq!(
        host.inbox(&format!("?thread={second}")).await[0]["thread"],
        second.as_str()
    );
    let r = host.get("/inbox?thred=x").send().await.unwrap();
    let (status, body) = problem(r).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unknown-key"))
    );
    // The event stream says `inbox` after the request, and again after the answer.
    let id = all[0]["id"].as_str().unwrap().to_owned();
    let answer = json!({"decision": "answer", "value": "now"});
    assert_eq!(host.answer(&id, answer).await.0, StatusCode::OK);
    host.reaches(&first, "idle").await;
    let mut stream = host
        .get(&format!("/threads/{first}/events"))
        .send()
        .await
        .unwrap();
    let mut text = String::new();
    while !text.contains("event: settled") {
        let chunk = stream.chunk().await.unwrap().expect("the stream settles");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let inbox: Vec<Json> = text
        .split("\n\n")
        .filter(|e| e.starts_with("event: inbox"))
        .map(|e| serde_json::from_str(e.split("data: ").nth(1).unwrap()).unwrap())
        .collect();
    assert_eq!(inbox.len(), 2, "{text}");
    assert_eq!(
        (inbox[0]["event"].as_str(), inbox[0]["id"].as_str()),
        (Some("request"), Some(id.as_str()))
    );
    assert_eq!(inbox[1]["answer"]["value"], "now");
}

/// Server-sent events read off a response as (name, JSON data), as they come.
struct Events {
    response: reqwest::Response,
    text: String,
}

impl Events {
    /// The next event, waiting at most 10 s for it.
    async fn next(&mut self) -> (String, Json) {
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let event: String = self.text.drain(..end + 2).collect();
                let field = |name: &str| {
                    event
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(str::to_owned)
                };
                let Some(name) = field("event: ") else {
                    continue; // a keep-alive comment
                };
                let data = field("data: ").unwrap_or_default();
                return (name, serde_json::from_str(&data).unwrap_or(Json::Null));
            }
            let chunk = tokio::time::timeout(Duration::from_secs(10), self.response.chunk());
            let chunk = chunk.await.expect("an event within 10 s").unwrap();
            let chunk = chunk.expect("the stream goes on");
            self.text.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// "A stream over every thread's inbox" (the seed of issue 31's last items): `GET
/// /inbox/events` lists what is open, then says when a request is listed, answered or expired,
/// for every thread, without polling; it is behind the API token like every route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_inbox_stream_says_listed_answered_and_expired_for_every_thread() {
    let dir = scratch("inbox-stream");
    let host = Host::start(&dir.0);
    let anonymous = host.client.get(format!("{}/inbox/events", host.base));
    let r = anonymous.send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let before = host.start_thread(&ask("Before?", &[])).await;
    let open = host.open(&before, 1).await;
    let response = host.get("/inbox/events").send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut events = Events {
        response,
        text: String::new(),
    };
    // What is open already comes first.
    let (name, data) = events.next().await;
    assert_eq!((name.as_str(), &data["id"]), ("listed", &open[0]["id"]));
    // A new request in another thread, answered.
    let thread = host.start_thread(&command("rm", &["-f", "gone"])).await;
    let (name, listed) = events.next().await;
    assert_eq!(
        (name.as_str(), listed["thread"].as_str()),
        ("listed", Some(thread.as_str()))
    );
    assert_eq!(listed["request"]["kind"], "approval");
    let id = listed["id"].as_str().unwrap();
    let deny = json!({"decision": "deny", "reason": "keep it", "by": "erin"});
    assert_eq!(host.answer(id, deny).await.0, StatusCode::OK);
    let (name, answered) = events.next().await;
    assert_eq!(name, "answered");
    assert_eq!(
        (
            answered["thread"].as_str(),
            answered["answer"]["request"].as_str()
        ),
        (Some(thread.as_str()), Some(id))
    );
    assert_eq!(answered["answer"]["by"], "erin");
    // A question that times out: listed, then expired with its default.
    let quick = ask(
        "Quick?",
        &[
            ("timeout_seconds", Value::Num(1.into())),
            ("default", Value::Str("no".into())),
        ],
    );
    let thread = host.start_thread(&quick).await;
    let (name, listed) = events.next().await;
    assert_eq!(
        (name.as_str(), listed["thread"].as_str()),
        ("listed", Some(thread.as_str()))
    );
    let (name, expired) = events.next().await;
    assert_eq!(name, "expired");
    assert_eq!(expired["answer"]["request"], listed["id"]);
    assert_eq!(expired["answer"]["decision"], "timeout");
}

/// "`agentpump inbox` and `agentpump answer ID …` on the CLI (file or `--url`)" — with precise
/// errors and a non-zero exit when an answer is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_lists_and_answers_from_a_file_or_a_host() {
    let dir = scratch("inbox-cli");
    dir.write("victim", "x");
    let host = Host::start(&dir.0);
    let t = host.start_thread(&command("rm", &["victim"])).await;
    let id = host.open(&t, 1).await[0]["id"].as_str().unwrap().to_owned();
    let q = host.start_thread(&ask("Name a colour", &[])).await;
    let qid = host.open(&q, 1).await[0]["id"].as_str().unwrap().to_owned();
    let cli = |args: Vec<String>| {
        let host = &host;
        tokio::task::block_in_place(|| {
            host.cli(&args.iter().map(String::as_str).collect::<Vec<_>>())
        })
    };
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    // From the host, by thread prefix: the request and how to answer it.
    let (ok, out, err) = cli(args(&["inbox", "--thread", &t[..8]]));
    assert!(ok, "{err}");
    assert!(
        out.contains(&id) && out.contains("client calls command") && out.contains("--approve"),
        "{out}"
    );
    assert!(!out.contains(&qid), "the filter keeps one thread: {out}");
    // From the file, read-only while the host runs: both, oldest first.
    let (ok, out, err) =
        support::agentpump_in(&dir.0, &["inbox", "--db", "history.db", "--format", "json"]);
    assert!(ok, "{err}");
    let listed: Vec<Json> = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = listed.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, [id.as_str(), qid.as_str()]);
    // Answers: a bad --edit is named before anything is sent; then approve once.
    let (ok, _, err) = cli(args(&["answer", &id, "--edit", "rm -rf /"]));
    assert!(!ok && err.contains("--edit takes a JSON object"), "{err}");
    let (ok, _, err) = cli(args(&["answer", &id, "--approve", "--deny", "no"]));
    assert!(!ok && err.contains("cannot be used with"), "{err}");
    let (ok, out, err) = cli(args(&["answer", &id, "--approve", "--by", "carol"]));
    assert!(ok && out.contains("answered"), "{out}{err}");
    host.wait_for(&t, "<result").await;
    assert!(!dir.0.join("victim").exists());
    let (ok, _, err) = cli(args(&["answer", &id, "--deny", "changed my mind"]));
    assert!(
        !ok && err.contains("`carol`") && err.contains("(already-answered, HTTP 409)"),
        "{err}"
    );
    let (ok, _, err) = cli(args(&[
        "answer",
        &agentpump::MessageId::new().to_string(),
        "--approve",
    ]));
    assert!(!ok && err.contains("(unknown-request, HTTP 404)"), "{err}");
    // A question: --value takes JSON, or plain text as a string.
    let (ok, _, err) = cli(args(&["answer", &qid, "--value", "teal"]));
    assert!(ok, "{err}");
    host.wait_for(&q, "teal").await;
    let (ok, out, _) = cli(args(&["inbox"]));
    assert!(ok && out == "no open requests\n", "{out}");
}

/// "after kill -9 between the request and the answer, the restarted host still lists the
/// request and applies the answer when it comes".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_outlives_kill_9_and_its_answer_applies_once() {
    let dir = scratch("inbox-kill-asked");
    let host = Host::start(&dir.0);
    let t = host
        .start_thread(&count_run("tee", &["-a", "runs.log"]))
        .await;
    let id = host.open(&t, 1).await[0]["id"].as_str().unwrap().to_owned();
    host.kill9();
    let host = Host::start(&dir.0);
    let open = host.open(&t, 1).await;
    assert_eq!(open[0]["id"], id.as_str());
    host.reaches(&t, "waiting").await;
    assert_eq!(runs(&dir.0), 0);
    let (status, _) = host.answer(&id, json!({"decision": "approve"})).await;
    assert_eq!(status, StatusCode::OK);
    host.wait_for(&t, "<result").await;
    host.reaches(&t, "idle").await;
    assert_eq!(runs(&dir.0), 1);
    let (status, _) = host.answer(&id, json!({"decision": "approve"})).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(runs(&dir.0), 1);
}

/// "after kill -9 between the answer's commit and the forwarded call, the call is made once":
/// the approved command waits on a lock the test holds (`flock gate tee -a runs.log`), the
/// host dies with it, and the restarted host makes the call — once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_call_cut_off_by_kill_9_is_made_once_after_restart() {
    let dir = scratch("inbox-kill-answered");
    let gate = std::fs::File::create(dir.0.join("gate")).unwrap();
    gate.lock().unwrap();
    let host = Host::start(&dir.0);
    let call = count_run("flock", &["gate", "tee", "-a", "runs.log"]);
    let t = host.start_thread(&call).await;
    let id = host.open(&t, 1).await[0]["id"].as_str().unwrap().to_owned();
    let (status, _) = host.answer(&id, json!({"decision": "approve"})).await;
    assert_eq!(status, StatusCode::OK);
    // The answer is committed; the call waits at the gate: its effect is not made.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(runs(&dir.0), 0);
    host.kill9();
    gate.unlock().unwrap();
    let host = Host::start(&dir.0);
    host.wait_for(&t, "<result").await;
    host.reaches(&t, "idle").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(runs(&dir.0), 1, "the approved call is made once");
    let records = host.wait_for(&t, "<result").await;
    let answers = records
        .iter()
        .filter(|r| r["root"].as_str().unwrap_or_default().ends_with("}answer"))
        .count();
    assert_eq!(answers, 1, "{records:#?}");
    assert!(host.inbox("").await.is_empty());
}

/// "Eviction keeps waiting threads reloadable like any other."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_waiting_thread_is_listed_and_continues_when_answered() {
    let dir = scratch("inbox-evict");
    dir.write(
        "organism.toml",
        &format!("{ORGANISM}\n[limits]\nevict_idle_ms = 100\n"),
    );
    let host = Host::start(&dir.0);
    let t = host
        .start_thread(&count_run("tee", &["-a", "runs.log"]))
        .await;
    let id = host.open(&t, 1).await[0]["id"].as_str().unwrap().to_owned();
    let mut evicted = 0;
    for _ in 0..100 {
        let health: Json = host
            .get("/health")
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        evicted = health["threads"]["evicted"].as_u64().unwrap();
        if evicted > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(evicted > 0, "the waiting thread was never evicted");
    assert_eq!(host.inbox("").await[0]["id"], id.as_str());
    let (status, _) = host.answer(&id, json!({"decision": "approve"})).await;
    assert_eq!(status, StatusCode::OK);
    host.wait_for(&t, "<result").await;
    host.reaches(&t, "idle").await;
    assert_eq!(runs(&dir.0), 1);
}
