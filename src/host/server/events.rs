//! `GET /threads/{id}/events[?after=SEQ]`: a thread's records as server-sent events, in order, as
//! they are committed — those after `SEQ` (a page that shows the earlier ones already), or after
//! `Last-Event-ID` when a client reconnects; `settled` each time the thread goes idle with
//! everything sent (so a client need not poll); the stream ends once the thread is done or
//! halted and everything is sent (a last `settled`), or when the server shuts down. After a
//! person-in-the-loop record (a request or its answer) comes an `inbox` event saying what it is.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;

use super::params::Params;
use super::thread_path::ThreadPath;
use super::{Api, Problem};
use crate::history::Record;
use crate::{ThreadId, ThreadState};

/// How often the stream looks for new records.
const POLL: Duration = Duration::from_millis(50);

/// Query of `GET /threads/{id}/events`: skip the records up to this seq (a page shows them already).
#[derive(Debug, Deserialize)]
pub(crate) struct After {
    after: Option<u64>,
}

pub(crate) async fn follow(
    State(api): State<Api>,
    ThreadPath(thread): ThreadPath,
    headers: HeaderMap,
    Params(q): Params<After>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
    let after = q.after;
    if !api.pump.load(thread).await? {
        return Err(Problem::unknown_thread(&thread.to_string()));
    }
    let next = match after {
        Some(seq) => seq.saturating_add(1),
        None => resume_after(&headers)?,
    };
    Ok(Sse::new(stream(api, thread, next)).keep_alive(KeepAlive::default()))
}

/// The first seq to send: after `Last-Event-ID` (an event id is its record's seq), or 0.
fn resume_after(headers: &HeaderMap) -> Result<u64, Problem> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(0);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|seq| seq + 1)
        .ok_or_else(|| {
            Problem::new(
                StatusCode::BAD_REQUEST,
                "bad-last-event-id",
                format!(
                    "Last-Event-ID `{}` is not an event id (a record's seq)",
                    String::from_utf8_lossy(value.as_bytes())
                ),
            )
        })
}

fn stream(api: Api, thread: ThreadId, next: u64) -> impl Stream<Item = Result<Event, Infallible>> {
    let state = Follow {
        api,
        thread,
        next,
        ready: VecDeque::new(),
        inbox: None,
        finished: false,
        settled: None,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        let event = match state.next_record().await? {
            Step::Record(record) => Event::default()
                .event("record")
                .id(record.seq.to_string())
                .json_data(&record),
            Step::Inbox(data) => Event::default().event("inbox").json_data(&data),
            Step::Failed(problem) => Event::default().event("error").json_data(&problem),
            Step::Settled(state) => Event::default().event("settled").json_data(
                serde_json::json!({ "thread": state.0, "seq": state.1, "state": state.2 }),
            ),
        };
        Some((Ok(event.expect("records and problems serialize")), state))
    })
}

/// What a stream sends next.
enum Step {
    /// A committed record.
    Record(Record),
    /// What the inbox record just sent says (`inbox/request` or `inbox/answer`).
    Inbox(serde_json::Value),
    /// The history cannot be read: the last event of the stream, a problem JSON.
    Failed(Problem),
    /// The thread has nothing left to do: (thread, last seq sent, state). Sent once each time
    /// it goes idle, and last before the stream ends for a done or halted thread.
    Settled((ThreadId, Option<u64>, ThreadState)),
}

/// Where one event stream stands.
struct Follow {
    api: Api,
    thread: ThreadId,
    /// The first seq not yet read.
    next: u64,
    ready: VecDeque<Record>,
    /// The `inbox` event of the record just sent, sent next.
    inbox: Option<serde_json::Value>,
    /// The thread is closed and its last records are read: send what is ready, then end.
    finished: bool,
    /// The seq last reported as settled (`Some(None)`: settled before any record was sent).
    settled: Option<Option<u64>>,
}

impl Follow {
    /// The last seq sent (or skipped with `Last-Event-ID`).
    fn last_sent(&self) -> Option<u64> {
        self.next.checked_sub(1)
    }

    /// The `settled` event for the records sent so far, once per seq.
    fn settle_step(&mut self, fallback: ThreadState) -> Option<Step> {
        if self.settled == Some(self.last_sent()) {
            return None;
        }
        self.settled = Some(self.last_sent());
        let state = self
            .api
            .pump
            .thread(self.thread)
            .map_or(fallback, |t| t.state);
        Some(Step::Settled((self.thread, self.last_sent(), state)))
    }

    /// The next event to send, or `None` when the stream ends: the thread is closed and all of
    /// it is sent, the server is shutting down, or the history could not be read (said once).
    async fn next_record(&mut self) -> Option<Step> {
        loop {
            if let Some(data) = self.inbox.take() {
                return Some(Step::Inbox(data));
            }
            if let Some(record) = self.ready.pop_front() {
                self.inbox = super::inbox::event(&record);
                return Some(Step::Record(record));
            }
            if *self.api.stopping.borrow() {
                return None;
            }
            if self.finished {
                // Once: then the stream ends.
                return self.settle_step(ThreadState::Halted);
            }
            // Read the state first: once a thread is closed and settled, every record it will
            // ever have is committed, so the read after that is the last one needed.
            // A followed thread that was evicted meanwhile comes back (reads its tree once).
            if let Err(e) = self.api.pump.load(self.thread).await {
                tracing::error!(thread = %self.thread, error = %e, "reloading a followed thread");
            }
            let state = self.api.pump.thread(self.thread).map(|t| t.state);
            let closed = state.is_none_or(ThreadState::is_closed);
            if closed {
                self.api.pump.settle_here(self.thread).await;
                self.finished = true;
            }
            let records = match self.api.pump.store().thread(self.thread, self.next).await {
                Ok(records) => records,
                Err(e) => {
                    tracing::error!(thread = %self.thread, error = %e, "event stream ended: the history cannot be read");
                    self.finished = true;
                    return Some(Step::Failed(Problem::from(e)));
                }
            };
            if let Some(last) = records.last() {
                self.next = last.seq + 1;
            }
            self.ready.extend(records);
            // Idle before the read and nothing new in it: every record is sent, and nothing
            // more comes until someone posts into the thread.
            if self.ready.is_empty()
                && state == Some(ThreadState::Idle)
                && let Some(step) = self.settle_step(ThreadState::Idle)
            {
                return Some(step);
            }
            if self.ready.is_empty() && !self.finished {
                let mut stopping = self.api.stopping.clone();
                let stop = async move {
                    // A router outside `serve` has no one to stop it.
                    if stopping.wait_for(|s| *s).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                };
                tokio::select! {
                    () = tokio::time::sleep(POLL) => {}
                    () = stop => {}
                }
            }
        }
    }
}
