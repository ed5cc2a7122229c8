//! The front of a host whose history it does not write alone: every request is forwarded to
//! the host that writes the thread it names, at the address that host wrote in its lease, and
//! the answer comes back as it is — so a client, the CLI and the viewer can use any host.
//!
//! With one history stream (a standby waiting for the lease) every request goes to its writer.
//! With the threads in partitions (`[store] partitions`, docs/history.md "Partitions") a
//! request naming a thread goes to its partition's writer (answered in the process when that
//! is this host; the viewer's tree of a thread gets its descendants on other partitions added,
//! `front/tree.rs`), a new thread to a partition this host writes, a list to every partition (the
//! answers merged), the inbox's event stream from every partition (merged event by event), an
//! answer to the inbox to each partition until one knows the request, `/health` to every
//! partition (`front/health.rs`: each one's writer and whether it takes writes). `/mcp` is the host's own
//! MCP server there, its tool calls going through these same routes (`front/mcp.rs`). A
//! partition nobody writes yet answers `503 standby` (problem JSON, `Retry-After: 1`).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt as _;

use super::problem::Problem;
use crate::ThreadId;
use crate::thread::Partition;

mod events;
mod health;
mod mcp;
mod merge;
mod tree;

/// The header a forwarded answer carries: the writer it came from.
pub const FORWARDED_FROM: &str = "agentpump-forwarded-from";

/// How long a writer may take to accept a forwarded request's connection: past it, the
/// request was not sent (a new thread goes to another partition).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a writer may take to begin its answer to a forwarded request (beyond the
/// `wait_ms` the request asks for): past it, `504 writer-timeout`.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

/// Headers that belong to one connection, never forwarded either way.
const HOP_BY_HOP: [HeaderName; 5] = [
    header::CONNECTION,
    header::HOST,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::CONTENT_LENGTH,
];

/// What a front needs to serve `/mcp` itself (a partitioned organism; with one stream `/mcp`
/// is forwarded to the writer like any route).
#[derive(Debug)]
pub struct FrontMcp {
    /// The organism's API token: required on `/mcp`, and given to the partitions it asks.
    pub token: Arc<str>,
    /// The `Host` names `/mcp` takes besides loopback (`[server] allowed_hosts`).
    pub allowed_hosts: Vec<String>,
    /// The organism's listeners, as the pumps built on this host last said them.
    pub listeners: watch::Receiver<Vec<crate::host::mcp::server::ListenerDoc>>,
}

/// How a front serves.
#[derive(Debug)]
pub struct FrontOptions {
    /// The largest request body it takes (`[server] max_body_bytes`).
    pub max_body: usize,
    /// How long requests in flight get once the front shuts down (`[server]
    /// shutdown_timeout_ms`); then they are dropped.
    pub shutdown_timeout: std::time::Duration,
    /// `/mcp` served here (a partitioned organism), or forwarded like any route (`None`).
    pub mcp: Option<FrontMcp>,
}

/// The writer of each partition (index = partition), as its lease says.
pub type Writers = Vec<watch::Receiver<Option<String>>>;

/// For each partition, its pump's API in this process while this host writes it (empty for
/// a standby): a request for it is answered here, without a trip over the network.
pub type Locals = Vec<watch::Receiver<Option<Router>>>;

#[derive(Clone)]
struct Front {
    writers: Arc<Writers>,
    locals: Arc<Locals>,
    client: reqwest::Client,
    max_body: usize,
    /// The partition the next new thread goes to.
    turn: Arc<AtomicUsize>,
    /// How long a writer may take to begin an answer ([`ANSWER_TIMEOUT`]).
    answer_timeout: Duration,
    /// True once the front shuts down: merged event streams end then.
    stopping: watch::Receiver<bool>,
}

