//! The spans, events and counters of the GenAI semantic conventions (v1.38.0) for what the
//! pump does: a delivery is `invoke_agent {listener}`, `execute_tool {tool}` or
//! `{role} {listener}`; governor decisions and halts are events on it.

use std::sync::Arc;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::metrics::{Counter, Meter};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::trace::{
    Link, Span as _, SpanContext, SpanKind, Status, TraceContextExt as _, Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use sha2::{Digest as _, Sha256};

use super::PAYLOAD_TEXT_LIMIT;
use crate::Envelope;
use crate::governor::Decision;
use crate::listener::{Registration, Role, Usage};
use crate::thread::registry::ThreadEntry;
use crate::tool::{Call, TOOL_NS};

use super::{Halted, Waited};

/// The instrumentation scope every span and instrument of the pump is made in.
pub(super) const SCOPE: &str = "agentpump";

/// A pump's tracer, its instruments and its payload rule; carried in each delivery's
/// context so the hooks below find them without a global.
#[derive(Debug, Clone)]
pub(crate) struct Scope(Arc<Parts>);

#[derive(Debug)]
struct Parts {
    tracer: SdkTracer,
    instruments: Instruments,
    payload_text: bool,
}

/// The pump's counters (OTel metric names; the GenAI histograms are the LLM client's).
#[derive(Debug)]
struct Instruments {
    deliveries: Counter<u64>,
    refusals: Counter<u64>,
    halts: Counter<u64>,
}

impl Instruments {
    fn new(meter: &Meter) -> Self {
        Self {
            deliveries: meter
                .u64_counter("agentpump.deliveries")
                .with_description("Deliveries to listeners, by listener and outcome")
                .build(),
            refusals: meter
                .u64_counter("agentpump.refusals")
                .with_description("Listener outputs refused, by listener")
                .build(),
            halts: meter
                .u64_counter("agentpump.halts")
                .with_description("Threads halted by the governor, by class")
                .build(),
        }
    }
}

impl Scope {
    pub(crate) fn new(traces: &SdkTracerProvider, metrics: &SdkMeterProvider, text: bool) -> Self {
        Self(Arc::new(Parts {
            tracer: traces.tracer(SCOPE),
            instruments: Instruments::new(&metrics.meter(SCOPE)),
            payload_text: text,
        }))
    }

    /// A delivery's span, with this scope in its context. Built with no parent: its trace id
    /// comes from the id generator (the root thread's). A child thread's first delivery links
    /// to the span of the delivery that spawned it (`spawned_by`).
    pub(crate) fn delivery(
        &self,
        entry: &ThreadEntry,
        registration: &Registration,
        envelope: &Envelope,
        spawned_by: Option<SpanContext>,
    ) -> Context {
        let (span_name, mut attributes) = named(registration, envelope, self.0.payload_text);
        attributes.push(KeyValue::new(
            "gen_ai.conversation.id",
            entry.id.to_string(),
        ));
        attributes.push(KeyValue::new(
            "agentpump.thread.path",
            entry.path.to_string(),
        ));
        if let Some(parent) = entry.parent {
            attributes.push(KeyValue::new("agentpump.thread.parent", parent.to_string()));
        }
        let links = spawned_by.map(|span| {
            vec![Link::new(
                span,
                vec![KeyValue::new("agentpump.link", "spawned-by")],
                0,
            )]
        });
        let mut builder = self
            .0
            .tracer
            .span_builder(span_name)
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes);
        if let Some(links) = links {
            builder = builder.with_links(links);
        }
        let span = builder.start_with_context(&self.0.tracer, &Context::new());
        let delivering = Delivering {
            scope: self.clone(),
            listener: KeyValue::new("gen_ai.agent.name", registration.name().to_owned()),
        };
        Context::new().with_span(span).with_value(delivering)
    }
}

