//! [`LlmAgent`]: a listener whose handler asks a language model, over any OpenAI-compatible
//! chat-completions endpoint (Ollama, vLLM, llama.cpp server, OpenAI, LiteLLM), what to emit next.
//!
//! Each delivery: assemble the prompt (definition, protocol, peers' usage, then the thread's
//! history as chat messages — or a canonical *capsule* of the thread's state), check that the
//! call fits the budget, call the model with retries, charge the reported usage, and emit every
//! payload found in the answer. An answer without a valid payload comes back as `huh`, so the
//! model can correct itself; the governor bounds how often.

mod client;
#[cfg(feature = "host")]
pub(crate) use client::http_client;
pub use client::install_tls_provider;
mod prompt;
#[cfg(feature = "otel")]
mod trace;

use std::time::Duration;

use async_trait::async_trait;
use rust_decimal::Decimal;

pub use super::capsule::Capsule;
pub use prompt::ContextMode;

use crate::listener::{Context, Delivery, Listener, ListenerError, Usage};

/// A peer the agent may address, as it is described to the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerDoc {
    /// The peer's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// An example payload it accepts.
    pub example: String,
}

/// How to reach the model and what it costs.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmConfig {
    /// Base URL of the API, up to and including `/v1` (`http://127.0.0.1:11434/v1`).
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// Environment variable holding the API key, if the endpoint needs one (never logged or stored).
    pub api_key_env: Option<String>,
    /// Per-request timeout (default 60 s).
    pub timeout: Duration,
    /// Retries after a 429, a 5xx or a timeout (default 3).
    pub retries: u32,
    /// Sampling temperature, if set.
    pub temperature: Option<f64>,
    /// Most tokens to generate per call (default 1024; also the pre-call budget estimate).
    pub max_tokens: u32,
    /// Price per 1 000 input tokens (exact).
    pub price_in_per_1k: Decimal,
    /// Price per 1 000 output tokens (exact).
    pub price_out_per_1k: Decimal,
    /// Full history or capsule.
    pub context: ContextMode,
}

impl LlmConfig {
    /// A configuration for `model` at `base_url`, with the defaults above and free tokens.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            model: model.into(),
            api_key_env: None,
            timeout: Duration::from_secs(60),
            retries: 3,
            temperature: None,
            max_tokens: 1024,
            price_in_per_1k: Decimal::ZERO,
            price_out_per_1k: Decimal::ZERO,
            context: ContextMode::Full,
        }
    }

    /// The longest one delivery can take with these settings: every attempt timing out and every
    /// retry waiting the longest `Retry-After` honoured. Register an [`LlmAgent`] with at least
    /// this [`Registration::timeout`](crate::Registration::timeout), or the pump cancels the
    /// delivery while a retry would still succeed (the organism file does this for you).
    pub fn patience(&self) -> Duration {
        let attempts = self.retries.saturating_add(1);
        self.timeout.saturating_mul(attempts)
            + client::MAX_RETRY_AFTER.saturating_mul(self.retries)
            + Duration::from_secs(1)
    }

    fn cost(&self, tokens_in: u64, tokens_out: u64) -> Decimal {
        (Decimal::from(tokens_in) * self.price_in_per_1k
            + Decimal::from(tokens_out) * self.price_out_per_1k)
            / Decimal::from(1000)
    }
}

/// The agent. See the module documentation.
#[derive(Debug)]
pub struct LlmAgent {
    config: LlmConfig,
    definition: String,
    peers: Vec<PeerDoc>,
    http: reqwest::Client,
}

impl LlmAgent {
    /// An agent with role prompt `definition` (who it is, what it is for).
    pub fn new(config: LlmConfig, definition: impl Into<String>) -> Self {
        Self {
            config,
            definition: definition.into(),
            peers: Vec::new(),
            http: client::http_client()
                .build()
                .expect("an HTTP client with default settings builds"),
        }
    }

    /// Describes a peer to the model.
    pub fn with_peer(mut self, peer: PeerDoc) -> Self {
        self.peers.push(peer);
        self
    }
}

/// Rough token count of a text: four characters a token (used when the endpoint reports none,
/// and for the pre-call budget check).
pub fn estimate_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

#[async_trait]
impl Listener for LlmAgent {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        let history = cx.history().await.map_err(ListenerError::failed)?;
        let messages = prompt::messages(
            &self.definition,
            &self.peers,
            cx,
            msg,
            &history,
            self.config.context,
        );
        let prompt_tokens = messages
            .iter()
            .map(|m| estimate_tokens(&m.content))
            .sum::<u64>();
        let max_out = u64::from(self.config.max_tokens);
        let worst = Usage {
            tokens_in: prompt_tokens,
            tokens_out: max_out,
            cost: self.config.cost(prompt_tokens, max_out),
            tool_calls: 0,
            estimated: true,
            llm_us: 0,
        };
        if let Err(e) = cx.can_spend(&worst) {
            return Err(ListenerError::OverBudget(e.budget));
        }
        let asked = std::time::Instant::now();
        let answer = client::complete(&self.http, &self.config, &messages).await?;
        let llm_us = u64::try_from(asked.elapsed().as_micros()).unwrap_or(u64::MAX);
        let estimated = answer.usage.0.is_none() || answer.usage.1.is_none();
        if estimated {
            tracing::warn!(listener = %cx.me(), "the endpoint did not report its usage in full; charging an estimate");
        }
        let tokens_in = answer.usage.0.unwrap_or(prompt_tokens);
        let tokens_out = answer
            .usage
            .1
            .unwrap_or_else(|| estimate_tokens(&answer.content));
        cx.usage(Usage {
            tokens_in,
            tokens_out,
            cost: self.config.cost(tokens_in, tokens_out),
            tool_calls: 0,
            estimated,
            llm_us,
        });
        cx.emit_text(answer.content);
        Ok(())
    }
}