/// Serves the front on `listener` until `shutdown` completes (then lets requests in flight
/// finish, for `shutdown_timeout` at most): every request forwarded to a writer in `writers`
/// (one per partition), or answered by the partition's API in `locals` while this host writes
/// it; with several partitions and `mcp`, `/mcp` served here over them all (its sessions end
/// when the shutdown begins).
///
/// # Errors
///
/// The server fails.
pub async fn serve_front(
    listener: TcpListener,
    writers: Writers,
    locals: Locals,
    options: FrontOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let FrontOptions {
        max_body,
        shutdown_timeout,
        mcp,
    } = options;
    crate::listeners::llm::install_tls_provider();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(std::io::Error::other)?;
    let (stop, stopping) = watch::channel(false);
    let began = stop.subscribe();
    // MCP sessions hold an event stream open (rmcp's GET /mcp): they end when the shutdown
    // begins, or they would hold it open until the limit.
    let sessions = tokio_util::sync::CancellationToken::new();
    let state = Front {
        writers: Arc::new(writers),
        locals: Arc::new(locals),
        client,
        max_body,
        turn: Arc::new(AtomicUsize::new(0)),
        answer_timeout: ANSWER_TIMEOUT,
        stopping,
    };
    let mut app = Router::new();
    if let Some(mcp) = mcp.filter(|_| state.writers.len() > 1) {
        let served = mcp::FrontServed {
            front: state.clone(),
            token: Arc::clone(&mcp.token),
            listeners: mcp.listeners,
        };
        let server = crate::host::mcp::server::McpServer::over(Arc::new(served));
        let service =
            crate::host::mcp::server::http_service(server, max_body, sessions.child_token());
        // Behind the token and the `Host` check, as `/mcp` on a pump is; the rest of the
        // front checks nothing itself: the pumps it forwards to do.
        let served = Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn_with_state(
                super::hosts::AllowedHosts::new(&mcp.allowed_hosts),
                super::hosts::check,
            ))
            .layer(axum::middleware::from_fn_with_state(
                mcp.token,
                super::auth::require_token,
            ));
        app = app.merge(served);
    }
    let app = app.fallback(route).with_state(state);
    let server = axum::serve(listener, app).with_graceful_shutdown(async move {
        shutdown.await;
        sessions.cancel();
        // A merged event stream would hold the graceful shutdown open for good.
        stop.send_replace(true);
    });
    // No route of the front itself watches a cut-off: past the limit, what is left is dropped.
    let (cut_off, _) = watch::channel(false);
    super::within_limit(
        std::future::IntoFuture::into_future(server),
        began,
        shutdown_timeout,
        &cut_off,
    )
    .await
}

/// Where a request goes.
enum Destination {
    /// The writer of this partition.
    One(usize),
    /// A new thread: this partition first, then any other that takes it.
    New(usize),
    /// Every partition, the answers merged (a list).
    Every(merge::List),
    /// Each partition in turn until one answers other than 404.
    Seek,
    /// Every partition's event stream, merged (`GET /inbox/events`).
    Events,
    /// The viewer's tree of a thread (`GET /view/threads/{id}`): its partition's, with its
    /// descendants on other partitions added.
    Tree(usize),
    /// `GET /health`: every partition's writer and whether it takes writes (`?ready`: all must).
    Health {
        /// Whether every partition must take writes for a `200`.
        ready: bool,
    },
}

fn destination(front: &Front, method: &Method, uri: &Uri, body: &[u8]) -> Destination {
    let count = front.writers.len();
    if count == 1 {
        return Destination::One(0);
    }
    let path = uri.path();
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let thread = match segments.as_slice() {
        ["threads", id, ..] | ["view", "threads", id, ..] => id.parse::<ThreadId>().ok(),
        // A thread's own organism view (`?thread=ID`) is that thread's partition's.
        ["view", "organism"] => query_thread(uri),
        _ => None,
    };
    if let Some(thread) = thread {
        let partition = Partition::of(thread, count as u32) as usize;
        return match (method, segments.as_slice()) {
            (&Method::GET, ["view", "threads", _]) => Destination::Tree(partition),
            _ => Destination::One(partition),
        };
    }
    match (method, segments.as_slice()) {
        // An envelope naming its thread goes where that thread is.
        (&Method::POST, ["threads"]) => match named_thread(body, front.max_body) {
            Some(thread) => Destination::One(Partition::of(thread, count as u32) as usize),
            None => Destination::New(front.next_new()),
        },
        (&Method::GET, ["threads"]) => Destination::Every(merge::List::Threads),
        (&Method::GET, ["inbox"]) => Destination::Every(merge::List::Inbox),
        (&Method::GET, ["view", "threads"]) => Destination::Every(merge::List::Roots),
        (&Method::POST, ["history", "prune"]) => Destination::Every(merge::List::Pruned),
        (&Method::GET, ["view", "totals"]) => Destination::Every(merge::List::Totals),
        (&Method::GET, ["inbox", "events"]) => Destination::Events,
        (&Method::GET, ["view", "organism"]) => Destination::Every(merge::List::Organism),
        (&Method::POST, ["inbox", _]) => Destination::Seek,
        (&Method::GET, ["health"]) => Destination::Health {
            ready: query_value(uri.query(), "ready").is_some(),
        },
        // The rest (the viewer's files, the organism, tasks) is the same everywhere.
        _ => Destination::One(0),
    }
}

