//! The exporter: an OTLP/HTTP tracer and meter provider per pump, installed as the process's
//! global ones too, so the LLM client and the NATS hub reach them through the current context.

use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use opentelemetry::metrics::{Histogram, MeterProvider as _, ObservableGauge};
use opentelemetry::trace::{FutureExt as _, SpanContext, TraceContextExt as _, TraceId};
use opentelemetry::{Context, KeyValue, global};
use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::{IdGenerator, RandomIdGenerator, Sampler, SdkTracerProvider};
use rust_decimal::prelude::ToPrimitive as _;

use super::spans::Scope;
use super::{TelemetryConfig, TelemetryError};
use crate::ThreadId;
use crate::listener::Registration;
use crate::thread::registry::{Queued, Registry, ThreadEntry};

/// A pump's telemetry: `None` inside when off, and then [`Telemetry::delivery`] costs one
/// branch.
#[derive(Debug, Default)]
pub(crate) struct Telemetry(Option<Arc<Live>>);

#[derive(Debug)]
struct Live {
    traces: SdkTracerProvider,
    metrics: SdkMeterProvider,
    scope: Scope,
    /// Each child thread spawned and not yet delivered to: the span of the delivery that
    /// spawned it, which its first delivery's span links to.
    spawns: Mutex<HashMap<ThreadId, SpanContext>>,
    /// How long each history commit took, from handing it to the store to its durability.
    commits: Histogram<f64>,
    /// The queue gauges, kept for as long as the pump lives.
    gauges: Mutex<Vec<ObservableGauge<u64>>>,
}

/// Children spawned and not yet delivered to that [`Live::spawns`] remembers; beyond it a
/// child's first span goes without its link (a fan-out of that many waits anyway).
const SPAWNS_REMEMBERED: usize = 65_536;

/// A delivery's span, current while the delivery runs (or nothing, when telemetry is off).
#[derive(Debug)]
pub(crate) struct Traced(Option<Context>);

impl Traced {
    /// A span made elsewhere (a remote worker's).
    #[cfg(feature = "host")]
    pub(super) fn new(cx: Context) -> Self {
        Self(Some(cx))
    }

    /// Runs `work` with the span current on every poll; the span ends when `work` does.
    pub(crate) async fn run<F: Future>(self, work: F) -> F::Output {
        match self.0 {
            Some(cx) => work.with_context(cx).await,
            None => work.await,
        }
    }
}

