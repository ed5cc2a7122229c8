//! OpenTelemetry export (feature `otel`): what the pump knows, as OTLP traces and metrics with
//! the GenAI semantic conventions (v1.38.0). Off unless an endpoint is set, in
//! [`TelemetryConfig`] or by `OTEL_EXPORTER_OTLP_ENDPOINT`; when off no span is made.
//!
//! One trace per root thread (its id is the root thread's id), one span per delivery; the
//! handler runs inside its span, so an LLM call (`chat {model}`), a process statement or a
//! remote worker's span joins it. The pump calls `Telemetry`'s methods (`telemetry/live.rs`;
//! each returns at once when off, and without the feature they are empty, below); the spans
//! are `telemetry/spans.rs`, the `OTEL_*` variables `telemetry/env.rs`.

mod env;
#[cfg(feature = "otel")]
mod live;
#[cfg(feature = "host")]
pub(crate) mod remote;
#[cfg(feature = "otel")]
mod spans;

use rust_decimal::Decimal;

pub use env::TelemetryError;
#[cfg(feature = "host")]
pub(crate) use env::{check_protocol, ratio};
#[cfg(feature = "otel")]
pub(crate) use live::Telemetry;
#[cfg(all(feature = "otel", feature = "host"))]
use live::Traced;

/// Where and how the pump exports telemetry. The default exports nothing.
///
/// # Example
///
/// ```
/// # use agentpump::{PumpConfig, TelemetryConfig};
/// # fn main() -> Result<(), agentpump::TelemetryError> {
/// let telemetry = TelemetryConfig {
///     endpoint: Some("http://127.0.0.1:6006".into()),
///     ..TelemetryConfig::default()
/// };
/// assert!(telemetry.enabled());
/// let config = PumpConfig { telemetry, ..PumpConfig::default() };
/// # let _ = config;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP base URL (`http://host:4318`); traces go to `{endpoint}/v1/traces`,
    /// metrics to `{endpoint}/v1/metrics`. `None` (the default): telemetry is off.
    pub endpoint: Option<String>,
    /// Headers sent with every export (an API key, say), name and value.
    pub headers: Vec<(String, String)>,
    /// The `service.name` resource attribute (default `agentpump`).
    pub service_name: String,
    /// The share of root threads traced, from 0 to 1 (default 1): the decision is taken on the
    /// root thread's id, so a tree is traced whole or not at all.
    pub sampling_ratio: Decimal,
    /// Whether payload text goes into spans (`agentpump.payload.text`, at most
    /// [`PAYLOAD_TEXT_LIMIT`] bytes). Default `false`: sizes and SHA-256 digests only.
    pub payload_text: bool,
}

/// The most payload text one span attribute carries when [`TelemetryConfig::payload_text`] is
/// on; the rest is cut at a character boundary and the cut is marked with `…`.
pub const PAYLOAD_TEXT_LIMIT: usize = 4096;

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            endpoint: None,
            headers: Vec::new(),
            service_name: "agentpump".to_owned(),
            sampling_ratio: Decimal::ONE,
            payload_text: false,
        }
    }
}

impl TelemetryConfig {
    /// True when an endpoint is set: spans and metrics are exported.
    pub fn enabled(&self) -> bool {
        self.endpoint.is_some()
    }

    /// This configuration with the standard `OTEL_*` environment variables applied over it
    /// (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_PROTOCOL`,
    /// `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, `OTEL_TRACES_SAMPLER`,
    /// `OTEL_TRACES_SAMPLER_ARG`, `OTEL_SDK_DISABLED`): a variable that is set wins.
    ///
    /// # Errors
    ///
    /// [`TelemetryError::Variable`] naming the variable, its value and what is accepted.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::TelemetryConfig;
    /// # fn main() -> Result<(), agentpump::TelemetryError> {
    /// let config = TelemetryConfig::default().with_env()?;
    /// # let _ = config;
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_env(self) -> Result<Self, TelemetryError> {
        self.with_vars(|name| std::env::var(name).ok())
    }

