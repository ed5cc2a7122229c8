//! An MCP tool's JSON Schema as a [`Signature`]: names, types, required. What the signature
//! cannot stand for is refused, naming the tool, the keyword and where it is.

use serde_json::{Map, Value as Json, json};

use crate::tool::{Call, Signature};
use crate::value::Value;

/// Keywords an argument's schema may carry: checked (`type`, `items`, `properties`,
/// `required`) or carried for the model and the server, which checks them itself.
const ARGUMENT_KEYWORDS: &[&str] = &[
    "type",
    "items",
    "properties",
    "required",
    "additionalProperties",
    "description",
    "title",
    "default",
    "enum",
    "const",
    "examples",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "contentMediaType",
    "contentEncoding",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
    "anyOf",
];

/// Keywords the arguments' own (top-level) schema may carry besides [`ARGUMENT_KEYWORDS`].
const TOP_KEYWORDS: &[&str] = &["$schema", "$id"];

/// The JSON Schema types a signature checks.
const TYPES: &[&str] = &[
    "string", "number", "integer", "boolean", "array", "object", "null",
];

/// Why an MCP tool cannot be registered as a tool of the pump.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// Its input schema uses a keyword the signature cannot stand for.
    #[error(
        "tool `{tool}`: schema keyword `{keyword}` at {at} cannot be mapped to a signature{}",
        if why.is_empty() { String::new() } else { format!(" ({why})") }
    )]
    Keyword {
        /// The tool's name as the server lists it.
        tool: String,
        /// The keyword.
        keyword: String,
        /// Where, as a JSON pointer into the input schema (`/properties/path`).
        at: String,
        /// What about it, when the keyword alone does not say.
        why: String,
    },
    /// Its name, prefixed with the server's, is not a listener name.
    #[error("tool `{tool}`: `{full}` is not a usable tool name (1-64 of a-z A-Z 0-9 _ - .)")]
    Name {
        /// The tool's name as the server lists it.
        tool: String,
        /// The name it would register as.
        full: String,
    },
}

/// The signature of `tool` of server `server`, registered as `server.tool`.
///
/// # Errors
///
/// A [`SchemaError`] naming the tool and the first keyword that cannot be mapped.
pub fn signature(server: &str, tool: &rmcp::model::Tool) -> Result<Signature, SchemaError> {
    let name = tool.name.as_ref();
    let full = format!("{server}.{name}");
    if !crate::listener::registration::valid_name(&full) {
        return Err(SchemaError::Name {
            tool: name.to_owned(),
            full,
        });
    }
    let refuse = |keyword: &str, at: &str, why: &str| SchemaError::Keyword {
        tool: name.to_owned(),
        keyword: keyword.to_owned(),
        at: if at.is_empty() { "/".into() } else { at.into() },
        why: why.to_owned(),
    };
    let mut args = Json::Object((*tool.input_schema).clone());
    map_object(&mut args, "", true).map_err(|(k, at, why)| refuse(&k, &at, why))?;
    let description = tool
        .description
        .as_deref()
        .or(tool.title.as_deref())
        .unwrap_or_default();
    let mut signature = Signature::new(full, first_line(description));
    signature.args = args;
    signature.result = result_schema(tool.output_schema.as_deref());
    Ok(signature)
}

/// A refusal: the keyword, where, and what about it.
type Refusal = (String, String, &'static str);

/// Checks the arguments' schema (an object schema) and maps what it may: `anyOf` of plain
/// types becomes a `type` list.
fn map_object(schema: &mut Json, at: &str, top: bool) -> Result<(), Refusal> {
    map_schema(schema, at, top)?;
    match schema.get("type") {
        None => Ok(()),
        Some(Json::String(t)) if t == "object" => Ok(()),
        Some(_) => Err((
            "type".into(),
            at.into(),
            "a tool's arguments must be an object",
        )),
    }
}

fn map_schema(schema: &mut Json, at: &str, top: bool) -> Result<(), Refusal> {
    let Json::Object(map) = schema else {
        // `true` (anything) is an argument without `type`; `false` takes nothing.
        return match schema {
            Json::Bool(true) => {
                *schema = json!({});
                Ok(())
            }
            _ => Err(("false".into(), at.into(), "a schema that takes nothing")),
        };
    };
    for key in map.keys() {
        let known = ARGUMENT_KEYWORDS.contains(&key.as_str())
            || (top && TOP_KEYWORDS.contains(&key.as_str()));
        if !known {
            return Err((key.clone(), at.into(), ""));
        }
    }
    if let Some(any) = map.remove("anyOf") {
        let types = plain_types(&any).ok_or_else(|| {
            (
                "anyOf".to_owned(),
                at.to_owned(),
                "only a choice of plain types (`{\"type\": …}`) maps to a signature",
            )
        })?;
        if map.contains_key("type") {
            return Err(("anyOf".into(), at.into(), "beside `type`"));
        }
        map.insert("type".into(), Json::from(types));
    }
    check_type(map.get("type"), at)?;
    if let Some(items) = map.get_mut("items") {
        map_schema(items, &format!("{at}/items"), false)?;
    }
    if let Some(Json::Object(properties)) = map.get_mut("properties") {
        for (name, property) in properties.iter_mut() {
            map_schema(property, &format!("{at}/properties/{name}"), false)?;
        }
    }
    Ok(())
}

/// The types of an `anyOf` whose every branch is `{"type": T}` (with a description or title
/// at most): Python's `str | None`.
fn plain_types(any: &Json) -> Option<Vec<Json>> {
    let branches = any.as_array()?;
    let mut types = Vec::new();
    for branch in branches {
        let map = branch.as_object()?;
        if map
            .keys()
            .any(|k| !matches!(k.as_str(), "type" | "description" | "title"))
        {
            return None;
        }
        match map.get("type")? {
            Json::String(t) => types.push(Json::from(t.as_str())),
            _ => return None,
        }
    }
    (!types.is_empty()).then_some(types)
}

fn check_type(ty: Option<&Json>, at: &str) -> Result<(), Refusal> {
    let known = |t: &Json| t.as_str().is_some_and(|t| TYPES.contains(&t));
    let fine = match ty {
        None => true,
        Some(t @ Json::String(_)) => known(t),
        Some(Json::Array(list)) => !list.is_empty() && list.iter().all(known),
        Some(_) => false,
    };
    if fine {
        Ok(())
    } else {
        Err((
            "type".into(),
            at.into(),
            "a type a signature checks: string, number, integer, boolean, array, object, null",
        ))
    }
}

/// The result's fields: `text`, `structured` (the tool's output schema, when it has one) and
/// `content` (the blocks that are not text), each present when the answer has it.
fn result_schema(output: Option<&Map<String, Json>>) -> Json {
    let structured = output.map_or_else(
        || json!({"type": "object", "description": "the structured content"}),
        |schema| Json::Object(schema.clone()),
    );
    json!({
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "the text blocks, one per line"},
            "structured": structured,
            "content": {"type": "array", "description": "images, audio and resources, each with its MIME type"},
        },
        "required": [],
        "additionalProperties": false,
    })
}

