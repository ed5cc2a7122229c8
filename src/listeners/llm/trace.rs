//! The `chat {model}` client span of one chat-completions call (GenAI semantic conventions
//! v1.38.0), its W3C `traceparent` on the request, and the GenAI client metrics. Made through
//! OpenTelemetry's global providers, which a pump with telemetry on installs; with none
//! installed (or without the `otel` feature) nothing is recorded and no header is sent.

use std::time::Instant;

use opentelemetry::propagation::Injector;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue, global};

use super::LlmConfig;
use super::client::Answer;
use crate::listener::ListenerError;

/// The API the client speaks, as the conventions name its provider.
const PROVIDER: &str = "openai";

/// One call's span and what it needs to finish it.
#[derive(Debug)]
pub(crate) struct Chat {
    cx: Context,
    started: Instant,
    model: String,
}

impl Chat {
    /// Starts the span as a child of the current delivery's.
    pub(crate) fn start(config: &LlmConfig) -> Self {
        let tracer = global::tracer("agentpump");
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", PROVIDER),
            KeyValue::new("gen_ai.request.model", config.model.clone()),
            KeyValue::new("gen_ai.request.max_tokens", i64::from(config.max_tokens)),
            KeyValue::new("server.address", config.base_url.clone()),
        ];
        if let Some(t) = config.temperature {
            attributes.push(KeyValue::new("gen_ai.request.temperature", t));
        }
        let span = tracer
            .span_builder(format!("chat {}", config.model))
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(&tracer, &Context::current());
        Self {
            cx: Context::current().with_span(span),
            started: Instant::now(),
            model: config.model.clone(),
        }
    }

    /// The `traceparent` (and `tracestate`) headers for the request: none when not traced.
    pub(crate) fn headers(&self) -> reqwest::header::HeaderMap {
        let mut headers = Headers(reqwest::header::HeaderMap::new());
        global::get_text_map_propagator(|p| p.inject_context(&self.cx, &mut headers));
        headers.0
    }

    /// Ends the span with the answer's model, tokens and finish reasons, or the error.
    pub(crate) fn finish(self, result: &Result<Answer, ListenerError>) {
        let span = self.cx.span();
        let mut common = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", PROVIDER),
            KeyValue::new("gen_ai.request.model", self.model.clone()),
        ];
        match result {
            Ok(answer) => {
                let model = answer.model.clone().unwrap_or_else(|| self.model.clone());
                common.push(KeyValue::new("gen_ai.response.model", model));
                span.set_attributes(common.clone());
                let reasons: Vec<opentelemetry::StringValue> = answer
                    .finish_reasons
                    .iter()
                    .cloned()
                    .map(Into::into)
                    .collect();
                span.set_attribute(KeyValue::new(
                    "gen_ai.response.finish_reasons",
                    opentelemetry::Value::Array(reasons.into()),
                ));
                tokens(&span, &common, answer.usage);
            }
            Err(e) => {
                common.push(KeyValue::new("error.type", error_type(e)));
                span.set_attributes(common.clone());
                span.set_status(Status::error(e.to_string()));
            }
        }
        global::meter("agentpump")
            .f64_histogram("gen_ai.client.operation.duration")
            .with_unit("s")
            .with_description("GenAI operation duration")
            .build()
            .record(self.started.elapsed().as_secs_f64(), &common);
        span.end();
    }
}

/// Token counts on the span and in `gen_ai.client.token.usage`.
fn tokens(
    span: &opentelemetry::trace::SpanRef<'_>,
    common: &[KeyValue],
    (input, output): (Option<u64>, Option<u64>),
) {
    let usage = global::meter("agentpump")
        .u64_histogram("gen_ai.client.token.usage")
        .with_unit("{token}")
        .with_description("Measures number of input and output tokens used")
        .build();
    for (count, key, kind) in [
        (input, "gen_ai.usage.input_tokens", "input"),
        (output, "gen_ai.usage.output_tokens", "output"),
    ] {
        let Some(count) = count else { continue };
        span.set_attribute(KeyValue::new(key, count as i64));
        let mut attributes = common.to_vec();
        attributes.push(KeyValue::new("gen_ai.token.type", kind));
        usage.record(count, &attributes);
    }
}

fn error_type(e: &ListenerError) -> &'static str {
    match e {
        ListenerError::Upstream(_) => "upstream",
        ListenerError::Backpressure(_) => "rate_limited",
        ListenerError::OverBudget(_) => "over_budget",
        _ => "_OTHER",
    }
}

struct Headers(reqwest::header::HeaderMap);

impl Injector for Headers {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            reqwest::header::HeaderName::from_bytes(key.as_bytes()),
            reqwest::header::HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}
