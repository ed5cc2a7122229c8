//! Threads partitioned over pumps (issue 35): three `agentpump run` hosts on a three-node
//! `nats-server` cluster, the organism's threads in three partitions, each a three-replica
//! stream written by the host holding its lease. Needs `nats-server` on the PATH (`.ci/run`
//! installs it).

#![cfg(all(feature = "nats", feature = "host"))]

mod support;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agentpump::history::{HistoryStore, JetStreamHistory, JetStreamOptions, RecordKind};
use agentpump::thread::Partition;
use agentpump::{Limits, ThreadId};
use support::Scratch;

const LEASE_MS: u64 = 1_500;
const TOKEN: &str = "partitions-test-token";
/// The model of a test that asks none.
const NO_MODEL: &str = "http://127.0.0.1:9/v1";

fn say(text: &str) -> String {
    format!(r#"<say xmlns="urn:example:say:v1">{text}</say>"#)
}

/// An organism in `dir` with its threads in three partitions on the cluster at `url`, children
/// spread over them, an echo listener, a `planner` (an LLM agent whose model is at `model`),
/// and the token every host of it shares.
fn organism_in(dir: &Path, url: &str, model: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("agentpump.token"), TOKEN).unwrap();
    std::fs::write(
        dir.join("organism.toml"),
        format!(
            "[organism]\nname = \"parts\"\n\n[store]\nkind = \"jetstream\"\nurl = \"{url}\"\nstream = \"parts\"\nreplicas = 3\nlease_ms = {LEASE_MS}\npartitions = 3\nspread_children = true\n\n[[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\naccepts = [\"{{urn:example:say:v1}}say\"]\n\n[[listener]]\nname = \"planner\"\nkind = \"llm\"\nbase_url = \"{model}\"\nmodel = \"m\"\nprompt = \"You plan.\"\naccepts = [\"{{urn:example:plan:v1}}plan\", \"{{urn:example:say:v1}}say\"]\npeers = [\"echo\"]\n"
        ),
    )
    .unwrap();
}

/// One `agentpump run` host: its process, its front's address, and its output lines as they
/// come.
struct Host {
    child: std::process::Child,
    base: String,
    lines: std::sync::mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Host {
    /// `agentpump run` in `dir`, taking `partition` first.
    fn start(dir: &Path, partition: u32) -> Self {
        use std::io::BufRead as _;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
            .args(["run", "organism.toml", "--port", "0"])
            .args(["--partition", &partition.to_string()])
            .current_dir(dir)
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(dir.join("stderr.log")).unwrap())
            .spawn()
            .unwrap();
        let out = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let first = lines.recv_timeout(Duration::from_secs(30)).unwrap();
        Self {
            child,
            base: support::listening_on(&first),
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits (up to `within`) for a line of output containing `text`; whether one came.
    fn said(&mut self, text: &str, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if self.seen.iter().any(|l| l.contains(text)) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => return false,
            }
        }
    }

    /// Forgets the output so far: [`Host::said`] then looks at what comes next only.
    fn forget(&mut self) {
        while self.lines.try_recv().is_ok() {}
        self.seen.clear();
    }

    fn signal(&self, signal: &str) {
        let status = std::process::Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three hosts in `root/host-N`, host N taking partition N first, each writing its own.
fn three_hosts(root: &Path, url: &str, name: &str, model: &str) -> Vec<Host> {
    let mut hosts: Vec<Host> = (0..3)
        .map(|i| {
            let dir = root.join(format!("{name}-{i}"));
            organism_in(&dir, url, model);
            Host::start(&dir, i)
        })
        .collect();
    for (i, host) in hosts.iter_mut().enumerate() {
        let writing = format!("partition {i} of 3: writing");
        assert!(
            host.said(&writing, Duration::from_secs(60)),
            "{:?}",
            host.seen
        );
    }
    hosts
}

/// Posts `text` to a new thread through `base`; the thread and the writer that took it.
async fn post(
    http: &reqwest::Client,
    base: &str,
    text: &str,
) -> Result<(ThreadId, String), String> {
    let answer = http
        .post(format!("{base}/threads?to=echo"))
        .bearer_auth(TOKEN)
        .timeout(Duration::from_secs(5))
        .body(say(text))
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = answer.status();
    let writer = answer
        .headers()
        .get("agentpump-forwarded-from")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = answer.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!("{status}: {body}"));
    }
    let body: serde_json::Value = serde_json::from_str(&body).map_err(|e| e.to_string())?;
    Ok((body["thread"].as_str().unwrap().parse().unwrap(), writer))
}

/// The JSON answer to `request`, asked again (up to 30 s) while it is `503 standby` (or, for a
/// read, `502 writer-unreachable`): a partition changing hands, as a host's lease renewals can
/// starve on a machine running two clusters and six hosts at once. The CLI retries the same
/// way.
async fn json_retrying(request: reqwest::RequestBuilder) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let answer = request.try_clone().unwrap().send().await.unwrap();
        let status = answer.status();
        let text = answer.text().await.unwrap();
        let read = request.try_clone().unwrap().build().unwrap().method() == reqwest::Method::GET;
        let moving = status == 503 || (read && status == 502);
        if moving && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(250)).await;
            continue;
        }
        assert!(status.is_success(), "{status}: {text}");
        return serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    }
}

