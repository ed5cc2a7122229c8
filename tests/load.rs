//! Bounded load on the HTTP API over loopback: 300 concurrent clients send 6 000 requests to a
//! pump with a durable `SqliteHistory`, a queue capacity of 4 and a turn budget of 100 per root
//! thread, so that backpressure really happens (`503 queue-full` while a shared thread's queue
//! is full, `409 thread-closed` once the governor has halted it).
//!
//! Every answer must be an acknowledgement or one of those documented refusals; every
//! acknowledged message must be in the store (reopened read-only after shutdown) exactly once,
//! in its thread, with the bytes sent, and answered once — echoed — or, when its thread was
//! halted with it queued, kept pending (unanswered: a resume would deliver it); every refusal must be recorded and nothing refused
//! stored as a message; and the server must still answer afterwards. No assertion depends on
//! timing: what is accepted varies from run to run, the invariants do not.
//!
//! Clients: 300 tokio tasks sharing one `reqwest::Client` (one connection pool). Over HTTP/1.1 a
//! connection carries one request at a time, so the pool opens a connection per request in
//! flight: the server holds 300 and more concurrent connections (about 550 were open in a run).
//! A `Client` per task would model separate users more literally, but building one loads the
//! platform's root certificates — about 25 ms of a debug build's CPU, blocking a runtime
//! worker — so 300 of them cost more than the load and started the clients staggered.

mod support;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use agentpump::governor::{Budget, GovernorPolicy};
use agentpump::history::{HistoryStore, Record, RecordKind, SqliteHistory};
use agentpump::host::server;
use agentpump::listeners::Echo;
use agentpump::{MessageId, PumpBuilder, PumpConfig, PumpHandle, Registration, ThreadId};
use reqwest::StatusCode;
use serde::Deserialize;
use support::{Scratch, p, q};

const TOKEN: &str = "load-test-token-0123456789";
/// Concurrent clients.
const CLIENTS: usize = 300;
/// Requests each client sends, one after the other.
const PER_CLIENT: usize = 20;
/// Threads every client posts into, so that their queues fill.
const SHARED_THREADS: usize = 4;
/// Queue capacity of every thread (the default is 1024).
const QUEUE_CAPACITY: usize = 4;
/// Turn budget of every root thread (the default is 10 000): a shared thread is halted by the
/// governor after about this many deliveries; a client's own thread never gets there.
const TURNS: u64 = 100;

/// The `201` body of both posting routes.
#[derive(Debug, Deserialize)]
struct Receipt {
    thread: ThreadId,
    ids: Vec<MessageId>,
}

/// Where a request went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// `POST /threads`: a new thread of the client's own.
    New,
    /// `POST /threads/{id}/messages` into the client's own thread.
    Own(ThreadId),
    /// `POST /threads/{id}/messages` into a thread every client posts into.
    Shared(ThreadId),
}

/// How a request was answered.
#[derive(Debug)]
enum Answer {
    /// `201` with the message id the pump gave it.
    Acked(ThreadId, MessageId),
    /// A documented refusal: its status and problem code.
    Refused(StatusCode, String),
}

/// One request and its answer.
#[derive(Debug)]
struct Outcome {
    route: Route,
    /// The payload sent (unique per request, so it can be found in the store).
    payload: String,
    answer: Answer,
}

/// The pump, its durable store and the HTTP API on a loopback port.
struct Host {
    base: String,
    pump: PumpHandle,
    scratch: Scratch,
}

impl Host {
    /// Builds the pump over a fresh `SqliteHistory` and serves the API on an ephemeral port.
    async fn start() -> Self {
        let scratch = Scratch::new("load");
        let store = SqliteHistory::open(scratch.db()).expect("open the history");
        let governor = GovernorPolicy {
            budget: Budget {
                turns: Some(TURNS),
                ..GovernorPolicy::default_budget()
            },
            ..GovernorPolicy::default()
        };
        let pump = PumpBuilder::new()
            .history(Arc::new(store))
            .config(PumpConfig {
                queue_capacity: QUEUE_CAPACITY,
                governor,
                ..PumpConfig::default()
            })
            .register(Registration::new("echo", Echo).accepts(q("say")))
            .build()
            .expect("build the pump");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let served = pump.clone();
        tokio::spawn(async move {
            server::serve(listener, served, TOKEN, 64 * 1024, std::future::pending()).await
        });
        Self {
            base,
            pump,
            scratch,
        }
    }
}

