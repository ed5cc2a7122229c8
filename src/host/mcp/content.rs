//! An MCP tool's answer as the tool protocol's: content blocks and structured content become
//! a `<result>`'s fields, `isError` and JSON-RPC errors an `<error>` with the server's message.

use std::collections::BTreeMap;

use base64::Engine as _;
use rmcp::model::{CallToolResult, ErrorCode, ErrorData};
use serde_json::Value as Json;

use crate::tool::{Call, ErrorType, ToolError, ToolResult};
use crate::value::Value;

/// `call`'s result from what the server answered.
///
/// Fields, each present when the answer has it: `text` (the text blocks, one per line),
/// `structured` (the structured content, as JSON), `content` (every other block as an object
/// with its `type` and `mime_type`: images and audio with `data` in base64 and their decoded
/// `bytes`, embedded resources with `uri` and `text` or `blob`, resource links with `uri` and
/// `name`).
///
/// # Errors
///
/// An `isError` answer is a `failed` error with the answer's text; an answer that is not
/// JSON the tool protocol can carry is a `failed` error saying why.
pub fn result(call: &Call, answer: &CallToolResult) -> Result<ToolResult, ToolError> {
    let blocks = serde_json::to_value(&answer.content).unwrap_or(Json::Null);
    let blocks = blocks.as_array().map(Vec::as_slice).unwrap_or_default();
    let text: Vec<&str> = blocks
        .iter()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    if answer.is_error == Some(true) {
        let message = if text.is_empty() {
            "the tool reported an error without a message".to_owned()
        } else {
            text.join("\n")
        };
        return Err(call.error(ErrorType::Failed, message));
    }
    let mut fields = BTreeMap::new();
    if !text.is_empty() {
        fields.insert("text".to_owned(), Value::Str(text.join("\n")));
    }
    if let Some(structured) = &answer.structured_content {
        fields.insert("structured".to_owned(), value(call, structured)?);
    }
    let others: Vec<Value> = blocks
        .iter()
        .filter(|b| b["type"] != "text")
        .map(|b| block(call, b))
        .collect::<Result<_, _>>()?;
    if !others.is_empty() {
        fields.insert("content".to_owned(), Value::List(others));
    }
    Ok(ToolResult {
        fields,
        ..call.result()
    })
}

/// A block that is not text, as an object with its type and MIME type.
fn block(call: &Call, b: &Json) -> Result<Value, ToolError> {
    let kind = b["type"].as_str().unwrap_or("unknown");
    let mut out = serde_json::Map::new();
    out.insert("type".into(), Json::from(kind));
    let copy = |out: &mut serde_json::Map<String, Json>, from: &Json, keys: &[(&str, &str)]| {
        for (theirs, ours) in keys {
            if let Some(v) = from.get(*theirs).filter(|v| !v.is_null()) {
                out.insert((*ours).to_owned(), v.clone());
            }
        }
    };
    match kind {
        "image" | "audio" => {
            copy(&mut out, b, &[("mimeType", "mime_type"), ("data", "data")]);
            let data = b["data"].as_str().unwrap_or_default();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .map(|d| d.len())
                .unwrap_or(0);
            out.insert("bytes".into(), Json::from(bytes));
        }
        "resource" => copy(
            &mut out,
            &b["resource"],
            &[
                ("uri", "uri"),
                ("mimeType", "mime_type"),
                ("text", "text"),
                ("blob", "blob"),
            ],
        ),
        _ => copy(
            &mut out,
            b,
            &[
                ("uri", "uri"),
                ("name", "name"),
                ("mimeType", "mime_type"),
                ("description", "description"),
            ],
        ),
    }
    value(call, &Json::Object(out))
}

/// A JSON value as a [`Value`] (numbers exact).
fn value(call: &Call, json: &Json) -> Result<Value, ToolError> {
    Value::from_json(&json.to_string()).map_err(|e| {
        call.error(
            ErrorType::Failed,
            format!("the server's answer does not fit a tool result: {e}"),
        )
    })
}

/// A JSON-RPC error from the server as the call's error: invalid params are
/// `invalid-argument`, an unknown tool `unavailable`, anything else `failed`; the message is
/// the server's.
pub fn rpc_error(call: &Call, error: &ErrorData) -> ToolError {
    let kind = match error.code {
        ErrorCode::INVALID_PARAMS => ErrorType::InvalidArgument,
        ErrorCode::METHOD_NOT_FOUND => ErrorType::Unavailable,
        _ => ErrorType::Failed,
    };
    call.error(kind, error.message.to_string())
}

/// A call's arguments as the JSON object MCP sends.
///
/// # Errors
///
/// An argument whose number JSON cannot carry (none a call can hold today).
pub fn arguments(call: &Call) -> Result<serde_json::Map<String, Json>, ToolError> {
    let mut out = serde_json::Map::new();
    for (name, v) in &call.args {
        let json: Json = serde_json::from_str(&v.to_json()).map_err(|e| {
            call.error(
                ErrorType::InvalidArgument,
                format!("argument `{name}` cannot be sent as JSON: {e}"),
            )
        })?;
        out.insert(name.clone(), json);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    fn answer(json: Json) -> CallToolResult {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn blocks_and_structured_content_become_fields() {
        let call = Call::new("ev.t").id("c1");
        let a = answer(serde_json::json!({
            "content": [
                {"type": "text", "text": "one"},
                {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
                {"type": "text", "text": "two"},
                {"type": "resource", "resource": {"uri": "demo://x", "mimeType": "text/plain", "text": "body"}},
            ],
            "structuredContent": {"temperature": 22.5, "conditions": "sunny"},
        }));
        let r = result(&call, &a).unwrap();
        assert_eq!(r.call.as_deref(), Some("c1"));
        assert_eq!(r.fields["text"], Value::Str("one\ntwo".into()));
        assert_eq!(
            r.fields["structured"].to_json(),
            r#"{"conditions":"sunny","temperature":22.5}"#
        );
        assert_eq!(
            r.fields["content"].to_json(),
            r#"[{"bytes":5,"data":"aGVsbG8=","mime_type":"image/png","type":"image"},{"mime_type":"text/plain","text":"body","type":"resource","uri":"demo://x"}]"#
        );
    }

    #[test]
    fn an_error_result_is_a_failed_error_with_the_servers_message() {
        let call = Call::new("ev.t");
        let a = CallToolResult::error(vec![ContentBlock::text("location must be one of …")]);
        let e = result(&call, &a).unwrap_err();
        assert_eq!(
            (e.kind, e.message.as_str()),
            (ErrorType::Failed, "location must be one of …")
        );
        let rpc = ErrorData::invalid_params("bad a", None);
        assert_eq!(rpc_error(&call, &rpc).kind, ErrorType::InvalidArgument);
    }
}
