//! The three messages of the tool protocol, read from and written to XML.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use quick_xml::Reader;
use quick_xml::escape::escape;
use quick_xml::events::{BytesStart, Event};

use super::TOOL_NS;
use crate::Payload;
use crate::value::{Value, parse_number, write_number};

mod canonical;

pub(crate) use canonical::{fits as written_fits, payload as written_payload};

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
    /// A person refused the call when asked to approve it (`pump/inbox`).
    Denied,
}

impl ErrorType {
    /// Every type.
    pub const ALL: [ErrorType; 6] = [
        Self::InvalidArgument,
        Self::Failed,
        Self::Timeout,
        Self::NotAllowed,
        Self::Unavailable,
        Self::Denied,
    ];

    /// As written in the `type` attribute.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidArgument => "invalid-argument",
            Self::Failed => "failed",
            Self::Timeout => "timeout",
            Self::NotAllowed => "not-allowed",
            Self::Unavailable => "unavailable",
            Self::Denied => "denied",
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

/// Whether reading `xml`, what the crate wrote of a call or answer, gives back exactly the
/// values it was written from: no character XML forbids, no carriage return (XML reads it as a
/// line feed), no tab or line break in an attribute (XML reads it as a space), every item name
/// valid. Tests hold the writers and the readers to it.
fn reads_back(xml: &str, attributes: &[&str], items: &BTreeMap<String, Value>, item: &str) -> bool {
    attributes.iter().all(|a| !a.contains(['\t', '\n', '\r']))
        && !xml.contains('\r')
        && crate::envelope::check_chars(xml).is_ok()
        && items.keys().all(|name| invalid_name(name, item).is_none())
}

/// `xml` as a tool payload whose reading is `value`.
fn read_payload<T: std::any::Any + Send + Sync>(local: &str, xml: &str, value: T) -> Payload {
    Payload::from_read(crate::QName::recent(TOOL_NS, local), xml, Arc::new(value))
}

impl Call {
    /// This call as a payload that keeps it as its reading, when reading its text gives it back
    /// ([`reads_back`]): the pump then checks only its limits. Otherwise its text, for the pump
    /// to read and, if it must, refuse naming the fault.
    pub(crate) fn into_payload(self) -> Result<Payload, String> {
        let xml = self.to_xml();
        let id = self.id.as_deref().unwrap_or_default();
        if !reads_back(&xml, &[&self.tool, id], &self.args, "arg") {
            return Err(xml);
        }
        Ok(read_payload("call", &xml, self))
    }
}

impl Answer {
    /// [`Call::into_payload`] for an answer.
    pub(crate) fn into_payload(self) -> Result<Payload, String> {
        let xml = self.to_xml();
        let (local, fine) = match &self {
            Answer::Result(r) => {
                let call = r.call.as_deref().unwrap_or_default();
                (
                    "result",
                    reads_back(&xml, &[&r.tool, call], &r.fields, "field"),
                )
            }
            Answer::Error(e) => {
                let call = e.call.as_deref().unwrap_or_default();
                (
                    "error",
                    reads_back(&xml, &[&e.tool, call], &BTreeMap::new(), ""),
                )
            }
        };
        if !fine {
            return Err(xml);
        }
        Ok(read_payload(local, &xml, self))
    }
}

/// The attributes each message allows, in the order [`Attributes`] keeps them.
const CALL_ATTRIBUTES: &[&str] = &["tool", "id", "timeout-ms"];
const RESULT_ATTRIBUTES: &[&str] = &["tool", "call"];
const ERROR_ATTRIBUTES: &[&str] = &["tool", "call", "type", "retry"];

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
        Self::shared(payload).map(Arc::unwrap_or_clone)
    }

    /// Reads a call from a payload once: the pump reads every call it routes (zero trust), and
    /// the tool that receives the payload shares that reading instead of reading the bytes again.
    ///
    /// # Errors
    ///
    /// A [`WireError`] naming what does not fit the protocol.
    pub fn shared(payload: &Payload) -> Result<Arc<Self>, WireError> {
        payload.read_once(Self::parse_xml)
    }

    /// Reads a call from XML text.
    ///
    /// # Errors
    ///
    /// A [`WireError`] naming what does not fit the protocol.
    pub fn parse_xml(xml: &str) -> Result<Self, WireError> {
        Self::from_message(Message::read(xml, "call", CALL_ATTRIBUTES, "arg")?)
    }

    /// The call a read `<call>` holds.
    fn from_message(mut m: Message) -> Result<Self, WireError> {
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
        Self::shared(payload).map(|r| r.map(Arc::unwrap_or_clone))
    }

    /// Reads a result or an error once per payload, as [`Call::shared`] does: the pump's check
    /// reads it, the caller that receives the payload shares that reading.
    ///
    /// # Errors
    ///
    /// A [`WireError`] when it is a `result` or `error` of the protocol that does not fit it.
    pub fn shared(payload: &Payload) -> Option<Result<Arc<Self>, WireError>> {
        let q = payload.qname();
        if q.namespace() != TOOL_NS {
            return None;
        }
        let local = q.local();
        match local {
            "result" | "error" => Some(payload.read_once(|xml| Self::parse_xml(local, xml))),
            _ => None,
        }
    }

    /// Reads a `result` or an `error` (`local`) from XML text.
    fn parse_xml(local: &str, xml: &str) -> Result<Self, WireError> {
        if local == "result" {
            Self::from_message(Message::read(xml, "result", RESULT_ATTRIBUTES, "field")?)
        } else {
            Self::from_message(Message::read(xml, "error", ERROR_ATTRIBUTES, "")?)
        }
    }

    /// The answer a read `<result>` or `<error>` holds.
    fn from_message(mut m: Message) -> Result<Self, WireError> {
        if m.element == "result" {
            return Ok(Answer::Result(ToolResult {
                tool: m.required("tool")?,
                call: m.optional("call"),
                fields: m.items,
            }));
        }
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
    let mut out = String::with_capacity(160);
    for part in ["<", element, " xmlns=\"", TOOL_NS, "\" tool=\""] {
        out.push_str(part);
    }
    out.push_str(&escape(tool));
    out.push('"');
    if let Some(id) = id {
        for part in [" ", id_attr, "=\""] {
            out.push_str(part);
        }
        out.push_str(&escape(id));
        out.push('"');
    }
    out
}

