//! History on NATS JetStream (issue 35, its first part): a pump whose history is a JetStream
//! stream, against real `nats-server` processes — one server, and a three-node cluster keeping
//! three replicas. Needs `nats-server` on the PATH (`.ci/run` installs it).

#![cfg(feature = "nats")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use agentpump::history::{
    Batch, HistoryStore, JetStreamHistory, JetStreamOptions, LeaseOptions, NewRecord, Record,
    RecordKind,
};
use agentpump::{Envelope, Limits, Payload, PumpHandle, ThreadId};
use support::{Scratch, say_v1 as say};

async fn open(url: &str, stream: &str, replicas: usize) -> Arc<JetStreamHistory> {
    // A cluster that lost a node elects new leaders first; on a loaded 2-core machine that
    // can take tens of seconds.
    let mut options = JetStreamOptions::new(url, stream);
    options.replicas = replicas;
    options.patience = Duration::from_secs(60);
    Arc::new(JetStreamHistory::open(options).await.unwrap())
}

fn pump_on(store: &Arc<JetStreamHistory>) -> PumpHandle {
    support::echo_pump(store.clone())
}

/// One batch of messages from the client into `thread`, appended by hand (not through a pump).
fn client_batch(thread: ThreadId, payloads: &[String]) -> Batch {
    let records = payloads
        .iter()
        .map(|xml| NewRecord {
            envelope: Envelope::new(
                "client".into(),
                thread,
                Payload::parse(xml, &Limits::default()).unwrap(),
            ),
            kind: RecordKind::Message,
            pending: false,
        })
        .collect();
    Batch {
        records,
        ..Batch::default()
    }
}

async fn records(store: &dyn HistoryStore, threads: &[ThreadId]) -> Vec<Vec<Record>> {
    let mut out = Vec::new();
    for &t in threads {
        out.push(store.thread(t, 0).await.unwrap());
    }
    out
}

/// Issue 35: "History on JetStream: a `HistoryStore` that appends each commit batch to a
/// stream … `agentpump verify` … work against it" and "a restart of everything from the stream
/// alone": a second store opened on the stream (nothing else kept) has every record, sequence
/// number and digest, verifies, and a pump on it goes on where the first stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pump_restarts_from_the_history_stream_alone() {
    let scratch = Scratch::new("js-history-restart");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "restart", 1).await;
    let pump = pump_on(&store);
    let threads = support::converse(&pump, 20, "first").await;
    let before = records(&*store, &threads).await;
    assert!(
        before.iter().all(|r| r.len() == 2),
        "a message and its echo each"
    );
    let marks = store.marks(threads[0]).await.unwrap();
    assert!(
        marks[0].timing.is_some(),
        "the delivery is timed: {marks:?}"
    );
    pump.shutdown(Duration::from_secs(5)).await;
    let checked = store.verify().await.unwrap();
    drop(pump);
    drop(store);

    let again = open(&url, "restart", 1).await;
    assert_eq!(
        records(&*again, &threads).await,
        before,
        "the same records, seq and digests"
    );
    assert_eq!(again.verify().await.unwrap(), checked);
    assert_eq!(
        again.marks(threads[0]).await.unwrap(),
        marks,
        "usage and timings too"
    );
    let pump = pump_on(&again);
    let next = pump
        .post(Some(threads[0]), Some("echo"), &say("again"))
        .await
        .unwrap();
    pump.settle(next.thread()).await;
    let thread = again.thread(threads[0], 0).await.unwrap();
    assert_eq!(thread.len(), 4, "the thread goes on: {thread:#?}");
    assert!(thread[2].seq > before.iter().flatten().map(|r| r.seq).max().unwrap());
    assert!(again.verify().await.unwrap() > checked);
    pump.shutdown(Duration::from_secs(5)).await;
}

