//! A chat-completions endpoint on loopback that validates requests and answers from a script —
//! the one thing outside our control in the LLM tests, served by a real HTTP server.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One scripted answer.
#[derive(Clone)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    pub retry_after: Option<u64>,
    pub delay: Duration,
}

/// A 200 answer with `text` as the assistant's content and the given usage.
pub fn answer(text: &str, prompt_tokens: u64, completion_tokens: u64) -> Reply {
    let body = json!({
        "choices": [{ "index": 0, "message": { "role": "assistant", "content": text }, "finish_reason": "stop" }],
        "usage": { "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens }
    });
    Reply {
        status: 200,
        body: body.to_string(),
        retry_after: None,
        delay: Duration::ZERO,
    }
}

/// A bare error status, with `Retry-After` when given.
pub fn status(code: u16, retry_after: Option<u64>) -> Reply {
    Reply {
        status: code,
        body: json!({"error": {"message": "scripted"}}).to_string(),
        retry_after,
        delay: Duration::ZERO,
    }
}

/// The scripted model: answers in order, then `otherwise`; keeps every request it got.
#[derive(Default)]
pub struct Model {
    /// Answers still to give, in order.
    pub replies: Mutex<VecDeque<Reply>>,
    /// Answer given once the script runs out.
    pub otherwise: Mutex<Option<Reply>>,
    /// Every valid request body received, in order.
    pub requests: Mutex<Vec<Value>>,
    /// The W3C `traceparent` header of each valid request, in the same order.
    pub traceparents: Mutex<Vec<Option<String>>>,
}

async fn completions(
    State(model): State<Arc<Model>>,
    headers: HeaderMap,
    body: String,
) -> Response {
    let request: Value = match serde_json::from_str(&body) {
        Ok(v) => v,
        Err(e) => return (StatusCode::BAD_REQUEST, format!("invalid JSON: {e}")).into_response(),
    };
    let valid = request["model"].is_string()
        && request["messages"].as_array().is_some_and(|m| {
            !m.is_empty()
                && m.iter().all(|m| {
                    matches!(m["role"].as_str(), Some("system" | "user" | "assistant"))
                        && m["content"].is_string()
                })
        });
    if !valid
        || headers.get("content-type").and_then(|v| v.to_str().ok()) != Some("application/json")
    {
        return (
            StatusCode::BAD_REQUEST,
            Json(json!({"error": "invalid chat request"})),
        )
            .into_response();
    }
    model.requests.lock().unwrap().push(request);
    let traceparent = headers.get("traceparent").and_then(|v| v.to_str().ok());
    (model.traceparents.lock().unwrap()).push(traceparent.map(str::to_owned));
    let next = model
        .replies
        .lock()
        .unwrap()
        .pop_front()
        .or_else(|| model.otherwise.lock().unwrap().clone());
    let reply = next.unwrap_or_else(|| status(500, None));
    tokio::time::sleep(reply.delay).await;
    let mut response = (StatusCode::from_u16(reply.status).unwrap(), reply.body).into_response();
    response
        .headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    if let Some(seconds) = reply.retry_after {
        response
            .headers_mut()
            .insert("retry-after", seconds.to_string().parse().unwrap());
    }
    response
}

/// Starts the scripted model; returns it and its base URL.
pub async fn serve_model(replies: Vec<Reply>, otherwise: Option<Reply>) -> (Arc<Model>, String) {
    let model = Arc::new(Model {
        replies: Mutex::new(replies.into()),
        otherwise: Mutex::new(otherwise),
        ..Model::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let app = app(&model);
    tokio::spawn(async move { axum::serve(listener, app).await });
    (model, base)
}

/// The routes of the scripted model.
fn app(model: &Arc<Model>) -> axum::Router {
    axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(completions))
        .with_state(Arc::clone(model))
}

/// A scripted model served on its own runtime, so that it can vanish the way a crashed server
/// does: open connections reset, new ones refused. Restartable on the same address.
pub struct Endpoint {
    /// Where it listens.
    pub addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Endpoint {
    /// Serves `model` on `addr` (port 0 picks one).
    pub fn start(model: &Arc<Model>, addr: SocketAddr) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // Address reuse, so a restarted endpoint gets its port back while the old
        // connections linger in TIME_WAIT.
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_reuseaddr(true).unwrap();
        socket.bind(addr).unwrap();
        let addr = socket.local_addr().unwrap();
        let app = app(model);
        runtime.spawn(async move { axum::serve(socket.listen(64).unwrap(), app).await });
        Self {
            addr,
            runtime: Some(runtime),
        }
    }

    /// The base URL an `LlmConfig` takes.
    pub fn base(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Stops everything at once: no answer to requests in flight, no more connections.
    pub fn vanish(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        self.vanish();
    }
}

/// LiteLLM's OpenAI-compatible proxy (a real one, PyPI `litellm[proxy]`) in front of an
/// upstream base URL, on a free loopback port; killed on drop. The executable is
/// `AGENTPUMP_LITELLM`, or `litellm` on the PATH (`.ci/run` installs it).
pub struct Proxy {
    child: std::process::Child,
    port: u16,
}

impl Proxy {
    /// Starts the proxy serving `openai/{model}` from `upstream` and waits until it is live.
    pub async fn start(upstream: &str, model: &str) -> Self {
        let exe = std::env::var("AGENTPUMP_LITELLM").unwrap_or_else(|_| "litellm".into());
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = std::process::Command::new(&exe)
            .args([
                "--model",
                &format!("openai/{model}"),
                "--api_base",
                upstream,
            ])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .env("OPENAI_API_KEY", "sk-loopback")
            .env("LITELLM_LOCAL_MODEL_COST_MAP", "True") // no download at start
            .env("LITELLM_TELEMETRY", "False")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "{exe}: {e} (install it as .ci/run does: pip install 'litellm[proxy]==1.79.3')"
                )
            });
        let proxy = Self { child, port };
        let live = format!("http://127.0.0.1:{port}/health/liveliness");
        let client = super::http_client(); // installs the TLS provider reqwest needs
        for _ in 0..600 {
            if client
                .get(&live)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return proxy;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("the LiteLLM proxy did not come up on port {port} in 120 s");
    }

    /// The base URL an `LlmConfig` takes.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
