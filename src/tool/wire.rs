//! The three messages of the tool protocol, read from and written to XML.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use quick_xml::Reader;
use quick_xml::escape::escape;
use quick_xml::events::{BytesStart, Event};

use super::TOOL_NS;
use crate::Payload;
use crate::value::{Value, parse_number};

/// A tool call: `<call tool="…" id="…"><arg name="…" type="…">…</arg>…</call>`.
///
/// # Example
///
/// ```
/// use agentpump::tool::Call;
/// use agentpump::value::Value;
/// let call = Call::new("calculator").id("c1").arg("expression", "1 + 2");
/// let xml = call.to_xml();
/// assert_eq!(
///     xml,
///     r#"<call xmlns="urn:agentpump:tool:v1" tool="calculator" id="c1"><arg name="expression">1 + 2</arg></call>"#
/// );
/// assert_eq!(Call::parse_xml(&xml)?, call);
/// # Ok::<(), agentpump::tool::WireError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Call {
    /// The tool's name.
    pub tool: String,
    /// The caller's handle for this call, echoed as `call` on the answer.
    pub id: Option<String>,
    /// How long the caller waits, in milliseconds (`timeout-ms`): a tool registered through
    /// the adapter answers `timeout` past it.
    pub timeout_ms: Option<u64>,
    /// The named arguments.
    pub args: BTreeMap<String, Value>,
}

/// A tool's result: `<result tool="…" call="…"><field name="…" type="…">…</field>…</result>`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolResult {
    /// The tool that answered.
    pub tool: String,
    /// The call's `id`, if it had one.
    pub call: Option<String>,
    /// The named fields.
    pub fields: BTreeMap<String, Value>,
}

/// What kind of failure a [`ToolError`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorType {
    /// The call does not fit the tool's signature.
    InvalidArgument,
    /// The tool ran and failed.
    Failed,
    /// The tool ran out of time.
    Timeout,
    /// A policy refused the call.
    NotAllowed,
    /// The tool cannot answer now; calling again later may succeed.
    Unavailable,
}

impl ErrorType {
    /// Every type.
    pub const ALL: [ErrorType; 5] = [
        Self::InvalidArgument,
        Self::Failed,
        Self::Timeout,
        Self::NotAllowed,
        Self::Unavailable,
    ];

    /// As written in the `type` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArgument => "invalid-argument",
            Self::Failed => "failed",
            Self::Timeout => "timeout",
            Self::NotAllowed => "not-allowed",
            Self::Unavailable => "unavailable",
        }
    }

    /// The type written `text`, if there is one.
    pub fn from_name(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

/// A tool's error: `<error tool="…" call="…" type="…" retry="…">message</error>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// The tool that answered.
    pub tool: String,
    /// The call's `id`, if it had one.
    pub call: Option<String>,
    /// What kind of failure.
    pub kind: ErrorType,
    /// What went wrong, for a person or a model.
    pub message: String,
    /// Whether calling again may succeed.
    pub retry: bool,
}

/// A tool's answer to a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// It worked.
    Result(ToolResult),
    /// It did not.
    Error(ToolError),
}

/// Why a payload is not a well-formed tool message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WireError(pub String);

fn wire(message: impl Into<String>) -> WireError {
    WireError(message.into())
}

impl Call {
    /// A call of `tool` with no arguments yet.
    pub fn new(tool: impl Into<String>) -> Self {
        Self {
            tool: tool.into(),
            ..Self::default()
        }
    }

    /// Sets the call's id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Adds (or replaces) an argument.
    pub fn arg(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.args.insert(name.into(), value.into());
        self
    }

    /// The call as a payload.
    pub fn to_xml(&self) -> String {
        let mut out = open("call", &self.tool, "id", self.id.as_deref());
        if let Some(ms) = self.timeout_ms {
            let _ = write!(out, " timeout-ms=\"{ms}\"");
        }
        out.push('>');
        items(&mut out, "arg", &self.args);
        out.push_str("</call>");
        out
    }

    /// Reads a call from a payload.
    ///
    /// # Errors
    ///
    /// A [`WireError`] naming what does not fit the protocol.
    pub fn parse(payload: &Payload) -> Result<Self, WireError> {
        Self::parse_xml(payload.as_str())
    }