/// A delivery span's name and the attributes that follow from its listener and payload.
pub(super) fn named(
    registration: &Registration,
    envelope: &Envelope,
    text: bool,
) -> (String, Vec<KeyValue>) {
    let payload = envelope.payload();
    let name = registration.name();
    let mut attributes = vec![
        KeyValue::new("gen_ai.agent.name", name.to_owned()),
        KeyValue::new(
            "agentpump.listener.role",
            registration.listener_role().as_str(),
        ),
        KeyValue::new("agentpump.message.id", envelope.id().to_string()),
        KeyValue::new("agentpump.message.from", envelope.from().to_owned()),
        KeyValue::new("agentpump.payload.root", payload.qname().to_string()),
        KeyValue::new("agentpump.payload.bytes", payload.as_str().len() as i64),
        KeyValue::new(
            "agentpump.payload.sha256",
            hex::encode(Sha256::digest(payload.as_str())),
        ),
    ];
    if text {
        attributes.push(KeyValue::new(
            "agentpump.payload.text",
            cut(payload.as_str()),
        ));
    }
    let span_name = match tool_call(envelope) {
        Some(call) => {
            attributes.push(KeyValue::new("gen_ai.operation.name", "execute_tool"));
            attributes.push(KeyValue::new("gen_ai.tool.name", call.tool.clone()));
            if let Some(id) = &call.id {
                attributes.push(KeyValue::new("gen_ai.tool.call.id", id.clone()));
            }
            format!("execute_tool {}", call.tool)
        }
        None if registration.listener_role() == Role::Agent => {
            attributes.push(KeyValue::new("gen_ai.operation.name", "invoke_agent"));
            format!("invoke_agent {name}")
        }
        None => format!("{} {name}", registration.listener_role().as_str()),
    };
    (span_name, attributes)
}

fn tool_call(envelope: &Envelope) -> Option<Call> {
    let payload = envelope.payload();
    if !payload.qname().is(TOOL_NS, "call") {
        return None;
    }
    Call::shared(payload).ok().map(|c| (*c).clone())
}