/// Issue 35: "fencing … so two pumps never append to one thread": a second store on the same
/// stream is refused at its first append once the first has appended since it opened (the
/// stream's expected last sequence), names why and takes no more writes; the first goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_writer_on_one_stream_is_refused_and_the_first_goes_on() {
    let scratch = Scratch::new("js-history-fence");
    let (_server, url) = support::nats::server(&scratch.0);
    let first = open(&url, "fence", 1).await;
    let second = open(&url, "fence", 1).await;
    let pump = pump_on(&first); // its boot record moves the stream on
    support::converse(&pump, 2, "first").await;
    let batch = client_batch(ThreadId::new(), &[say("x")]);
    let refused = batch.records[0].envelope.id();
    let error = second
        .append(batch)
        .unwrap()
        .wait()
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("another writer appended to the history stream `fence`"),
        "{error}"
    );
    assert!(
        second.was_refused(refused),
        "a pump drops the unacknowledged message from its queue"
    );
    assert_eq!(
        second.writable().unwrap_err().to_string(),
        error,
        "no more writes"
    );
    support::converse(&pump, 2, "still").await;
    assert!(first.writable().is_ok());
    first.verify().await.unwrap();
    pump.shutdown(Duration::from_secs(5)).await;
}

/// The hash chain holds on the stream too: an append published by hand whose records do not
/// rebuild as it says (an altered stream) stops the next open, naming its stream sequence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_altered_stream_is_refused_at_open_naming_the_message() {
    let scratch = Scratch::new("js-history-altered");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "altered", 1).await;
    let pump = pump_on(&store);
    let threads = support::converse(&pump, 1, "one").await;
    pump.shutdown(Duration::from_secs(5)).await;
    let record = &store.thread(threads[0], 0).await.unwrap()[0];
    drop(pump);
    drop(store);
    // The first append again, its payload's text changed and its recorded digests kept.
    let client = async_nats::connect(&url).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let mut stream = js.get_stream("altered").await.unwrap();
    let last = stream.info().await.unwrap().state.last_sequence;
    let original = (1..=last)
        .map(|seq| stream.get_raw_message(seq))
        .collect::<futures_util::stream::FuturesOrdered<_>>();
    let messages: Vec<_> = futures_util::StreamExt::collect::<Vec<_>>(original).await;
    let carrying = messages
        .into_iter()
        .map(|m| m.unwrap())
        .find(|m| String::from_utf8_lossy(&m.payload).contains(&record.id.to_string()))
        .expect("the append carrying the first message");
    let forged = String::from_utf8_lossy(&carrying.payload).replace("one-0", "one-X");
    js.publish("agentpump.history.altered", forged.into_bytes().into())
        .await
        .unwrap()
        .await
        .unwrap();
    let mut options = JetStreamOptions::new(&url, "altered");
    options.patience = Duration::from_secs(5);
    let refused = JetStreamHistory::open(options)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains(&format!(
            "message {} of the history stream `altered`",
            last + 1
        )) && refused.contains("the stream was altered"),
        "{refused}"
    );
}

/// Issue 35: "kill -9 of one NATS node: no acknowledged record lost, the pumps continue" — a
/// three-node cluster keeping three replicas; a node is killed between two rounds of
/// conversations; the second round is acknowledged, and a store opened afterwards on the two
/// nodes left has every record of both rounds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_replica_stream_loses_nothing_when_a_node_is_killed() {
    let scratch = Scratch::new("js-history-cluster");
    let mut cluster = support::nats::Cluster::start(&scratch.0);
    let store = open(&cluster.url(), "replicated", 3).await;
    let pump = pump_on(&store);
    let mut threads = support::converse(&pump, 10, "before").await;
    cluster.nodes[0].kill();
    threads.extend(support::converse(&pump, 10, "after").await);
    let acknowledged = records(&*store, &threads).await;
    assert!(acknowledged.iter().all(|r| r.len() == 2));
    pump.shutdown(Duration::from_secs(5)).await;
    drop(pump);
    drop(store);
    let left = cluster.urls[1..].join(",");
    let again = open(&left, "replicated", 3).await;
    assert_eq!(records(&*again, &threads).await, acknowledged);
    again.verify().await.unwrap();
}