    /// Reads a call from XML text.
    ///
    /// # Errors
    ///
    /// A [`WireError`] naming what does not fit the protocol.
    pub fn parse_xml(xml: &str) -> Result<Self, WireError> {
        let m = Message::read(xml, "call", &["tool", "id", "timeout-ms"], "arg")?;
        let timeout_ms = match m.optional("timeout-ms") {
            None => None,
            Some(t) => Some(t.parse::<u64>().map_err(|_| {
                wire(format!(
                    "timeout-ms=\"{t}\" on <call> is not a whole number of milliseconds"
                ))
            })?),
        };
        Ok(Self {
            tool: m.required("tool")?,
            id: m.optional("id"),
            timeout_ms,
            args: m.items,
        })
    }

    /// An empty result answering this call.
    pub fn result(&self) -> ToolResult {
        ToolResult {
            tool: self.tool.clone(),
            call: self.id.clone(),
            fields: BTreeMap::new(),
        }
    }

    /// An error answering this call.
    pub fn error(&self, kind: ErrorType, message: impl Into<String>) -> ToolError {
        ToolError {
            tool: self.tool.clone(),
            call: self.id.clone(),
            kind,
            message: message.into(),
            retry: false,
        }
    }
}

impl ToolResult {
    /// Adds (or replaces) a field.
    pub fn field(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.fields.insert(name.into(), value.into());
        self
    }

    /// The result as a payload.
    pub fn to_xml(&self) -> String {
        let mut out = open("result", &self.tool, "call", self.call.as_deref());
        out.push('>');
        items(&mut out, "field", &self.fields);
        out.push_str("</result>");
        out
    }

    /// The fields as one object value (what a CAPTURE map's path starts from).
    pub fn to_value(&self) -> Value {
        Value::Object(self.fields.clone())
    }
}

impl ToolError {
    /// Marks the error as worth a retry (or not).
    pub fn retry(mut self, retry: bool) -> Self {
        self.retry = retry;
        self
    }

    /// The error as a payload.
    pub fn to_xml(&self) -> String {
        let mut out = open("error", &self.tool, "call", self.call.as_deref());
        let _ = write!(
            out,
            " type=\"{}\" retry=\"{}\">{}</error>",
            self.kind.as_str(),
            self.retry,
            escape(self.message.as_str())
        );
        out
    }
}

impl Answer {
    /// Reads a result or an error; `None` when the payload is neither (another namespace or
    /// element).
    ///
    /// # Errors
    ///
    /// A [`WireError`] when it is a `result` or `error` of the protocol that does not fit it.
    pub fn parse(payload: &Payload) -> Option<Result<Self, WireError>> {
        let q = payload.qname();
        if q.namespace() != TOOL_NS {
            return None;
        }
        let xml = payload.as_str();
        match q.local() {
            "result" => Some(
                Message::read(xml, "result", &["tool", "call"], "field").and_then(|m| {
                    Ok(Answer::Result(ToolResult {
                        tool: m.required("tool")?,
                        call: m.optional("call"),
                        fields: m.items,
                    }))
                }),
            ),
            "error" => Some(
                Message::read(xml, "error", &["tool", "call", "type", "retry"], "").and_then(|m| {
                    let kind = m.required("type")?;
                    let kind = ErrorType::from_name(&kind)
                        .ok_or_else(|| wire(format!("unknown error type=\"{kind}\" in <error>")))?;
                    let retry = match m.optional("retry").as_deref() {
                        None | Some("false") => false,
                        Some("true") => true,
                        Some(other) => {
                            return Err(wire(format!(
                                "retry=\"{other}\" in <error> is not true or false"
                            )));
                        }
                    };
                    Ok(Answer::Error(ToolError {
                        tool: m.required("tool")?,
                        call: m.optional("call"),
                        kind,
                        message: m.text,
                        retry,
                    }))
                }),
            ),
            _ => None,
        }
    }

    /// The `call` id it answers.
    pub fn call(&self) -> Option<&str> {
        match self {
            Answer::Result(r) => r.call.as_deref(),
            Answer::Error(e) => e.call.as_deref(),
        }
    }

    /// The answer as a payload.
    pub fn to_xml(&self) -> String {
        match self {
            Answer::Result(r) => r.to_xml(),
            Answer::Error(e) => e.to_xml(),
        }
    }
}

fn open(element: &str, tool: &str, id_attr: &str, id: Option<&str>) -> String {
    let mut out = format!("<{element} xmlns=\"{TOOL_NS}\" tool=\"{}\"", escape(tool));
    if let Some(id) = id {
        let _ = write!(out, " {id_attr}=\"{}\"", escape(id));
    }
    out
}

