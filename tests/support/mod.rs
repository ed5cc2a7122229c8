//! Shared helpers for the integration tests: small listeners and history queries.
#![allow(dead_code)]

#[cfg(feature = "host")]
pub mod mcp;
pub mod model;
pub mod nats;
pub mod process;

use std::path::PathBuf;
use std::sync::Arc;

use agentpump::history::{Record, RecordKind};
#[cfg(feature = "host")]
use agentpump::host::server;
use agentpump::{Context, Delivery, Listener, ListenerError, PumpHandle, QName, ThreadId};
use tokio::sync::Semaphore;

/// Runs the `agentpump` binary with `args` in `dir`: (exit 0?, stdout, stderr).
#[cfg(feature = "host")]
pub fn agentpump_in(dir: &std::path::Path, args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the agentpump binary runs");
    (
        out.status.success(),
        String::from_utf8(out.stdout).expect("utf-8 stdout"),
        String::from_utf8(out.stderr).expect("utf-8 stderr"),
    )
}

/// Re-seals `thread`'s chain in the SQLite history `db` as a forger would (each record's
/// digest computed again from the one before), so only a check beyond the chain can tell an
/// edited record.
pub async fn reseal(db: &std::path::Path, thread: ThreadId) {
    use agentpump::history::HistoryStore as _;
    let store = agentpump::history::SqliteHistory::open(db).unwrap();
    let records = store.thread(thread, 0).await.unwrap();
    store.close().unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(db).unwrap();
    let mut previous = [0u8; 32];
    for record in records {
        previous = record.chained_digest(&previous);
        conn.execute(
            "UPDATE records SET digest = ?1 WHERE seq = ?2",
            rusqlite::params![previous.to_vec(), record.seq as i64],
        )
        .unwrap();
    }
}

/// Namespace of the test payloads.
pub const NS: &str = "urn:test:v1";

/// `{urn:test:v1}local`.
pub fn q(local: &str) -> QName {
    QName::new(NS, local)
}

/// `<local xmlns="urn:test:v1">body</local>`.
pub fn p(local: &str, body: &str) -> String {
    format!(r#"<{local} xmlns="{NS}">{body}</{local}>"#)
}

type Handler = dyn Fn(&Delivery, &mut Context) -> Result<(), ListenerError> + Send + Sync;

/// A listener made of a closure.
#[derive(Clone)]
pub struct Script(Arc<Handler>);

impl Script {
    pub fn new(
        f: impl Fn(&Delivery, &mut Context) -> Result<(), ListenerError> + Send + Sync + 'static,
    ) -> Self {
        Self(Arc::new(f))
    }
}

#[async_trait::async_trait]
impl Listener for Script {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        (self.0)(msg, cx)
    }
}

/// Replies with the payload it got, but only after the test hands out a permit; adds a permit
/// to `entered` when a delivery starts waiting.
#[derive(Clone)]
pub struct Gate {
    pub permits: Arc<Semaphore>,
    pub entered: Arc<Semaphore>,
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self {
            permits: Arc::new(Semaphore::new(0)),
            entered: Arc::new(Semaphore::new(0)),
        }
    }

    /// Waits until a delivery is inside the handler.
    pub async fn entered(&self) {
        self.entered.acquire().await.expect("open").forget();
    }

    /// Lets `n` deliveries through.
    pub fn open(&self, n: usize) {
        self.permits.add_permits(n);
    }
}

#[async_trait::async_trait]
impl Listener for Gate {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        self.entered.add_permits(1);
        self.permits.acquire().await.expect("gate open").forget();
        cx.reply(msg.payload().as_str());
        Ok(())
    }
}

