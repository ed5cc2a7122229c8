//! The chat-completions call: retries with backoff and jitter, `Retry-After` on 429, precise
//! errors for everything else.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::LlmConfig;
use super::prompt::ChatMessage;
use crate::listener::ListenerError;

/// Installs rustls' `ring` provider as the process's default TLS provider, unless the program
/// installed one already.
///
/// agentpump builds reqwest with rustls on `ring` rather than reqwest's default `aws-lc-rs` (a C
/// and cmake build that dominated a cold build), so reqwest finds no provider of its own: a
/// program that builds its own `reqwest::Client` in the same build (a test, an embedding
/// program without reqwest's `rustls` feature) calls this first. agentpump's own clients call
/// it themselves.
pub fn install_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another installer is fine: a provider is installed either way.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// A reqwest client builder with a TLS provider installed ([`install_tls_provider`]).
pub(crate) fn http_client() -> reqwest::ClientBuilder {
    install_tls_provider();
    reqwest::Client::builder()
}

/// What the model answered.
#[derive(Debug)]
pub(crate) struct Answer {
    pub content: String,
    /// `prompt_tokens` and `completion_tokens`, each as far as the endpoint reported it.
    pub usage: (Option<u64>, Option<u64>),
    /// The model that answered, as the endpoint named it.
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    pub model: Option<String>,
    /// Each choice's `finish_reason`.
    #[cfg_attr(not(feature = "otel"), allow(dead_code))]
    pub finish_reasons: Vec<String>,
}

#[derive(Serialize)]
struct Request<'a> {
    model: &'a str,
    messages: &'a [ChatMessage],
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    max_tokens: u32,
}

#[derive(Deserialize)]
struct Response {
    choices: Vec<Choice>,
    usage: Option<UsageJson>,
    #[serde(default)]
    model: Option<String>,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Message {
    content: Option<String>,
}

#[derive(Deserialize)]
struct UsageJson {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

/// Longest wait a `Retry-After` may impose.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Calls the endpoint, retrying 429, 5xx and timeouts up to `config.retries` times, inside a
/// `chat {model}` span when telemetry is on (`llm/trace.rs`).
pub(crate) async fn complete(
    http: &reqwest::Client,
    config: &LlmConfig,
    messages: &[ChatMessage],
) -> Result<Answer, ListenerError> {
    #[cfg(feature = "otel")]
    {
        let chat = super::trace::Chat::start(config);
        let answer = attempts(http, config, messages, chat.headers()).await;
        chat.finish(&answer);
        answer
    }
    #[cfg(not(feature = "otel"))]
    attempts(http, config, messages, reqwest::header::HeaderMap::new()).await
}

async fn attempts(
    http: &reqwest::Client,
    config: &LlmConfig,
    messages: &[ChatMessage],
    trace: reqwest::header::HeaderMap,
) -> Result<Answer, ListenerError> {
    let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
    let body = Request {
        model: &config.model,
        messages,
        temperature: config.temperature,
        max_tokens: config.max_tokens,
    };
    let key = config
        .api_key_env
        .as_deref()
        .and_then(|name| std::env::var(name).ok());
    let mut attempt = 0;
    loop {
        // The timeout is set per request, so it holds whatever client the agent was built with.
        let mut request = (http.post(&url).timeout(config.timeout))
            .headers(trace.clone())
            .json(&body);
        if let Some(key) = &key {
            request = request.bearer_auth(key);
        }
        let last = attempt >= config.retries;
        match request.send().await {
            Ok(response) if response.status().is_success() => {
                let text = response.text().await.map_err(|e| {
                    ListenerError::Upstream(format!("{url}: reading the answer: {e}"))
                })?;
                return parse(&text)
                    .map_err(|e| ListenerError::Upstream(format!("invalid JSON from {url}: {e}")));
            }
            Ok(response) if response.status() == reqwest::StatusCode::TOO_MANY_REQUESTS => {
                if last {
                    return Err(ListenerError::Backpressure(format!(
                        "{url}: HTTP 429 after {} attempts",
                        attempt + 1
                    )));
                }
                let wait = retry_after(&response).unwrap_or_else(|| backoff(attempt));
                tokio::time::sleep(wait.min(MAX_RETRY_AFTER)).await;
            }
            Ok(response) if response.status().is_server_error() && !last => {
                tokio::time::sleep(backoff(attempt)).await
            }
            Ok(response) => {
                let status = response.status();
                let text = response.text().await.unwrap_or_default();
                let snippet: String = text.chars().take(200).collect();
                let hint = match (&config.api_key_env, &key, status.as_u16()) {
                    (Some(name), None, 401 | 403) => {
                        format!(" (no API key sent: environment variable {name} is not set)")
                    }
                    _ => String::new(),
                };
                return Err(ListenerError::Upstream(format!(
                    "{url}: HTTP {status} after {} attempts{hint}: {snippet}",
                    attempt + 1
                )));
            }
            Err(e) if !last && (e.is_timeout() || e.is_connect() || e.is_request()) => {
                tokio::time::sleep(backoff(attempt)).await
            }
            Err(e) => {
                let what = if e.is_timeout() {
                    "timed out"
                } else {
                    "failed"
                };
                return Err(ListenerError::Upstream(format!(
                    "{url}: request {what} after {} attempts: {e}",
                    attempt + 1
                )));
            }
        }
        attempt += 1;
    }
}

fn parse(text: &str) -> Result<Answer, String> {
    let response: Response = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let finish_reasons = (response.choices.iter())
        .filter_map(|c| c.finish_reason.clone())
        .collect();
    let content = response
        .choices
        .into_iter()
        .next()
        .and_then(|c| c.message.content)
        .ok_or("no choices[0].message.content in the answer")?;
    Ok(Answer {
        content,
        model: response.model,
        finish_reasons,
        usage: response
            .usage
            .map_or((None, None), |u| (u.prompt_tokens, u.completion_tokens)),
    })
}

fn retry_after(response: &reqwest::Response) -> Option<Duration> {
    let seconds: u64 = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds))
}

/// 200 ms × 2^attempt plus up to 100 ms of jitter.
fn backoff(attempt: u32) -> Duration {
    let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0]) * 100 / 255;
    Duration::from_millis(200 * (1 << attempt.min(6)) + jitter)
}