/// Writes each named value as `<element name="…" type="…">text</element>` (the form of a
/// call's arguments and a result's fields; other protocols reuse it).
pub(crate) fn items(out: &mut String, element: &str, items: &BTreeMap<String, Value>) {
    for (name, value) in items {
        let (ty, text) = match value {
            Value::Str(s) => ("", s.clone()),
            Value::Num(n) => (" type=\"number\"", n.normalize().to_string()),
            Value::Bool(b) => (" type=\"boolean\"", b.to_string()),
            other => (" type=\"json\"", other.to_json()),
        };
        let _ = write!(
            out,
            "<{element} name=\"{}\"{ty}>{}</{element}>",
            escape(name.as_str()),
            escape(text.as_str())
        );
    }
}

/// A protocol message as read: its root's attributes, its items, its text.
struct Message {
    element: &'static str,
    attributes: BTreeMap<String, String>,
    items: BTreeMap<String, Value>,
    text: String,
}

impl Message {
    fn required(&self, name: &str) -> Result<String, WireError> {
        self.optional(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| wire(format!("<{}> needs a {name}=\"…\" attribute", self.element)))
    }

    fn optional(&self, name: &str) -> Option<String> {
        self.attributes.get(name).cloned()
    }

    /// Reads `<element attrs…>` with children `<item name type>text</item>` (or only text
    /// when `item` is empty).
    fn read(
        xml: &str,
        element: &'static str,
        allowed: &[&str],
        item: &'static str,
    ) -> Result<Message, WireError> {
        let mut reader = Reader::from_str(xml);
        let mut m = Message {
            element,
            attributes: BTreeMap::new(),
            items: BTreeMap::new(),
            text: String::new(),
        };
        let mut open_item: Option<(String, String)> = None;
        let mut depth = 0usize;
        let mut text = String::new();
        loop {
            let event = reader.read_event().map_err(|e| wire(e.to_string()))?;
            let (start, empty) = match &event {
                Event::Start(e) => (Some(e), false),
                Event::Empty(e) => (Some(e), true),
                _ => (None, false),
            };
            if let Some(e) = start {
                match depth {
                    0 => {
                        m.attributes = attributes(e, element, allowed)?;
                        if empty {
                            break;
                        }
                    }
                    1 if !item.is_empty() && local_name(e) == item => {
                        let a = attributes(e, item, &["name", "type"])?;
                        let name = a.get("name").cloned().unwrap_or_default();
                        if !valid_name(&name) {
                            return Err(wire(format!(
                                "<{item}> needs a name=\"…\" of 1-64 of a-z A-Z 0-9 _ - (found \"{name}\")"
                            )));
                        }
                        let ty = a.get("type").cloned().unwrap_or_else(|| "string".into());
                        text.clear();
                        if empty {
                            m.close_item(name, &ty, "", item)?;
                            continue;
                        }
                        open_item = Some((name, ty));
                    }
                    1 if !item.is_empty() => {
                        return Err(wire(format!(
                            "unknown element <{}> in <{element}>, expected <{item}>",
                            local_name(e)
                        )));
                    }
                    _ => {
                        return Err(wire(format!(
                            "unexpected element <{}> in <{element}>",
                            local_name(e)
                        )));
                    }
                }
                depth += 1;
                continue;
            }
            match event {
                Event::Text(t) => {
                    text.push_str(&t);
                }
                Event::GeneralRef(r) => {
                    text.push_str(&resolve_entity(r.as_ref())?);
                }
                Event::CData(c) => text.push_str(c.as_ref()),
                Event::End(_) if depth == 2 => {
                    if let Some((name, ty)) = open_item.take() {
                        m.close_item(name, &ty, &text, item)?;
                    }
                    text.clear();
                    depth = 1;
                }
                Event::End(_) => {
                    if item.is_empty() {
                        m.text = std::mem::take(&mut text);
                    } else if !text.trim().is_empty() {
                        return Err(wire(format!(
                            "text in <{element}> outside <{item}>: put values in <{item}> elements"
                        )));
                    }
                    break;
                }
                Event::Eof => break,
                _ => {}
            }
        }
        Ok(m)
    }

    fn close_item(
        &mut self,
        name: String,
        ty: &str,
        text: &str,
        item: &str,
    ) -> Result<(), WireError> {
        let value = typed(&name, ty, text, item)?;
        if self.items.insert(name.clone(), value).is_some() {
            return Err(wire(format!("<{item} name=\"{name}\"> appears twice")));
        }
        Ok(())
    }
}

fn resolve_entity(name: &str) -> Result<String, WireError> {
    if let Some(c) = quick_xml::escape::resolve_predefined_entity(name) {
        return Ok(c.to_owned());
    }
    let code = name
        .strip_prefix("#x")
        .map(|h| u32::from_str_radix(h, 16))
        .or_else(|| name.strip_prefix('#').map(str::parse))
        .and_then(Result::ok)
        .and_then(char::from_u32);
    code.map(String::from)
        .ok_or_else(|| wire(format!("unknown entity &{name};")))
}