/// The value of `key` in `query`, if it has one.
fn query_value(query: Option<&str>, key: &str) -> Option<String> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query?).ok()?;
    pairs.into_iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// The `thread` of `uri`'s query, if it names one.
fn query_thread(uri: &Uri) -> Option<ThreadId> {
    query_value(uri.query(), "thread")?.parse().ok()
}

/// The thread an envelope in `body` names, if it is one and names one. A body that has no
/// `thread` in it anywhere (a bare payload, the usual new thread) is not parsed here: the pump
/// parses it once.
fn named_thread(body: &[u8], max_body: usize) -> Option<ThreadId> {
    if !body.windows(6).any(|w| w == b"thread") {
        return None;
    }
    let limits = crate::Limits {
        max_bytes: max_body,
        ..crate::Limits::default()
    };
    crate::Incoming::parse(body, &limits)
        .ok()?
        .thread()?
        .parse()
        .ok()
}

async fn route(State(front): State<Front>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, front.max_body).await {
        Ok(body) => body,
        Err(_) => {
            let detail = format!(
                "the body is over this host's limit of {} bytes (max_body_bytes)",
                front.max_body
            );
            return Problem::new(StatusCode::PAYLOAD_TOO_LARGE, "too-large", detail)
                .into_response();
        }
    };
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", axum::http::uri::PathAndQuery::as_str);
    let sent = Sent {
        method: &parts.method,
        path,
        headers: &parts.headers,
        body,
    };
    let answer = match destination(&front, &parts.method, &parts.uri, &sent.body) {
        Destination::One(partition) => front.exchange(partition, &sent).await,
        Destination::New(first) => front.create(first, &sent).await,
        Destination::Every(list) => Ok(merge::every(&front, list, &sent).await),
        Destination::Seek => front.seek(&sent).await,
        Destination::Events => events::every(&front, &sent).await,
        Destination::Tree(partition) => tree::whole(&front, partition, &sent).await,
        Destination::Health { ready } => Ok(health::every(&front, &sent, ready).await),
    };
    answer.unwrap_or_else(std::convert::identity)
}

/// A request as the client sent it, to forward.
struct Sent<'a> {
    method: &'a Method,
    /// The path and query.
    path: &'a str,
    headers: &'a HeaderMap,
    body: Bytes,
}