/// An append larger than the server's largest message (1 MB by default) goes in parts and
/// comes back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_past_the_largest_message_goes_in_parts_and_comes_back_whole() {
    let scratch = Scratch::new("js-history-parts");
    let (_server, url) = support::nats::server(&scratch.0);
    let store = open(&url, "parts", 1).await;
    let thread = ThreadId::new();
    let big = "a".repeat(700_000);
    let batch = client_batch(thread, &[say(&format!("0{big}")), say(&format!("1{big}"))]);
    store.append(batch).unwrap().wait().await.unwrap();
    let written = store.thread(thread, 0).await.unwrap();
    drop(store);
    let client = async_nats::connect(&url).await.unwrap();
    let mut stream = async_nats::jetstream::new(client)
        .get_stream("parts")
        .await
        .unwrap();
    assert!(stream.info().await.unwrap().state.messages >= 2, "in parts");
    let again = open(&url, "parts", 1).await;
    assert_eq!(again.thread(thread, 0).await.unwrap(), written);
}

/// `agentpump run` with `[store] kind = "jetstream"` on the organism's stream; its first line
/// (the address) and the child.
#[cfg(feature = "host")]
fn run_host(dir: &std::path::Path) -> (std::process::Child, String) {
    let (mut child, ready) = start_host(dir, 0);
    match ready.recv() {
        Ok(base) => (child, base),
        Err(_) => {
            let mut err = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
            panic!("agentpump run did not start: {err}");
        }
    }
}

/// `agentpump run` started in `dir` on `port` (0: any); its address arrives on the channel once
/// it serves as the writer (a standby waiting for the lease sends nothing yet).
#[cfg(feature = "host")]
fn start_host(
    dir: &std::path::Path,
    port: u16,
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agentpump"))
        .args(["run", "organism.toml", "--port", &port.to_string()])
        .current_dir(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = lines.map_while(Result::ok);
        if let Some(first) = lines.next() {
            let _ = tx.send(support::listening_on(&first));
        }
        lines.for_each(drop);
    });
    (child, rx)
}

/// An organism in `dir` on stream `stream` of the server at `url`, with an echo listener and,
/// when given, the writer's lease.
#[cfg(feature = "host")]
fn organism_on(dir: &std::path::Path, url: &str, stream: &str, lease_ms: Option<u64>) {
    std::fs::create_dir_all(dir).unwrap();
    let lease = lease_ms.map_or(String::new(), |ms| format!("lease_ms = {ms}\n"));
    std::fs::write(
        dir.join("organism.toml"),
        format!(
            "[organism]\nname = \"js\"\n\n[store]\nkind = \"jetstream\"\nurl = \"{url}\"\nstream = \"{stream}\"\n{lease}\n[[listener]]\nname = \"echo\"\nkind = \"builtin\"\nbuiltin = \"echo\"\naccepts = [\"{{urn:example:say:v1}}say\"]\n"
        ),
    )
    .unwrap();
}