/// Writes each named value as `<element name="…" type="…">text</element>` (the form of a
/// call's arguments and a result's fields; other protocols reuse it).
pub(crate) fn items(out: &mut String, element: &str, items: &BTreeMap<String, Value>) {
    for (name, value) in items {
        out.push('<');
        out.push_str(element);
        out.push_str(" name=\"");
        out.push_str(&escape(name.as_str()));
        out.push('"');
        match value {
            Value::Str(s) => {
                out.push('>');
                out.push_str(&escape(s.as_str()));
            }
            Value::Num(n) => {
                out.push_str(" type=\"number\">");
                write_number(out, *n);
            }
            Value::Bool(b) => {
                out.push_str(" type=\"boolean\">");
                out.push_str(if *b { "true" } else { "false" });
            }
            other => {
                out.push_str(" type=\"json\">");
                out.push_str(&escape(other.to_json().as_str()));
            }
        }
        out.push_str("</");
        out.push_str(element);
        out.push('>');
    }
}

/// A protocol message as read: its root's attributes, its items, its text.
#[derive(Debug, PartialEq)]
struct Message {
    element: &'static str,
    /// The root's attributes, by their place in the names the element allows.
    allowed: &'static [&'static str],
    attributes: Attributes,
    items: BTreeMap<String, Value>,
    text: String,
}

/// Attribute values by the place of their name in a list of allowed names (at most four:
/// `<error>`'s `tool`, `call`, `type`, `retry`).
type Attributes = [Option<String>; 4];

