//! What crosses the host's edges: the current delivery span's W3C `traceparent` to a remote
//! worker, the worker's span for a work item as the child of the span it names, and a traced
//! HTTP post's span in its caller's trace (made with the global tracer; payload text never
//! included). Empty without the `otel` feature.

use super::Traced;
use crate::Envelope;
use crate::listener::Registration;

/// The current delivery's W3C `traceparent`, when it is traced.
pub(crate) fn traceparent() -> Option<String> {
    #[cfg(feature = "otel")]
    return otel::traceparent();
    #[cfg(not(feature = "otel"))]
    None
}

/// The worker's span for a work item (current while [`Traced::run`] runs the handler).
pub(crate) fn work(traceparent: Option<&str>, r: &Registration, envelope: &Envelope) -> Traced {
    #[cfg(feature = "otel")]
    return Traced::new(otel::work(traceparent, r, envelope));
    #[cfg(not(feature = "otel"))]
    {
        let _ = (traceparent, r, envelope);
        Traced
    }
}

/// A post that came with a `traceparent`: a server span `{route}` in the caller's trace, naming
/// the thread it went into (whose own trace id is its root thread's).
pub(crate) fn accepted(traceparent: Option<&str>, route: &str, thread: crate::ThreadId) {
    #[cfg(feature = "otel")]
    if let Some(value) = traceparent {
        otel::accepted(value, route, thread);
    }
    #[cfg(not(feature = "otel"))]
    let _ = (traceparent, route, thread);
}

#[cfg(feature = "otel")]
mod otel {
    use std::collections::HashMap;

    use opentelemetry::propagation::TextMapPropagator as _;
    use opentelemetry::trace::{SpanKind, TraceContextExt as _, Tracer as _};
    use opentelemetry::{Context, KeyValue};
    use opentelemetry_sdk::propagation::TraceContextPropagator;

    use super::super::spans::{SCOPE, named};
    use crate::Envelope;
    use crate::listener::Registration;

    pub(super) fn traceparent() -> Option<String> {
        let mut carrier = HashMap::new();
        TraceContextPropagator::new().inject_context(&Context::current(), &mut carrier);
        carrier.remove("traceparent")
    }

    fn extract(value: &str) -> Context {
        let carrier = HashMap::from([("traceparent".to_owned(), value.to_owned())]);
        TraceContextPropagator::new().extract(&carrier)
    }

    pub(super) fn accepted(value: &str, route: &str, thread: crate::ThreadId) {
        let tracer = opentelemetry::global::tracer(SCOPE);
        let attributes = vec![
            KeyValue::new("gen_ai.conversation.id", thread.to_string()),
            KeyValue::new("http.route", route.to_owned()),
        ];
        let mut span = tracer
            .span_builder(format!("POST {route}"))
            .with_kind(SpanKind::Server)
            .with_attributes(attributes)
            .start_with_context(&tracer, &extract(value));
        opentelemetry::trace::Span::end(&mut span);
    }

    pub(super) fn work(
        traceparent: Option<&str>,
        r: &Registration,
        envelope: &Envelope,
    ) -> Context {
        let parent = traceparent.map_or_else(Context::new, extract);
        let (span_name, mut attributes) = named(r, envelope, false);
        let thread = envelope.thread().to_string();
        attributes.push(KeyValue::new("gen_ai.conversation.id", thread));
        attributes.push(KeyValue::new(
            "agentpump.worker",
            i64::from(std::process::id()),
        ));
        let tracer = opentelemetry::global::tracer(SCOPE);
        let span = tracer
            .span_builder(span_name)
            .with_kind(SpanKind::Consumer)
            .with_attributes(attributes)
            .start_with_context(&tracer, &parent);
        parent.with_span(span)
    }
}
