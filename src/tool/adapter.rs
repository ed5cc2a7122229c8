//! [`Tool`]: a tool written in Rust, and the [`Adapter`] that makes it a [`Listener`] speaking
//! the tool protocol.

use async_trait::async_trait;

use super::{Answer, Call, ErrorType, Signature, TOOL_NS, ToolError, ToolResult};
use crate::{Context, Delivery, Listener, ListenerError, QName, Registration, Role};

/// A tool: a signature and a call. The [`Adapter`] does the protocol around it — reading the
/// `<call>`, checking its arguments against the signature, writing the answer with the call's
/// id — so `call` only does the work.
///
/// # Example
///
/// ```
/// use agentpump::tool::{self, Call, Signature, Tool, ToolError, ToolResult};
/// use agentpump::{Context, async_trait};
///
/// struct Greet;
///
/// #[async_trait]
/// impl Tool for Greet {
///     fn signature(&self) -> Signature {
///         Signature::new("greet", "says hello")
///             .arg("name", "string", "who to greet", true)
///             .field("text", "string", "the greeting")
///     }
///
///     async fn call(&self, call: &Call, _cx: &mut Context) -> Result<ToolResult, ToolError> {
///         let name = call.args["name"].to_string();
///         Ok(call.result().field("text", format!("hello, {name}")))
///     }
/// }
///
/// let registration = tool::register(Greet);
/// assert_eq!(registration.name(), "greet");
/// ```
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The tool's name, description, arguments and result.
    fn signature(&self) -> Signature;

    /// Does the work of one call, whose arguments already fit the signature.
    ///
    /// # Errors
    ///
    /// A [`ToolError`] for the caller (make it with [`Call::error`]).
    async fn call(&self, call: &Call, cx: &mut Context) -> Result<ToolResult, ToolError>;
}

/// A [`Tool`] as a [`Listener`]: answers each `<call>` with a `<result>` or an `<error>`.
#[derive(Debug)]
pub struct Adapter<T> {
    tool: T,
    signature: Signature,
}

impl<T: Tool> Adapter<T> {
    /// Wraps `tool`, reading its signature once.
    pub fn new(tool: T) -> Self {
        let signature = tool.signature();
        Self { tool, signature }
    }

    /// The tool's signature.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }
}

#[async_trait]
impl<T: Tool> Listener for Adapter<T> {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        answer(&self.tool, &self.signature, msg, cx).await
    }

    fn answers_call_timeouts(&self) -> bool {
        true
    }
}

/// The root every tool accepts: `{urn:agentpump:tool:v1}call`.
pub fn call_root() -> QName {
    QName::new(TOOL_NS, "call")
}

/// Registers `tool` under its signature's name, with [`Role::Tool`], accepting
/// [`call_root`], described by its signature. Chain [`Registration`]'s methods for the rest
/// (`.timeout(…)`, `.peers(…)`).
///
/// # Example
///
/// See [`Tool`].
pub fn register(tool: impl Tool) -> Registration {
    let adapter = Adapter::new(tool);
    let name = adapter.signature.name.clone();
    let description = adapter.signature.description.clone();
    let example = adapter.signature.example_call().to_xml();
    Registration::new(name, adapter)
        .accepts(call_root())
        .role(Role::Tool)
        .description(description)
        .example(example)
}

/// Answers one delivery for `tool`, as [`Adapter`] does: for a listener that speaks the tool
/// protocol besides roots of its own (the calculator).
///
/// System notices are ignored; a call that names another tool or does not fit the signature is
/// answered with `invalid-argument`, without calling the tool.
///
/// # Errors
///
/// [`ListenerError::InvalidPayload`] when the delivery is not a well-formed `<call>` (the pump
/// refuses those before delivery; this is the defence in depth).
pub async fn answer<T: Tool + ?Sized>(
    tool: &T,
    signature: &Signature,
    msg: &Delivery,
    cx: &mut Context,
) -> Result<(), ListenerError> {
    if msg.is_system() {
        return Ok(());
    }
    if *msg.qname() != call_root() {
        return Err(ListenerError::InvalidPayload(format!(
            "{} is not a tool call: expected {}",
            msg.qname(),
            call_root()
        )));
    }
    // The pump's reading of the call, shared: no second read, no copy of the arguments.
    let call = Call::shared(msg.payload()).map_err(|e| ListenerError::InvalidPayload(e.0))?;
    let outcome = if call.tool != cx.me() {
        let message = format!("this is tool `{}`; the call names `{}`", cx.me(), call.tool);
        Err(call.error(ErrorType::InvalidArgument, message))
    } else if let Err(e) = signature.check(&call) {
        Err(e)
    } else if let Some(ms) = call.timeout_ms {
        // The caller waits `timeout-ms` (a process's USE `timeout_ms`): past it, `timeout`.
        let limit = std::time::Duration::from_millis(ms);
        match tokio::time::timeout(limit, tool.call(&call, cx)).await {
            Ok(outcome) => outcome,
            Err(_) => Err(call
                .error(ErrorType::Timeout, format!("no answer within {ms} ms"))
                .retry(true)),
        }
    } else {
        tool.call(&call, cx).await
    };
    reply(&call, outcome, cx);
    Ok(())
}

/// Replies to `call` with `outcome`, stamped with the call's tool and id: what [`answer`] does
/// after the tool ran, for a listener that calls its tool itself (an MCP server's tool, whose
/// upstream failures are the pump's `system-error`, not an answer).
pub(crate) fn reply(call: &Call, outcome: Result<ToolResult, ToolError>, cx: &mut Context) {
    let answer = match outcome {
        Ok(result) => Answer::Result(ToolResult {
            tool: call.tool.clone(),
            call: call.id.clone(),
            ..result
        }),
        Err(error) => Answer::Error(ToolError {
            tool: call.tool.clone(),
            call: call.id.clone(),
            ..error
        }),
    };
    // Written from typed values: the caller shares this reading; what would not read back
    // goes as text, for the pump to check.
    match answer.into_payload() {
        Ok(payload) => cx.reply_read(payload),
        Err(xml) => cx.reply(xml),
    }
}
