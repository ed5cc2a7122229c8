//! `GET /tasks/events`: the task ledger's new lines as server-sent events (`event: task`, the
//! line as JSON data, `id:` the byte offset after it), from the ledger's end — or from the
//! offset in `Last-Event-ID` when a client reconnects. Ends when the server shuts down.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;

use super::{Api, Problem};

/// How often the stream looks at the ledger.
const POLL: Duration = Duration::from_millis(200);

pub(crate) async fn follow(
    State(api): State<Api>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
    let Some(layout) = api.tasks.clone() else {
        return Err(Problem::new(
            StatusCode::NOT_FOUND,
            "no-tasks",
            "this organism has no task ledger",
        ));
    };
    let ledger = layout.ledger().to_owned();
    let offset = match headers.get("last-event-id") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| {
                Problem::new(
                    StatusCode::BAD_REQUEST,
                    "bad-last-event-id",
                    "Last-Event-ID must be a byte offset",
                )
            })?,
        None => std::fs::metadata(&ledger).map_or(0, |m| m.len()),
    };
    let tail = Tail {
        api,
        ledger,
        offset,
        ready: VecDeque::new(),
    };
    let stream = futures_util::stream::unfold(tail, |mut tail| async move {
        let (line, end) = tail.next().await?;
        let event = Event::default()
            .event("task")
            .id(end.to_string())
            .data(line);
        Some((Ok(event), tail))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// Where one stream stands in the ledger.
struct Tail {
    api: Api,
    ledger: PathBuf,
    /// The byte offset after the last whole line read.
    offset: u64,
    /// Lines read, not sent yet, each with the offset after it.
    ready: VecDeque<(String, u64)>,
}

impl Tail {
    /// The next whole line, waiting for one; `None` once the server stops.
    async fn next(&mut self) -> Option<(String, u64)> {
        loop {
            if let Some(line) = self.ready.pop_front() {
                return Some(line);
            }
            if *self.api.stopping.borrow() {
                return None;
            }
            let (ledger, offset) = (self.ledger.clone(), self.offset);
            let read = tokio::task::spawn_blocking(move || whole_lines(&ledger, offset))
                .await
                .unwrap_or_default();
            if let Some((_, end)) = read.last() {
                self.offset = *end;
            }
            self.ready.extend(read);
            if self.ready.is_empty() {
                let mut stopping = self.api.stopping.clone();
                let _ = tokio::time::timeout(POLL, stopping.changed()).await;
            }
        }
    }
}

/// The whole lines after `offset`, each with the offset after it (a torn tail waits).
fn whole_lines(ledger: &std::path::Path, offset: u64) -> Vec<(String, u64)> {
    let Ok(mut file) = std::fs::File::open(ledger) else {
        return Vec::new();
    };
    let mut bytes = Vec::new();
    if file.seek(SeekFrom::Start(offset)).is_err() || file.read_to_end(&mut bytes).is_err() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut at = offset;
    for piece in bytes.split_inclusive(|b| *b == b'\n') {
        if !piece.ends_with(b"\n") {
            break;
        }
        at += piece.len() as u64;
        let text = String::from_utf8_lossy(piece).trim_end().to_owned();
        if !text.is_empty() {
            out.push((text, at));
        }
    }
    out
}