/// Sends one payload on `route` and classifies the answer; panics, with the body, on anything
/// that is neither an acknowledgement nor a refusal this route may get.
async fn send(http: &reqwest::Client, base: &str, route: Route, payload: String) -> Outcome {
    let url = match route {
        Route::New => format!("{base}/threads"),
        Route::Own(t) | Route::Shared(t) => format!("{base}/threads/{t}/messages"),
    };
    let response = http
        .post(url)
        .bearer_auth(TOKEN)
        .body(payload.clone())
        .send()
        .await
        .unwrap_or_else(|e| panic!("{route:?}: no answer: {e}"));
    let status = response.status();
    let text = response.text().await.expect("a readable body");
    let answer = if status == StatusCode::CREATED {
        let receipt: Receipt = serde_json::from_str(&text).expect("a receipt");
        assert_eq!(receipt.ids.len(), 1, "one listener accepts `say`: {text}");
        Answer::Acked(receipt.thread, receipt.ids[0])
    } else {
        refusal(route, status, &text)
    };
    Outcome {
        route,
        payload,
        answer,
    }
}

/// A refusal's status and code, if the route may get it: only a shared thread, and only with
/// `503 queue-full` or `409 thread-closed` (problem JSON with the recorded answer).
fn refusal(route: Route, status: StatusCode, text: &str) -> Answer {
    let problem: serde_json::Value = serde_json::from_str(text)
        .unwrap_or_else(|_| panic!("{route:?}: status {status}, not problem JSON: {text}"));
    let code = problem["code"].as_str().unwrap_or_default().to_owned();
    let documented = matches!(
        (status, code.as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "queue-full") | (StatusCode::CONFLICT, "thread-closed")
    );
    assert!(
        documented && matches!(route, Route::Shared(_)),
        "{route:?}: unexpected answer {status}: {text}"
    );
    assert!(
        problem["answer"].is_string(),
        "a refusal is recorded: {text}"
    );
    Answer::Refused(status, code)
}

/// One client: `PER_CLIENT` requests in turn — every fifth starts a thread of its own, odd ones
/// go to a shared thread, the rest into its own latest thread.
async fn client(
    http: reqwest::Client,
    base: Arc<str>,
    shared: Arc<[ThreadId]>,
    client: usize,
) -> Vec<Outcome> {
    let mut own = None;
    let mut outcomes = Vec::with_capacity(PER_CLIENT);
    for k in 0..PER_CLIENT {
        let route = match own {
            _ if k % 5 == 0 => Route::New,
            Some(t) if k % 2 == 0 => Route::Own(t),
            _ => Route::Shared(shared[(client + k) % shared.len()]),
        };
        let outcome = send(&http, &base, route, p("say", &format!("c{client}-r{k}"))).await;
        if let (Route::New, Answer::Acked(thread, _)) = (route, &outcome.answer) {
            own = Some(*thread);
        }
        outcomes.push(outcome);
    }
    outcomes
}

/// Starts the shared threads (each with one message), sequentially, before the load; their
/// first messages go to `outcomes`.
async fn shared_threads(
    http: &reqwest::Client,
    base: &str,
    outcomes: &mut Vec<Outcome>,
) -> Vec<ThreadId> {
    let mut threads = Vec::new();
    for n in 0..SHARED_THREADS {
        let outcome = send(http, base, Route::New, p("say", &format!("shared-{n}"))).await;
        match outcome.answer {
            Answer::Acked(thread, _) => threads.push(thread),
            Answer::Refused(status, ref code) => panic!("shared thread {n}: {status} {code}"),
        }
        outcomes.push(outcome);
    }
    threads
}