fn typed(name: &str, ty: &str, text: &str, item: &str) -> Result<Value, WireError> {
    let bad = |what: &str| wire(format!("<{item} name=\"{name}\" type=\"{ty}\">: {what}"));
    match ty {
        "string" => Ok(Value::Str(text.to_owned())),
        "number" => parse_number(text.trim())
            .map(Value::Num)
            .ok_or_else(|| bad(&format!("\"{}\" is not a number", text.trim()))),
        "boolean" => match text.trim() {
            "true" => Ok(Value::Bool(true)),
            "false" => Ok(Value::Bool(false)),
            other => Err(bad(&format!("\"{other}\" is not true or false"))),
        },
        "json" => Value::from_json(text).map_err(|e| bad(&e.to_string())),
        other => Err(wire(format!(
            "<{item} name=\"{name}\">: unknown type=\"{other}\", expected string, number, boolean or json"
        ))),
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn local_name(e: &BytesStart<'_>) -> String {
    e.local_name().as_ref().to_owned()
}

fn attributes(
    e: &BytesStart<'_>,
    element: &str,
    allowed: &[&str],
) -> Result<BTreeMap<String, String>, WireError> {
    let mut out = BTreeMap::new();
    // Duplicates were refused when the payload was parsed (every payload is, before anyone
    // reads it): no second check here.
    for a in e.attributes().with_checks(false) {
        let a = a.map_err(|e| wire(e.to_string()))?;
        let key: &str = a.key.as_ref();
        if key == "xmlns" || key.starts_with("xmlns:") {
            continue;
        }
        if !allowed.contains(&key) {
            return Err(wire(format!(
                "unknown attribute {key}=\"…\" on <{element}>, expected {}",
                allowed.join(", ")
            )));
        }
        // Only a value with a reference or a whitespace character to normalize needs the work.
        let plain = !a.value.contains(['&', '\t', '\n', '\r']);
        let value = if plain {
            a.value.clone().into_owned()
        } else {
            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .map_err(|e| wire(e.to_string()))?
                .into_owned()
        };
        out.insert(key.to_owned(), value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips() {
        let call = Call::new("t")
            .id("a&b")
            .arg("s", "x < y & \"z\"")
            .arg("n", Value::Num("0.10".parse().unwrap()))
            .arg("b", true)
            .arg("j", Value::from_json(r#"[1, {"k": null}]"#).unwrap())
            .arg("e", "");
        let back = Call::parse_xml(&call.to_xml()).unwrap();
        assert_eq!(back.args["n"], Value::Num("0.1".parse().unwrap()));
        assert_eq!(back.args["s"], call.args["s"]);
        assert_eq!(back.args["j"], call.args["j"]);
        assert_eq!(back.args["e"], Value::Str(String::new()));
        assert_eq!(back.id.as_deref(), Some("a&b"));
    }

    #[test]
    fn refusals_name_the_fault() {
        let ns = TOOL_NS;
        let cases = [
            (format!(r#"<call xmlns="{ns}"/>"#), "needs a tool="),
            (
                format!(r#"<call xmlns="{ns}" tool="t" x="1"/>"#),
                "unknown attribute x=",
            ),
            (
                format!(
                    r#"<call xmlns="{ns}" tool="t"><arg name="n" type="number">1,5</arg></call>"#
                ),
                "is not a number",
            ),
            (
                format!(
                    r#"<call xmlns="{ns}" tool="t"><arg name="a">1</arg><arg name="a">2</arg></call>"#
                ),
                "appears twice",
            ),
            (
                format!(r#"<call xmlns="{ns}" tool="t"><param name="a">1</param></call>"#),
                "unknown element <param>",
            ),
            (
                format!(r#"<call xmlns="{ns}" tool="t"><arg name="a" type="date">1</arg></call>"#),
                "unknown type=\"date\"",
            ),
        ];
        for (xml, expected) in cases {
            let err = Call::parse_xml(&xml).unwrap_err().0;
            assert!(err.contains(expected), "{xml}: {err}");
        }
    }

    #[test]
    fn an_error_answer_reads_back() {
        let e = Call::new("calc")
            .id("7")
            .error(ErrorType::Timeout, "took > 1s")
            .retry(true);
        let payload = Payload::parse(&e.to_xml(), &crate::Limits::default()).unwrap();
        assert_eq!(Answer::parse(&payload).unwrap().unwrap(), Answer::Error(e));
    }
}
