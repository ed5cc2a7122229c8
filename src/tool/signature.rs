//! [`Signature`]: a tool's name, description, arguments and result as JSON Schema, and the
//! check of a [`Call`]'s arguments against it.

use serde_json::{Map, Value as Json, json};

use super::{Call, ErrorType, ToolError};
use crate::value::Value;

/// What a tool is called, what it does, what it takes and what it gives back.
///
/// `args` and `result` are JSON Schema (2020-12) objects: the same signature serves the pump's
/// check of every call, an LLM's function calling and MCP's tool listing.
///
/// [`Signature::check`] reads a subset of the schema, enough for tool arguments:
///
/// - `properties`: the arguments a call may carry; any other argument is refused (as if
///   `additionalProperties` were `false`, whatever the schema says);
/// - `required`: the arguments a call must carry;
/// - per argument, `type` (one name or a list of names): `string`, `number`, `integer` (a
///   number without fraction), `boolean`, `array`, `object`, `null`; an argument without
///   `type` takes any value;
/// - for an `array`, `items.type` checked on every element the same way.
///
/// Everything else (`enum`, `minimum`, `pattern`, …) is carried for the model and not checked:
/// the tool checks what it needs.
///
/// # Example
///
/// ```
/// use agentpump::tool::{Call, ErrorType, Signature};
/// let sig = Signature::new("greet", "says hello")
///     .arg("name", "string", "who to greet", true)
///     .field("text", "string", "the greeting");
/// assert!(sig.check(&Call::new("greet").arg("name", "Ada")).is_ok());
/// let err = sig.check(&Call::new("greet").arg("nom", "Ada")).unwrap_err();
/// assert_eq!(err.kind, ErrorType::InvalidArgument);
/// assert_eq!(err.message, "unknown argument `nom`; greet takes name");
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Signature {
    /// The tool's name: the `tool` attribute of its calls, and its listener's name.
    pub name: String,
    /// One line on what it does.
    pub description: String,
    /// A JSON Schema of the arguments: an object schema with `properties` and `required`.
    pub args: Json,
    /// A JSON Schema of the result's fields.
    pub result: Json,
}

impl Signature {
    /// A tool that takes no arguments yet and returns no fields yet.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            args: empty_object(),
            result: empty_object(),
        }
    }

    /// Adds an argument of JSON Schema type `ty` (`"string"`, `"number"`, …).
    pub fn arg(mut self, name: &str, ty: &str, description: &str, required: bool) -> Self {
        add_property(&mut self.args, name, ty, description, required);
        self
    }

    /// Adds an argument with its own schema (for `{"type": "array", "items": …}` and the like).
    pub fn arg_schema(mut self, name: &str, schema: Json, required: bool) -> Self {
        insert(&mut self.args, name, schema, required);
        self
    }

    /// Adds a result field of JSON Schema type `ty`, always present.
    pub fn field(mut self, name: &str, ty: &str, description: &str) -> Self {
        add_property(&mut self.result, name, ty, description, true);
        self
    }

    /// A call of this tool that [`Signature::check`] accepts: each required argument with a
    /// placeholder of its type (a string argument's own name, `1`, `false`, an empty list or
    /// object). What the viewer offers to start from.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::tool::Signature;
    /// let s = Signature::new("shout", "says it loudly").arg("text", "string", "what to say", true);
    /// assert_eq!(s.example_call().to_xml(), r#"<call xmlns="urn:agentpump:tool:v1" tool="shout"><arg name="text">text</arg></call>"#);
    /// ```
    pub fn example_call(&self) -> Call {
        let properties = self.args.get("properties").and_then(Json::as_object);
        let required = self.args.get("required").and_then(Json::as_array);
        let mut call = Call::new(&self.name);
        for name in required.into_iter().flatten().filter_map(Json::as_str) {
            let ty =
                properties
                    .and_then(|p| p.get(name))
                    .and_then(|schema| match schema.get("type") {
                        Some(Json::Array(list)) => list.first().and_then(Json::as_str),
                        t => t.and_then(Json::as_str),
                    });
            let value = match ty {
                Some("number" | "integer") => Value::Num(1.into()),
                Some("boolean") => Value::Bool(false),
                Some("array") => Value::List(Vec::new()),
                Some("object") => Value::Object(std::collections::BTreeMap::new()),
                _ => Value::Str(name.to_owned()),
            };
            call = call.arg(name, value);
        }
        call
    }

    /// Checks a call's arguments: every required one present, no unknown one, each of its
    /// declared type (the subset described on [`Signature`]).
    ///
    /// # Errors
    ///
    /// An `invalid-argument` [`ToolError`] answering `call`, naming the argument.
    pub fn check(&self, call: &Call) -> Result<(), ToolError> {
        let invalid = |message: String| Err(call.error(ErrorType::InvalidArgument, message));
        let properties = self.args.get("properties").and_then(Json::as_object);
        let empty = Map::new();
        let properties = properties.unwrap_or(&empty);
        for (name, value) in &call.args {
            let Some(schema) = properties.get(name) else {
                let known: Vec<&str> = properties.keys().map(String::as_str).collect();
                let takes = if known.is_empty() {
                    "no arguments".to_owned()
                } else {
                    known.join(", ")
                };
                return invalid(format!(
                    "unknown argument `{name}`; {} takes {takes}",
                    self.name
                ));
            };
            if let Some(why) = mismatch(schema, value) {
                return invalid(format!("argument `{name}` {why}"));
            }
        }
        let required = self.args.get("required").and_then(Json::as_array);
        for name in required.into_iter().flatten().filter_map(Json::as_str) {
            if !call.args.contains_key(name) {
                return invalid(format!("missing required argument `{name}`"));
            }
        }
        Ok(())
    }
}