    /// [`with_env`](Self::with_env) over any source of variables (tests, a config layer).
    ///
    /// # Errors
    ///
    /// As [`with_env`](Self::with_env).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::TelemetryConfig;
    /// # fn main() -> Result<(), agentpump::TelemetryError> {
    /// let vars = |name: &str| (name == "OTEL_EXPORTER_OTLP_ENDPOINT").then(|| "http://127.0.0.1:4318".to_owned());
    /// assert!(TelemetryConfig::default().with_vars(vars)?.enabled());
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_vars(self, var: impl Fn(&str) -> Option<String>) -> Result<Self, TelemetryError> {
        env::apply(self, var)
    }
}

/// A wait for a person that ended: a request answered, or expired (for its span).
#[derive(Debug)]
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
pub(crate) struct Waited<'a> {
    /// The request's id.
    pub request: crate::MessageId,
    /// What was asked: `approval` (a held call) or `question` (the `ask` tool).
    pub kind: &'a str,
    /// The tool whose call was held, for an approval.
    pub tool: Option<&'a str>,
    /// How it ended: `approve`, `deny`, `edit`, `answer` or `timeout`.
    pub outcome: &'a str,
    /// Who answered, as recorded.
    pub by: Option<&'a str>,
    /// When it was asked, in milliseconds since the Unix epoch (the span's start).
    pub asked_at_ms: i64,
}

/// What a `halt` message says, for the halt's event (read only with the `otel` feature).
#[derive(Debug)]
#[cfg_attr(not(feature = "otel"), allow(dead_code))]
pub(crate) struct Halted<'a> {
    /// The halt's class (`done`, `budget`, …).
    pub class: &'a str,
    /// Why, as the `halt` message says.
    pub reason: &'a str,
    /// The certificate, or `none`.
    pub certificate: &'a str,
    /// The SHA-256 of the halting report's JSON, hex.
    pub digest: &'a str,
}

/// Without the `otel` feature: a pump that never exports. An enabled configuration is refused
/// at build time rather than ignored.
#[cfg(not(feature = "otel"))]
#[derive(Debug, Default)]
pub(crate) struct Telemetry;

#[cfg(not(feature = "otel"))]
impl Telemetry {
    pub(crate) fn start(config: &TelemetryConfig) -> Result<Self, TelemetryError> {
        match config.enabled() {
            true => Err(TelemetryError::NotBuilt),
            false => Ok(Self),
        }
    }

    pub(crate) fn delivery(
        &self,
        _registry: &crate::thread::registry::Registry,
        _entry: &crate::thread::registry::ThreadEntry,
        _registration: &crate::listener::Registration,
        _item: &crate::thread::registry::Queued,
    ) -> Traced {
        Traced
    }

    pub(crate) fn on(&self) -> bool {
        false
    }

    pub(crate) fn delivered(
        &self,
        _usage: &crate::listener::Usage,
        _failure: Option<&str>,
        _refused: usize,
        _turn: u64,
    ) {
    }

    pub(crate) fn decision(&self, _decision: &crate::governor::Decision) {}

    pub(crate) fn observe_queues(&self, _queued: impl Fn() -> (u64, u64, u64)) {}

    pub(crate) fn commit_started(&self) -> Option<std::time::Instant> {
        None
    }

    pub(crate) fn committed(&self, _started: Option<std::time::Instant>, _ok: bool) {}

    pub(crate) fn spawned(&self, _child: crate::ThreadId) {}

    pub(crate) fn waited(
        &self,
        _registry: &crate::thread::registry::Registry,
        _entry: &crate::thread::registry::ThreadEntry,
        _wait: &Waited<'_>,
    ) {
    }

    pub(crate) fn halted(
        &self,
        _registry: &crate::thread::registry::Registry,
        _entry: &crate::thread::registry::ThreadEntry,
        _halt: &Halted<'_>,
    ) {
    }

    pub(crate) async fn flush(&self) {}
}

/// Without the `otel` feature: a delivery runs as it is.
#[cfg(not(feature = "otel"))]
#[derive(Debug)]
pub(crate) struct Traced;

#[cfg(not(feature = "otel"))]
impl Traced {
    pub(crate) async fn run<F: std::future::Future>(self, work: F) -> F::Output {
        work.await
    }
}