impl Message {
    fn required(&mut self, name: &str) -> Result<String, WireError> {
        self.optional(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| wire(format!("<{}> needs a {name}=\"…\" attribute", self.element)))
    }

    /// Takes the value of attribute `name` (one of the allowed names).
    fn optional(&mut self, name: &str) -> Option<String> {
        let at = self.allowed.iter().position(|a| *a == name)?;
        self.attributes[at].take()
    }

    /// Reads `<element attrs…>` with children `<item name type>text</item>` (or only text
    /// when `item` is empty).
    fn read(
        xml: &str,
        element: &'static str,
        allowed: &'static [&'static str],
        item: &'static str,
    ) -> Result<Message, WireError> {
        if let Some(read) = canonical::read(xml, element, allowed, item) {
            return read;
        }
        Self::read_general(xml, element, allowed, item)
    }

    /// [`Message::read`] for any form: an XML reader.
    fn read_general(
        xml: &str,
        element: &'static str,
        allowed: &'static [&'static str],
        item: &'static str,
    ) -> Result<Message, WireError> {
        let mut reader = Reader::from_str(xml);
        let mut m = Message {
            element,
            allowed,
            attributes: Attributes::default(),
            items: BTreeMap::new(),
            text: String::new(),
        };
        let mut open_item: Option<(String, ItemType)> = None;
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
                    1 if !item.is_empty() && e.local_name().as_ref() == item => {
                        let [name, ty, ..] = attributes(e, item, &["name", "type"])?;
                        let name = name.unwrap_or_default();
                        if let Some(e) = invalid_name(&name, item) {
                            return Err(e);
                        }
                        let ty = ItemType::of(&name, ty.as_deref(), item)?;
                        text.clear();
                        if empty {
                            m.close_item(name, ty, "", item)?;
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
                        m.close_item(name, ty, &text, item)?;
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
        ty: ItemType,
        text: &str,
        item: &str,
    ) -> Result<(), WireError> {
        use std::collections::btree_map::Entry;
        let value = ty.value(&name, text, item)?;
        match self.items.entry(name) {
            Entry::Occupied(e) => Err(wire(format!("<{item} name=\"{}\"> appears twice", e.key()))),
            Entry::Vacant(e) => {
                e.insert(value);
                Ok(())
            }
        }
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

/// The `type` of an item: how its text becomes a value.
#[derive(Debug, Clone, Copy)]
enum ItemType {
    String,
    Number,
    Boolean,
    Json,
}

impl ItemType {
    /// The type written `ty` (absent: string) on item `name`.
    fn of(name: &str, ty: Option<&str>, item: &str) -> Result<Self, WireError> {
        Ok(match ty {
            None | Some("string") => Self::String,
            Some("number") => Self::Number,
            Some("boolean") => Self::Boolean,
            Some("json") => Self::Json,
            Some(other) => {
                return Err(wire(format!(
                    "<{item} name=\"{name}\">: unknown type=\"{other}\", expected string, number, boolean or json"
                )));
            }
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Json => "json",
        }
    }

    /// The value of an item of this type with text `text`.
    fn value(self, name: &str, text: &str, item: &str) -> Result<Value, WireError> {
        let bad = |what: &str| {
            let ty = self.as_str();
            wire(format!("<{item} name=\"{name}\" type=\"{ty}\">: {what}"))
        };
        match self {
            Self::String => Ok(Value::Str(text.to_owned())),
            Self::Number => parse_number(text.trim())
                .map(Value::Num)
                .ok_or_else(|| bad(&format!("\"{}\" is not a number", text.trim()))),
            Self::Boolean => match text.trim() {
                "true" => Ok(Value::Bool(true)),
                "false" => Ok(Value::Bool(false)),
                other => Err(bad(&format!("\"{other}\" is not true or false"))),
            },
            Self::Json => Value::from_json(text).map_err(|e| bad(&e.to_string())),
        }
    }
}

/// The refusal of an item's `name`, if it is not 1-64 of a-z A-Z 0-9 _ -.
fn invalid_name(name: &str, item: &str) -> Option<WireError> {
    (!valid_name(name)).then(|| {
        wire(format!(
            "<{item}> needs a name=\"…\" of 1-64 of a-z A-Z 0-9 _ - (found \"{name}\")"
        ))
    })
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

/// The attributes of `e` by their place in `allowed` (at most four names).
fn attributes(
    e: &BytesStart<'_>,
    element: &str,
    allowed: &[&str],
) -> Result<Attributes, WireError> {
    let mut out = Attributes::default();
    // Duplicates were refused when the payload was parsed (every payload is, before anyone
    // reads it): no second check here.
    for a in e.attributes().with_checks(false) {
        let a = a.map_err(|e| wire(e.to_string()))?;
        let key: &str = a.key.as_ref();
        if key == "xmlns" || key.starts_with("xmlns:") {
            continue;
        }
        let Some(at) = allowed.iter().position(|a| *a == key) else {
            return Err(wire(format!(
                "unknown attribute {key}=\"…\" on <{element}>, expected {}",
                allowed.join(", ")
            )));
        };
        // Only a value with a reference or a whitespace character to normalize needs the work.
        let plain = !a.value.contains(['&', '\t', '\n', '\r']);
        let value = if plain {
            a.value.clone().into_owned()
        } else {
            a.normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .map_err(|e| wire(e.to_string()))?
                .into_owned()
        };
        out[at] = Some(value);
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

    /// The messages the writers write (`true`), then hand-made forms, faulty ones among them
    /// (`false`), each with its element.
    fn forms() -> Vec<(&'static str, String, bool)> {
        let ns = TOOL_NS;
        let values: Vec<Value> = vec![
            "plain".into(),
            "".into(),
            "x < y & \"z\" > 'w'".into(),
            "tab\tline\nreturn\r".into(),
            "two\nlines\twith a tab ]]> and >".into(),
            "ünïcødé ✓".into(),
            "  padded  ".into(),
            Value::Num("-12.500".parse().unwrap()),
            Value::Bool(false),
            Value::from_json(r#"{"k": [1, "<&>"], "n": null}"#).unwrap(),
        ];
        let mut written = Vec::new();
        for (i, v) in values.iter().enumerate() {
            let call = Call::new("t").id(format!("c-{i}")).arg("v", v.clone());
            written.push(("call", call.to_xml()));
            written.push(("result", call.result().field("v", v.clone()).to_xml()));
        }
        let call = Call::new("a\"b")
            .id("x&y")
            .arg("a", Value::Num("1.5".parse().unwrap()))
            .arg("b", "2");
        written.push(("call", call.to_xml()));
        written.push(("result", call.result().to_xml()));
        let error = call.error(ErrorType::Timeout, "took > 1s").retry(true);
        written.push(("error", error.to_xml()));
        written.push(("error", call.error(ErrorType::Failed, "").to_xml()));
        let mut timed = Call::new("t");
        timed.timeout_ms = Some(250);
        written.push(("call", timed.to_xml()));
        let forms = [
            format!(r#"<call xmlns="{ns}" tool="t" id="1"><arg name="a">1</arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"><arg name="a" type="number">x</arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"><arg name="a" type="date">1</arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"><arg name="">1</arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"><arg name="a b">1</arg></call>"#),
            format!(
                r#"<call xmlns="{ns}" tool="t"><arg name="a">1</arg><arg name="a">2</arg></call>"#
            ),
            format!(r#"<call xmlns="{ns}" tool="t"><arg name="a" type="json">{{</arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"><arg name="a" type="boolean">yes</arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool=""></call>"#),
            format!(r#"<call xmlns="{ns}"></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t" timeout-ms="soon"></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t" x="1"></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t" tool="u"></call>"#),
            format!(r#"<call xmlns="{ns}" tool='t'></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t" ><arg name="a">1</arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"> <arg name="a">1</arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"><arg name="a">1</arg></call> "#),
            format!(r#"<call xmlns="{ns}" tool="t"><arg name="a">&lt;</arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"><arg name="a"><![CDATA[<]]></arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"><arg name="a"><!-- c -->1</arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"><arg name="a"><b/></arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"><arg type="number" name="a">1</arg></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"><arg name="a"/></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"><param name="a">1</param></call>"#),
            format!(r#"<call xmlns="{ns}" tool="t">text</call>"#),
            format!(r#"<call xmlns="{ns}" tool="t"/>"#),
            format!(r#"<t:call xmlns:t="{ns}" tool="t"></t:call>"#),
            format!(r#"<call xmlns="{ns}" xmlns:p="urn:p" tool="t"></call>"#),
            format!(r#"<call xmlns="{ns}" tool="a&amp;b"></call>"#),
            format!(r#"<call xmlns="{ns}" tool="a	b"></call>"#),
            format!(r#"<error xmlns="{ns}" tool="t" type="failed">a &amp; b</error>"#),
            format!(r#"<error xmlns="{ns}" tool="t" type="odd">x</error>"#),
            format!(r#"<error xmlns="{ns}" tool="t" type="failed" retry="maybe">x</error>"#),
            format!(r#"<error xmlns="{ns}" tool="t" type="failed"><b/></error>"#),
        ];
        let hand = forms.into_iter().map(|x| {
            let element = if x.contains("<error") {
                "error"
            } else {
                "call"
            };
            (element, x, false)
        });
        let written = written.into_iter().map(|(e, x)| (e, x, true));
        written.chain(hand).collect()
    }

    /// Every form the written-form reader accepts reads as the general reader reads it.
    #[test]
    fn the_written_form_reads_as_the_general_reader_reads_it() {
        // Reads `xml` both ways; whether the short way took it.
        let both = |element: &'static str, xml: &str| {
            let (allowed, item) = match element {
                "call" => (CALL_ATTRIBUTES, "arg"),
                "result" => (RESULT_ATTRIBUTES, "field"),
                _ => (ERROR_ATTRIBUTES, ""),
            };
            let general = Message::read_general(xml, element, allowed, item);
            let short = canonical::read(xml, element, allowed, item);
            if let Some(read) = &short {
                assert_eq!(*read, general, "{xml}");
            }
            short.is_some()
        };
        let mut short = 0;
        for (element, xml, written) in forms() {
            if written {
                // Everything the writers write takes the short way, unless it holds a
                // reference (an escaped character) or a carriage return.
                assert_eq!(both(element, &xml), !xml.contains(['&', '\r']), "{xml}");
            } else if both(element, &xml) {
                short += 1;
            }
        }
        // Of the hand-made forms, the faults of items do too; the rest go the general way.
        assert!(short >= 8, "{short}");
    }

    /// A listener's output taken the short way is the payload the parse makes, with the
    /// reading the pump's protocol check makes; a fault, or anything else, goes the parse's way.
    #[test]
    fn a_written_payload_is_what_the_parse_and_the_check_make_of_it() {
        let limits = crate::Limits::default();
        let mut short = 0;
        for (element, xml, written) in forms() {
            let Some(payload) = written_payload(&xml, &limits) else {
                // Declined: what was written the short way could read went the general way
                // only for a reference, a carriage return or a `]]>`.
                let plain = !xml.contains(['&', '\r']) && !xml.contains("]]>");
                assert!(!(written && plain), "{xml}");
                continue;
            };
            short += 1;
            let parsed = Payload::parse(&xml, &limits).expect("the parse accepts it too");
            assert_eq!(payload, parsed, "{xml}");
            assert!(parsed.qname().is(TOOL_NS, element), "{xml}");
            assert!(parsed.declares_default_namespace(), "{xml}");
            assert!(!parsed.carries_reserved_element(), "{xml}");
            if element == "call" {
                let kept = Call::shared(&payload).expect("kept");
                assert_eq!(*kept, Call::parse_xml(&xml).unwrap(), "{xml}");
            } else {
                let kept = Answer::shared(&payload).unwrap().expect("kept");
                assert_eq!(*kept, Answer::parse_xml(element, &xml).unwrap(), "{xml}");
            }
        }
        assert!(short >= 10, "{short}");
        let call = Call::new("t").arg("v", "1").to_xml();
        assert!(written_payload(&call, &limits).is_some());
        // Past a limit, with a forbidden character, or in another form: the general way.
        let declined = [
            (
                call.clone(),
                crate::Limits {
                    max_bytes: call.len() - 1,
                    ..limits
                },
            ),
            (
                call.clone(),
                crate::Limits {
                    max_depth: 1,
                    ..limits
                },
            ),
            (
                call.clone(),
                crate::Limits {
                    max_attributes: 3,
                    ..limits
                },
            ),
            (call.replace("1</arg>", "1\u{1}</arg>"), limits),
            (format!(" {call}"), limits),
            (call.replace("<call ", "<cal "), limits),
            (call.replace(TOOL_NS, "urn:other"), limits),
        ];
        for (xml, limits) in declined {
            assert!(written_payload(&xml, &limits).is_none(), "{xml}");
        }
    }

    /// Every one-character change of every form (inserted, replaced, removed, at every place)
    /// that the short way takes, the parse takes too, to the same payload and reading.
    #[test]
    fn no_small_change_makes_the_short_way_take_what_the_parse_refuses() {
        let limits = crate::Limits::default();
        let marks = [
            '<', '>', '"', '\'', '&', ' ', '\n', '=', '/', ':', ']', '\u{1}', 'x',
        ];
        let (mut tried, mut short) = (0usize, 0usize);
        for (element, xml, _) in forms() {
            let places: Vec<usize> = (0..=xml.len())
                .filter(|&i| xml.is_char_boundary(i))
                .collect();
            for (n, &i) in places.iter().enumerate() {
                let next = places.get(n + 1).copied();
                let mut changed: Vec<String> = marks
                    .iter()
                    .map(|m| format!("{}{m}{}", &xml[..i], &xml[i..]))
                    .collect();
                if let Some(j) = next {
                    changed.push(format!("{}{}", &xml[..i], &xml[j..]));
                    changed.extend(
                        marks
                            .iter()
                            .map(|m| format!("{}{m}{}", &xml[..i], &xml[j..])),
                    );
                }
                for text in changed {
                    tried += 1;
                    let Some(payload) = written_payload(&text, &limits) else {
                        continue;
                    };
                    short += 1;
                    let parsed = Payload::parse(&text, &limits)
                        .unwrap_or_else(|e| panic!("the parse refuses {text}: {e}"));
                    assert_eq!(payload, parsed, "{text}");
                    assert!(parsed.qname().is(TOOL_NS, element), "{text}");
                    assert!(!parsed.carries_reserved_element(), "{text}");
                    if element == "call" {
                        let fresh = Call::parse_xml(&text).unwrap();
                        assert_eq!(*Call::shared(&payload).unwrap(), fresh, "{text}");
                    } else {
                        let fresh = Answer::parse_xml(element, &text).unwrap();
                        assert_eq!(*Answer::shared(&payload).unwrap().unwrap(), fresh, "{text}");
                    }
                }
            }
        }
        assert!(
            tried > 50_000 && short > 1_000,
            "{tried} tried, {short} short"
        );
    }

    /// What the crate writes from typed values and keeps as the payload's reading is what a
    /// reading of the text gives, and the parse takes the text to the same payload; what would
    /// not read back (a carriage return, a character XML forbids, a tab in an attribute, an
    /// invalid name) goes as text.
    #[test]
    fn what_the_crate_writes_and_keeps_reads_back_to_the_same_values() {
        let limits = crate::Limits::default();
        let values: Vec<Value> = vec![
            "plain".into(),
            "".into(),
            "x < y & \"z\" > 'w' ]]>".into(),
            "two\nlines\twith a tab".into(),
            "ünïcødé ✓".into(),
            "  padded  ".into(),
            Value::Num("-12.500".parse().unwrap()),
            Value::Num("0.001".parse().unwrap()),
            Value::Bool(false),
            Value::from_json(r#"{"k": [1, "<&>"], "n": null, "d": 0.10}"#).unwrap(),
            "carriage\rreturn".into(),
            "control \u{1}".into(),
        ];
        let mut kept = 0;
        for v in &values {
            for (tool, id, name) in [
                ("t", "c-1", "v"),
                ("a\"b", "x&y", "v_2"),
                ("t", "a\tb", "v"),
                ("t", "1", "a b"),
            ] {
                let call = Call::new(tool).id(id).arg(name, v.clone());
                let result = call.result().field(name, v.clone());
                let error = call.error(ErrorType::Failed, v.to_string());
                let plain = |text: &str| !text.contains(['\r', '\u{1}']);
                let expect_kept = plain(&v.to_string()) && !id.contains('\t') && name != "a b";
                match call.clone().into_payload() {
                    Ok(p) => {
                        kept += 1;
                        assert_eq!(Payload::parse(p.as_str(), &limits).unwrap(), p);
                        assert_eq!(Call::parse_xml(p.as_str()).unwrap(), call);
                        assert_eq!(*Call::shared(&p).unwrap(), call);
                    }
                    Err(xml) => {
                        assert_eq!(xml, call.to_xml());
                        assert!(!expect_kept, "{xml}");
                    }
                }
                for answer in [Answer::Result(result), Answer::Error(error)] {
                    let local = match &answer {
                        Answer::Result(_) => "result",
                        Answer::Error(_) => "error",
                    };
                    match answer.clone().into_payload() {
                        Ok(p) => {
                            kept += 1;
                            assert_eq!(Payload::parse(p.as_str(), &limits).unwrap(), p);
                            assert_eq!(Answer::parse_xml(local, p.as_str()).unwrap(), answer);
                            assert_eq!(*Answer::shared(&p).unwrap().unwrap(), answer);
                        }
                        Err(xml) => assert_eq!(xml, answer.to_xml()),
                    }
                }
            }
        }
        assert!(kept > 60, "{kept}");
    }

    #[test]
    fn a_payload_is_read_once_and_shared_by_its_clones() {
        let limits = crate::Limits::default();
        let xml = Call::new("t").id("1").arg("v", true).to_xml();
        let payload = Payload::parse(&xml, &limits).unwrap();
        let first = Call::shared(&payload).unwrap();
        // What the pump checked is what the receiver reads: the same reading, not a new one.
        assert!(Arc::ptr_eq(
            &first,
            &Call::shared(&payload.clone()).unwrap()
        ));
        assert_eq!(Call::parse(&payload).unwrap(), *first);
        // A payload parsed anew from the same text reads its own text, and is equal.
        let fresh = Payload::parse(&xml, &limits).unwrap();
        assert_eq!(fresh, payload);
        assert!(!Arc::ptr_eq(&first, &Call::shared(&fresh).unwrap()));
        // Another type asked of the same payload is read, not confused with the kept one.
        assert!(Answer::shared(&payload).is_none());
    }

    #[test]
    fn a_refused_reading_is_not_kept() {
        let xml = format!(r#"<call xmlns="{TOOL_NS}" tool="t" x="1"/>"#);
        let payload = Payload::parse(&xml, &crate::Limits::default()).unwrap();
        for _ in 0..2 {
            let err = Call::shared(&payload).unwrap_err().0;
            assert!(err.contains("unknown attribute x="), "{err}");
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