fn empty_object() -> Json {
    json!({"type": "object", "properties": {}, "required": [], "additionalProperties": false})
}

fn add_property(schema: &mut Json, name: &str, ty: &str, description: &str, required: bool) {
    insert(
        schema,
        name,
        json!({"type": ty, "description": description}),
        required,
    );
}

fn insert(schema: &mut Json, name: &str, property: Json, required: bool) {
    if let Some(properties) = schema["properties"].as_object_mut() {
        properties.insert(name.to_owned(), property);
    }
    if required && let Some(list) = schema["required"].as_array_mut() {
        list.push(Json::from(name));
    }
}

/// Why `value` does not fit `schema` (`must be a string, not boolean`), if it does not.
pub(crate) fn mismatch(schema: &Json, value: &Value) -> Option<String> {
    let types: Vec<&str> = match schema.get("type") {
        Some(Json::String(t)) => vec![t.as_str()],
        Some(Json::Array(list)) => list.iter().filter_map(Json::as_str).collect(),
        _ => return None,
    };
    if !types.iter().any(|t| fits(t, value)) {
        let names: Vec<&str> = types.iter().map(|t| article(t)).collect();
        return Some(format!(
            "must be {}, not {}",
            names.join(" or "),
            value.kind()
        ));
    }
    if let (Value::List(items), Some(item)) = (value, schema.get("items")) {
        for (i, element) in items.iter().enumerate() {
            if let Some(why) = mismatch(item, element) {
                return Some(format!("item {i} {why}"));
            }
        }
    }
    None
}

fn fits(ty: &str, value: &Value) -> bool {
    match (ty, value) {
        ("string", Value::Str(_))
        | ("number", Value::Num(_))
        | ("boolean", Value::Bool(_))
        | ("array", Value::List(_))
        | ("object", Value::Object(_))
        | ("null", Value::Null) => true,
        ("integer", Value::Num(n)) => n.fract().is_zero(),
        _ => false,
    }
}

fn article(ty: &str) -> &str {
    match ty {
        "string" => "a string",
        "number" => "a number",
        "integer" => "an integer",
        "boolean" => "a boolean",
        "array" => "a list",
        "object" => "an object",
        "null" => "null",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig() -> Signature {
        Signature::new("t", "a test tool")
            .arg("s", "string", "", true)
            .arg("n", "integer", "", false)
            .arg_schema(
                "list",
                json!({"type": "array", "items": {"type": "string"}}),
                false,
            )
            .arg_schema("any", json!({}), false)
    }

    #[test]
    fn refusals_name_the_argument() {
        let list = Value::from_json(r#"["a", 2]"#).unwrap();
        let cases = [
            (Call::new("t"), "missing required argument `s`"),
            (
                Call::new("t").arg("s", "x").arg("z", true),
                "unknown argument `z`; t takes any, list, n, s",
            ),
            (
                Call::new("t").arg("s", true),
                "argument `s` must be a string, not boolean",
            ),
            (
                Call::new("t")
                    .arg("s", "x")
                    .arg("n", Value::Num("1.5".parse().unwrap())),
                "argument `n` must be an integer, not number",
            ),
            (
                Call::new("t").arg("s", "x").arg("list", list),
                "argument `list` item 1 must be a string, not number",
            ),
        ];
        for (call, expected) in cases {
            let err = sig().check(&call).unwrap_err();
            assert_eq!(err.kind, ErrorType::InvalidArgument);
            assert_eq!(err.message, expected);
        }
    }

    #[test]
    fn a_fitting_call_passes() {
        let call = Call::new("t")
            .arg("s", "x")
            .arg("n", Value::Num(3.into()))
            .arg("any", Value::Null)
            .arg("list", Value::from_json(r#"["a", "b"]"#).unwrap());
        assert_eq!(sig().check(&call), Ok(()));
    }
}