/// The system element and code of a system record (`("system-error", "peer-not-allowed")`).
pub fn notice(record: &Record) -> (String, String) {
    let element = record.root.local().to_owned();
    let text = &*record.payload;
    let code = text
        .split("<code>")
        .nth(1)
        .and_then(|r| r.split("</code>").next())
        .or_else(|| {
            text.split("code=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
        })
        .unwrap_or_default()
        .to_owned();
    (element, code)
}

/// The `(to, element, code)` of every system record in a thread.
pub async fn notices(pump: &PumpHandle, thread: ThreadId) -> Vec<(String, String, String)> {
    pump.history(thread)
        .await
        .unwrap()
        .iter()
        .filter(|r| r.kind == RecordKind::System)
        .map(|r| {
            let (element, code) = notice(r);
            (r.to.as_deref().unwrap_or("").to_owned(), element, code)
        })
        .collect()
}

/// The payloads of every egress record (what went out to the client) in a thread, in order.
pub async fn egress(pump: &PumpHandle, thread: ThreadId) -> Vec<String> {
    pump.history(thread)
        .await
        .unwrap()
        .iter()
        .filter(|r| r.kind == RecordKind::Egress)
        .map(|r| r.payload.to_string())
        .collect()
}

/// Asserts that a listener named `echo` accepting `say` still answers in a new thread: the
/// pump keeps serving after whatever the test did to it.
pub async fn assert_echo_serves(pump: &PumpHandle) {
    let r = pump
        .post(None, Some("echo"), &p("say", "still here"))
        .await
        .unwrap();
    pump.settle(r.thread()).await;
    assert_eq!(egress(pump, r.thread()).await, [p("say", "still here")]);
}

/// Posts `payload` into a new thread and waits until the thread settles.
pub async fn start(pump: &PumpHandle, payload: &str) -> ThreadId {
    let thread = pump.post(None, None, payload).await.unwrap().thread();
    pump.settle(thread).await;
    thread
}

#[cfg(feature = "host")]
/// Serves `pump`'s HTTP API on a loopback port until the test ends, requiring `token` and
/// refusing bodies over `max_body` bytes; returns the base URL (`http://127.0.0.1:PORT`).
pub async fn serve(pump: &PumpHandle, token: &str, max_body: usize) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (pump, token) = (pump.clone(), token.to_owned());
    tokio::spawn(async move {
        server::serve(listener, pump, &token, max_body, std::future::pending()).await
    });
    base
}

#[cfg(feature = "host")]
/// The status and body of a problem-JSON answer; fails unless the content type says so.
pub async fn problem(response: reqwest::Response) -> (reqwest::StatusCode, serde_json::Value) {
    let status = response.status();
    let content_type = response.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    let text = response.text().await.unwrap();
    assert_eq!(
        content_type, "application/problem+json",
        "status {status}: {text}"
    );
    let body: serde_json::Value = serde_json::from_str(&text).unwrap();
    // RFC 9457: every problem names its type, a stable URI made from its code.
    assert_eq!(
        body["type"].as_str(),
        Some(format!("urn:agentpump:problem:{}", body["code"].as_str().unwrap()).as_str()),
        "{text}"
    );
    (status, body)
}

/// A scratch folder under the system temp dir, unique to one test of one run. Removed when the
/// test passes, kept for inspection when it fails.
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A fresh, empty folder named after `test`.
    pub fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("agentpump-{test}-{}", ThreadId::new()));
        std::fs::create_dir_all(&dir).expect("create scratch folder");
        Self(dir)
    }

    /// `history.db` inside it.
    pub fn db(&self) -> PathBuf {
        self.0.join("history.db")
    }

    /// Writes `text` to `name` inside it.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("write scratch file");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("scratch files kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(feature = "host")]
/// A reqwest client, with the TLS provider agentpump's build relies on installed.
#[allow(dead_code)]
pub fn http_client() -> reqwest::Client {
    agentpump::listeners::llm::install_tls_provider();
    reqwest::Client::new()
}

