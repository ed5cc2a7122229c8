//! Faults outside the pump: the history disk filling up or being read-only, and the LLM
//! endpoint vanishing mid-run. In each, the pump answers with a precise error, keeps what it
//! acknowledged, and carries on (or restarts) once the fault is gone.
//!
//! The disk tests mount a small tmpfs, which needs root; elsewhere they say so and skip.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use agentpump::history::{HistoryStore, RecordKind, SqliteHistory};
use agentpump::host::server;
use agentpump::listeners::Echo;
use agentpump::listeners::llm::{LlmAgent, LlmConfig};
use agentpump::{IngressError, MessageId, PumpBuilder, PumpHandle, Registration, Role, ThreadId};
use support::model::{Endpoint, Model, Reply, answer};
use support::{Gate, Scratch, egress, notices, p, q};

/// A tmpfs of a given size on a scratch folder, unmounted when dropped.
struct SmallDisk {
    dir: PathBuf,
    _scratch: Scratch,
}

impl SmallDisk {
    /// Mounts one, or says why it cannot (not root, no mount) and returns `None`; with
    /// `AGENTPUMP_TESTS_NEED_MOUNT` set (`.ci/run` sets it) it cannot skip: it fails.
    fn mount(test: &str, size: &str) -> Option<Self> {
        let must = std::env::var_os("AGENTPUMP_TESTS_NEED_MOUNT").is_some();
        let scratch = Scratch::new(test);
        let dir = scratch.0.join("disk");
        std::fs::create_dir_all(&dir).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output();
        match mounted {
            Ok(out) if out.status.success() => Some(Self {
                dir,
                _scratch: scratch,
            }),
            Ok(out) => {
                let why = String::from_utf8_lossy(&out.stderr);
                assert!(!must, "{test}: cannot mount a tmpfs: {}", why.trim());
                eprintln!(
                    "SKIPPED {test}: cannot mount a tmpfs (needs root): {}",
                    why.trim()
                );
                None
            }
            Err(e) => {
                assert!(!must, "{test}: cannot run mount: {e}");
                eprintln!("SKIPPED {test}: cannot run mount: {e}");
                None
            }
        }
    }