impl Front {
    /// The writer of `partition`, or the `503 standby` answer (with `Retry-After: 1`).
    fn writer(&self, partition: usize) -> Result<String, Problem> {
        if let Some(writer) = self.writers[partition].borrow().clone() {
            return Ok(writer);
        }
        let detail = if self.writers.len() == 1 {
            "this host is a standby and no writer of the history stream is known yet; try again"
                .to_owned()
        } else {
            format!(
                "no host writes partition {partition} of {} yet (its lease is free or being taken over); try again",
                self.writers.len()
            )
        };
        Err(Problem::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "standby",
            detail,
        ))
    }

    /// The partition a new thread goes to: the partitions this host writes in turn, or, when
    /// it writes none, every partition in turn.
    fn next_new(&self) -> usize {
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        let here = |p: &usize| self.locals.get(*p).is_some_and(|l| l.borrow().is_some());
        let written = |p: &usize| self.writers[*p].borrow().is_some();
        // None written: partition 0 answers `503 standby`.
        in_turn(self.writers.len(), turn, here)
            .or_else(|| in_turn(self.writers.len(), turn, written))
            .unwrap_or(0)
    }

    /// A new thread, to `first` and, while a partition refuses it having accepted nothing —
    /// no writer, its writer not reached, or its `503` (a hand-back, a failing disk, a
    /// shutdown) — to each other written partition in turn: a new thread is refused only when
    /// no partition takes it, with the last refusal. An answer that may mean the thread was
    /// started (any other, or a writer that stopped answering mid-way) is returned as it is.
    async fn create(&self, first: usize, sent: &Sent<'_>) -> Result<Response, Response> {
        let count = self.writers.len();
        let mut refused = None;
        for partition in (0..count).map(|i| (first + i) % count) {
            if partition != first && self.writers[partition].borrow().is_none() {
                continue;
            }
            let why = match self.forward(partition, sent).await {
                Ok(answer) if answer.status() != StatusCode::SERVICE_UNAVAILABLE => {
                    return Ok(answer);
                }
                Ok(answer) => answer,
                Err(Refused::Untouched(answer)) => answer,
                Err(Refused::Unknown(answer)) => return Err(answer),
            };
            tracing::info!(
                partition,
                status = why.status().as_u16(),
                "a new thread goes to another partition: this one did not take it"
            );
            refused = Some(why);
        }
        // `first` is always asked: there is a refusal.
        Err(refused.unwrap_or_else(|| StatusCode::SERVICE_UNAVAILABLE.into_response()))
    }

    /// `sent` answered by the writer of `partition`: in this process when it is this host,
    /// else over HTTP (the body streamed back as it comes); with the writer's address.
    async fn exchange(&self, partition: usize, sent: &Sent<'_>) -> Result<Response, Response> {
        self.forward(partition, sent)
            .await
            .map_err(Refused::into_response)
    }

    /// [`Front::exchange`], its refusals told apart by whether the request may have reached
    /// a pump.
    async fn forward(&self, partition: usize, sent: &Sent<'_>) -> Result<Response, Refused> {
        let writer = self
            .writer(partition)
            .map_err(|p| Refused::Untouched(p.into_response()))?;
        let local = self.locals.get(partition).and_then(|l| l.borrow().clone());
        let mut answer = match local {
            Some(router) => {
                let mut request = Request::builder()
                    .method(sent.method.clone())
                    .uri(sent.path)
                    .body(Body::from(sent.body.clone()))
                    .map_err(|e| {
                        let detail =
                            format!("the path and query cannot be passed on to the pump: {e}");
                        let problem = Problem::new(StatusCode::BAD_REQUEST, "bad-query", detail);
                        Refused::Unknown(problem.into_response())
                    })?;
                // The request as it came, `Host` included (`/mcp` checks it), less the
                // framing of the connection it came on.
                let mut headers = sent.headers.clone();
                for name in [
                    header::CONTENT_LENGTH,
                    header::TRANSFER_ENCODING,
                    header::CONNECTION,
                ] {
                    headers.remove(name);
                }
                *request.headers_mut() = headers;
                match router.oneshot(request).await {
                    Ok(answer) => answer,
                    Err(never) => match never {},
                }
            }
            None => self.over_http(partition, &writer, sent).await?,
        };
        if let Ok(from) = HeaderValue::from_str(&writer) {
            answer.headers_mut().insert(FORWARDED_FROM, from);
        }
        Ok(answer)
    }

    /// The `200` answer of `partition`'s writer to `sent`, read as `T`; any other answer as it
    /// came, or the problem of reaching it or reading its answer.
    async fn fetch<T: serde::de::DeserializeOwned>(
        &self,
        partition: usize,
        sent: &Sent<'_>,
    ) -> Result<T, Response> {
        let answer = self.exchange(partition, sent).await?;
        if answer.status() != StatusCode::OK {
            return Err(answer);
        }
        let unreadable = |e: &dyn std::fmt::Display| {
            let detail = format!("partition {partition}'s writer answered what does not read: {e}");
            Problem::new(StatusCode::BAD_GATEWAY, "writer-unreachable", detail).into_response()
        };
        let body = axum::body::to_bytes(answer.into_body(), usize::MAX)
            .await
            .map_err(|e| unreadable(&e))?;
        serde_json::from_slice(&body).map_err(|e| unreadable(&e))
    }

    /// `sent` to `partition`'s writer at `writer`, its answer as this host's: refused when
    /// the writer cannot be connected to within [`CONNECT_TIMEOUT`], or has not begun its
    /// answer within the front's answer timeout ([`ANSWER_TIMEOUT`]; plus the `wait_ms` the
    /// request asks it to wait).
    async fn over_http(
        &self,
        partition: usize,
        writer: &str,
        sent: &Sent<'_>,
    ) -> Result<Response, Refused> {
        let url = format!("{}{}", writer.trim_end_matches('/'), sent.path);
        let waits = sent
            .path
            .split_once('?')
            .and_then(|(_, query)| query_value(Some(query), "wait_ms"))
            .and_then(|ms| ms.parse().ok())
            .map_or(Duration::ZERO, Duration::from_millis);
        let limit = self.answer_timeout + waits;
        let sending = self
            .client
            .request(sent.method.clone(), &url)
            .headers(end_to_end(sent.headers))
            .body(sent.body.clone())
            .send();
        let Ok(answered) = tokio::time::timeout(limit, sending).await else {
            let detail = format!(
                "partition {partition}'s writer at {writer} began no answer within {} ms (paused, or overloaded); what was sent may have been accepted: read it back before sending it again",
                limit.as_millis()
            );
            let problem = Problem::new(StatusCode::GATEWAY_TIMEOUT, "writer-timeout", detail);
            return Err(Refused::Unknown(problem.into_response()));
        };
        let answer = answered.map_err(|e| {
            let answer = Problem::new(
                StatusCode::BAD_GATEWAY,
                "writer-unreachable",
                format!("partition {partition}'s writer at {writer} did not answer: {e}"),
            )
            .into_response();
            // Not connected: the request never left this host.
            if e.is_connect() {
                Refused::Untouched(answer)
            } else {
                Refused::Unknown(answer)
            }
        })?;
        Ok(streamed(answer))
    }

    /// `sent` to each partition in turn; the first answer that is not 404. When none knows
    /// it: the first partition that could not be asked (the answer might be there), else the
    /// last 404.
    async fn seek(&self, sent: &Sent<'_>) -> Result<Response, Response> {
        let mut unreached = None;
        let mut last = StatusCode::NOT_FOUND.into_response();
        for partition in 0..self.writers.len() {
            match self.exchange(partition, sent).await {
                Ok(answer) if answer.status() != StatusCode::NOT_FOUND => return Ok(answer),
                Ok(answer) => last = answer,
                Err(refused) => {
                    unreached.get_or_insert(refused);
                }
            }
        }
        unreached.map_or(Ok(last), Err)
    }
}

