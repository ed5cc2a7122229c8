//! The payloads of a task thread (`urn:agentpump:tasks:v1`) and the tool protocol
//! (`urn:agentpump:tool:v1`, docs/tools.md) the verifier speaks to the `command` tool.
//!
//! A task thread: the orchestrator posts `<task>` to the coordinator; the coordinator sends
//! `<work>` to the worker, which replies `<delta>`; the coordinator sends `<verify>` to the
//! verifier, which calls the `command` tool and replies `<verdict>`; the coordinator sends the
//! `<outcome>` to the client. Structured content travels as JSON text inside the element.

use std::collections::BTreeMap;

use quick_xml::escape::escape;
use quick_xml::events::Event;
use serde::{Deserialize, Serialize};

use super::{Delta, Task};
pub use crate::tool::TOOL_NS;
use crate::tool::{Answer, Call};
use crate::value::Value;

/// Why a task-thread payload (or a tool answer read by the task listeners) could not be read:
/// the text names what is wrong, for the `huh` or the failure a listener reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PayloadError(pub String);

impl From<String> for PayloadError {
    fn from(message: String) -> Self {
        Self(message)
    }
}

/// The name the orchestrator calls the command tool by.
const COMMAND_TOOL: &str = "command";

/// The namespace of task-thread payloads.
pub const TASKS_NS: &str = "urn:agentpump:tasks:v1";

/// What the orchestrator posts into a new task thread, and what the coordinator forwards to the
/// worker as `<work>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Assignment {
    /// The task file.
    pub task: Task,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// Why the previous attempt failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
}

/// What the coordinator asks the verifier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verify {
    /// The shell command.
    pub command: String,
    /// The goal's criterion ids the exit code is evidence for.
    pub criteria: Vec<String>,
}

/// The verifier's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    /// The command exited 0.
    pub passed: bool,
    /// Its exit code, when it ran.
    pub exit_code: Option<i64>,
    /// The tail of its output, or the tool's error.
    pub tail: String,
}

/// How a task thread ended, sent to the client by the coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The task.
    pub task: String,
    /// Verified (a delta, and the verification command exited 0).
    pub completed: bool,
    /// A sentence for the ledger.
    pub summary: String,
    /// The worker's delta, when it gave one.
    pub delta: Option<Delta>,
}

/// `<name xmlns="urn:agentpump:tasks:v1" task="…">json</name>`.
pub fn payload(name: &str, task: &str, body: &impl Serialize) -> String {
    let json = serde_json::to_string(body).expect("serializes");
    format!(
        "<{name} xmlns=\"{TASKS_NS}\" task=\"{}\">{}</{name}>",
        escape(task),
        escape(json.as_str())
    )
}

/// The JSON inside a tasks payload, decoded.
///
/// # Errors
///
/// The payload is not XML with JSON text of that shape; the message says what.
pub fn decode<T: serde::de::DeserializeOwned>(xml: &str) -> Result<T, PayloadError> {
    let (_, _, text) = element(xml)?;
    serde_json::from_str(&text).map_err(|e| PayloadError(format!("not the expected JSON: {e}")))
}

/// The call that runs `command` with `sh -c` in `root`; `positional` become `$1`, `$2`, ….
pub fn command_call(id: &str, root: &str, command: &str, positional: &[&str]) -> String {
    let script = format!("cd {} && {command}", shell_quote(root));
    let mut args = vec![Value::from("-c"), Value::from(script), Value::from("sh")];
    args.extend(positional.iter().map(|p| Value::from(*p)));
    Call::new(COMMAND_TOOL)
        .id(id)
        .arg("program", "sh")
        .arg("args", Value::List(args))
        .to_xml()
}

/// `'…'` with single quotes inside escaped: a path as one shell word.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// What a tool answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAnswer {
    /// `<result>`: its fields' text by name.
    Result(BTreeMap<String, String>),
    /// `<error>`: its type and message.
    Error {
        /// `invalid-argument`, `failed`, `timeout`, `not-allowed`, `unavailable`.
        kind: String,
        /// The message.
        message: String,
    },
}

/// Reads a tool's `<result>` or `<error>`.
///
/// # Errors
///
/// Anything else; the message says what was found.
pub fn tool_answer(xml: &str) -> Result<ToolAnswer, PayloadError> {
    let payload =
        crate::Payload::parse(xml, &crate::Limits::default()).map_err(|e| e.to_string())?;
    match Answer::parse(&payload) {
        Some(Ok(Answer::Result(r))) => Ok(ToolAnswer::Result(
            r.fields
                .into_iter()
                .map(|(k, v)| (k, v.to_string()))
                .collect(),
        )),
        Some(Ok(Answer::Error(e))) => Ok(ToolAnswer::Error {
            kind: e.kind.as_str().to_owned(),
            message: e.message,
        }),
        Some(Err(e)) => Err(PayloadError(e.to_string())),
        None => Err(PayloadError(format!(
            "expected a tool <result> or <error>, got {}",
            payload.qname()
        ))),
    }
}