    /// Changes the mount's options (`size=64m`, `ro`, `rw`).
    fn remount(&self, options: &str) {
        let out = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "remount {options}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn db(&self) -> PathBuf {
        self.dir.join("history.db")
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

fn echo() -> Registration {
    Registration::new("echo", Echo).accepts(q("say"))
}

fn pump_on(db: &Path) -> Result<(PumpHandle, Arc<dyn HistoryStore>), String> {
    gated_pump_on(db, &Gate::new())
}

/// A pump with `echo` and `gate` (which answers `wait` once the test lets it).
fn gated_pump_on(db: &Path, gate: &Gate) -> Result<(PumpHandle, Arc<dyn HistoryStore>), String> {
    let store: Arc<dyn HistoryStore> =
        Arc::new(SqliteHistory::open(db).map_err(|e| e.to_string())?);
    let pump = PumpBuilder::new()
        .history(Arc::clone(&store))
        .register(echo())
        .register(Registration::new("gate", gate.clone()).accepts(q("wait")))
        .build()
        .map_err(|e| e.to_string())?;
    Ok((pump, store))
}

/// Every acknowledged message, by the thread it went into.
type Acked = Vec<(ThreadId, MessageId)>;

/// Asserts that the store holds every acknowledged message and that each thread's chain holds.
async fn assert_all_present(store: &Arc<dyn HistoryStore>, acked: &Acked) {
    for (thread, id) in acked {
        let records = store.thread(*thread, 0).await.unwrap();
        assert!(
            records.iter().any(|r| r.id == *id),
            "acknowledged message {id} in {thread} is missing"
        );
        agentpump::history::verify_chain(&records).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_input_then_recovers_without_a_restart_losing_nothing_acknowledged() {
    let Some(disk) = SmallDisk::mount("full-disk", "1m") else {
        return;
    };
    let gate = Gate::new();
    let (pump, store) = gated_pump_on(&disk.db(), &gate).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let served = pump.clone();
    let (stop_serving, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        server::serve(listener, served, "t0123456789abcdef", 1 << 20, async {
            let _ = stopped.await;
        })
        .await
    });

    let client = support::http_client();
    let health = || {
        client
            .get(format!("{base}/health"))
            .bearer_auth("t0123456789abcdef")
            .send()
    };
    assert_eq!(health().await.unwrap().status(), 200);

    // Three acknowledged messages whose handlers are running when the disk fills.
    let mut held: Acked = Vec::new();
    for n in 0..3 {
        let receipt = pump.post(None, None, &p("wait", &n.to_string())).await;
        let receipt = receipt.unwrap();
        held.push((receipt.thread(), receipt.ids()[0]));
        gate.entered().await;
    }

    // Fill the disk with acknowledged messages until the store refuses one.
    let filler = "x".repeat(8 * 1024);
    let mut acked: Acked = Vec::new();
    let refusal: IngressError = loop {
        match pump.post(None, None, &p("say", &filler)).await {
            Ok(receipt) => acked.push((receipt.thread(), receipt.ids()[0])),
            Err(e) => break e,
        }
        assert!(acked.len() < 10_000, "a 1 MiB disk never filled up");
    };
    assert!(acked.len() > 5, "only {} messages fit", acked.len());
    assert_eq!(refusal.code(), "history-unavailable");
    assert_eq!(refusal.recorded_in(), None);
    assert!(
        refusal.to_string().contains("database or disk is full"),
        "{refusal}"
    );

    // From then on new input is refused the same way, also over HTTP as problem JSON, while
    // what was accepted can still be read.
    let again = pump.post(None, None, &p("say", "small")).await.unwrap_err();
    assert_eq!(again.code(), "history-unavailable");
    let response = client
        .post(format!("{base}/threads"))
        .bearer_auth("t0123456789abcdef")
        .body(p("say", "over http"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    let problem: serde_json::Value = response.json().await.unwrap();
    assert!(
        problem.to_string().contains("history-unavailable"),
        "{problem}"
    );
    let unhealthy = health().await.unwrap();
    assert_eq!(unhealthy.status(), 503);
    let problem: serde_json::Value = unhealthy.json().await.unwrap();
    assert_eq!(problem["code"], "history-unavailable", "{problem}");
    assert_eq!(
        pump.health().unwrap_err().code(),
        "history-unavailable",
        "the embedding program can ask too"
    );
    assert_all_present(&store, &acked).await;
    assert_all_present(&store, &held).await;

    // The held handlers finish now: their commits fail, and their messages wait.
    gate.open(held.len());
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (thread, _) in &held {
        assert!(egress(&pump, *thread).await.is_empty(), "{thread}");
    }
    assert_eq!(pump.health().unwrap_err().code(), "history-unavailable");

    // Room again: the same pump, without a restart, finds the disk writable, delivers every
    // acknowledged message that was waiting, and accepts input again.
    disk.remount("size=64m");
    let healed = async {
        while pump.health().is_err() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(15), healed)
        .await
        .expect("the pump takes input again once the disk has room");
    let healthy = health().await.unwrap();
    assert_eq!(healthy.status(), 200, "/health is ok again");
    let fresh = pump
        .post(None, None, &p("say", "room again"))
        .await
        .unwrap();
    pump.settle(fresh.thread()).await;
    assert_eq!(
        egress(&pump, fresh.thread()).await,
        [p("say", "room again")]
    );
    let over_http = client
        .post(format!("{base}/threads"))
        .bearer_auth("t0123456789abcdef")
        .body(p("say", "over http again"))
        .send()
        .await
        .unwrap();
    assert_eq!(over_http.status(), 201);
    // The held messages are delivered again (their first run left nothing in history).
    gate.open(held.len());
    acked.extend(held.iter().copied());
    let delivered = async {
        for (thread, _) in &acked {
            while egress(&pump, *thread).await.is_empty() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(15), delivered)
        .await
        .expect("every acknowledged message is delivered without a restart");
    assert_each_once(&store, &acked).await;
    assert!(pump.verify().await.unwrap() > acked.len() as u64);
    let verified = Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .args(["verify", "--db"])
        .arg(disk.db())
        .output()
        .unwrap();
    assert!(
        verified.status.success(),
        "agentpump verify: {}",
        String::from_utf8_lossy(&verified.stderr)
    );
    pump.shutdown(Duration::from_secs(5)).await;
    assert_eq!(pump.health().unwrap_err().code(), "shutting-down");
    // The server holds the pump, and the pump its store (one writing store per file): both go
    // before the restart, as with a process that ends.
    drop(client);
    let _ = stop_serving.send(());
    server.await.unwrap().unwrap();
    drop((pump, store));

    // A restart finds the same history: nothing delivered twice, nothing waiting. (The old
    // pump's tasks drop their weak hold of the store a moment after the last handle.)
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    let (pump, store) = loop {
        match pump_on(&disk.db()) {
            Ok(opened) => break opened,
            Err(e) if tokio::time::Instant::now() < deadline && e.contains("already open") => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("{e}"),
        }
    };
    for (thread, _) in &acked {
        pump.settle(*thread).await;
    }
    assert_each_once(&store, &acked).await;
    assert!(pump.verify().await.unwrap() > acked.len() as u64);
}

/// Asserts that each acknowledged message is in its thread once, answered by one reply.
async fn assert_each_once(store: &Arc<dyn HistoryStore>, acked: &Acked) {
    assert_all_present(store, acked).await;
    for (thread, id) in acked {
        let records = store.thread(*thread, 0).await.unwrap();
        let copies = records.iter().filter(|r| r.id == *id).count();
        let replies = records
            .iter()
            .filter(|r| r.kind == RecordKind::Egress && r.in_reply_to == Some(*id))
            .count();
        assert_eq!((copies, replies), (1, 1), "{thread}: {records:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_disk_is_refused_at_start_and_its_history_stays_readable() {
    let Some(disk) = SmallDisk::mount("read-only-disk", "8m") else {
        return;
    };
    let (pump, store) = pump_on(&disk.db()).unwrap();
    let thread = support::start(&pump, &p("say", "before")).await;
    pump.shutdown(Duration::from_secs(5)).await;
    drop((pump, store));

    // Linux refuses to make a filesystem read-only while a file on it is open for writing, so
    // a disk turning read-only under a running pump surfaces as failed writes (the full-disk
    // case); here it is read-only when the pump starts.
    disk.remount("ro");
    let Err(err) = pump_on(&disk.db()) else {
        panic!("a read-only disk is refused");
    };
    assert!(
        err.contains("history.db: read-only"),
        "the error says why: {err}"
    );
    let reader = SqliteHistory::open_read_only(disk.db()).unwrap();
    let records = reader.thread(thread, 0).await.unwrap();
    assert_eq!(records.len(), 2, "message and reply are readable");
    assert_eq!(records[1].kind, RecordKind::Egress);
    disk.remount("rw");
}

fn assistant(base: String) -> Registration {
    let mut config = LlmConfig::new(base, "m");
    config.retries = 1;
    config.timeout = Duration::from_secs(2);
    Registration::from_shared(
        "assistant",
        Arc::new(LlmAgent::new(config, "You think in steps.")),
    )
    .accepts(q("ask"))
    .accepts(q("think"))
    .role(Role::Agent)
}

/// Waits until the model has received `n` requests.
async fn requests_reach(model: &Model, n: usize) {
    while model.requests.lock().unwrap().len() < n {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_llm_endpoint_that_vanishes_mid_run_is_an_upstream_failure_not_a_hang() {
    // The first answer makes the agent think again; the second request is in flight when the
    // endpoint vanishes, and the retry finds nobody listening.
    let slow = Reply {
        delay: Duration::from_secs(30),
        ..answer("too late", 1, 1)
    };
    let model = Arc::new(Model::default());
    model.replies.lock().unwrap().extend([
        answer(&format!("Step one. {}", p("think", "step two")), 10, 5),
        slow,
    ]);
    let mut endpoint = Endpoint::start(&model, SocketAddr::from(([127, 0, 0, 1], 0)));
    let pump = PumpBuilder::new()
        .register(assistant(endpoint.base()))
        .register(echo())
        .build()
        .unwrap();
    let thread = pump
        .post(None, Some("assistant"), &p("ask", "go"))
        .await
        .unwrap()
        .thread();
    requests_reach(&model, 2).await;
    endpoint.vanish();
    tokio::time::timeout(Duration::from_secs(30), pump.settle(thread))
        .await
        .expect("the thread settles instead of hanging");

    let got = notices(&pump, thread).await;
    let failure = got
        .iter()
        .find(|(_, el, code)| el == "system-error" && code == "upstream-failed")
        .unwrap_or_else(|| panic!("upstream-failed in {got:?}"));
    assert_eq!(failure.0, "assistant", "the agent is told");
    let history = pump.history(thread).await.unwrap();
    assert!(
        history.iter().any(|r| r.payload.contains("step two")),
        "what the agent said before the outage is kept"
    );
    assert_eq!(
        model.requests.lock().unwrap().len(),
        2,
        "no answer was made up"
    );
    support::assert_echo_serves(&pump).await;

    // Back on the same address: the agent works again.
    model.replies.lock().unwrap().push_back(answer(
        r#"Done. <loop xmlns="urn:agentpump:governor:v1" control="done"/>"#,
        3,
        3,
    ));
    let _endpoint = Endpoint::start(&model, endpoint.addr);
    let again = pump
        .post(None, Some("assistant"), &p("ask", "again"))
        .await
        .unwrap()
        .thread();
    tokio::time::timeout(Duration::from_secs(30), pump.settle(again))
        .await
        .expect("settles");
    let report = pump.reports(again).await.unwrap().pop().expect("halted");
    assert_eq!(
        (report.class.as_str(), report.stop_reason.as_str()),
        ("done-uncertified", "no-criteria-declared")
    );
}