/// Issue 35, failover: "when a pump dies its leases lapse and the others take its partitions"
/// — and when the pump that should write a partition comes back, it gets it back without
/// waiting for a lapse: a store that took the lease only because its home host was away
/// (`defer`) hands it over when that host claims it. It stops taking writes at once, keeps
/// the lease until it is dropped (its pump stopped, so the two never deliver at once), and
/// the claimant opens only then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferring_writer_hands_the_lease_to_the_home_store_when_it_claims_it() {
    let scratch = Scratch::new("js-history-handover");
    let (_server, url) = support::nats::server(&scratch.0);
    // Long enough that a test beside it on a loaded machine does not hold a renewal back
    // past it (the partitions test lets such a lapse through; this one is about the hand-over).
    let ttl = Duration::from_secs(6);
    let leased = |owner: &str, defer: Duration| {
        let mut options = JetStreamOptions::new(&url, "handover");
        options.patience = Duration::from_secs(60);
        let mut lease = LeaseOptions::this_process(ttl);
        lease.owner = owner.to_owned();
        lease.defer = defer;
        options.lease = Some(lease);
        options
    };
    // The home store is away: the deferring one waits a whole time to live, then writes.
    let standing_in = JetStreamHistory::open(leased("stand-in", ttl))
        .await
        .unwrap();
    standing_in.writable().unwrap();
    let home = tokio::spawn(JetStreamHistory::open(leased("home", Duration::ZERO)));
    let deadline = tokio::time::Instant::now() + ttl * 4;
    let handed = loop {
        if let Err(e) = standing_in.writable() {
            break e.to_string();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stand-in never heard the claim"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        handed.contains("handed the writer's lease on the history stream `handover` to home"),
        "{handed}"
    );
    // Still held while the stand-in lives, renewed: the home store waits past a time to live.
    tokio::time::sleep(ttl + ttl / 2).await;
    assert!(
        !home.is_finished(),
        "the home store opened while the stand-in held the lease"
    );
    drop(standing_in);
    let home = tokio::time::timeout(ttl, home)
        .await
        .expect("released at the drop, not lapsed: the home store opens within a time to live")
        .unwrap()
        .unwrap();
    home.writable().unwrap();
}

