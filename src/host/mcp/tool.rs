//! [`McpTool`]: one tool of an MCP server as a listener of the pump, speaking the tool
//! protocol: a `<call>` is checked against the tool's signature, sent as `tools/call`, and
//! answered with `<result>` or `<error>`; a server that is down or fails during the call is
//! the pump's `system-error code="upstream-failed"`.

use std::sync::{Arc, RwLock};

use async_trait::async_trait;

use super::connection::{CallFailure, Connection};
use super::{content, schema};
use crate::tool::{self, Answer, Call, ErrorType, Signature, ToolError, ToolResult};
use crate::{Context, Delivery, Listener, ListenerError, Registration, Role};

/// Bytes kept for the envelope around an answer when its size is checked against the
/// organism's `max_bytes`.
const ENVELOPE_ROOM: usize = 1024;

/// One MCP tool, registered as `server.tool`.
#[derive(Debug)]
pub struct McpTool {
    connection: Arc<Connection>,
    /// The tool's name on the server.
    tool: String,
    /// The signature, and the input schema it was made from (listed again after a
    /// `list_changed`, the schema may differ).
    signature: RwLock<(Arc<rmcp::model::JsonObject>, Signature)>,
    /// The largest answer the pump takes, in bytes.
    max_bytes: usize,
}

impl McpTool {
    /// `tool` of `connection`, with the signature made from its schema.
    pub fn new(
        connection: Arc<Connection>,
        tool: &rmcp::model::Tool,
        signature: Signature,
        max_bytes: usize,
    ) -> Self {
        Self {
            connection,
            tool: tool.name.to_string(),
            signature: RwLock::new((Arc::clone(&tool.input_schema), signature)),
            max_bytes,
        }
    }

    /// The listener's registration: named by its signature, the tool role, accepting calls,
    /// held to the server's timeout.
    pub fn registration(self) -> Registration {
        let signature = self.current_signature();
        let timeout = self.connection.config().timeout;
        let example = signature.example_call().to_xml();
        Registration::new(&signature.name, self)
            .accepts(tool::call_root())
            .role(Role::Tool)
            .description(signature.description)
            .example(example)
            .timeout(timeout)
    }

    fn current_signature(&self) -> Signature {
        self.signature
            .read()
            .map(|s| s.1.clone())
            .unwrap_or_else(|e| e.into_inner().1.clone())
    }

    /// The signature of the tool as the server lists it now: `Ok(None)` when it no longer
    /// lists it.
    fn signature_now(&self) -> Result<Option<Signature>, String> {
        let Some(listed) = self.connection.tool(&self.tool) else {
            return Ok(None);
        };
        if let Ok(cached) = self.signature.read()
            && Arc::ptr_eq(&cached.0, &listed.input_schema)
        {
            return Ok(Some(cached.1.clone()));
        }
        let fresh =
            schema::signature(self.connection.name(), &listed).map_err(|e| e.to_string())?;
        if let Ok(mut cached) = self.signature.write() {
            *cached = (Arc::clone(&listed.input_schema), fresh.clone());
        }
        Ok(Some(fresh))
    }

    /// The answer to `call`, or an upstream failure.
    async fn outcome(
        &self,
        call: &Call,
        me: &str,
    ) -> Result<Result<ToolResult, ToolError>, String> {
        if call.tool != me {
            let message = format!("this is tool `{me}`; the call names `{}`", call.tool);
            return Ok(Err(call.error(ErrorType::InvalidArgument, message)));
        }
        let signature = match self.signature_now() {
            Ok(Some(s)) => s,
            Ok(None) => {
                let message = format!(
                    "MCP server `{}` no longer lists tool `{}`",
                    self.connection.name(),
                    self.tool
                );
                return Ok(Err(call.error(ErrorType::Unavailable, message)));
            }
            Err(why) => return Ok(Err(call.error(ErrorType::Unavailable, why))),
        };
        if let Err(e) = signature.check(call) {
            return Ok(Err(e));
        }
        let arguments = match content::arguments(call) {
            Ok(a) => a,
            Err(e) => return Ok(Err(e)),
        };
        match self.connection.call(&self.tool, arguments).await {
            Ok(answer) => Ok(self.fit(call, content::result(call, &answer))),
            Err(CallFailure::Rpc(e)) => Ok(Err(content::rpc_error(call, &e))),
            Err(CallFailure::Upstream(why)) => Err(why),
        }
    }

    /// `outcome`, or a `failed` error naming the size when the answer would be over the
    /// organism's `max_bytes`.
    fn fit(
        &self,
        call: &Call,
        outcome: Result<ToolResult, ToolError>,
    ) -> Result<ToolResult, ToolError> {
        let result = outcome?;
        let limit = self.max_bytes.saturating_sub(ENVELOPE_ROOM);
        let size = Answer::Result(result.clone()).to_xml().len();
        if size > limit {
            return Err(call.error(
                ErrorType::Failed,
                format!(
                    "the answer of {size} bytes is over the {limit} bytes a message may carry ([limits] max_bytes less {ENVELOPE_ROOM} for the envelope)"
                ),
            ));
        }
        Ok(result)
    }
}

#[async_trait]
impl Listener for McpTool {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        if *msg.qname() != tool::call_root() {
            return Err(ListenerError::InvalidPayload(format!(
                "{} is not a tool call: expected {}",
                msg.qname(),
                tool::call_root()
            )));
        }
        let call = Call::shared(msg.payload()).map_err(|e| ListenerError::InvalidPayload(e.0))?;
        let me = cx.me().to_owned();
        let outcome = self
            .outcome(&call, &me)
            .await
            .map_err(ListenerError::Upstream)?;
        tool::reply(&call, outcome, cx);
        Ok(())
    }
}
