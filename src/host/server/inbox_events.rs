//! `GET /inbox/events`: every thread's inbox as server-sent events — first a `listed` event
//! for each open request, then each change as it happens: `listed` (a request whose record is
//! durable), `answered`, `expired` (its default applied). A client that falls behind gets
//! `reset` and the open requests listed again. Ends when the server shuts down
//! (docs/decisions/2026-11-26-inbox-stream.md).

use std::collections::VecDeque;
use std::convert::Infallible;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use tokio::sync::broadcast::Receiver;
use tokio::sync::broadcast::error::RecvError;

use super::{Api, Problem};
use crate::{InboxChange, InboxFilter};

pub(crate) async fn follow(
    State(api): State<Api>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, Problem> {
    // Subscribed before the open requests are read: nothing falls between the two.
    let changes = api.pump.inbox_changes();
    let ready = open(&api).await?;
    let state = Follow {
        api,
        changes,
        ready,
    };
    let stream = futures_util::stream::unfold(state, |mut state| async move {
        let event = state.next().await?;
        Some((Ok(event), state))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// A `listed` event for each open request, oldest first.
async fn open(api: &Api) -> Result<VecDeque<Event>, Problem> {
    let filter = InboxFilter::default();
    let open = api
        .pump
        .inbox(&filter)
        .await
        .map_err(super::inbox::problem)?;
    Ok(open
        .into_iter()
        .map(|r| event(&InboxChange::Listed(r)))
        .collect())
}

/// The SSE event of `change`: its name, its JSON.
fn event(change: &InboxChange) -> Event {
    Event::default()
        .event(change.name())
        .json_data(change)
        .expect("inbox changes serialize")
}

/// Where one stream stands.
struct Follow {
    api: Api,
    changes: Receiver<InboxChange>,
    /// Events read, not sent yet.
    ready: VecDeque<Event>,
}

impl Follow {
    /// The next event, waiting for one; `None` once the server stops or the pump is gone.
    async fn next(&mut self) -> Option<Event> {
        if let Some(event) = self.ready.pop_front() {
            return Some(event);
        }
        let mut stopping = self.api.stopping.clone();
        let stop = async move {
            // A router outside `serve` has no one to stop it.
            if stopping.wait_for(|s| *s).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let received = tokio::select! {
            received = self.changes.recv() => received,
            () = stop => return None,
        };
        match received {
            Ok(change) => Some(event(&change)),
            Err(RecvError::Closed) => None,
            Err(RecvError::Lagged(missed)) => {
                tracing::warn!(
                    missed,
                    "inbox stream fell behind: listing the open requests again"
                );
                self.changes = self.changes.resubscribe();
                self.ready = open(&self.api).await.ok()?;
                Some(Event::default().event("reset").data(missed.to_string()))
            }
        }
    }
}