impl Telemetry {
    /// Starts the exporters when `config` has an endpoint.
    pub(crate) fn start(config: &TelemetryConfig) -> Result<Self, TelemetryError> {
        let Some(endpoint) = &config.endpoint else {
            return Ok(Self(None));
        };
        let failed = |e: &dyn std::fmt::Display| TelemetryError::Exporter {
            endpoint: endpoint.clone(),
            reason: e.to_string(),
        };
        // reqwest is built with rustls and no provider of its own (see
        // `listeners::llm::install_tls_provider`): the exporter's client needs one installed.
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            let _ = rustls::crypto::ring::default_provider().install_default();
        }
        let headers: HashMap<String, String> = config.headers.iter().cloned().collect();
        let spans = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_endpoint(format!("{endpoint}/v1/traces"))
            .with_headers(headers.clone())
            .build()
            .map_err(|e| failed(&e))?;
        let meters = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_endpoint(format!("{endpoint}/v1/metrics"))
            .with_headers(headers)
            .build()
            .map_err(|e| failed(&e))?;
        let resource = Resource::builder()
            .with_service_name(config.service_name.clone())
            .build();
        let ratio = config.sampling_ratio.to_f64().unwrap_or(1.0);
        let traces = SdkTracerProvider::builder()
            .with_batch_exporter(spans)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                ratio,
            ))))
            .with_id_generator(RootThreadIds::default())
            .with_resource(resource.clone())
            .build();
        let metrics = SdkMeterProvider::builder()
            .with_periodic_exporter(meters)
            .with_resource(resource)
            .build();
        global::set_tracer_provider(traces.clone());
        global::set_meter_provider(metrics.clone());
        global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        let scope = Scope::new(&traces, &metrics, config.payload_text);
        let commits = metrics
            .meter(super::spans::SCOPE)
            .f64_histogram("agentpump.history.commit.duration")
            .with_unit("s")
            .with_description("Time from handing a commit to the history store to its durability")
            .build();
        Ok(Self(Some(Arc::new(Live {
            traces,
            metrics,
            scope,
            spawns: Mutex::new(HashMap::new()),
            commits,
            gauges: Mutex::new(Vec::new()),
        }))))
    }

    /// Whether spans and metrics are exported (an endpoint is set).
    pub(crate) fn on(&self) -> bool {
        self.0.is_some()
    }

    /// A delivery's usage, turn and outcome on its span and in the counters (nothing when off:
    /// no look-up of the current context).
    pub(crate) fn delivered(
        &self,
        usage: &crate::listener::Usage,
        failure: Option<&str>,
        refused: usize,
        turn: u64,
    ) {
        if self.on() {
            super::spans::delivered(usage, failure, refused, turn);
        }
    }

    /// A governor decision as an event on the delivery's span (nothing when off).
    pub(crate) fn decision(&self, decision: &crate::governor::Decision) {
        if self.on() {
            super::spans::decision(decision);
        }
    }

    /// Reports the pump's queues as gauges, read by `queued` (total queued deliveries, the
    /// deepest thread's queue, the threads in memory) at each metrics export.
    pub(crate) fn observe_queues(
        &self,
        queued: impl Fn() -> (u64, u64, u64) + Send + Sync + 'static,
    ) {
        let Some(live) = &self.0 else {
            return;
        };
        let queued = Arc::new(queued);
        let meter = live.metrics.meter(super::spans::SCOPE);
        let gauge = |name: &'static str, what: &'static str, pick: fn((u64, u64, u64)) -> u64| {
            let queued = Arc::clone(&queued);
            meter
                .u64_observable_gauge(name)
                .with_description(what)
                .with_callback(move |observer| observer.observe(pick(queued()), &[]))
                .build()
        };
        let gauges = [
            gauge(
                "agentpump.queue.depth",
                "Deliveries queued over every thread in memory",
                |q| q.0,
            ),
            gauge(
                "agentpump.queue.depth.max",
                "The deepest thread queue",
                |q| q.1,
            ),
            gauge("agentpump.threads", "Threads in memory", |q| q.2),
        ];
        lock(&live.gauges).extend(gauges);
    }

    /// When a commit was handed to the store (`None` when telemetry is off: no clock read).
    pub(crate) fn commit_started(&self) -> Option<Instant> {
        self.0.as_ref().map(|_| Instant::now())
    }

    /// A commit started at `started` is durable (or failed).
    pub(crate) fn committed(&self, started: Option<Instant>, ok: bool) {
        if let (Some(live), Some(at)) = (&self.0, started) {
            live.commits.record(
                at.elapsed().as_secs_f64(),
                &[KeyValue::new("outcome", if ok { "ok" } else { "failed" })],
            );
        }
    }

    /// The current delivery spawned `child`: its first delivery's span will link to this one.
    pub(crate) fn spawned(&self, child: ThreadId) {
        let Some(live) = &self.0 else {
            return;
        };
        let span = Context::map_current(|cx| cx.span().span_context().clone());
        if !span.is_valid() {
            return;
        }
        let mut spawns = lock(&live.spawns);
        if spawns.len() < SPAWNS_REMEMBERED {
            spawns.insert(child, span);
        }
    }

    /// A wait for a person ended: a span `wait_for_person {kind}` in the thread's trace from
    /// when it was asked (the request's record) to now.
    pub(crate) fn waited(
        &self,
        registry: &Registry,
        entry: &ThreadEntry,
        wait: &super::Waited<'_>,
    ) {
        let Some(live) = &self.0 else {
            return;
        };
        NEXT_TRACE.set(Some(TraceId::from_bytes(
            *root_of(registry, entry).as_uuid().as_bytes(),
        )));
        live.scope.waited(entry, wait);
        NEXT_TRACE.set(None);
    }

    /// A halt: an event on the current delivery's span, or — a halt outside any delivery (a
    /// stop, a deadline, a parent's cascade from outside) — on a span of its own in the
    /// thread's trace.
    pub(crate) fn halted(
        &self,
        registry: &Registry,
        entry: &ThreadEntry,
        halt: &super::Halted<'_>,
    ) {
        let Some(live) = &self.0 else {
            return;
        };
        lock(&live.spawns).remove(&entry.id);
        if super::spans::halted_in_delivery(entry, halt) {
            return;
        }
        NEXT_TRACE.set(Some(TraceId::from_bytes(
            *root_of(registry, entry).as_uuid().as_bytes(),
        )));
        live.scope.halted_outside(entry, halt);
        NEXT_TRACE.set(None);
    }

    /// The span of one delivery, in its root thread's trace.
    pub(crate) fn delivery(
        &self,
        registry: &Registry,
        entry: &ThreadEntry,
        registration: &Registration,
        item: &Queued,
    ) -> Traced {
        let Some(live) = &self.0 else {
            return Traced(None);
        };
        let root = root_of(registry, entry);
        let spawned_by = match entry.parent {
            Some(_) => lock(&live.spawns).remove(&entry.id),
            None => None,
        };
        NEXT_TRACE.set(Some(TraceId::from_bytes(*root.as_uuid().as_bytes())));
        let cx = live
            .scope
            .delivery(entry, registration, &item.envelope, spawned_by);
        NEXT_TRACE.set(None);
        Traced(Some(cx))
    }

    /// Sends what is batched (at shutdown, and in tests before reading the receiver).
    pub(crate) async fn flush(&self) {
        let Some(live) = self.0.clone() else {
            return;
        };
        // The SDK's exporters block their caller until the batch is sent.
        let flushed = tokio::task::spawn_blocking(move || {
            let traces = live.traces.force_flush();
            let metrics = live.metrics.force_flush();
            (traces, metrics)
        })
        .await;
        if let Ok((Err(e), _) | (_, Err(e))) = flushed {
            tracing::warn!(error = %e, "telemetry flush failed");
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The root of `entry`'s tree: its trace id.
fn root_of(registry: &Registry, entry: &ThreadEntry) -> ThreadId {
    let mut id = entry.id;
    let mut parent = entry.parent;
    while let Some(p) = parent {
        id = p;
        parent = registry.get(p).and_then(|e| e.parent);
    }
    id
}

thread_local! {
    /// The trace id the next root span takes: set just around building a delivery's span.
    static NEXT_TRACE: Cell<Option<TraceId>> = const { Cell::new(None) };
}

/// Random ids, except a delivery's trace id, which is its root thread's id: one trace per
/// root thread, however many deliveries, restarts or workers it takes.
#[derive(Debug, Default)]
struct RootThreadIds(RandomIdGenerator);

impl IdGenerator for RootThreadIds {
    fn new_trace_id(&self) -> TraceId {
        NEXT_TRACE.take().unwrap_or_else(|| self.0.new_trace_id())
    }

    fn new_span_id(&self) -> opentelemetry::trace::SpanId {
        self.0.new_span_id()
    }
}
