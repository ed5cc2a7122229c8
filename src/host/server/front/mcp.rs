//! `/mcp` on a host of a partitioned organism: the host's own MCP server, whose every tool call
//! goes through the front's routes in the process ([`FrontServed`]) — to the thread's partition
//! wherever it is written, or to every partition with the answers merged (`threads`) — so an
//! MCP session sees the whole organism from any host. The session lives in this host; behind
//! the organism's token and `Host` check, as `/mcp` on a pump is.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, header};
use futures_util::future::BoxFuture;
use serde_json::{Value as Json, json};
use tokio::sync::watch;

use super::Front;
use crate::ThreadId;
use crate::governor::Budget;
use crate::host::mcp::served::{Served, Settled};
use crate::host::mcp::server::ListenerDoc;

/// The organism through a front: the token its pumps take, and the listeners as the
/// partitions written here last built them (none while this host writes no partition).
#[derive(Clone)]
pub(super) struct FrontServed {
    pub(super) front: Front,
    pub(super) token: Arc<str>,
    pub(super) listeners: watch::Receiver<Vec<ListenerDoc>>,
}

impl std::fmt::Debug for FrontServed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrontServed")
            .field("partitions", &self.front.writers.len())
            .finish_non_exhaustive()
    }
}

impl FrontServed {
    /// `method path` with `body` through the front's routes, as a client with the token would
    /// send it: the answer's JSON (`null` for an empty body), or the problem's detail.
    async fn ask(&self, method: Method, path: &str, body: Vec<u8>) -> Result<Json, String> {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {}", self.token))
            .body(Body::from(body))
            .map_err(|e| format!("{path} cannot be asked: {e}"))?;
        let answer = super::route(State(self.front.clone()), request).await;
        let status = answer.status();
        let bytes = axum::body::to_bytes(answer.into_body(), usize::MAX)
            .await
            .map_err(|e| format!("the answer to {path} could not be read to its end: {e}"))?;
        if !status.is_success() {
            let problem: Option<Json> = serde_json::from_slice(&bytes).ok();
            let detail = problem
                .as_ref()
                .and_then(|p| p.get("detail"))
                .and_then(Json::as_str)
                .map_or_else(
                    || String::from_utf8_lossy(&bytes).into_owned(),
                    str::to_owned,
                );
            return Err(format!("{path}: {status}: {detail}"));
        }
        if bytes.is_empty() {
            return Ok(Json::Null);
        }
        serde_json::from_slice(&bytes).map_err(|e| format!("the answer to {path} is not JSON: {e}"))
    }

    /// [`ask`](Self::ask) for a JSON array.
    async fn list(&self, path: &str) -> Result<Vec<Json>, String> {
        match self.ask(Method::GET, path, Vec::new()).await? {
            Json::Array(items) => Ok(items),
            other => Err(format!("{path} answered {other}, not a list")),
        }
    }
}

/// `path` with `?to=` when `to` names a listener.
fn with_to(path: String, to: Option<&str>) -> String {
    match to {
        Some(to) => {
            let query = serde_urlencoded::to_string([("to", to)]).unwrap_or_default();
            format!("{path}?{query}")
        }
        None => path,
    }
}

/// `budget` as `POST /threads/{id}/resume` takes it (the keys the MCP `resume` tool sets).
fn budget_body(budget: &Budget) -> Vec<u8> {
    let mut body = serde_json::Map::new();
    let keys = [
        ("turns", budget.turns),
        ("tool_calls", budget.tool_calls),
        ("tokens", budget.tokens),
        (
            "wall_clock_ms",
            budget
                .wall_clock
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        ),
    ];
    for (key, value) in keys {
        if let Some(value) = value {
            body.insert(key.to_owned(), json!(value));
        }
    }
    Json::Object(body).to_string().into_bytes()
}

impl Served for FrontServed {
    fn post<'a>(
        &'a self,
        payload: &'a [u8],
        into: Option<ThreadId>,
        to: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Json, String>> {
        Box::pin(async move {
            let path = match into {
                Some(thread) => format!("/threads/{thread}/messages"),
                None => "/threads".to_owned(),
            };
            let path = with_to(path, to);
            self.ask(Method::POST, &path, payload.to_vec()).await
        })
    }

    fn settle(&self, thread: ThreadId, within: Duration) -> BoxFuture<'_, Result<Settled, String>> {
        Box::pin(async move {
            let ms = u64::try_from(within.as_millis()).unwrap_or(u64::MAX);
            let path = format!("/threads/{thread}/settled?wait_ms={ms}");
            let answer = self.ask(Method::GET, &path, Vec::new()).await?;
            Ok(Settled {
                settled: answer.get("settled").and_then(Json::as_bool) == Some(true),
                state: answer.get("state").cloned().unwrap_or(Json::Null),
            })
        })
    }

    fn answers(&self, thread: ThreadId) -> BoxFuture<'_, Result<Json, String>> {
        Box::pin(async move {
            let path = format!("/threads/{thread}/answers");
            self.ask(Method::GET, &path, Vec::new()).await
        })
    }

    fn threads(&self) -> BoxFuture<'_, Result<Vec<Json>, String>> {
        Box::pin(self.list("/threads"))
    }

    fn history(&self, thread: ThreadId) -> BoxFuture<'_, Result<Vec<Json>, String>> {
        Box::pin(async move { self.list(&format!("/threads/{thread}/history")).await })
    }

    fn reports(&self, thread: ThreadId) -> BoxFuture<'_, Result<Vec<Json>, String>> {
        Box::pin(async move { self.list(&format!("/threads/{thread}/reports")).await })
    }

    fn stop(&self, thread: ThreadId) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let path = format!("/threads/{thread}/stop");
            self.ask(Method::POST, &path, Vec::new()).await.map(drop)
        })
    }

    fn resume(&self, thread: ThreadId, budget: Budget) -> BoxFuture<'_, Result<(), String>> {
        Box::pin(async move {
            let path = format!("/threads/{thread}/resume");
            self.ask(Method::POST, &path, budget_body(&budget))
                .await
                .map(drop)
        })
    }

    fn listeners(&self) -> Vec<ListenerDoc> {
        self.listeners.borrow().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resume_budget_goes_as_the_route_takes_it() {
        let budget = Budget {
            turns: Some(3),
            wall_clock: Some(Duration::from_millis(1500)),
            ..Budget::default()
        };
        let body: Json = serde_json::from_slice(&budget_body(&budget)).unwrap();
        assert_eq!(body, json!({"turns": 3, "wall_clock_ms": 1500}));
        assert_eq!(
            with_to("/threads".into(), Some("a b&c")),
            "/threads?to=a+b%26c"
        );
        assert_eq!(with_to("/threads".into(), None), "/threads");
    }

    /// A tool call for a thread whose partition nobody writes is a tool error saying so, with
    /// the route and the status, not an empty answer.
    #[tokio::test]
    async fn a_call_for_a_partition_without_a_writer_says_so() {
        crate::listeners::llm::install_tls_provider();
        let served = FrontServed {
            front: super::super::tests::front(),
            token: Arc::from("t"),
            listeners: watch::channel(Vec::new()).1,
        };
        let unwritten = crate::thread::Partition::new(2, 3).unwrap().new_thread();
        let refused = served.history(unwritten).await.unwrap_err();
        assert_eq!(
            refused,
            format!(
                "/threads/{unwritten}/history: 503 Service Unavailable: no host writes partition 2 of 3 yet (its lease is free or being taken over); try again"
            )
        );
        assert!(served.listeners().is_empty());
    }
}