/// Issue 35, failover: "when a pump dies its leases lapse and the others take its partitions;
/// a pump that lost its lease stops writing (fencing …)", tested as the issue asks — "a paused
/// pump — SIGSTOP past its lease, then SIGCONT — must not append" — and "kill -9 of a pump":
/// two `agentpump run` hosts on one stream with `lease_ms`; the second waits (standby) while
/// the first writes; paused past its lease, the first is replaced by the second, which serves
/// every acknowledged message; resumed, the first takes nothing more into the stream; killed
/// with SIGKILL, the second is replaced by a third host started on the stream alone.
#[cfg(feature = "host")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_a_lapsed_lease_and_the_old_writer_is_fenced() {
    let scratch = Scratch::new("js-history-lease");
    let (_server, url) = support::nats::server(&scratch.0);
    let (a_dir, b_dir, c_dir) = (
        scratch.0.join("a"),
        scratch.0.join("b"),
        scratch.0.join("c"),
    );
    for dir in [&a_dir, &b_dir, &c_dir] {
        organism_on(dir, &url, "leased", Some(1_500));
    }
    let http = support::http_client();
    let post = |base: &str, token: &str, text: &str| {
        http.post(format!("{base}/threads?to=echo"))
            .bearer_auth(token)
            .timeout(Duration::from_secs(20))
            .body(say(text))
    };
    let (mut a, a_base) = run_host(&a_dir);
    let a_token = support::token_in(&a_dir);
    let b_port = support::nats::free_port();
    let (mut b, b_ready) = start_host(&b_dir, b_port);
    let mut threads = Vec::new();
    for i in 0..3 {
        let answer = support::json(post(&a_base, &a_token, &format!("first-{i}"))).await;
        threads.push(answer["thread"].as_str().unwrap().to_owned());
    }
    assert!(
        b_ready.recv_timeout(Duration::from_millis(2_000)).is_err(),
        "a standby does not write while the writer holds the lease"
    );
    // "Ingress: any pump's HTTP API accepts a request for any thread and forwards it to the
    // owner": the standby forwards a post and a read to the writer, answers as they are.
    let standby = format!("http://127.0.0.1:{b_port}");
    let forwarded = post(&standby, &a_token, "via-standby")
        .send()
        .await
        .unwrap();
    assert_eq!(
        forwarded.headers()["agentpump-forwarded-from"]
            .to_str()
            .unwrap(),
        a_base,
        "answered by the writer"
    );
    let answer: serde_json::Value = forwarded.json().await.unwrap();
    threads.push(answer["thread"].as_str().unwrap().to_owned());
    let read = http
        .get(format!("{standby}/threads/{}/history", threads[3]))
        .bearer_auth(&a_token);
    let text = support::json(read).await.to_string();
    assert!(text.contains("via-standby"), "{text}");
    // Paused past its lease: the standby takes over.
    let pause = std::time::Instant::now();
    let stop = |child: &std::process::Child, signal: &str| {
        let status = std::process::Command::new("kill")
            .args([signal, &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    stop(&a, "-STOP");
    let b_base = b_ready
        .recv_timeout(Duration::from_secs(30))
        .expect("the standby serves once the paused writer's lease lapsed");
    let b_token = support::token_in(&b_dir);
    let answered = support::json(post(&b_base, &b_token, "second")).await;
    eprintln!(
        "failover (pause → first answer from the new writer): {:?}",
        pause.elapsed()
    );
    threads.push(answered["thread"].as_str().unwrap().to_owned());
    for (i, thread) in threads.iter().take(3).enumerate() {
        let history = http.get(format!("{b_base}/threads/{thread}/history"));
        let text = support::json(history.bearer_auth(&b_token))
            .await
            .to_string();
        assert!(text.contains(&format!("first-{i}")), "{thread}: {text}");
    }
    // Resumed: the old writer is fenced — its post is refused, nothing of it reaches the stream.
    stop(&a, "-CONT");
    let refused = post(&a_base, &a_token, "stale").send().await.unwrap();
    let status = refused.status();
    let body = refused.text().await.unwrap();
    assert!(!status.is_success(), "{status}: {body}");
    eprintln!("the resumed writer answered {status}: {body}");
    a.kill().unwrap();
    a.wait().unwrap();
    // SIGKILL of the writer: a third host, started on the stream alone, takes over.
    b.kill().unwrap();
    b.wait().unwrap();
    let (mut c, c_base) = run_host(&c_dir);
    let c_token = support::token_in(&c_dir);
    for thread in &threads {
        let view = support::json(
            http.get(format!("{c_base}/view/threads/{thread}"))
                .bearer_auth(&c_token),
        )
        .await;
        assert_eq!(view["integrity"]["verified"], true, "{view}");
    }
    let all = open(&url, "leased", 1).await;
    for thread in &threads {
        let records = all.thread(thread.parse().unwrap(), 0).await.unwrap();
        assert!(
            records.iter().all(|r| !r.payload.contains("stale")),
            "the fenced writer appended nothing"
        );
    }
    let everything = all.verify().await.unwrap();
    assert!(everything > 0);
    c.kill().unwrap();
    c.wait().unwrap();
}

/// Issue 35: "kill -9 of a pump under load: … every acknowledged message is delivered exactly
/// once": four clients post to the writer while it is killed; the standby takes over, and in
/// the stream every post the writer acknowledged has exactly one echo — the ones it had not
/// answered yet are answered by the new writer, none twice.
#[cfg(feature = "host")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_message_acknowledged_before_a_kill_is_answered_exactly_once() {
    let scratch = Scratch::new("js-history-load");
    let (_server, url) = support::nats::server(&scratch.0);
    let (a_dir, b_dir) = (scratch.0.join("a"), scratch.0.join("b"));
    for dir in [&a_dir, &b_dir] {
        organism_on(dir, &url, "load", Some(1_500));
    }
    let (mut a, a_base) = run_host(&a_dir);
    let a_token = support::token_in(&a_dir);
    let (mut b, b_ready) = start_host(&b_dir, 0);
    let acknowledged = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let clients: Vec<_> = (0..4)
        .map(|c| {
            let (base, token) = (a_base.clone(), a_token.clone());
            let acknowledged = Arc::clone(&acknowledged);
            tokio::spawn(async move {
                let http = support::http_client();
                for i in 0.. {
                    let sent = http
                        .post(format!("{base}/threads?to=echo"))
                        .bearer_auth(&token)
                        .timeout(Duration::from_secs(5))
                        .body(say(&format!("load-{c}-{i}")))
                        .send()
                        .await;
                    let Ok(answer) = sent else { return };
                    if !answer.status().is_success() {
                        return;
                    }
                    let body: serde_json::Value = answer.json().await.unwrap();
                    let thread = body["thread"].as_str().unwrap().to_owned();
                    acknowledged.lock().unwrap().push(thread);
                }
            })
        })
        .collect();
    while acknowledged.lock().unwrap().len() < 40 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    a.kill().unwrap(); // SIGKILL, under load
    a.wait().unwrap();
    for client in clients {
        client.await.unwrap();
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    let b_base = b_ready
        .recv_timeout(Duration::from_secs(30))
        .expect("the standby takes over");
    let (http, b_token) = (support::http_client(), support::token_in(&b_dir));
    // The new writer answers what was queued; wait until every acknowledged thread has settled.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    for thread in &acknowledged {
        loop {
            let history = http
                .get(format!("{b_base}/threads/{thread}/history"))
                .bearer_auth(&b_token);
            let text = support::json(history).await.to_string();
            if text.contains("\"egress\"") || std::time::Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    b.kill().unwrap();
    b.wait().unwrap();
    let stream = open(&url, "load", 1).await;
    for thread in &acknowledged {
        let records = stream.thread(thread.parse().unwrap(), 0).await.unwrap();
        let echoes = records
            .iter()
            .filter(|r| r.kind == RecordKind::Egress && &*r.from == "echo")
            .count();
        assert_eq!(echoes, 1, "thread {thread}: {records:#?}");
    }
    assert!(stream.verify().await.unwrap() > 0);
    eprintln!(
        "{} posts acknowledged before the kill, each answered once",
        acknowledged.len()
    );
}

/// Issue 35: "SQLite stays the default" and the history "on JetStream" for a host: `agentpump
/// run` with `[store] kind = "jetstream"` keeps no history file; killed with SIGKILL and started
/// again, it serves every acknowledged message from the stream alone, and each thread's chain
/// verifies (the viewer's integrity check).
#[cfg(feature = "host")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentpump_run_keeps_its_history_on_the_stream_across_a_kill() {
    let scratch = Scratch::new("js-history-run");
    let (_server, url) = support::nats::server(&scratch.0);
    let host_dir = scratch.0.join("host");
    organism_on(&host_dir, &url, "host", None);
    let http = support::http_client();
    let (mut child, base) = run_host(&host_dir);
    let token = support::token_in(&host_dir);
    let mut threads = Vec::new();
    for i in 0..5 {
        let post = http.post(format!("{base}/threads?to=echo"));
        let answer = support::json(post.bearer_auth(&token).body(say(&format!("kept-{i}")))).await;
        threads.push(answer["thread"].as_str().unwrap().to_owned());
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !host_dir.join("agentpump.db").exists(),
        "no history file: the stream is the history"
    );
    let (mut child, base) = run_host(&host_dir);
    for (i, thread) in threads.iter().enumerate() {
        let history = http.get(format!("{base}/threads/{thread}/history"));
        let records = support::json(history.bearer_auth(&token)).await;
        let text = records.to_string();
        assert!(text.contains(&format!("kept-{i}")), "{thread}: {text}");
    }
    for thread in &threads {
        let view = support::json(
            http.get(format!("{base}/view/threads/{thread}"))
                .bearer_auth(&token),
        )
        .await;
        assert_eq!(view["integrity"]["verified"], true, "{view}");
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A JetStream store without its servers is a clear error at the start, not a hang; so are a
/// store without `url` and a lease of 0 ms.
#[cfg(feature = "host")]
#[test]
fn agentpump_run_without_its_nats_servers_says_so() {
    let scratch = Scratch::new("js-history-no-server");
    let port = support::nats::free_port();
    // `agentpump run` with this `[store]`: it fails; its standard error.
    let refused = |store: &str| {
        std::fs::write(
            scratch.0.join("organism.toml"),
            format!("[organism]\nname = \"js\"\n\n[store]\nkind = \"jetstream\"\n{store}"),
        )
        .unwrap();
        let (ok, _, stderr) =
            support::agentpump_in(&scratch.0, &["run", "organism.toml", "--port", "0"]);
        assert!(!ok, "{stderr}");
        stderr
    };
    let url = format!("url = \"nats://127.0.0.1:{port}\"\n");
    let stderr = refused(&url);
    let unreachable = format!("cannot connect to NATS at nats://127.0.0.1:{port}");
    assert!(stderr.contains(&unreachable), "{stderr}");
    let stderr = refused("");
    assert!(stderr.contains("needs `url`"), "{stderr}");
    let stderr = refused(&format!("{url}lease_ms = 0\n"));
    assert!(stderr.contains("lease_ms must be above 0"), "{stderr}");
}

/// A standby that cannot forward says why: no writer known yet is `503 standby` with
/// `Retry-After`; a writer that does not answer is `502 writer-unreachable`, naming it.
#[cfg(feature = "host")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_without_a_reachable_writer_answers_a_problem() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (writer, known) = tokio::sync::watch::channel(None::<String>);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(agentpump::host::server::front::serve_front(
        listener,
        vec![known],
        Vec::new(),
        agentpump::host::server::front::FrontOptions {
            max_body: 1 << 20,
            shutdown_timeout: Duration::from_secs(5),
            mcp: None,
        },
        async move {
            let _ = stopped.await;
        },
    ));
    let http = support::http_client();
    let answer = http.get(format!("{base}/threads")).send().await.unwrap();
    assert_eq!(answer.status(), 503);
    assert_eq!(answer.headers()["retry-after"], "1");
    let problem: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(problem["code"], "standby", "{problem}");
    let gone = format!("http://127.0.0.1:{}", support::nats::free_port());
    writer.send_replace(Some(gone.clone()));
    let answer = http
        .post(format!("{base}/threads?to=echo"))
        .body(say("lost"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 502);
    let problem: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(problem["code"], "writer-unreachable", "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains(&gone),
        "{problem}"
    );
    stop.send(()).unwrap();
    served.await.unwrap().unwrap();

    // Two partitions, the first's writer gone and the second with none: a request for a
    // thread of the second says which partition has no writer (503, Retry-After); a list,
    // asked of every partition in order, says the first's writer does not answer (502).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (_first, first) = tokio::sync::watch::channel(Some(gone.clone()));
    let (_second, second) = tokio::sync::watch::channel(None::<String>);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let served = tokio::spawn(agentpump::host::server::front::serve_front(
        listener,
        vec![first, second],
        Vec::new(),
        agentpump::host::server::front::FrontOptions {
            max_body: 1 << 20,
            shutdown_timeout: Duration::from_secs(5),
            mcp: None,
        },
        async move {
            let _ = stopped.await;
        },
    ));
    let in_second = agentpump::thread::Partition::new(1, 2)
        .unwrap()
        .new_thread();
    for path in [
        format!("/threads/{in_second}/history"),
        "/threads".to_owned(),
    ] {
        let answer = http.get(format!("{base}{path}")).send().await.unwrap();
        let status = answer.status();
        let retry = answer.headers().get("retry-after").cloned();
        let problem: serde_json::Value = answer.json().await.unwrap();
        if path == "/threads" {
            // Partition 0 is asked first: its writer is gone.
            assert_eq!(status, 502, "{problem}");
            assert_eq!(problem["code"], "writer-unreachable", "{problem}");
            continue;
        }
        assert_eq!(retry.as_ref().map(|v| v.to_str().unwrap()), Some("1"));
        assert_eq!(status, 503, "{problem}");
        assert_eq!(problem["code"], "standby", "{problem}");
        assert!(
            problem["detail"]
                .as_str()
                .unwrap()
                .contains("no host writes partition 1 of 2"),
            "{problem}"
        );
    }
    stop.send(()).unwrap();
    served.await.unwrap().unwrap();
}
