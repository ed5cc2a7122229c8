//! What crosses to a remote worker: the current delivery span's W3C `traceparent`, and the
//! worker's span for a work item as the child of the span it names (made with the worker's
//! global tracer; payload text never included). Empty without the `otel` feature.

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

    pub(super) fn work(
        traceparent: Option<&str>,
        r: &Registration,
        envelope: &Envelope,
    ) -> Context {
        let parent = traceparent.map_or_else(Context::new, |value| {
            let carrier = HashMap::from([("traceparent".to_owned(), value.to_owned())]);
            TraceContextPropagator::new().extract(&carrier)
        });
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