/// At most [`PAYLOAD_TEXT_LIMIT`] bytes of `text`, cut at a character boundary.
fn cut(text: &str) -> String {
    if text.len() <= PAYLOAD_TEXT_LIMIT {
        return text.to_owned();
    }
    let mut end = PAYLOAD_TEXT_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// What a delivery's context carries besides its span: the pump's scope and the listener.
#[derive(Debug)]
struct Delivering {
    scope: Scope,
    listener: KeyValue,
}

/// Runs `f` on the current delivery's span, if there is one.
fn on_current(f: impl FnOnce(&opentelemetry::trace::SpanRef<'_>, &Delivering)) {
    Context::map_current(|cx| {
        if let Some(delivering) = cx.get::<Delivering>() {
            f(&cx.span(), delivering);
        }
    });
}

/// The delivery's usage, turn and outcome, on its span and in the counters.
pub(super) fn delivered(usage: &Usage, failure: Option<&str>, refused: usize, turn: u64) {
    on_current(|span, delivering| {
        span.set_attributes([
            KeyValue::new("gen_ai.usage.input_tokens", usage.tokens_in as i64),
            KeyValue::new("gen_ai.usage.output_tokens", usage.tokens_out as i64),
            KeyValue::new("agentpump.usage.tool_calls", usage.tool_calls as i64),
            KeyValue::new("agentpump.usage.cost", usage.cost.to_string()),
            KeyValue::new("agentpump.turn", turn as i64),
            KeyValue::new("agentpump.outputs.refused", refused as i64),
        ]);
        let outcome = match failure {
            Some(message) => {
                span.set_attribute(KeyValue::new("error.type", "handler-failed"));
                span.set_status(Status::error(message.to_owned()));
                "failed"
            }
            None => "ok",
        };
        span.set_attribute(KeyValue::new("agentpump.outcome", outcome));
        let listener = delivering.listener.clone();
        let counts = &delivering.scope.0.instruments;
        counts
            .deliveries
            .add(1, &[listener.clone(), KeyValue::new("outcome", outcome)]);
        if refused > 0 {
            counts.refusals.add(refused as u64, &[listener]);
        }
    });
}

/// A governor decision as an event on the delivery's span.
pub(super) fn decision(decision: &Decision) {
    on_current(|span, _| {
        let kind = match decision {
            Decision::Goal { .. } => "goal",
            Decision::Carve { .. } => "carve",
            Decision::Resume { .. } => "resume",
            Decision::Halt { .. } => "halt",
            Decision::Fork(_) => "fork",
            Decision::Parcel { sent: true, .. } => "sent",
            Decision::Parcel { sent: false, .. } => "received",
            Decision::Returned { .. } => "returned",
            Decision::Delivered { .. } => "delivered",
        };
        span.add_event(
            "governor.decision",
            vec![KeyValue::new("agentpump.decision", kind)],
        );
    });
}

/// A halt as an event on the current delivery's span (which may be another thread's: a
/// parent halting its children); false when no delivery is current.
pub(crate) fn halted_in_delivery(entry: &ThreadEntry, halt: &Halted<'_>) -> bool {
    let mut noted = false;
    on_current(|span, delivering| {
        span.add_event("governor.halt", halt_attributes(entry, halt));
        delivering.scope.count_halt(halt);
        noted = true;
    });
    noted
}

impl Scope {
    /// A halt outside any delivery, on a span of its own (`halt {path}`) in the thread's trace
    /// (the caller sets its trace id).
    pub(crate) fn halted_outside(&self, entry: &ThreadEntry, halt: &Halted<'_>) {
        let tracer = &self.0.tracer;
        let mut span = tracer
            .span_builder(format!("halt {}", entry.path))
            .with_kind(SpanKind::Internal)
            .with_attributes(vec![
                KeyValue::new("gen_ai.conversation.id", entry.id.to_string()),
                KeyValue::new("agentpump.thread.path", entry.path.to_string()),
            ])
            .start_with_context(tracer, &Context::new());
        span.add_event("governor.halt", halt_attributes(entry, halt));
        span.end();
        self.count_halt(halt);
    }

    /// A wait for a person, from its request to its end, on a span of its own (the caller
    /// sets its trace id).
    pub(crate) fn waited(&self, entry: &ThreadEntry, wait: &Waited<'_>) {
        let tracer = &self.0.tracer;
        let asked = std::time::UNIX_EPOCH
            + std::time::Duration::from_millis(u64::try_from(wait.asked_at_ms).unwrap_or(0));
        let mut attributes = vec![
            KeyValue::new("gen_ai.conversation.id", entry.id.to_string()),
            KeyValue::new("agentpump.thread.path", entry.path.to_string()),
            KeyValue::new("agentpump.inbox.request", wait.request.to_string()),
            KeyValue::new("agentpump.inbox.kind", wait.kind.to_owned()),
            KeyValue::new("agentpump.inbox.outcome", wait.outcome.to_owned()),
        ];
        if let Some(tool) = wait.tool {
            attributes.push(KeyValue::new("gen_ai.tool.name", tool.to_owned()));
        }
        if let Some(by) = wait.by {
            attributes.push(KeyValue::new("agentpump.inbox.answered_by", by.to_owned()));
        }
        let mut span = tracer
            .span_builder(format!("wait_for_person {}", wait.kind))
            .with_kind(SpanKind::Internal)
            .with_start_time(asked)
            .with_attributes(attributes)
            .start_with_context(tracer, &Context::new());
        span.end();
    }

    fn count_halt(&self, halt: &Halted<'_>) {
        self.0
            .instruments
            .halts
            .add(1, &[KeyValue::new("class", halt.class.to_owned())]);
    }
}

/// What a `halt` message says, as an event's attributes, with the thread it halted.
fn halt_attributes(entry: &ThreadEntry, halt: &Halted<'_>) -> Vec<KeyValue> {
    vec![
        KeyValue::new("agentpump.halt.thread", entry.id.to_string()),
        KeyValue::new("agentpump.halt.class", halt.class.to_owned()),
        KeyValue::new("agentpump.halt.reason", halt.reason.to_owned()),
        KeyValue::new("agentpump.halt.certificate", halt.certificate.to_owned()),
        KeyValue::new("agentpump.halt.report_sha256", halt.digest.to_owned()),
    ]
}