/// Why a forwarded request got no answer from a pump.
enum Refused {
    /// It reached no pump: no writer is known, or its writer could not be connected to.
    Untouched(Response),
    /// It may have reached one (the writer stopped answering mid-way).
    Unknown(Response),
}

impl Refused {
    fn into_response(self) -> Response {
        match self {
            Self::Untouched(answer) | Self::Unknown(answer) => answer,
        }
    }
}

/// The `turn`-th (modulo how many there are) of the partitions below `count` that are `chosen`.
fn in_turn(count: usize, turn: usize, chosen: impl Fn(&usize) -> bool) -> Option<usize> {
    let n = (0..count).filter(&chosen).count();
    (n > 0)
        .then(|| (0..count).filter(&chosen).nth(turn % n))
        .flatten()
}

/// The writer's `answer` as this host's, its body streamed as it comes.
fn streamed(answer: reqwest::Response) -> Response {
    let mut response = Response::builder().status(answer.status());
    if let Some(headers) = response.headers_mut() {
        headers.extend(end_to_end(answer.headers()));
    }
    response
        .body(Body::from_stream(answer.bytes_stream()))
        .unwrap_or_else(|e| {
            Problem::new(StatusCode::BAD_GATEWAY, "writer-unreachable", e.to_string())
                .into_response()
        })
}

