//! [`Units`]: a small MCP server built into agentpump, `agentpump mcp-units` (hidden), for the
//! demo and the benches: one deterministic tool, `convert`, that converts a length between
//! units with exact decimals. The demo organism starts it as a stdio `[[mcp]]` server, a child
//! of the host, and a process `USE`s `units.convert` (no network).

use std::str::FromStr;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use rust_decimal::Decimal;
use serde_json::{Value as Json, json};

/// Lengths `convert` knows, each with its size in metres (exact).
const LENGTHS: [(&str, &str); 8] = [
    ("mm", "0.001"),
    ("cm", "0.01"),
    ("m", "1"),
    ("km", "1000"),
    ("in", "0.0254"),
    ("ft", "0.3048"),
    ("yd", "0.9144"),
    ("mi", "1609.344"),
];

/// Decimal places of a converted value.
pub const PLACES: u32 = 6;

/// The `units` MCP server: `convert(value, from, to)`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Units;

/// `value` `from` in `to`, rounded to [`PLACES`] decimal places.
///
/// # Errors
///
/// A unit `convert` does not know, named with the units it knows.
pub fn convert(value: Decimal, from: &str, to: &str) -> Result<Decimal, String> {
    let size = |unit: &str| {
        LENGTHS
            .iter()
            .find(|(name, _)| *name == unit)
            .and_then(|(_, metres)| Decimal::from_str(metres).ok())
            .ok_or_else(|| {
                let known: Vec<&str> = LENGTHS.iter().map(|(n, _)| *n).collect();
                format!("unknown unit `{unit}`; units are {}", known.join(", "))
            })
    };
    let metres = value
        .checked_mul(size(from)?)
        .ok_or_else(|| format!("{value} {from} is too large to convert"))?;
    Ok((metres / size(to)?).round_dp(PLACES).normalize())
}

/// The answer to a `convert` call with `args`: the line `42.195 km = 26.218757 mi` and, as
/// structured content, the value and its unit.
fn answer(args: &serde_json::Map<String, Json>) -> Result<CallToolResult, String> {
    let text = |key: &str| {
        args.get(key)
            .and_then(Json::as_str)
            .ok_or_else(|| format!("`{key}` is required: a unit name"))
    };
    let value = match args.get("value") {
        Some(Json::Number(n)) => Decimal::from_str(&n.to_string())
            .or_else(|_| Decimal::from_scientific(&n.to_string()))
            .map_err(|e| format!("`value` {n} is not a decimal: {e}"))?,
        _ => return Err("`value` is required: a number".to_owned()),
    };
    let (from, to) = (text("from")?, text("to")?);
    let converted = convert(value, from, to)?;
    let number = converted
        .to_string()
        .parse::<f64>()
        .map_err(|e| e.to_string())?;
    let mut result = CallToolResult::structured(json!({ "value": number, "unit": to }));
    result.content = vec![ContentBlock::text(format!(
        "{value} {from} = {converted} {to}"
    ))];
    Ok(result)
}

impl ServerHandler for Units {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools().build();
        rmcp::model::ServerConfig::new(capabilities).with_server_info(
            rmcp::model::Implementation::new("agentpump-units", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let units: Vec<&str> = LENGTHS.iter().map(|(n, _)| *n).collect();
        let unit = json!({"type": "string", "enum": units});
        let tools = json!([{
            "name": "convert",
            "description": format!("Converts a length between units (exact decimals, rounded to {PLACES} places)."),
            "inputSchema": {
                "type": "object",
                "properties": {"value": {"type": "number"}, "from": unit, "to": unit},
                "required": ["value", "from", "to"],
            },
        }]);
        serde_json::from_value(json!({ "tools": tools }))
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "convert" {
            let message = format!("no tool `{}`; this server offers convert", request.name);
            return Err(ErrorData::invalid_params(message, None));
        }
        let args = request.arguments.unwrap_or_default();
        let result = match answer(&args) {
            Ok(result) => result,
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        };
        Ok(CallToolResponse::Complete(result))
    }
}

/// Serves [`Units`] on standard input and output until the client closes them.
///
/// # Errors
///
/// The MCP handshake fails or the transport breaks.
pub async fn serve_stdio() -> Result<(), super::McpError> {
    super::server::serve_on_stdio(Units, "agentpump-units").await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_exactly_and_names_an_unknown_unit() {
        let d = |s: &str| Decimal::from_str(s).unwrap();
        assert_eq!(convert(d("42.195"), "km", "mi").unwrap(), d("26.218757"));
        assert_eq!(convert(d("1"), "mi", "ft").unwrap(), d("5280"));
        assert_eq!(
            convert(d("1"), "km", "league").unwrap_err(),
            "unknown unit `league`; units are mm, cm, m, km, in, ft, yd, mi"
        );
    }
}
