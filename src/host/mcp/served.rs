//! [`Served`]: what an [`McpServer`](super::server::McpServer) serves — the threads of one pump
//! ([`OnePump`]), or of every partition of an organism through a host's front
//! (`server/front/mcp.rs`). The server's tools and resources are written once, over this.
//!
//! Every answer is JSON as the HTTP API gives it (a thread as `GET /threads/{id}`, records as
//! `GET /threads/{id}/history`), and every refusal a sentence naming what went wrong.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value as Json, json};

use super::server::ListenerDoc;
use crate::governor::Budget;
use crate::{PumpHandle, ThreadId};

/// What a wait for a thread to settle found.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled {
    /// It settled in time: idle or closed, nothing left to deliver here or on another pump.
    pub settled: bool,
    /// Its state then (`"idle"`, `"halted"`, …), `null` for a thread nobody knows.
    pub state: Json,
}

/// The operations behind the MCP tools and resources.
pub trait Served: Send + Sync + std::fmt::Debug + 'static {
    /// Posts `payload` (a payload or an envelope) into a new thread, or into `into`, to the
    /// listener `to` when given: `{"thread": …, "ids": […]}`.
    fn post<'a>(
        &'a self,
        payload: &'a [u8],
        into: Option<ThreadId>,
        to: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Json, String>>;
    /// Waits up to `within` for `thread` to settle.
    fn settle(&self, thread: ThreadId, within: Duration) -> BoxFuture<'_, Result<Settled, String>>;
    /// What went out of `thread` to its outside sender.
    fn answers(&self, thread: ThreadId) -> BoxFuture<'_, Result<Json, String>>;
    /// Every thread with its state.
    fn threads(&self) -> BoxFuture<'_, Result<Vec<Json>, String>>;
    /// `thread`'s records, oldest first.
    fn history(&self, thread: ThreadId) -> BoxFuture<'_, Result<Vec<Json>, String>>;
    /// `thread`'s halting reports, oldest first.
    fn reports(&self, thread: ThreadId) -> BoxFuture<'_, Result<Vec<Json>, String>>;
    /// Stops `thread`.
    fn stop(&self, thread: ThreadId) -> BoxFuture<'_, Result<(), String>>;
    /// Resumes a halted `thread`, adding `budget`.
    fn resume(&self, thread: ThreadId, budget: Budget) -> BoxFuture<'_, Result<(), String>>;
    /// The organism's listeners.
    fn listeners(&self) -> Vec<ListenerDoc>;
}

/// One pump in this process, whose listeners are known.
#[derive(Debug, Clone)]
pub struct OnePump {
    pump: PumpHandle,
    listeners: Arc<[ListenerDoc]>,
}

impl OnePump {
    /// `pump`, whose listeners are `listeners`.
    pub fn new(pump: PumpHandle, listeners: Vec<ListenerDoc>) -> Self {
        Self {
            pump,
            listeners: listeners.into(),
        }
    }
}

/// `value` as JSON; a value that does not serialize says why.
fn to_json(value: impl serde::Serialize) -> Result<Json, String> {
    serde_json::to_value(value).map_err(|e| e.to_string())
}

/// Each of `values` as JSON.
fn each_to_json<T: serde::Serialize>(values: Vec<T>) -> Result<Vec<Json>, String> {
    values.into_iter().map(to_json).collect()
}

impl Served for OnePump {
    fn post<'a>(
        &'a self,
        payload: &'a [u8],
        into: Option<ThreadId>,
        to: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Json, String>> {
        Box::pin(async move {
            let receipt = self
                .pump
                .receive(payload, into, to)
                .await
                .map_err(|e| e.to_string())?;
            Ok(json!({ "thread": receipt.thread(), "ids": receipt.ids() }))
        })
    }

    fn settle(&self, thread: ThreadId, within: Duration) -> BoxFuture<'_, Result<Settled, String>> {
        Box::pin(async move {
            let settled = tokio::time::timeout(within, self.pump.settle(thread))
                .await
                .is_ok();
            let state = to_json(self.pump.thread(thread).map(|t| t.state))?;
            Ok(Settled { settled, state })
        })
    }

    fn answers(&self, thread: ThreadId) -> BoxFuture<'_, Result<Json, String>> {
        Box::pin(
            async move { to_json(self.pump.answers(thread).await.map_err(|e| e.to_string())?) },
        )
    }

    fn threads(&self) -> BoxFuture<'_, Result<Vec<Json>, String>> {
        Box::pin(async move {
            let threads = crate::host::server::routes::every_thread(&self.pump).await;
            each_to_json(threads.map_err(|e| e.to_string())?)
        })
    }

    fn history(&self, thread: ThreadId) -> BoxFuture<'_, Result<Vec<Json>, String>> {
        Box::pin(async move {
            // A thread nobody knows is said so, not shown as an empty history.
            if !self.pump.load(thread).await.map_err(|e| e.to_string())? {
                return Err(format!("no thread {thread}"));
            }
            each_to_json(self.pump.history(thread).await.map_err(|e| e.to_string())?)
        })
    }

    fn reports(&self, thread: ThreadId) -> BoxFuture<'_, Result<Vec<Json>, String>> {
        Box::pin(async move {
            each_to_json(self.pump.reports(thread).await.map_err(|e| e.to_string())?)
        })
    }

    fn stop(&self, thread: ThreadId) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move { self.pump.stop(thread).await.map_err(|e| e.to_string()) })
    }

    fn resume(&self, thread: ThreadId, budget: Budget) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            self.pump
                .resume(thread, &budget)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn listeners(&self) -> Vec<ListenerDoc> {
        self.listeners.to_vec()
    }
}