/// Acknowledged and refused counts, refusals by status and code; printed for the log.
fn tally(outcomes: &[Outcome]) -> (usize, BTreeMap<String, usize>) {
    let mut acked = 0;
    let mut refused = BTreeMap::new();
    for o in outcomes {
        match &o.answer {
            Answer::Acked(..) => acked += 1,
            Answer::Refused(status, code) => {
                *refused
                    .entry(format!("{} {code}", status.as_u16()))
                    .or_default() += 1;
            }
        }
    }
    let new = outcomes.iter().filter(|o| o.route == Route::New).count();
    let shared = outcomes
        .iter()
        .filter(|o| matches!(o.route, Route::Shared(_)))
        .count();
    println!(
        "load: {} requests ({new} new threads, {shared} into {SHARED_THREADS} shared threads): \
         {acked} acknowledged, refused {refused:?}",
        outcomes.len()
    );
    (acked, refused)
}

/// After the load: a read, and a new thread that is answered (its outcome is returned).
async fn still_answers(http: &reqwest::Client, host: &Host) -> Outcome {
    let listed = http
        .get(format!("{}/threads", host.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .expect("the server answers a read after the load");
    assert_eq!(listed.status(), StatusCode::OK);
    let after = send(http, &host.base, Route::New, p("say", "after")).await;
    let Answer::Acked(thread, _) = &after.answer else {
        panic!(
            "a new thread after the load was refused: {:?}",
            after.answer
        );
    };
    tokio::time::timeout(Duration::from_secs(10), host.pump.settle(*thread))
        .await
        .expect("the thread started after the load settles");
    let echoed = support::egress(&host.pump, *thread).await;
    assert_eq!(echoed, [p("say", "after")]);
    after
}

/// Every record the durable file holds, read back through a fresh read-only connection.
/// Every record, and the messages still pending in a halted thread (queued when it halted).
async fn stored(host: &Host) -> (Vec<Record>, HashSet<MessageId>) {
    let store = SqliteHistory::open_read_only(host.scratch.db()).expect("reopen the history");
    assert!(store.verify().await.expect("every hash chain verifies") > 0);
    let mut records = Vec::new();
    let mut halted = HashSet::new();
    for info in store.threads(None).await.unwrap() {
        if info.state == agentpump::ThreadState::Halted {
            halted.insert(info.id);
        }
        records.extend(store.thread(info.id, 0).await.unwrap());
    }
    let left = store.pending().await.unwrap();
    let left = left
        .iter()
        .filter(|r| halted.contains(&r.thread))
        .map(|r| r.id)
        .collect();
    (records, left)
}

/// Every acknowledged message is stored exactly once, in its thread, with the bytes sent;
/// nothing refused was stored as a message; and nothing else came from the client.
fn check_stored(outcomes: &[Outcome], records: &[Record]) {
    let from_client: Vec<&Record> = records
        .iter()
        .filter(|r| r.kind == RecordKind::Message && &*r.from == "client")
        .collect();
    let mut by_id: HashMap<MessageId, Vec<&Record>> = HashMap::new();
    let mut by_payload: HashMap<&str, usize> = HashMap::new();
    for r in &from_client {
        by_id.entry(r.id).or_default().push(r);
        *by_payload.entry(&r.payload).or_default() += 1;
    }
    let mut acked = 0;
    for o in outcomes {
        let found = by_payload.get(o.payload.as_str()).copied().unwrap_or(0);
        match o.answer {
            Answer::Acked(thread, id) => {
                acked += 1;
                let copies = by_id.get(&id).map_or(&[][..], Vec::as_slice);
                assert_eq!(copies.len(), 1, "acknowledged {id} stored once: {o:?}");
                assert_eq!(copies[0].thread, thread, "{id} is in its thread");
                assert_eq!(&*copies[0].payload, o.payload, "{id} kept its bytes");
                assert_eq!(found, 1, "payload of {id} stored once");
            }
            Answer::Refused(..) => assert_eq!(found, 0, "refused, yet stored: {o:?}"),
        }
    }
    assert_eq!(
        from_client.len(),
        acked,
        "no client message stored unacknowledged"
    );
}

/// Every acknowledged message was answered exactly once: echoed back (an egress record replying
/// to it, with the same bytes), or — left queued in a shared thread the governor halted — kept
/// pending in history, unanswered (a resume would deliver it; shutdown records nothing in a
/// halted thread). Every refusal is recorded as a notice to the client in its thread, or
/// counted by a `refusals-repeated` record in reply to the first of its kind.
fn check_answered(outcomes: &[Outcome], records: &[Record], left_in_halted: &HashSet<MessageId>) {
    // Other notices may reply to a delivery too (`budget-warning`); they are not answers.
    let answer = |r: &Record| {
        r.kind == RecordKind::Egress
            || r.kind == RecordKind::System && support::notice(r).1 == "shutting-down"
    };
    let mut replies: HashMap<MessageId, Vec<&Record>> = HashMap::new();
    for r in records.iter().filter(|r| answer(r)) {
        if let Some(to) = r.in_reply_to {
            replies.entry(to).or_default().push(r);
        }
    }
    // A flood of identical refusals is recorded as the first few and a `refusals-repeated`
    // count in reply to the first (docs/reliability.md, "Floods of refusals").
    let by_id: HashMap<MessageId, &Record> = records.iter().map(|r| (r.id, r)).collect();
    let mut refusals: BTreeMap<(ThreadId, String), usize> = BTreeMap::new();
    for r in records.iter().filter(|r| r.kind == RecordKind::System) {
        if r.to.as_deref() != Some("client") {
            continue;
        }
        let code = support::notice(r).1;
        if code == "refusals-repeated" {
            let sample = by_id[&r.in_reply_to.expect("a count names its sample")];
            let count: usize = r
                .payload
                .split(" more refusal")
                .next()
                .and_then(|t| t.rsplit(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
                .expect("a count");
            *refusals
                .entry((r.thread, support::notice(sample).1))
                .or_default() += count;
        } else {
            *refusals.entry((r.thread, code)).or_default() += 1;
        }
    }
    for o in outcomes {
        match (&o.answer, o.route) {
            (Answer::Acked(_, id), _) => {
                let answers = replies.get(id).map_or(&[][..], Vec::as_slice);
                let ok = match answers {
                    [r] if r.kind == RecordKind::Egress => *r.payload == *o.payload,
                    [_] => matches!(o.route, Route::Shared(_)),
                    [] => left_in_halted.contains(id),
                    _ => false,
                };
                assert!(ok, "{o:?} answered by {answers:#?}");
            }
            (Answer::Refused(_, code), Route::Shared(thread)) => {
                let left = refusals.get_mut(&(thread, code.clone()));
                let left = left.unwrap_or_else(|| panic!("{o:?}: refusal not recorded"));
                assert!(*left > 0, "{o:?}: more refusals than recorded");
                *left -= 1;
            }
            (Answer::Refused(..), route) => unreachable!("refused on {route:?}"),
        }
    }
    assert!(refusals.values().all(|&n| n == 0), "unanswered refusals");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_get_answers_and_every_acknowledged_message_is_stored_once() {
    let host = Host::start().await;
    let http = support::http_client();
    let mut setup = Vec::new();
    let shared: Arc<[ThreadId]> = shared_threads(&http, &host.base, &mut setup).await.into();
    let base: Arc<str> = Arc::from(host.base.as_str());
    let started = std::time::Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            tokio::spawn(client(
                http.clone(),
                Arc::clone(&base),
                Arc::clone(&shared),
                i,
            ))
        })
        .collect();
    let mut outcomes = Vec::with_capacity(CLIENTS * PER_CLIENT);
    for c in clients {
        outcomes.extend(c.await.expect("a client panicked"));
    }

    println!("load: took {:?}", started.elapsed());
    let (acked, refused) = tally(&outcomes);
    let refused_total: usize = refused.values().sum();
    assert_eq!(acked + refused_total, CLIENTS * PER_CLIENT);
    // A shared thread takes at most about TURNS + QUEUE_CAPACITY messages before the governor
    // halts it, far fewer than the clients send it: refusals are certain, whatever the timing.
    assert!(refused_total > 0, "no backpressure under load");
    outcomes.push(still_answers(&http, &host).await);
    outcomes.extend(setup);

    let report = host.pump.shutdown(Duration::from_secs(10)).await;
    println!("load: shutdown {report:?}");
    let (records, left_in_halted) = stored(&host).await;
    check_stored(&outcomes, &records);
    check_answered(&outcomes, &records, &left_in_halted);
}