#[cfg(feature = "host")]
/// The JSON answer to `request`; fails naming the status and body unless it is a success.
pub async fn json(request: reqwest::RequestBuilder) -> serde_json::Value {
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    assert!(status.is_success(), "{status}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// A pump governed by the default policy with `budget` as the root budget, with these listeners.
pub fn governed(
    budget: agentpump::governor::Budget,
    registrations: Vec<agentpump::Registration>,
) -> PumpHandle {
    let config = agentpump::PumpConfig {
        governor: agentpump::governor::GovernorPolicy {
            budget,
            ..agentpump::governor::GovernorPolicy::default()
        },
        ..agentpump::PumpConfig::default()
    };
    registrations
        .into_iter()
        .fold(
            agentpump::PumpBuilder::new().config(config),
            agentpump::PumpBuilder::register,
        )
        .build()
        .unwrap()
}

/// The text inside a payload's root element (`<n>7</n>` → `7`; empty for an empty element).
pub fn body(msg: &Delivery) -> &str {
    let t = msg.payload().as_str();
    match (t.find('>'), t.rfind("</")) {
        (Some(a), Some(b)) if a < b => &t[a + 1..b],
        _ => "",
    }
}

/// The number inside a payload's root element.
pub fn number<T: std::str::FromStr>(msg: &Delivery) -> T
where
    T::Err: std::fmt::Debug,
{
    body(msg).trim().parse().expect("a number in the payload")
}

/// `looper`, an agent that counts up by messaging itself forever (`<tick>n</tick>` emits
/// `<tick>n+1</tick>`; every payload differs): it runs until the governor stops it.
pub fn looper() -> agentpump::Registration {
    agentpump::Registration::new(
        "looper",
        Script::new(|msg, cx| {
            if !msg.is_system() {
                let n: u64 = body(msg).parse().unwrap_or(0);
                cx.emit(p("tick", &(n + 1).to_string()));
            }
            Ok(())
        }),
    )
    .accepts(q("tick"))
    .role(agentpump::Role::Agent)
}

/// `name`, which on `<go>` spawns `children` child threads (`w0`, `w1`, …), each carving
/// `budget` and starting with `<wait>` for the `gate` listener.
pub fn carving_spawner(
    name: &str,
    children: usize,
    budget: agentpump::governor::Budget,
) -> agentpump::Registration {
    agentpump::Registration::new(
        name,
        Script::new(move |msg, cx| {
            if msg.qname().local() == "go" {
                for i in 0..children {
                    let spawn = agentpump::Spawn::new(p("wait", ""))
                        .sub_id(format!("w{i}"))
                        .budget(budget.clone());
                    cx.spawn(spawn);
                }
            }
            Ok(())
        }),
    )
    .accepts(q("go"))
    .peers(["gate"])
}

/// Microseconds since the Unix epoch, as the history stamps records.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// A history file for retention tests: two root threads answered by an echo before the
/// returned cut — `halted`, stopped after the cut (so its halt records are newer than the
/// cut), and `open`, left idle. Returns (halted, open, cut in microseconds); the file is
/// closed.
pub async fn finished_and_open(db: &std::path::Path) -> (ThreadId, ThreadId, i64) {
    use std::time::Duration;
    let store = Arc::new(agentpump::history::SqliteHistory::open(db).unwrap());
    let pump = agentpump::PumpBuilder::new()
        .history(Arc::clone(&store) as Arc<dyn agentpump::history::HistoryStore>)
        .register(
            agentpump::Registration::new("echo", agentpump::listeners::Echo).accepts(q("say")),
        )
        .build()
        .unwrap();
    let halted = start(&pump, &p("say", "old")).await;
    let open = start(&pump, &p("say", "still open")).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    let cut = now_us();
    tokio::time::sleep(Duration::from_millis(5)).await;
    pump.stop(halted).await.unwrap();
    pump.settle(halted).await;
    pump.shutdown(Duration::from_secs(1)).await;
    store.close().unwrap();
    (halted, open, cut)
}

/// The base URL in `agentpump run`'s first line (`… listening on http://ADDR …`).
pub fn listening_on(ready: &str) -> String {
    ready
        .split("listening on ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no address in agentpump run's first line: {ready}"))
        .to_owned()
}

/// The API token `agentpump run` wrote beside its organism in `dir`.
pub fn token_in(dir: &std::path::Path) -> String {
    std::fs::read_to_string(dir.join("agentpump.token"))
        .unwrap()
        .trim()
        .to_owned()
}

/// `<say xmlns="urn:example:say:v1">text</say>`, what [`echo_pump`]'s echo accepts.
pub fn say_v1(text: &str) -> String {
    format!(r#"<say xmlns="urn:example:say:v1">{text}</say>"#)
}

/// A pump on `store` with one `echo` accepting `{urn:example:say:v1}say`.
pub fn echo_pump(store: Arc<dyn agentpump::history::HistoryStore>) -> agentpump::PumpHandle {
    agentpump::PumpBuilder::new()
        .register(
            agentpump::Registration::new("echo", agentpump::listeners::Echo)
                .accepts(agentpump::QName::new("urn:example:say:v1", "say")),
        )
        .history(store)
        .build()
        .unwrap()
}

/// A thread started through `pump` with `<say>{body}</say>` to `echo`, settled; its id.
pub async fn converse_one(pump: &agentpump::PumpHandle, body: &str) -> agentpump::ThreadId {
    let receipt = pump.post(None, Some("echo"), &say_v1(body)).await.unwrap();
    tokio::time::timeout(
        std::time::Duration::from_secs(30),
        pump.settle(receipt.thread()),
    )
    .await
    .expect("a thread settles");
    receipt.thread()
}

/// `n` threads started through `pump` with one message each to `echo` and settled; their ids.
pub async fn converse(
    pump: &agentpump::PumpHandle,
    n: usize,
    tag: &str,
) -> Vec<agentpump::ThreadId> {
    let mut threads = Vec::new();
    for i in 0..n {
        let receipt = pump
            .post(None, Some("echo"), &say_v1(&format!("{tag}-{i}")))
            .await
            .unwrap();
        threads.push(receipt.thread());
    }
    for &t in &threads {
        tokio::time::timeout(std::time::Duration::from_secs(30), pump.settle(t))
            .await
            .expect("a thread settles");
    }
    threads
}