/// [`post`], again while the answer is `503 standby` (as its `Retry-After` asks): a front
/// learns a partition's new writer at its next look at the lease.
async fn post_retrying(http: &reqwest::Client, base: &str, text: &str) -> (ThreadId, String) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match post(http, base, text).await {
            Ok(posted) => return posted,
            Err(e) if e.starts_with("503") && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(e) => panic!("{text}: {e}"),
        }
    }
}

/// Waits until `thread`'s history, read through `base`, holds the echo's answer.
async fn answered(http: &reqwest::Client, base: &str, thread: ThreadId) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let history = http
            .get(format!("{base}/threads/{thread}/history"))
            .bearer_auth(TOKEN)
            .send()
            .await;
        if let Ok(history) = history
            && history.status().is_success()
            && history
                .text()
                .await
                .unwrap_or_default()
                .contains("\"egress\"")
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "thread {thread} was never answered"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The `planner`'s model, on loopback: to the client's `<plan>` it answers with a
/// `spawn-thread` to `echo` carving 4 turns and no threads; in the child it bats `say` back to
/// `echo` (a loop only the child's turns budget ends); the child's `thread-result` it reports
/// to the client. Returns its base URL.
async fn planner_model() -> String {
    async fn complete(
        axum::Json(body): axum::Json<serde_json::Value>,
    ) -> axum::Json<serde_json::Value> {
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default()
            .to_owned();
        let text = if last.contains("thread-result") {
            r#"<send to="client"><say xmlns="urn:example:say:v1">child back</say></send>"#
        } else if last.contains("thread-spawned") {
            r#"<send to="client"><say xmlns="urn:example:say:v1">spawned</say></send>"#
        } else if last.contains("<plan") {
            r#"<spawn-thread xmlns="urn:agentpump:system:v1" suggested-sub-id="batting" to="echo"><budget turns="4" threads="0"/><initial-payload><say xmlns="urn:example:say:v1">ping</say></initial-payload></spawn-thread>"#
        } else {
            r#"<reply><say xmlns="urn:example:say:v1">pong</say></reply>"#
        };
        axum::Json(serde_json::json!({
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 10, "completion_tokens": 5 }
        }))
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(complete));
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// GETs `path` through `base` as JSON, again while it fails (up to 60 s) or `until` does not
/// hold of it.
async fn read_until(
    http: &reqwest::Client,
    base: &str,
    path: &str,
    until: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let answer = http
            .get(format!("{base}{path}"))
            .bearer_auth(TOKEN)
            .send()
            .await;
        if let Ok(answer) = answer
            && answer.status().is_success()
            && let Ok(value) = answer.json::<serde_json::Value>().await
            && until(&value)
        {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "{path} never came to what was waited for"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue 35: "a parent on one pump spawning children owned by another, with a carved budget
/// enforced". The planner's thread spawns a child carving 4 turns; the child is made in the next
/// partition, run by that partition's pump (another host), held to its 4 turns there; its result
/// comes back over the fronts and the parent's account is settled exactly. Returns the two
/// threads.
async fn a_child_runs_on_another_pump_to_its_grant(
    http: &reqwest::Client,
    hosts: &[Host],
) -> [ThreadId; 2] {
    let plan = r#"<plan xmlns="urn:example:plan:v1">go</plan>"#;
    let posted = json_retrying(
        http.post(format!("{}/threads?to=planner", hosts[0].base))
            .bearer_auth(TOKEN)
            .body(plan),
    )
    .await;
    let root: ThreadId = posted["thread"].as_str().unwrap().parse().unwrap();
    let has = |text: &'static str| move |v: &serde_json::Value| v.to_string().contains(text);
    let history = read_until(
        http,
        &hosts[1].base,
        &format!("/threads/{root}/history"),
        has("child back"),
    )
    .await;
    let records = history.as_array().unwrap();
    let spawned = records
        .iter()
        .find(|r| {
            r["root"]
                .as_str()
                .is_some_and(|root| root.ends_with("thread-spawned"))
        })
        .expect("a thread-spawned notice");
    let payload = spawned["payload"].as_str().unwrap();
    let at = payload.find("assigned-id=\"").unwrap() + "assigned-id=\"".len();
    let child: ThreadId = payload[at..at + 36].parse().unwrap();
    // The child is in the next partition: another host's pump runs it.
    let parent_partition = Partition::of(root, 3);
    assert_eq!(Partition::of(child, 3), (parent_partition + 1) % 3);
    // Held to its grant there: four turns, then TIMEOUT max-turns.
    let report = read_until(
        http,
        &hosts[2].base,
        &format!("/threads/{child}/report"),
        |_| true,
    )
    .await;
    assert_eq!(report["stop_reason"], "max-turns", "{report}");
    assert_eq!(report["budget"]["max-turns"]["limit"], "4", "{report}");
    assert_eq!(report["budget"]["max-turns"]["spent"], "4", "{report}");
    let child_history = read_until(
        http,
        &hosts[0].base,
        &format!("/threads/{child}/history"),
        has("delivered"),
    )
    .await;
    assert!(
        child_history
            .to_string()
            .contains("action=\\\"received\\\""),
        "{child_history}"
    );
    // The parent: the result came back, what the child spent was recorded, nothing is held.
    let result = records
        .iter()
        .find(|r| {
            r["root"]
                .as_str()
                .is_some_and(|root| root.ends_with("thread-result"))
        })
        .expect("a thread-result");
    assert!(
        result["payload"].as_str().unwrap().contains("max-turns"),
        "{result}"
    );
    assert!(
        history.to_string().contains("action=\\\"returned\\\""),
        "{history}"
    );
    let thread = json_retrying(
        http.get(format!("{}/threads/{root}", hosts[2].base))
            .bearer_auth(TOKEN),
    )
    .await;
    let own = thread["counters"]["deliveries"].as_u64().unwrap();
    let budget = json_retrying(
        http.get(format!("{}/threads/{root}/budget", hosts[1].base))
            .bearer_auth(TOKEN),
    )
    .await;
    assert_eq!(
        budget["max-turns"]["spent"],
        (own + 4).to_string(),
        "{budget}"
    );
    assert_eq!(budget["max-turns"]["reserved"], "0", "{budget}");
    assert_eq!(budget["max-threads"]["spent"], "1", "{budget}");
    // The viewer's tree through any host shows the child where it ran, under its parent, with
    // its state and halting report read from its own partition.
    // (A partition changing hands meanwhile lists the child `unreached`: asked again.)
    let deadline = Instant::now() + Duration::from_secs(30);
    let detail = loop {
        let detail = json_retrying(
            http.get(format!("{}/view/threads/{root}", hosts[2].base))
                .bearer_auth(TOKEN),
        )
        .await;
        if detail.get("unreached").is_none() || Instant::now() > deadline {
            break detail;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let tree = detail["tree"].as_array().unwrap();
    let node = tree
        .iter()
        .find(|n| n["id"] == child.to_string())
        .unwrap_or_else(|| panic!("the child in the tree: {detail}"));
    assert_eq!(node["parent"], root.to_string(), "{node}");
    assert_eq!(node["state"], "halted", "{node}");
    assert_eq!(node["report"]["class"], "TIMEOUT", "{node}");
    assert!(
        node["carve_out"]
            .as_str()
            .is_some_and(|c| c.starts_with("<budget")),
        "its carve-out, from its parent's partition: {node}"
    );
    assert!(detail.get("unreached").is_none(), "{detail}");
    [root, child]
}

/// Each partition's stream, opened to read (after every host stopped).
async fn streams(url: &str) -> Vec<JetStreamHistory> {
    let mut streams = Vec::new();
    for i in 0..3 {
        let mut tries = 0;
        loop {
            let mut options = JetStreamOptions::new(url, format!("parts-p{i}"));
            options.replicas = 3;
            options.limits = Limits::default();
            match JetStreamHistory::open(options).await {
                Ok(stream) => break streams.push(stream),
                // A cluster short of a node answers slowly at times.
                Err(e) if tries < 5 => {
                    tries += 1;
                    eprintln!("opening parts-p{i} again: {e}");
                }
                Err(e) => panic!("parts-p{i}: {e}"),
            }
        }
    }
    streams
}

/// The echo's answers in `thread`, read from its partition's stream.
async fn echoes(streams: &[JetStreamHistory], thread: ThreadId) -> usize {
    let stream = &streams[Partition::of(thread, 3) as usize];
    let records = stream.thread(thread, 0).await.unwrap();
    records
        .iter()
        .filter(|r| r.kind == RecordKind::Egress && &*r.from == "echo")
        .count()
}

/// Issue 35: "threads spread over the pumps, every message answered once, `verify` passes";
/// "kill -9 of one NATS node: no acknowledged record lost, the pumps continue"; "a restart of
/// everything from the stream alone"; and "any pump's HTTP API accepts a request for any
/// thread and forwards it to the owner … the CLI and the viewer work against any pump".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_spread_over_three_pumps_survive_a_nats_node_and_a_restart_from_the_streams() {
    let scratch = Scratch::new("partitions-spread");
    let mut cluster = support::nats::Cluster::start(&scratch.0);
    let url = cluster.url();
    cluster.elected().await;
    let model = planner_model().await;
    let mut hosts = three_hosts(&scratch.0, &url, "host", &model);
    let http = support::http_client();
    let mut writers: HashMap<String, usize> = HashMap::new();
    let mut threads = Vec::new();
    for i in 0..30 {
        let base = &hosts[i % 3].base;
        let (thread, writer) = post_retrying(&http, base, &format!("spread-{i}")).await;
        *writers.entry(writer).or_default() += 1;
        threads.push(thread);
    }
    assert_eq!(
        writers.len(),
        3,
        "every pump writes some threads: {writers:?}"
    );
    // Any host answers for any thread; the list of every host is the whole list.
    for (i, &thread) in threads.iter().enumerate() {
        answered(&http, &hosts[(i + 1) % 3].base, thread).await;
    }
    let listed = json_retrying(
        http.get(format!("{}/threads", hosts[2].base))
            .bearer_auth(TOKEN),
    )
    .await;
    let listed = listed.as_array().unwrap();
    // Each pump has a system thread of its own (its notices), in its partition.
    let systems: Vec<&serde_json::Value> =
        listed.iter().filter(|t| t["path"] == "system").collect();
    assert_eq!(systems.len(), 3, "{systems:?}");
    for system in systems {
        let id: ThreadId = system["id"].as_str().unwrap().parse().unwrap();
        json_retrying(
            http.get(format!("{}/threads/{id}/history", hosts[0].base))
                .bearer_auth(TOKEN),
        )
        .await;
    }
    let listed: BTreeSet<String> = listed
        .iter()
        .filter(|t| t["path"] != "system")
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    let posted: BTreeSet<String> = threads.iter().map(ToString::to_string).collect();
    assert_eq!(listed, posted);
    // The viewer's list, paged 7 at a time through one host, shows every root once, newest
    // first.
    let mut paged = Vec::new();
    let mut before = None::<u64>;
    loop {
        let cursor = before.map_or(String::new(), |b| format!("&before={b}"));
        let page = json_retrying(
            http.get(format!("{}/view/threads?limit=7{cursor}", hosts[1].base))
                .bearer_auth(TOKEN),
        )
        .await;
        for t in page["threads"].as_array().unwrap() {
            if t["path"] == "system" {
                continue;
            }
            paged.push((
                t["started_us"].as_i64().unwrap(),
                t["id"].as_str().unwrap().to_owned(),
            ));
        }
        match page["next"].as_u64() {
            Some(next) => before = Some(next),
            None => break,
        }
    }
    assert_eq!(paged.len(), 30, "{paged:?}");
    // The viewer's totals and organism through any host are every partition's, summed: each
    // echo thread had one delivery to `echo`, and the threads are in all three partitions.
    let totals = json_retrying(
        http.get(format!("{}/view/totals", hosts[1].base))
            .bearer_auth(TOKEN),
    )
    .await;
    let echo = totals["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == "echo")
        .unwrap_or_else(|| panic!("{totals}"));
    assert!(
        echo["deliveries"].as_u64().unwrap() >= threads.len() as u64,
        "{totals}"
    );
    let organism = json_retrying(
        http.get(format!("{}/view/organism", hosts[2].base))
            .bearer_auth(TOKEN),
    )
    .await;
    let to_echo: u64 = organism["routes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["to"] == "echo")
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    // About ten echo threads per partition: one partition's answer alone would have ten.
    assert!(
        to_echo >= 20,
        "each partition's newest roots, summed: {organism}"
    );
    // The inbox's event stream is every partition's, merged (nothing open here: it stays open,
    // an event stream).
    let events = http
        .get(format!("{}/inbox/events", hosts[0].base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(events.status(), 200);
    assert_eq!(
        events.headers()["content-type"],
        "text/event-stream",
        "{:?}",
        events.headers()
    );
    drop(events);
    let through_mcp = mcp_through_one_host(&hosts[0].base, &threads).await;
    // An envelope naming its thread goes to that thread's partition, through any host.
    let named = threads[0];
    let elsewhere = hosts[(Partition::of(named, 3) as usize + 1) % 3]
        .base
        .clone();
    let envelope = format!(
        r#"<message xmlns="urn:agentpump:envelope:v1"><meta><thread>{named}</thread></meta>{}</message>"#,
        say("again")
    );
    let again = http
        .post(format!("{elsewhere}/threads?to=echo"))
        .bearer_auth(TOKEN)
        .body(envelope)
        .send()
        .await
        .unwrap();
    assert!(
        again.status().is_success(),
        "{}",
        again.text().await.unwrap()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let history = json_retrying(
            http.get(format!("{elsewhere}/threads/{named}/history"))
                .bearer_auth(TOKEN),
        )
        .await;
        let echoes = history
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "egress" && r["from"] == "echo")
            .count();
        if echoes == 2 {
            break;
        }
        assert!(Instant::now() < deadline, "{history}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(paged.windows(2).all(|w| w[0].0 >= w[1].0), "newest first");
    let seen: BTreeSet<String> = paged.into_iter().map(|(_, id)| id).collect();
    assert_eq!(seen, posted);

    let [planned, _] = a_child_runs_on_another_pump_to_its_grant(&http, &hosts).await;

    // One NATS node killed: the pumps go on (each host was given all three servers).
    cluster.nodes[0].kill();
    for i in 0..9 {
        let base = &hosts[i % 3].base;
        let mut tries = 0;
        let thread = loop {
            match post(&http, base, &format!("after-node-{i}")).await {
                Ok((thread, _)) => break thread,
                // A stream whose leader was on the killed node elects another (a few seconds).
                Err(e) if tries < 60 => {
                    tries += 1;
                    eprintln!("while the cluster elects: {e}");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Err(e) => panic!("the pumps did not go on without one NATS node: {e}"),
            }
        };
        answered(&http, &hosts[(i + 2) % 3].base, thread).await;
        threads.push(thread);
    }

    // Everything stopped, then started again in fresh folders: the streams alone bring every
    // thread back.
    for host in &mut hosts {
        host.signal("-TERM");
    }
    for host in &mut hosts {
        let _ = host.child.wait();
    }
    let left = cluster.urls[1..].join(",");
    let again = three_hosts(&scratch.0, &left, "again", NO_MODEL);
    for (i, &thread) in threads.iter().enumerate() {
        answered(&http, &again[i % 3].base, thread).await;
    }
    answered(&http, &again[0].base, planned).await;
    // `agentpump verify --url --certificates` against one host recomputes every partition's
    // chains and re-derives every halt.
    let verified = std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .args([
            "verify",
            "--url",
            &again[1].base,
            "--token",
            TOKEN,
            "--certificates",
        ])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&verified.stdout);
    let err = String::from_utf8_lossy(&verified.stderr);
    assert!(verified.status.success(), "{out}{err}");
    assert!(out.contains("every chain intact"), "{out}");
    // Every halt — the planner's child, halted on its own pump at its grant — re-derived from
    // the records each partition serves.
    assert!(out.contains("every certificate agrees"), "{out}");
    // Issue 35: "retention work[s] against it": a thread stopped through one host, then
    // `history prune --url` through another with the cut at now prunes it in its own
    // partition's stream (the front asks every partition), and every chain still verifies.
    let pruned = threads[1];
    assert_ne!(pruned, named);
    let cli = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
            .args(args)
            .args(["--token", TOKEN])
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    };
    let (ok, out) = cli(&["stop", &pruned.to_string(), "--url", &again[2].base]);
    assert!(ok, "{out}");
    let (ok, out) = cli(&[
        "history",
        "prune",
        "--keep-days",
        "0",
        "--url",
        &again[0].base,
    ]);
    // The stopped thread at least (the planner's child may be finished too), each partition
    // numbering its own.
    assert!(
        ok && out.contains(": pruned ")
            && out.contains(" in 3 partitions (each its own seq numbers and anchor chain)"),
        "{out}"
    );
    let (ok, out) = cli(&["verify", "--url", &again[1].base]);
    assert!(ok && out.contains("every chain intact"), "{out}");
    drop(again);
    let streams = streams(&left).await;
    for &thread in &threads {
        let expected = match thread {
            t if t == pruned => 0,
            t if t == named => 2 + usize::from(t == through_mcp),
            t => 1 + usize::from(t == through_mcp),
        };
        assert_eq!(echoes(&streams, thread).await, expected, "thread {thread}");
    }
    for stream in &streams {
        assert!(stream.verify().await.unwrap() > 0);
    }
}

/// Calls `tool` with `args` over `client`: the structured answer, or the tool error's text.
async fn call_tool(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    tool: &str,
    args: serde_json::Value,
) -> Result<serde_json::Value, String> {
    let params = rmcp::model::CallToolRequestParams::new(tool.to_owned())
        .with_arguments(args.as_object().unwrap().clone());
    let answer = client.call_tool(params).await.unwrap();
    if answer.is_error == Some(true) {
        let content = serde_json::to_value(&answer.content).unwrap();
        return Err(content[0]["text"].as_str().unwrap_or_default().to_owned());
    }
    Ok(answer.structured_content.unwrap_or_default())
}

/// `/mcp` through one host of a partitioned organism sees every partition (issue 35: "the
/// CLI and the viewer work against any pump"; issue 30's `/mcp` "behind the same token"): the
/// `threads` tool lists the threads of all three, `history` reads a thread written by another
/// host, `post` into such a thread waits for its answer, `stop`, `report` and `resume` reach
/// it, the resources name every thread and the listeners; a wrong token is refused. Returns
/// the thread it posted into (one echo more).
async fn mcp_through_one_host(base: &str, threads: &[ThreadId]) -> ThreadId {
    use rmcp::ServiceExt as _;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let url = format!("{base}/mcp");
    let config = StreamableHttpClientTransportConfig::with_uri(url.clone()).auth_header(TOKEN);
    let transport = StreamableHttpClientTransport::with_client(support::http_client(), config);
    let client = ().serve(transport).await.expect("an MCP session through the front");
    let listed = call_tool(&client, "threads", serde_json::json!({}))
        .await
        .unwrap();
    let listed: BTreeSet<String> = listed["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    for thread in threads {
        assert!(
            listed.contains(&thread.to_string()),
            "{thread} in {listed:?}"
        );
    }
    // Threads of the partitions another host writes (host 0 writes partition 0).
    let far: Vec<ThreadId> = [1, 2]
        .iter()
        .map(|&p| *threads.iter().find(|&&t| Partition::of(t, 3) == p).unwrap())
        .collect();
    let history = call_tool(
        &client,
        "history",
        serde_json::json!({"thread": far[0].to_string(), "limit": 1}),
    )
    .await
    .unwrap();
    assert_eq!(history["records"].as_array().unwrap().len(), 1, "{history}");
    assert!(history["total"].as_u64().unwrap() >= 2, "{history}");
    let posted = call_tool(
        &client,
        "post",
        serde_json::json!({"payload": say("through mcp"), "thread": far[1].to_string(), "to": "echo", "wait_ms": 30000}),
    )
    .await
    .unwrap();
    assert_eq!(posted["thread"], far[1].to_string(), "{posted}");
    assert_eq!(posted["settled"], true, "{posted}");
    assert!(
        posted["answers"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a.as_str().unwrap().contains("through mcp")),
        "{posted}"
    );
    let report = call_tool(
        &client,
        "report",
        serde_json::json!({"thread": far[0].to_string()}),
    )
    .await
    .unwrap_err();
    assert!(report.contains("has not halted"), "{report}");
    let stopped = call_tool(
        &client,
        "stop",
        serde_json::json!({"thread": far[0].to_string()}),
    )
    .await
    .unwrap();
    assert_eq!(stopped["stopped"], true, "{stopped}");
    let report = call_tool(
        &client,
        "report",
        serde_json::json!({"thread": far[0].to_string()}),
    )
    .await
    .unwrap();
    assert_eq!(report["report"]["stop_reason"], "stop-request", "{report}");
    let resumed = call_tool(
        &client,
        "resume",
        serde_json::json!({"thread": far[0].to_string(), "turns": 5}),
    )
    .await
    .unwrap();
    assert_eq!(resumed["resumed"], true, "{resumed}");
    // A tool's refusal through the front names the thread's own problem.
    let unknown = ThreadId::new();
    let refused = call_tool(
        &client,
        "history",
        serde_json::json!({"thread": unknown.to_string()}),
    )
    .await
    .unwrap_err();
    assert!(refused.contains(&unknown.to_string()), "{refused}");
    let resources = client.list_resources(None).await.unwrap();
    let uris: Vec<String> = resources.resources.iter().map(|r| r.uri.clone()).collect();
    for thread in &far {
        let uri = format!("agentpump://threads/{thread}/history");
        assert!(uris.contains(&uri), "{uri} in {uris:?}");
    }
    let read = client
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "agentpump://listeners",
        ))
        .await
        .unwrap();
    let text = serde_json::to_value(&read.contents).unwrap()[0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("\"echo\""), "{text}");
    client.cancel().await.unwrap();
    // Behind the organism's token, as on a pump.
    support::mcp::refuses_a_wrong_token(&url).await;
    far[1]
}

/// A host of a partitioned organism with an MCP client connected (whose session holds an
/// event stream open on the front's `/mcp`) stops at SIGTERM without waiting for the client to
/// go, long before its shutdown time limit (two minutes here): the sessions end when the
/// shutdown begins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_with_an_mcp_session_open_stops_at_sigterm() {
    use rmcp::ServiceExt as _;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let scratch = Scratch::new("partitions-mcp-stop");
    let (_server, url) = support::nats::server(&scratch.0);
    let dir = scratch.0.join("host");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("agentpump.token"), TOKEN).unwrap();
    std::fs::write(
        dir.join("organism.toml"),
        format!(
            "[organism]\nname = \"stop\"\n\n[server]\nshutdown_timeout_ms = 120000\n\n[store]\nkind = \"jetstream\"\nurl = \"{url}\"\nstream = \"stop\"\nlease_ms = {LEASE_MS}\npartitions = 2\n\n[[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\naccepts = [\"{{urn:example:say:v1}}say\"]\n"
        ),
    )
    .unwrap();
    let mut host = Host::start(&dir, 0);
    for p in 0..2 {
        let writing = format!("partition {p} of 2: writing");
        assert!(
            host.said(&writing, Duration::from_secs(60)),
            "{:?}",
            host.seen
        );
    }
    let config = StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", host.base))
        .auth_header(TOKEN);
    let transport = StreamableHttpClientTransport::with_client(support::http_client(), config);
    let client = ().serve(transport).await.expect("an MCP session through the front");
    call_tool(&client, "threads", serde_json::json!({}))
        .await
        .unwrap();
    let stopping = Instant::now();
    host.signal("-TERM");
    let status = loop {
        if let Some(status) = host.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            stopping.elapsed() < Duration::from_secs(60),
            "the host still runs a minute after SIGTERM, with an MCP session open"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}");
    drop(client);
}

/// Issue 35: "kill -9 of a pump under load: its partitions move within the lease TTL; every
/// acknowledged message is delivered exactly once; no thread is written by two pumps (the
/// fencing test: a paused pump — SIGSTOP past its lease, then SIGCONT — must not append)".
/// Six clients post through the three hosts all along (those of a dead or paused host are
/// refused meanwhile); host 1 is killed, then host 2 paused past its lease and resumed: it
/// gives its partition up and waits again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_or_paused_pump_s_partition_moves_and_every_acknowledged_message_is_answered_once()
{
    let scratch = Scratch::new("partitions-failover");
    let cluster = support::nats::Cluster::start(&scratch.0);
    let url = cluster.url();
    cluster.elected().await;
    let mut hosts = three_hosts(&scratch.0, &url, "host", NO_MODEL);
    let front = hosts[0].base.clone();
    let acknowledged = Arc::new(Mutex::new(Vec::<ThreadId>::new()));
    let running = Arc::new(std::sync::atomic::AtomicBool::new(true));
    // Two clients per host: a front makes new threads in the partitions its host writes.
    let fronts: Vec<String> = hosts.iter().map(|h| h.base.clone()).collect();
    let clients: Vec<_> = (0..6)
        .map(|c| {
            let (front, acknowledged, running) = (
                fronts[c % 3].clone(),
                Arc::clone(&acknowledged),
                Arc::clone(&running),
            );
            tokio::spawn(async move {
                let http = support::http_client();
                let mut refused = 0usize;
                for i in 0.. {
                    if !running.load(std::sync::atomic::Ordering::Relaxed) {
                        break;
                    }
                    match post(&http, &front, &format!("load-{c}-{i}")).await {
                        Ok((thread, _)) => acknowledged.lock().unwrap().push(thread),
                        // A partition between writers answers 503 or 502: not acknowledged.
                        Err(_) => {
                            refused += 1;
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
                refused
            })
        })
        .collect();
    let count = |n: usize| {
        let acknowledged = Arc::clone(&acknowledged);
        async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            while acknowledged.lock().unwrap().len() < n {
                assert!(
                    Instant::now() < deadline,
                    "the clients stalled before {n} posts"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    count(40).await;
    let http = support::http_client();
    let in_one = acknowledged
        .lock()
        .unwrap()
        .iter()
        .copied()
        .find(|&t| Partition::of(t, 3) == 1)
        .unwrap();
    for host in &mut hosts {
        host.forget();
    }
    let killed = Instant::now();
    hosts[1].kill(); // SIGKILL, under load
    let moved = loop {
        let read = http
            .get(format!("{front}/threads/{in_one}"))
            .bearer_auth(TOKEN)
            .send()
            .await;
        if read.is_ok_and(|r| r.status().is_success()) {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "partition 1 never moved"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    eprintln!("failover: partition 1 answered again {moved:?} after its pump was killed");
    let taken = hosts
        .iter_mut()
        .map(|h| h.said("partition 1 of 3: writing", Duration::from_secs(5)))
        .filter(|&took| took)
        .count();
    assert_eq!(taken, 1, "one other host writes it now");
    let n = acknowledged.lock().unwrap().len();
    count(n + 20).await;

    // Host 2 paused past its lease: partition 2 moves to host 0; resumed, host 2 stops its pump.
    for host in &mut hosts {
        host.forget();
    }
    hosts[2].signal("-STOP");
    assert!(
        hosts[0].said("partition 2 of 3: writing", Duration::from_secs(20)),
        "{:?}",
        hosts[0].seen
    );
    hosts[2].signal("-CONT");
    assert!(
        hosts[2].said(
            "partition 2 of 3: no longer written here",
            Duration::from_secs(20)
        ),
        "{:?}",
        hosts[2].seen
    );
    // Back, host 2 claims its partition, and host 0 gives it up: it hands the lease over once
    // its pump stopped, or, when a loaded machine held its renewal back past the lease, the
    // lease lapsed and host 2 took it — which host 0 learns at its next renewal, or at its
    // next append, which the fence refuses. No thread is written twice either way (checked
    // below). The hand-over alone is tested in tests/jetstream_history.rs, on one server
    // with a longer lease.
    assert!(
        hosts[2].said("partition 2 of 3: writing", Duration::from_secs(30)),
        "{:?}",
        hosts[2].seen
    );
    assert!(
        hosts[0].said(
            "partition 2 of 3: no longer written here",
            Duration::from_secs(5)
        ),
        "{:?}",
        hosts[0].seen
    );
    let gave_up = hosts[0]
        .seen
        .iter()
        .find(|l| l.contains("partition 2 of 3: no longer written here"))
        .cloned()
        .unwrap_or_default();
    let reasons = [
        "handed the writer's lease",
        "it lapsed and",
        "another writer appended",
        "could not renew the writer's lease",
    ];
    assert!(reasons.iter().any(|r| gave_up.contains(r)), "{gave_up}");
    eprintln!("host 0 gave partition 2 back: {gave_up}");
    let n = acknowledged.lock().unwrap().len();
    count(n + 20).await;
    running.store(false, std::sync::atomic::Ordering::Relaxed);
    let mut refused = 0;
    for client in clients {
        refused += client.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    for &thread in &acknowledged {
        answered(&http, &front, thread).await;
    }
    drop(hosts);
    let streams = streams(&url).await;
    for &thread in &acknowledged {
        assert_eq!(echoes(&streams, thread).await, 1, "thread {thread}");
    }
    for stream in &streams {
        assert!(stream.verify().await.unwrap() > 0);
    }
    eprintln!(
        "{} posts acknowledged through the failovers, each answered once; {refused} refused while a partition had no writer",
        acknowledged.len()
    );
}

/// A partitioned organism's usage errors say what to change.
#[test]
fn partitions_without_a_leased_stream_or_past_the_count_are_refused() {
    let scratch = Scratch::new("partitions-usage");
    let cases = [
        (
            "[store]\npartitions = 3\n",
            vec![],
            "partitions = 3 needs kind = \"jetstream\" and lease_ms",
        ),
        (
            "[store]\nkind = \"jetstream\"\nurl = \"nats://127.0.0.1:1\"\nlease_ms = 1000\npartitions = 0\n",
            vec![],
            "partitions must be 1 or more",
        ),
        (
            "[store]\nkind = \"jetstream\"\nurl = \"nats://127.0.0.1:1\"\nlease_ms = 1000\npartitions = 2\n",
            vec!["--partition", "2"],
            "--partition 2: the organism has 2 partitions (0 to 1)",
        ),
        (
            "",
            vec!["--partition", "1"],
            "--partition 1: the organism has one partition",
        ),
        (
            "[store]\nspread_children = true\n",
            vec![],
            "spread_children needs partitions above 1",
        ),
    ];
    for (i, (store, args, expected)) in cases.into_iter().enumerate() {
        let dir: PathBuf = scratch.0.join(format!("case-{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("organism.toml"),
            format!("[organism]\nname = \"usage\"\n\n{store}"),
        )
        .unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
            .args(["run", "organism.toml", "--port", "0"])
            .args(&args)
            .current_dir(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "case {i} ran");
        assert!(stderr.contains(expected), "case {i}: {stderr}");
    }
}

/// An organism in `dir` with its threads in two partitions on the server at `url`, and an
/// `echo` served by workers (`remote = true`) through the same server.
fn remote_organism_in(dir: &Path, url: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("agentpump.token"), TOKEN).unwrap();
    std::fs::write(
        dir.join("organism.toml"),
        format!(
            "[organism]\nname = \"far\"\n\n[store]\nkind = \"jetstream\"\nurl = \"{url}\"\nstream = \"far\"\nlease_ms = {LEASE_MS}\npartitions = 2\n\n[cluster]\nurl = \"{url}\"\nack_wait_ms = 1000\n\n[[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\naccepts = [\"{{urn:example:say:v1}}say\"]\ntimeout_ms = 20000\nremote = true\n"
        ),
    )
    .unwrap();
}

/// Issue 35 with issue 18's remote listeners: "Listeners already run on any host through NATS
/// JetStream (`agentpump worker`)" — and now with the threads in partitions. Two hosts, each
/// writing one partition, hand their `echo` deliveries to one worker; each partition's pump
/// hears its own outcomes. When a host is killed, the other takes its partition, and the
/// deliveries of that partition are answered through its new pump.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_listeners_serve_every_partition_and_follow_a_partition_to_its_new_host() {
    let scratch = Scratch::new("partitions-remote");
    let (_server, url) = support::nats::server(&scratch.0);
    let dirs: Vec<_> = (0..2).map(|i| scratch.0.join(format!("far-{i}"))).collect();
    for dir in &dirs {
        remote_organism_in(dir, &url);
    }
    let mut hosts: Vec<Host> = dirs
        .iter()
        .enumerate()
        .map(|(i, dir)| Host::start(dir, i as u32))
        .collect();
    for (i, host) in hosts.iter_mut().enumerate() {
        let writing = format!("partition {i} of 2: writing");
        assert!(
            host.said(&writing, Duration::from_secs(60)),
            "{:?}",
            host.seen
        );
    }
    let mut worker = std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .args(["worker", "--organism", "organism.toml"])
        .current_dir(&dirs[0])
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(dirs[0].join("worker.log")).unwrap())
        .spawn()
        .unwrap();
    let http = support::http_client();
    let mut writers = HashMap::new();
    let mut threads = Vec::new();
    for i in 0..6 {
        let (thread, writer) = post_retrying(&http, &hosts[i % 2].base, &format!("far-{i}")).await;
        *writers.entry(writer).or_insert(0) += 1;
        threads.push(thread);
    }
    assert_eq!(
        writers.len(),
        2,
        "both partitions took threads: {writers:?}"
    );
    for &thread in &threads {
        answered(&http, &hosts[0].base, thread).await;
    }
    // Host 1 goes; host 0 takes partition 1, and its deliveries are answered there.
    hosts[1].kill();
    assert!(
        hosts[0].said("partition 1 of 2: writing", Duration::from_secs(60)),
        "{:?}",
        hosts[0].seen
    );
    let mut later = Vec::new();
    for i in 0..4 {
        let (thread, _) = post_retrying(&http, &hosts[0].base, &format!("later-{i}")).await;
        later.push(thread);
    }
    assert!(
        later.iter().any(|&t| Partition::of(t, 2) == 1),
        "host 0 writes partition 1 now"
    );
    for &thread in &later {
        answered(&http, &hosts[0].base, thread).await;
    }
    let _ = worker.kill();
    let _ = worker.wait();
}
