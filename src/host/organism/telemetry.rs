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

#[cfg(test)]
mod tests {
    use crate::host::organism::Organism;

    /// Issue 32: "`[telemetry]` in the organism: OTLP endpoint, protocol (http/protobuf), headers
    /// from the environment, service name, sampling ratio, and whether payload text is included".
    #[test]
    fn the_section_reads_every_key_and_refuses_what_it_cannot_use() {
        let text = "[telemetry]\nendpoint = \"http://127.0.0.1:6006/\"\nprotocol = \"http/protobuf\"\n\
                    service_name = \"shop\"\nsampling_ratio = \"0.5\"\npayload_text = true\n";
        let config = Organism::parse(text, "o.toml")
            .unwrap()
            .config("o.toml")
            .unwrap();
        let t = config.telemetry;
        assert_eq!(t.endpoint.as_deref(), Some("http://127.0.0.1:6006"));
        assert_eq!(
            (t.service_name.as_str(), t.sampling_ratio.to_string()),
            ("shop", "0.5".into())
        );
        assert!(t.payload_text);
        let refused = [
            (
                "protocol = \"grpc\"",
                "o.toml: [telemetry] protocol=\"grpc\" is not accepted",
            ),
            (
                "sampling_ratio = \"2\"",
                "o.toml: [telemetry] sampling_ratio=\"2\" is not accepted",
            ),
            (
                "[telemetry.headers_from_env]\napi_key = \"AGENTPUMP_UNSET_FOR_THIS_TEST\"",
                "o.toml: [telemetry] headers_from_env.api_key: the environment variable AGENTPUMP_UNSET_FOR_THIS_TEST is not set",
            ),
        ];
        for (line, message) in refused {
            let text = format!("[telemetry]\n{line}\n");
            let error = Organism::parse(&text, "o.toml")
                .unwrap()
                .config("o.toml")
                .unwrap_err();
            assert!(error.to_string().starts_with(message), "{error}");
        }
    }
}