type Parsed = (String, BTreeMap<String, String>, String);

/// The root element's local name, its attributes and all its text (children's included).
fn element(xml: &str) -> Result<Parsed, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut name = None;
    let mut attrs = BTreeMap::new();
    let mut text = String::new();
    loop {
        match reader.read_event().map_err(|e| e.to_string())? {
            Event::Start(e) | Event::Empty(e) if name.is_none() => {
                name = Some(e.local_name().as_ref().to_owned());
                for a in e.attributes() {
                    let a = a.map_err(|e| e.to_string())?;
                    let value = a
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .map_err(|e| e.to_string())?;
                    let key = a.key.local_name().as_ref().to_owned();
                    attrs.insert(key, value.into_owned());
                }
            }
            Event::Text(t) => text.push_str(&t),
            Event::CData(t) => text.push_str(&t),
            Event::GeneralRef(r) => text.push(reference(&r)?),
            Event::Eof => break,
            _ => {}
        }
    }
    Ok((name.ok_or("no element")?, attrs, text))
}

/// The text of the `<child name="…">` elements (a result's `field`s, a call's `arg`s), by name.
pub fn children(xml: &str, child: &str) -> Result<BTreeMap<String, String>, PayloadError> {
    children_of(xml, child).map_err(PayloadError)
}

fn children_of(xml: &str, child: &str) -> Result<BTreeMap<String, String>, String> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut out = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    loop {
        match reader.read_event().map_err(|e| e.to_string())? {
            Event::Start(e) if e.local_name().as_ref() == child => {
                let name = e
                    .try_get_attribute("name")
                    .map_err(|e| e.to_string())?
                    .ok_or("a child element without a name")?;
                let name = name
                    .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .map_err(|e| e.to_string())?;
                current = Some((name.into_owned(), String::new()));
            }
            Event::Empty(e) if e.local_name().as_ref() == child => {
                if let Some(name) = e.try_get_attribute("name").map_err(|e| e.to_string())? {
                    let name = name
                        .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                        .map_err(|e| e.to_string())?;
                    out.insert(name.into_owned(), String::new());
                }
            }
            Event::Text(t) => {
                if let Some((_, v)) = current.as_mut() {
                    v.push_str(&t);
                }
            }
            Event::CData(t) => {
                if let Some((_, v)) = current.as_mut() {
                    v.push_str(&t);
                }
            }
            Event::GeneralRef(r) => {
                if let Some((_, v)) = current.as_mut() {
                    v.push(reference(&r)?);
                }
            }
            Event::End(e) if e.local_name().as_ref() == child => {
                if let Some((k, v)) = current.take() {
                    out.insert(k, v);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}

fn reference(r: &quick_xml::events::BytesRef<'_>) -> Result<char, String> {
    if let Ok(Some(c)) = r.resolve_char_ref() {
        return Ok(c);
    }
    match &**r {
        "amp" => Ok('&'),
        "lt" => Ok('<'),
        "gt" => Ok('>'),
        "quot" => Ok('"'),
        "apos" => Ok('\''),
        other => Err(format!("unknown entity &{other};")),
    }
}

/// The attributes of the root element of `xml`.
///
/// # Errors
///
/// `xml` does not parse.
pub fn attributes(xml: &str) -> Result<BTreeMap<String, String>, PayloadError> {
    element(xml)
        .map(|(_, attrs, _)| attrs)
        .map_err(PayloadError)
}

/// The last `max` characters of `text` (whole characters), with `…` when cut.
pub fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.trim_end().to_owned();
    }
    let cut: String = text.chars().skip(count - max).collect();
    format!("…{}", cut.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_result_fields() {
        let xml = r#"<result xmlns="urn:agentpump:tool:v1" tool="command" call="c1"><field name="exit_code" type="number">0</field><field name="stdout">a &amp; b&#10;</field><field name="stderr"/></result>"#;
        let ToolAnswer::Result(f) = tool_answer(xml).unwrap() else {
            panic!()
        };
        assert_eq!(f["exit_code"], "0");
        assert_eq!(f["stdout"], "a & b\n");
        assert_eq!(f["stderr"], "");
    }

    #[test]
    fn tool_error() {
        let xml = r#"<error xmlns="urn:agentpump:tool:v1" tool="command" call="c1" type="timeout" retry="false">took too long</error>"#;
        assert_eq!(
            tool_answer(xml).unwrap(),
            ToolAnswer::Error {
                kind: "timeout".into(),
                message: "took too long".into()
            }
        );
    }

    #[test]
    fn payload_round_trip() {
        let v = Verdict {
            passed: false,
            exit_code: Some(1),
            tail: "<oops> & \"quotes\"".into(),
        };
        let xml = payload("verdict", "T-001", &v);
        assert_eq!(decode::<Verdict>(&xml).unwrap(), v);
        assert_eq!(attributes(&xml).unwrap()["task"], "T-001");
    }
}