/// `headers` without those of one connection.
fn end_to_end(headers: &HeaderMap) -> HeaderMap {
    let mut out = headers.clone();
    for name in &HOP_BY_HOP {
        out.remove(name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A front of three partitions, the first two written (by no one reachable: only where
    /// requests go is looked at), none of them in this process.
    pub(super) fn front() -> Front {
        let writers = (0..3)
            .map(|p| watch::channel((p < 2).then(|| format!("http://writer-{p}"))).1)
            .collect();
        Front {
            writers: Arc::new(writers),
            locals: Arc::new(Vec::new()),
            client: reqwest::Client::builder().build().unwrap(),
            max_body: 1 << 20,
            turn: Arc::new(AtomicUsize::new(0)),
            answer_timeout: ANSWER_TIMEOUT,
            stopping: watch::channel(false).1,
        }
    }

    fn to(front: &Front, method: Method, uri: &str, body: &str) -> String {
        let uri: Uri = uri.parse().unwrap();
        match destination(front, &method, &uri, body.as_bytes()) {
            Destination::One(p) => format!("one {p}"),
            Destination::New(p) => format!("new {p}"),
            Destination::Every(list) => format!("every {list:?}"),
            Destination::Seek => "seek".to_owned(),
            Destination::Events => "events".to_owned(),
            Destination::Tree(p) => format!("tree {p}"),
            Destination::Health { ready } => format!("health ready={ready}"),
        }
    }

    /// A writer on loopback that answers every request with `status`; its address.
    async fn writer_answering(status: StatusCode) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let app = Router::new().fallback(move || async move { status.into_response() });
        tokio::spawn(async move { axum::serve(listener, app).await });
        address
    }

    /// An address nothing listens on.
    async fn closed_address() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    }

    fn front_of(writers: Vec<Option<String>>) -> Front {
        let writers = writers.into_iter().map(|w| watch::channel(w).1).collect();
        Front {
            writers: Arc::new(writers),
            ..front()
        }
    }

    async fn new_thread(front: &Front) -> Response {
        let request = Request::post("/threads")
            .body(Body::from(r#"<say xmlns="urn:example:v1"/>"#))
            .unwrap();
        route(State(front.clone()), request).await
    }

    /// Issue 48: "new threads are refused while other partitions are healthy". A partition
    /// whose writer cannot be connected to, one that answers 503 and one without a writer are
    /// passed over; the thread goes to the partition that takes it, whichever comes first.
    #[tokio::test]
    async fn a_new_thread_goes_to_a_partition_that_takes_it() {
        crate::listeners::llm::install_tls_provider();
        let taking = writer_answering(StatusCode::CREATED).await;
        let writers = vec![
            Some(closed_address().await),
            Some(writer_answering(StatusCode::SERVICE_UNAVAILABLE).await),
            None,
            Some(taking.clone()),
        ];
        let front = front_of(writers);
        for _ in 0..4 {
            let answer = new_thread(&front).await;
            assert_eq!(answer.status(), StatusCode::CREATED);
            assert_eq!(answer.headers()[FORWARDED_FROM], taking.as_str());
        }
        // None takes it: the last refusal, as it came.
        let front = front_of(vec![
            Some(closed_address().await),
            Some(writer_answering(StatusCode::SERVICE_UNAVAILABLE).await),
        ]);
        let answer = new_thread(&front).await;
        assert!(
            [StatusCode::BAD_GATEWAY, StatusCode::SERVICE_UNAVAILABLE].contains(&answer.status())
        );
        // An answer that may mean the thread was started is not asked again elsewhere.
        let failing = writer_answering(StatusCode::INTERNAL_SERVER_ERROR).await;
        let front = front_of(vec![Some(failing.clone()), Some(taking)]);
        let answer = new_thread(&front).await;
        assert_eq!(answer.status(), StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(answer.headers()[FORWARDED_FROM], failing.as_str());
    }

    /// Issue 48: "a request forwarded to a paused writer hangs until the client gives up". A
    /// writer that takes the connection and never answers (as a SIGSTOPped one does: the kernel
    /// accepts for it) is a `504 writer-timeout` naming the partition; a new thread is not
    /// sent elsewhere then (it may have been accepted); a `wait_ms` lengthens the limit.
    #[tokio::test]
    async fn a_writer_that_never_answers_is_a_timeout_naming_its_partition() {
        crate::listeners::llm::install_tls_provider();
        let paused = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let writer = format!("http://{}", paused.local_addr().unwrap());
        let taking = writer_answering(StatusCode::CREATED).await;
        let front = Front {
            answer_timeout: Duration::from_millis(200),
            ..front_of(vec![Some(writer), Some(taking)])
        };
        let answer = new_thread(&front).await;
        assert_eq!(answer.status(), StatusCode::GATEWAY_TIMEOUT);
        let body = axum::body::to_bytes(answer.into_body(), 1 << 16)
            .await
            .unwrap();
        let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(problem["code"], "writer-timeout");
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("partition 0's writer at http://127.0.0.1:"),
            "{detail}"
        );
        assert!(detail.contains("within 200 ms"), "{detail}");
        let thread = Partition::new(0, 2).unwrap().new_thread();
        let request = Request::get(format!("/threads/{thread}/settled?wait_ms=300"))
            .body(Body::empty())
            .unwrap();
        let answer = route(State(front.clone()), request).await;
        let body = axum::body::to_bytes(answer.into_body(), 1 << 16)
            .await
            .unwrap();
        assert!(String::from_utf8_lossy(&body).contains("within 500 ms"));
        drop(paused);
    }

    async fn get(front: &Front, path: &str) -> (StatusCode, serde_json::Value) {
        let request = Request::get(path).body(Body::empty()).unwrap();
        let answer = route(State(front.clone()), request).await;
        let status = answer.status();
        let body = axum::body::to_bytes(answer.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, serde_json::from_slice(&body).unwrap())
    }

    /// Issue 48: "`/health` is answered by partition 0's writer, so it said ok on every host
    /// while another partition had no writer". It names each partition's writer and state;
    /// `?ready` is 200 only when every partition takes writes.
    #[tokio::test]
    async fn health_reports_every_partition_and_ready_needs_them_all() {
        crate::listeners::llm::install_tls_provider();
        let ok = writer_answering(StatusCode::OK).await;
        let failing = writer_answering(StatusCode::SERVICE_UNAVAILABLE).await;
        let front = front_of(vec![Some(ok.clone()), None, Some(failing.clone())]);
        let (status, health) = get(&front, "/health").await;
        assert_eq!(status, StatusCode::OK, "{health}");
        assert_eq!(health["status"], "degraded");
        let states: Vec<(&str, &str)> = health["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["writer"].as_str().unwrap_or("-"),
                    p["status"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            states,
            [
                (ok.as_str(), "ok"),
                ("-", "no-writer"),
                (failing.as_str(), "http-503")
            ]
        );
        let (status, problem) = get(&front, "/health?ready").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(problem["code"], "not-ready");
        assert_eq!(problem["partitions"].as_array().unwrap().len(), 3);
        let front = front_of(vec![Some(ok.clone()), Some(ok.clone())]);
        let (status, health) = get(&front, "/health?ready").await;
        assert_eq!((status, &health["status"]), (StatusCode::OK, &"ok".into()));
        let front = front_of(vec![None, Some(failing)]);
        let (status, problem) = get(&front, "/health").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{problem}");
    }

    #[test]
    fn each_request_goes_where_its_thread_or_its_list_is() {
        crate::listeners::llm::install_tls_provider();
        let front = front();
        let in_two = Partition::new(2, 3).unwrap().new_thread();
        let one = |m: Method, uri: &str| to(&front, m, uri, "");
        assert_eq!(
            one(Method::GET, &format!("/threads/{in_two}/history")),
            "one 2"
        );
        assert_eq!(
            one(Method::GET, &format!("/view/threads/{in_two}/records")),
            "one 2"
        );
        assert_eq!(
            one(Method::GET, &format!("/view/threads/{in_two}")),
            "tree 2"
        );
        assert_eq!(
            one(Method::GET, &format!("/view/organism?thread={in_two}")),
            "one 2"
        );
        assert_eq!(one(Method::GET, "/view/organism"), "every Organism");
        assert_eq!(one(Method::GET, "/view/totals?by=day"), "every Totals");
        assert_eq!(one(Method::POST, "/history/prune"), "every Pruned");
        assert_eq!(one(Method::GET, "/inbox/events"), "events");
        assert_eq!(one(Method::GET, "/threads?state=idle"), "every Threads");
        assert_eq!(one(Method::GET, "/view/threads?limit=5"), "every Roots");
        assert_eq!(one(Method::GET, "/inbox"), "every Inbox");
        assert_eq!(one(Method::POST, "/inbox/abc"), "seek");
        assert_eq!(one(Method::GET, "/health"), "health ready=false");
        assert_eq!(one(Method::GET, "/health?ready"), "health ready=true");
        // New threads go to written partitions only (partition 2 has no writer), in turn.
        let new: Vec<String> = (0..4).map(|_| one(Method::POST, "/threads")).collect();
        assert_eq!(new, ["new 0", "new 1", "new 0", "new 1"]);
        // An envelope naming its thread goes to that thread's partition.
        let envelope = format!(
            r#"<message xmlns="urn:agentpump:envelope:v1"><meta><thread>{in_two}</thread></meta><say xmlns="urn:example:v1"/></message>"#
        );
        assert_eq!(to(&front, Method::POST, "/threads", &envelope), "one 2");
    }
}
