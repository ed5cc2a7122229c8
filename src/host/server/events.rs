//! `GET /threads/{id}/events`: a thread's records as server-sent events, in order, as they are
//! committed; the stream ends once the thread is done or halted and everything is sent.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;

use super::routes::thread_id;
use super::{Api, Problem};
use crate::ThreadId;

/// How often the stream looks for new records.
const POLL: Duration = Duration::from_millis(50);

pub(crate) async fn follow(
    State(api): State<Api>,
    Path(id): Path<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
    let thread = thread_id(&id)?;
    if api.pump.thread(thread).is_none() {
        return Err(Problem::unknown_thread(&id));
    }
    Ok(Sse::new(stream(api, thread)).keep_alive(KeepAlive::default()))
}

fn stream(api: Api, thread: ThreadId) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(
        (api, 0u64, Vec::new(), false),
        move |(api, mut next, mut ready, mut finished)| async move {
            loop {
                if let Some(record) = (!ready.is_empty()).then(|| ready.remove(0)) {
                    let record: crate::history::Record = record;
                    next = record.seq + 1;
                    let event = Event::default()
                        .event("record")
                        .id(record.seq.to_string())
                        .json_data(&record)
                        .expect("a record serializes");
                    return Some((Ok(event), (api, next, ready, finished)));
                }
                if finished {
                    return None;
                }
                // Read the state first: a thread that was closed before this read has all its
                // records committed by the time the history is read.
                let closed = api.pump.thread(thread).is_none_or(|t| t.state.is_closed());
                ready = api
                    .pump
                    .history(thread)
                    .await
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|r| r.seq >= next)
                    .collect();
                if ready.is_empty() && closed {
                    finished = true;
                    continue;
                }
                if ready.is_empty() {
                    tokio::time::sleep(POLL).await;
                }
            }
        },
    )
}
