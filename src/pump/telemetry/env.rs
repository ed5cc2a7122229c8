//! The standard `OTEL_*` environment variables, applied over a [`TelemetryConfig`].

use std::str::FromStr;

use rust_decimal::Decimal;

use super::TelemetryConfig;

/// Telemetry that cannot start as configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// An `OTEL_*` variable (or the organism's `[telemetry]` key of the same meaning) holds a
    /// value we do not take.
    #[error("{name}={value:?} is not accepted: {expected}")]
    Variable {
        /// The variable or key.
        name: String,
        /// Its value.
        value: String,
        /// What would be accepted.
        expected: &'static str,
    },
    /// The exporter could not be built (a malformed endpoint or header).
    #[error("the OTLP exporter for {endpoint} cannot be built: {reason}")]
    Exporter {
        /// The configured endpoint.
        endpoint: String,
        /// The SDK's reason.
        reason: String,
    },
    /// Telemetry is enabled but this build has no `otel` feature.
    #[error("telemetry is enabled but agentpump was built without the `otel` feature")]
    NotBuilt,
}

/// The only OTLP protocol this build exports with.
pub(crate) const PROTOCOL: &str = "http/protobuf";

pub(super) fn apply(
    mut config: TelemetryConfig,
    var: impl Fn(&str) -> Option<String>,
) -> Result<TelemetryConfig, TelemetryError> {
    let set = |name: &str| var(name).filter(|v| !v.trim().is_empty());
    if let Some(endpoint) = set("OTEL_EXPORTER_OTLP_ENDPOINT") {
        config.endpoint = Some(endpoint.trim().trim_end_matches('/').to_owned());
    }
    if let Some(protocol) = set("OTEL_EXPORTER_OTLP_PROTOCOL") {
        check_protocol("OTEL_EXPORTER_OTLP_PROTOCOL", &protocol)?;
    }
    if let Some(headers) = set("OTEL_EXPORTER_OTLP_HEADERS") {
        config.headers.extend(parse_headers(&headers)?);
    }
    if let Some(name) = set("OTEL_SERVICE_NAME") {
        config.service_name = name;
    }
    if let Some(sampler) = set("OTEL_TRACES_SAMPLER") {
        let arg = set("OTEL_TRACES_SAMPLER_ARG");
        config.sampling_ratio = sampler_ratio(&sampler, arg.as_deref())?;
    }
    if let Some(disabled) = set("OTEL_SDK_DISABLED") {
        match disabled.trim().to_ascii_lowercase().as_str() {
            "true" => config.endpoint = None,
            "false" => {}
            _ => return Err(refused("OTEL_SDK_DISABLED", &disabled, "true or false")),
        }
    }
    Ok(config)
}

/// Refuses any protocol but http/protobuf, naming the key it came from.
pub(crate) fn check_protocol(name: &str, value: &str) -> Result<(), TelemetryError> {
    match value.trim() == PROTOCOL {
        true => Ok(()),
        false => Err(refused(
            name,
            value,
            "http/protobuf (grpc and http/json are not built)",
        )),
    }
}

/// Checks a sampling ratio: a decimal from 0 to 1.
pub(crate) fn ratio(name: &str, value: &str) -> Result<Decimal, TelemetryError> {
    Decimal::from_str(value.trim())
        .ok()
        .filter(|r| *r >= Decimal::ZERO && *r <= Decimal::ONE)
        .ok_or_else(|| refused(name, value, "a decimal from 0 to 1"))
}

fn sampler_ratio(sampler: &str, arg: Option<&str>) -> Result<Decimal, TelemetryError> {
    let arg = || arg.map_or(Ok(Decimal::ONE), |a| ratio("OTEL_TRACES_SAMPLER_ARG", a));
    match sampler.trim() {
        "always_on" | "parentbased_always_on" => Ok(Decimal::ONE),
        "always_off" | "parentbased_always_off" => Ok(Decimal::ZERO),
        "traceidratio" | "parentbased_traceidratio" => arg(),
        _ => Err(refused(
            "OTEL_TRACES_SAMPLER",
            sampler,
            "always_on, always_off, traceidratio or their parentbased_ forms",
        )),
    }
}

/// `name=value` pairs separated by commas, values percent-decoded (the OTLP exporter spec).
fn parse_headers(text: &str) -> Result<Vec<(String, String)>, TelemetryError> {
    let bad = || {
        refused(
            "OTEL_EXPORTER_OTLP_HEADERS",
            text,
            "name=value pairs separated by commas",
        )
    };
    text.split(',')
        .filter(|pair| !pair.trim().is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').ok_or_else(bad)?;
            let name = name.trim();
            if name.is_empty() {
                return Err(bad());
            }
            let value = percent_decode(value.trim()).ok_or_else(bad)?;
            Ok((name.to_owned(), value))
        })
        .collect()
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn refused(name: &str, value: &str, expected: &'static str) -> TelemetryError {
    TelemetryError::Variable {
        name: name.to_owned(),
        value: value.to_owned(),
        expected,
    }
}
