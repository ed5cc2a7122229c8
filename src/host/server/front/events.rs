//! `GET /inbox/events` over every partition: each partition's event stream, merged event by
//! event into one. A `reset` from one partition (its client fell behind) ends the merged
//! stream, and so does any partition's stream ending: the client's `EventSource` connects
//! again and gets every partition's open requests listed afresh, so no partition's list is
//! cleared by another's reset. A partition's stream silent for [`UPSTREAM_IDLE`] — not even a
//! keep-alive: its host or the network between went away without closing — ends it too.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{Stream, StreamExt as _};

use super::{Front, Sent};
use crate::host::server::problem::Problem;

/// How long a partition's event stream may send nothing, not even a keep-alive (every 15 s),
/// before the merged stream ends.
pub(super) const UPSTREAM_IDLE: Duration = Duration::from_secs(45);

/// Every partition's `sent` (`GET /inbox/events`) as one event stream; the first refusal as
/// it came.
pub(super) async fn every(front: &Front, sent: &Sent<'_>) -> Result<Response, Response> {
    let mut streams = Vec::with_capacity(front.writers.len());
    for partition in 0..front.writers.len() {
        let answer = front.exchange(partition, sent).await?;
        if answer.status() != StatusCode::OK {
            return Err(answer);
        }
        // A partition's stream that ends ends the merged one; why is logged (the client only
        // sees the end, and connects again).
        let ended = futures_util::stream::once(async { Err("ended".to_owned()) });
        let said = move |event: &Result<Bytes, String>| {
            if let Err(why) = event {
                tracing::info!(partition, why = %why, "a partition's inbox event stream ended; the merged stream ends");
            }
        };
        streams.push(
            events(answer.into_body().into_data_stream())
                .chain(ended)
                .inspect(said)
                .boxed(),
        );
    }
    let mut stopping = front.stopping.clone();
    let stopped = async move {
        let _ = stopping.wait_for(|s| *s).await;
    };
    let merged = futures_util::stream::select_all(streams)
        .take_until(stopped)
        .take_while(|event| std::future::ready(event.is_ok()))
        .scan(false, |ended, event| {
            // The reset itself goes out: the client starts over at once.
            let out = if *ended { None } else { Some(event) };
            if let Some(Ok(bytes)) = &out {
                *ended = is_reset(bytes);
            }
            std::future::ready(out)
        });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(merged))
        .map_err(|e| {
            Problem::new(StatusCode::BAD_GATEWAY, "writer-unreachable", e.to_string())
                .into_response()
        })
}

/// Whether an event is a `reset`.
fn is_reset(event: &[u8]) -> bool {
    event
        .split(|&b| b == b'\n')
        .any(|line| line == b"event: reset" || line == b"event:reset")
}

/// The whole events (each ending with its blank line, `\n\n`: the partitions' streams are
/// this project's, which ends lines with `\n`) of a stream of body chunks, however the chunks
/// cut them; a chunk that fails, or none for [`UPSTREAM_IDLE`], ends it with the error.
fn events<E: std::fmt::Display>(
    chunks: impl Stream<Item = Result<Bytes, E>> + Send + 'static,
) -> impl Stream<Item = Result<Bytes, String>> + Send + 'static {
    // What is held, and how far it was searched for an event's end (not searched again).
    futures_util::stream::unfold(
        (Box::pin(chunks), Vec::<u8>::new(), 0usize, false),
        |(mut chunks, mut held, mut searched, done)| async move {
            loop {
                let from = searched.saturating_sub(1);
                if let Some(end) = held[from..].windows(2).position(|w| w == b"\n\n") {
                    let event: Vec<u8> = held.drain(..from + end + 2).collect();
                    return Some((Ok(Bytes::from(event)), (chunks, held, 0, done)));
                }
                searched = held.len();
                if done {
                    return None;
                }
                match tokio::time::timeout(UPSTREAM_IDLE, chunks.next()).await {
                    Ok(Some(Ok(chunk))) => held.extend_from_slice(&chunk),
                    Ok(Some(Err(e))) => {
                        return Some((Err(e.to_string()), (chunks, held, searched, true)));
                    }
                    Ok(None) => return None,
                    Err(_) => {
                        let silent = format!("no event for {UPSTREAM_IDLE:?}");
                        return Some((Err(silent), (chunks, held, searched, true)));
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&'static str]) -> impl Stream<Item = Result<Bytes, String>> + Send {
        let parts: Vec<Result<Bytes, String>> = parts
            .iter()
            .map(|p| Ok(Bytes::from_static(p.as_bytes())))
            .collect();
        futures_util::stream::iter(parts)
    }

    #[tokio::test]
    async fn events_come_whole_however_the_chunks_cut_them() {
        let split = chunks(&[
            "event: listed\ndata: {\"a\"",
            ":1}\n\nevent: ans",
            "wered\ndata: 2\n\n: keep",
        ]);
        let got: Vec<String> = events(split)
            .map(|e| String::from_utf8(e.unwrap().to_vec()).unwrap())
            .collect()
            .await;
        assert_eq!(
            got,
            [
                "event: listed\ndata: {\"a\":1}\n\n",
                "event: answered\ndata: 2\n\n"
            ],
            "a partial event at the end is not passed on"
        );
        assert!(is_reset(b"event: reset\ndata: {}\n\n"));
        assert!(!is_reset(b"event: listed\ndata: \"event: reset\"\n\n"));
    }

    /// A partition's stream that goes silent (its host gone without closing) ends, so the
    /// merged stream ends and the client connects again.
    #[tokio::test(start_paused = true)]
    async fn a_silent_partition_stream_ends_after_the_idle_time() {
        let silent = chunks(&["event: listed\ndata: 1\n\n"]).chain(futures_util::stream::pending());
        let mut got = Box::pin(events(silent));
        assert!(got.next().await.unwrap().is_ok());
        let started = tokio::time::Instant::now();
        let ended = got.next().await.unwrap().unwrap_err();
        assert_eq!(ended, "no event for 45s");
        assert_eq!(started.elapsed(), UPSTREAM_IDLE);
        assert!(got.next().await.is_none());
    }
}
