//! The organism's `[telemetry]` section: OpenTelemetry export, with the standard `OTEL_*`
//! variables applied over it (a variable that is set wins; the endpoint alone turns it on).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::host::HostError;
use crate::pump::TelemetryConfig;

/// `[telemetry]`: `endpoint`, `protocol`, `service_name`, `sampling_ratio`, `payload_text`
/// and `[telemetry.headers_from_env]` (header name → the environment variable holding its
/// value, so that no secret sits in the file).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TelemetrySection {
    endpoint: Option<String>,
    protocol: Option<String>,
    service_name: Option<String>,
    sampling_ratio: Option<String>,
    #[serde(default)]
    payload_text: bool,
    #[serde(default)]
    headers_from_env: BTreeMap<String, String>,
}

impl TelemetrySection {
    /// The telemetry configuration, `OTEL_*` variables applied.
    pub(super) fn config(&self, origin: &str) -> Result<TelemetryConfig, HostError> {
        let wrong = |message: String| HostError::Organism {
            origin: origin.to_owned(),
            line: None,
            message: format!("[telemetry] {message}"),
        };
        let mut config = TelemetryConfig {
            endpoint: self
                .endpoint
                .as_ref()
                .map(|e| e.trim_end_matches('/').to_owned()),
            payload_text: self.payload_text,
            ..TelemetryConfig::default()
        };
        if let Some(protocol) = &self.protocol {
            crate::pump::telemetry_protocol("protocol", protocol)
                .map_err(|e| wrong(e.to_string()))?;
        }
        if let Some(name) = &self.service_name {
            config.service_name = name.clone();
        }
        if let Some(ratio) = &self.sampling_ratio {
            config.sampling_ratio = crate::pump::telemetry_ratio("sampling_ratio", ratio)
                .map_err(|e| wrong(e.to_string()))?;
        }
        for (header, var) in &self.headers_from_env {
            let value = std::env::var(var).map_err(|_| {
                wrong(format!(
                    "headers_from_env.{header}: the environment variable {var} is not set"
                ))
            })?;
            config.headers.push((header.clone(), value));
        }
        Ok(config.with_env()?)
    }
}
