//! The `ask` tool: how a process (`USE ask`) or an LLM agent (from the tool's usage in its
//! prompt) puts a question to a person. The pump holds every call to it (`inbox/hold.rs`); its
//! handler never runs.

use async_trait::async_trait;
use serde_json::json;

use crate::listener::{Context, Registration};
use crate::tool::{self, Call, ErrorType, Signature, Tool, ToolError, ToolResult};

/// The `ask` tool's name.
pub const ASK_TOOL: &str = "ask";

/// The `ask` tool, to register beside the listeners that may ask: a call
/// `<call tool="ask"><arg name="question">…</arg></call>` waits for a person's answer, which
/// comes back as `<result tool="ask"><field name="answer">…</field>…</result>`.
///
/// # Example
///
/// ```
/// let registration = agentpump::pump::ask_tool();
/// assert_eq!(registration.name(), "ask");
/// ```
pub fn ask_tool() -> Registration {
    tool::register(Ask)
}

#[derive(Debug)]
struct Ask;

#[async_trait]
impl Tool for Ask {
    fn signature(&self) -> Signature {
        Signature::new(
            ASK_TOOL,
            "asks a person and waits for the answer (the thread takes no turns meanwhile)",
        )
        .arg("question", "string", "the question, for a person", true)
        .arg_schema(
            "choices",
            json!({"type": "array", "items": {"type": "string"}, "description": "the answers allowed"}),
            false,
        )
        .arg_schema(
            "schema",
            json!({"type": "object", "description": "a JSON Schema the answer must fit"}),
            false,
        )
        .arg("default", "string", "the answer if nobody answers in time", false)
        .arg(
            "timeout_seconds",
            "number",
            "how long to wait before the default applies",
            false,
        )
        .field("answer", "string", "the person's answer (or the default)")
        .field("by", "string", "who answered (`timeout` when the default applied)")
    }

    async fn call(&self, call: &Call, _cx: &mut Context) -> Result<ToolResult, ToolError> {
        Err(call.error(
            ErrorType::Unavailable,
            "ask is answered through the pump's inbox; this call was not held",
        ))
    }
}

/// The `ask` tool's signature, to check a held call against.
pub(crate) fn signature() -> Signature {
    Ask.signature()
}