fn first_line(text: &str) -> &str {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or_default()
}

/// An example call of `signature`, for a model's prompt: each required argument with a value
/// of its type.
pub fn example(signature: &Signature) -> String {
    let mut call = Call::new(signature.name.clone());
    let properties = signature.args.get("properties").and_then(Json::as_object);
    let required = signature.args.get("required").and_then(Json::as_array);
    for name in required.into_iter().flatten().filter_map(Json::as_str) {
        let ty = properties
            .and_then(|p| p.get(name))
            .and_then(|p| p.get("type"))
            .and_then(|t| t.as_str().or_else(|| t.get(0).and_then(Json::as_str)));
        let value = match ty {
            Some("number" | "integer") => Value::Num(1.into()),
            Some("boolean") => Value::Bool(true),
            Some("array") => Value::List(Vec::new()),
            Some("object") => Value::Object(Default::default()),
            _ => Value::Str("…".into()),
        };
        call = call.arg(name, value);
    }
    call.to_xml()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(schema: Json) -> rmcp::model::Tool {
        let Json::Object(schema) = schema else {
            panic!("an object")
        };
        rmcp::model::Tool::new("t", "a tool\nmore", schema)
    }

    /// Issue 30: "what cannot be mapped is refused at load naming the tool and the schema
    /// keyword".
    #[test]
    fn what_cannot_be_mapped_is_refused_naming_the_tool_and_the_keyword() {
        let cases = [
            (
                json!({"type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}}),
                "tool `t`: schema keyword `$ref` at /properties/p cannot be mapped to a signature",
            ),
            (
                json!({"type": "object", "oneOf": [{}]}),
                "tool `t`: schema keyword `oneOf` at / cannot",
            ),
            (
                json!({"type": "object", "properties": {"l": {"type": "array", "items": {"type": "tuple"}}}}),
                "tool `t`: schema keyword `type` at /properties/l/items cannot be mapped to a signature (a type a signature checks",
            ),
            (
                json!({"type": "object", "properties": {"p": {"anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}]}}}),
                "tool `t`: schema keyword `anyOf` at /properties/p cannot be mapped to a signature (only a choice of plain types",
            ),
            (
                json!({"type": "array"}),
                "tool `t`: schema keyword `type` at / cannot be mapped to a signature (a tool's arguments must be an object)",
            ),
            (
                json!({"type": "object", "properties": {"p": {"$schema": "x"}}}),
                "tool `t`: schema keyword `$schema` at /properties/p",
            ),
        ];
        for (schema, expected) in cases {
            let err = signature("srv", &tool(schema.clone()))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(expected), "{schema}: {err}");
        }
        let mut bad = tool(json!({"type": "object"}));
        bad.name = "a b".into();
        let err = signature("srv", &bad).unwrap_err().to_string();
        assert_eq!(
            err,
            "tool `a b`: `srv.a b` is not a usable tool name (1-64 of a-z A-Z 0-9 _ - .)"
        );
    }

    #[test]
    fn names_types_and_required_become_the_signature() {
        let schema = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "First number"},
                "tag": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                "list": {"type": "array", "items": {"type": "integer"}},
            },
            "required": ["a"],
        });
        let sig = signature("ev", &tool(schema)).unwrap();
        assert_eq!(sig.name, "ev.t");
        assert_eq!(sig.description, "a tool");
        assert_eq!(
            sig.args["properties"]["tag"]["type"],
            json!(["string", "null"])
        );
        let ok = Call::new("ev.t")
            .arg("a", Value::Num(2.into()))
            .arg("tag", Value::Null);
        assert_eq!(sig.check(&ok), Ok(()));
        let refused = sig.check(&Call::new("ev.t").arg("a", "two")).unwrap_err();
        assert_eq!(refused.message, "argument `a` must be a number, not string");
        let missing = sig.check(&Call::new("ev.t")).unwrap_err();
        assert_eq!(missing.message, "missing required argument `a`");
        assert_eq!(
            example(&sig),
            r#"<call xmlns="urn:agentpump:tool:v1" tool="ev.t"><arg name="a" type="number">1</arg></call>"#
        );
    }
}
