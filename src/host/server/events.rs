//! `GET /threads/{id}/events[?after=SEQ]`: a thread's records (those after `SEQ`, default all) as
//! server-sent events, in order, as they are committed; the stream ends once the thread is done or halted and everything is sent, or when
//! the server shuts down.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Deserialize;

use super::routes::thread_id;
use super::{Api, Problem};
use crate::ThreadId;
use crate::history::Record;

/// How often the stream looks for new records.
const POLL: Duration = Duration::from_millis(50);

/// Query of `GET /threads/{id}/events`: skip the records up to this seq (a page shows them already).
#[derive(Debug, Deserialize)]
pub(crate) struct After {
    after: Option<u64>,
}

pub(crate) async fn follow(
    State(api): State<Api>,
    Path(id): Path<String>,
    q: Result<Query<After>, QueryRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
    let after = q
        .map_err(|e| Problem::new(e.status(), "bad-query", e.body_text()))?
        .0
        .after;
    let thread = thread_id(&id)?;
    if api.pump.thread(thread).is_none() {
        return Err(Problem::unknown_thread(&id));
    }
    let next = after.map_or(0, |seq| seq.saturating_add(1));
    Ok(Sse::new(stream(api, thread, next)).keep_alive(KeepAlive::default()))
}

fn stream(api: Api, thread: ThreadId, next: u64) -> impl Stream<Item = Result<Event, Infallible>> {
    let state = Follow {
        api,
        thread,
        next,
        ready: VecDeque::new(),
        finished: false,
    };
    futures_util::stream::unfold(state, |mut state| async move {
        let event = match state.next_record().await? {
            Step::Record(record) => Event::default()
                .event("record")
                .id(record.seq.to_string())
                .json_data(&record),
            Step::Failed(problem) => Event::default().event("error").json_data(&problem),
        };
        Some((Ok(event.expect("records and problems serialize")), state))
    })
}

/// What a stream sends next.
enum Step {
    /// A committed record.
    Record(Record),
    /// The history cannot be read: the last event of the stream, a problem JSON.
    Failed(Problem),
}

/// Where one event stream stands.
struct Follow {
    api: Api,
    thread: ThreadId,
    /// The first seq not yet read.
    next: u64,
    ready: VecDeque<Record>,
    /// The thread is closed and its last records are read: send what is ready, then end.
    finished: bool,
}

impl Follow {
    /// The next event to send, or `None` when the stream ends: the thread is closed and all of
    /// it is sent, the server is shutting down, or the history could not be read (said once).
    async fn next_record(&mut self) -> Option<Step> {
        loop {
            if let Some(record) = self.ready.pop_front() {
                return Some(Step::Record(record));
            }
            if self.finished || *self.api.stopping.borrow() {
                return None;
            }
            // Read the state first: once a thread is closed and settled, every record it will
            // ever have is committed, so the read after that is the last one needed.
            let closed = self
                .api
                .pump
                .thread(self.thread)
                .is_none_or(|t| t.state.is_closed());
            if closed {
                self.api.pump.settle(self.thread).await;
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
