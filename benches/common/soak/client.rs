//! The soak's clients: each posts one request after another until told to stop, and counts what
//! came back in the [`Tally`] they share; each keeps a [`Fingerprint`] of the message ids
//! acknowledged to it.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use agentpump::{MessageId, ThreadId};
use serde::Deserialize;

use super::histogram::Histogram;

/// Unexpected answers kept for the final message (all are counted).
const KEPT: usize = 20;

/// An order-independent digest of a set of message ids: how many, their wrapping sum and their
/// xor. Two sets with the same fingerprint are, short of a contrived collision, the same set —
/// so a client keeps 40 bytes instead of every id it was given, and the resident memory
/// measured during the soak is the server's, not the bookkeeping's.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint {
    count: u64,
    sum: u128,
    xor: u128,
}

impl Fingerprint {
    /// Adds one id.
    pub fn add(&mut self, id: MessageId) {
        let v = id.as_uuid().as_u128();
        self.count += 1;
        self.sum = self.sum.wrapping_add(v);
        self.xor ^= v;
    }

    /// Adds every id of `other`.
    pub fn merge(&mut self, other: Fingerprint) {
        self.count += other.count;
        self.sum = self.sum.wrapping_add(other.sum);
        self.xor ^= other.xor;
    }

    /// How many ids were added.
    pub fn count(&self) -> u64 {
        self.count
    }
}

/// What every client adds to: latencies, acknowledgements, refusals by status and code, and
/// answers that are neither (which fail the soak).
#[derive(Debug)]
pub struct Tally {
    /// Latency of every answered request, drained once per interval.
    pub latency: Histogram,
    /// Acknowledged requests so far.
    pub acked: AtomicU64,
    /// Threads started so far (acknowledged `POST /threads`): counted here because listing the
    /// pump's threads every interval would allocate a snapshot of each, and at tens of
    /// thousands of threads that allocation shows in the resident memory being measured.
    pub started: AtomicU64,
    /// Refusals so far, by `"503 queue-full"`.
    pub refused: Mutex<BTreeMap<String, u64>>,
    /// Unexpected answers (or failed requests) so far.
    pub unexpected: AtomicU64,
    /// The first few of them, for the final message.
    pub examples: Mutex<Vec<String>>,
}

impl Tally {
    /// Nothing counted yet.
    pub fn new() -> Self {
        Self {
            latency: Histogram::new(),
            acked: AtomicU64::new(0),
            started: AtomicU64::new(0),
            refused: Mutex::new(BTreeMap::new()),
            unexpected: AtomicU64::new(0),
            examples: Mutex::new(Vec::new()),
        }
    }

    /// A snapshot of the refusals so far.
    pub fn refusals(&self) -> BTreeMap<String, u64> {
        self.refused.lock().expect("tally lock").clone()
    }

    /// Counts an unexpected answer, keeping the first few.
    fn unexpected(&self, what: String) {
        self.unexpected.fetch_add(1, Ordering::Relaxed);
        let mut examples = self.examples.lock().expect("tally lock");
        if examples.len() < KEPT {
            examples.push(what);
        }
    }
}

/// Where one client sends, and how.
#[derive(Debug, Clone)]
pub struct Client {
    /// The shared HTTP connection pool.
    pub http: reqwest::Client,
    /// `http://127.0.0.1:port`.
    pub base: Arc<str>,
    /// The bearer token.
    pub token: Arc<str>,
    /// Threads every client posts into.
    pub shared: Arc<[ThreadId]>,
    /// The payload every request carries.
    pub payload: &'static str,
    /// Requests sent into a thread of the client's own before it starts the next one.
    pub conversation: u64,
}

/// The `201` body of both posting routes.
#[derive(Debug, Deserialize)]
pub struct Receipt {
    /// The thread the message went into.
    pub thread: ThreadId,
    /// One message id per listener it went to.
    pub ids: Vec<MessageId>,
}

impl Client {
    /// Posts until `stop` is set (a request in flight is finished first): every `conversation`
    /// requests a new thread of its own, then odd requests into a shared thread and even ones
    /// into its own. Returns the fingerprint of the ids acknowledged.
    pub async fn run(self, n: usize, tally: Arc<Tally>, stop: Arc<AtomicBool>) -> Fingerprint {
        let mut acked = Fingerprint::default();
        let mut own: Option<ThreadId> = None;
        let mut k: u64 = 0;
        while !stop.load(Ordering::Relaxed) {
            let next = k.is_multiple_of(self.conversation.max(1));
            let path = match own {
                Some(t) if !next && k.is_multiple_of(2) => format!("/threads/{t}/messages"),
                Some(_) if !next => {
                    let t = self.shared[(n + k as usize) % self.shared.len()];
                    format!("/threads/{t}/messages")
                }
                _ => "/threads".to_owned(),
            };
            if let Some(receipt) = self.post(&path, &tally).await {
                receipt.ids.iter().for_each(|id| acked.add(*id));
                if path == "/threads" {
                    own = Some(receipt.thread);
                }
            }
            k += 1;
        }
        acked
    }

    /// One request, timed and counted; the receipt if it was acknowledged.
    pub async fn post(&self, path: &str, tally: &Tally) -> Option<Receipt> {
        let started = Instant::now();
        let sent = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&*self.token)
            .body(self.payload)
            .send()
            .await;
        let answer = match sent {
            Ok(response) => (response.status(), response.text().await),
            Err(e) => {
                tally.unexpected(format!("POST {path}: {e}"));
                return None;
            }
        };
        tally
            .latency
            .record(started.elapsed().as_micros().try_into().unwrap_or(u64::MAX));
        match answer {
            (status, Ok(text)) if status == reqwest::StatusCode::CREATED => {
                let receipt = serde_json::from_str(&text).ok();
                if receipt.is_some() {
                    tally.acked.fetch_add(1, Ordering::Relaxed);
                    if path == "/threads" {
                        tally.started.fetch_add(1, Ordering::Relaxed);
                    }
                } else {
                    tally.unexpected(format!("POST {path}: 201 {text}"));
                }
                receipt
            }
            (status, Ok(text)) => {
                refusal(path, status, &text, tally);
                None
            }
            (status, Err(e)) => {
                tally.unexpected(format!("POST {path}: {status}, body unreadable: {e}"));
                None
            }
        }
    }
}

/// Counts a refusal if it is the documented backpressure answer (`503 queue-full`), else an
/// unexpected answer.
fn refusal(path: &str, status: reqwest::StatusCode, text: &str, tally: &Tally) {
    let problem: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
    let code = problem["code"].as_str().unwrap_or_default();
    if status == reqwest::StatusCode::SERVICE_UNAVAILABLE && code == "queue-full" {
        let key = format!("{} {code}", status.as_u16());
        *tally
            .refused
            .lock()
            .expect("tally lock")
            .entry(key)
            .or_default() += 1;
    } else {
        tally.unexpected(format!("POST {path}: {status} {text}"));
    }
}
