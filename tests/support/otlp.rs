//! An OTLP/HTTP receiver on loopback: `POST /v1/traces` and `/v1/metrics` decoded with the
//! protocol's own protobuf messages (`opentelemetry-proto`) and kept for the test to read. It
//! stands in for a collector where Phoenix (tests/telemetry.rs) keeps less than the pump
//! sends: span links and metrics.

use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;

/// What the receiver got so far.
#[derive(Default)]
struct Received {
    spans: Vec<Span>,
    metrics: Vec<Metric>,
}

/// A running receiver; its endpoint goes in `TelemetryConfig::endpoint`.
pub struct Otlp {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    received: Arc<Mutex<Received>>,
}

impl Otlp {
    /// Serves on a free loopback port until the test's runtime ends.
    pub async fn start() -> Self {
        let received = Arc::new(Mutex::new(Received::default()));
        let app = axum::Router::new()
            .route("/v1/traces", post(traces))
            .route("/v1/metrics", post(metrics))
            .with_state(Arc::clone(&received));
        let socket = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", socket.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(socket, app).await.unwrap() });
        Self { endpoint, received }
    }

    /// Every span received.
    pub fn spans(&self) -> Vec<Span> {
        self.received.lock().unwrap().spans.clone()
    }

    /// Every data point of the metric `name` received, as (value, attributes), in order of
    /// arrival (sums and gauges as numbers, histograms as their count).
    pub fn points(&self, name: &str) -> Vec<(f64, Vec<(String, String)>)> {
        let received = self.received.lock().unwrap();
        let mut out = Vec::new();
        for m in received.metrics.iter().filter(|m| m.name == name) {
            match &m.data {
                Some(metric::Data::Sum(s)) => out.extend(
                    s.data_points
                        .iter()
                        .map(|p| (number(p), attributes(&p.attributes))),
                ),
                Some(metric::Data::Gauge(g)) => out.extend(
                    g.data_points
                        .iter()
                        .map(|p| (number(p), attributes(&p.attributes))),
                ),
                Some(metric::Data::Histogram(h)) => out.extend(
                    h.data_points
                        .iter()
                        .map(|p| (p.count as f64, attributes(&p.attributes))),
                ),
                _ => {}
            }
        }
        out
    }
}

fn number(p: &opentelemetry_proto::tonic::metrics::v1::NumberDataPoint) -> f64 {
    use opentelemetry_proto::tonic::metrics::v1::number_data_point::Value;
    match p.value {
        Some(Value::AsDouble(v)) => v,
        Some(Value::AsInt(v)) => v as f64,
        None => f64::NAN,
    }
}

/// A span's or a point's attributes as (key, value as text).
pub fn attributes(
    kv: &[opentelemetry_proto::tonic::common::v1::KeyValue],
) -> Vec<(String, String)> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value;
    kv.iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                Some(Value::IntValue(i)) => i.to_string(),
                Some(Value::DoubleValue(d)) => d.to_string(),
                Some(Value::BoolValue(b)) => b.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

/// The value of `key` among `kv`, if there.
pub fn attribute(
    kv: &[opentelemetry_proto::tonic::common::v1::KeyValue],
    key: &str,
) -> Option<String> {
    attributes(kv)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

async fn traces(State(received): State<Arc<Mutex<Received>>>, body: Bytes) -> StatusCode {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return StatusCode::BAD_REQUEST;
    };
    let spans = request
        .resource_spans
        .into_iter()
        .flat_map(|r| r.scope_spans)
        .flat_map(|s| s.spans);
    received.lock().unwrap().spans.extend(spans);
    StatusCode::OK
}

async fn metrics(State(received): State<Arc<Mutex<Received>>>, body: Bytes) -> StatusCode {
    let Ok(request) = ExportMetricsServiceRequest::decode(body) else {
        return StatusCode::BAD_REQUEST;
    };
    let metrics = request
        .resource_metrics
        .into_iter()
        .flat_map(|r| r.scope_metrics)
        .flat_map(|s| s.metrics);
    received.lock().unwrap().metrics.extend(metrics);
    StatusCode::OK
}
