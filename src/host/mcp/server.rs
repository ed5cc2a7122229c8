//! [`McpServer`]: the host as an MCP server, a thin face over what it serves ([`Served`]: one
//! pump, or every partition through a host's front): tools to post into a thread (optionally
//! waiting for the answer), list threads, read a thread's history a page at a time, read its
//! halting report, stop and resume; resources for thread histories and the organism's
//! listeners. Served over stdio (`agentpump mcp`) and Streamable HTTP (`/mcp` on `agentpump
//! run`, behind the API's token).

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    ServerCapabilities,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value as Json, json};

use super::served::{OnePump, Served};
use crate::governor::Budget;
use crate::{PumpHandle, ThreadId};

/// The most records one `history` call returns.
pub const MAX_PAGE: usize = 500;
/// Records per `history` page when the call does not say.
pub const DEFAULT_PAGE: usize = 50;
/// The longest `wait_ms` a `post` may ask (10 minutes).
pub const MAX_WAIT_MS: u64 = 600_000;

/// The organism's listeners as the `agentpump://listeners` resource shows them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ListenerDoc {
    /// Its name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// Its role (`tool`, `agent`, …).
    pub role: String,
    /// The roots it accepts, in Clark notation.
    pub accepts: Vec<String>,
}

impl ListenerDoc {
    /// How `r` is shown.
    pub fn of(r: &crate::Registration) -> Self {
        Self {
            name: r.name().to_owned(),
            description: r.about().to_owned(),
            role: r.listener_role().as_str().to_owned(),
            accepts: r.roots().iter().map(ToString::to_string).collect(),
        }
    }
}

/// The MCP face of a running pump, or of a partitioned organism.
#[derive(Debug, Clone)]
pub struct McpServer {
    served: Arc<dyn Served>,
}

impl McpServer {
    /// Serves `pump`, whose listeners are `listeners`.
    pub fn new(pump: PumpHandle, listeners: Vec<ListenerDoc>) -> Self {
        Self::over(Arc::new(OnePump::new(pump, listeners)))
    }

    /// Serves what `served` gives.
    pub fn over(served: Arc<dyn Served>) -> Self {
        Self { served }
    }

    async fn call(&self, name: &str, args: &serde_json::Map<String, Json>) -> Result<Json, String> {
        match name {
            "post" => self.post(args).await,
            "threads" => Ok(json!({ "threads": self.served.threads().await? })),
            "history" => self.history(args).await,
            "report" => {
                let thread = thread(args)?;
                let mut reports = self.served.reports(thread).await?;
                let report = reports
                    .pop()
                    .ok_or_else(|| format!("thread {thread} has not halted"))?;
                Ok(json!({ "report": report }))
            }
            "stop" => {
                let thread = thread(args)?;
                self.served.stop(thread).await?;
                Ok(json!({ "thread": thread, "stopped": true }))
            }
            "resume" => {
                let thread = thread(args)?;
                let budget = budget(args)?;
                self.served.resume(thread, budget).await?;
                Ok(json!({ "thread": thread, "resumed": true }))
            }
            other => Err(format!(
                "no tool `{other}`; agentpump offers post, threads, history, report, stop, resume"
            )),
        }
    }

    async fn post(&self, args: &serde_json::Map<String, Json>) -> Result<Json, String> {
        let payload =
            string(args, "payload")?.ok_or("`payload` is required: an XML payload or envelope")?;
        let into = string(args, "thread")?.map(parse_thread).transpose()?;
        let to = string(args, "to")?;
        let wait = integer(args, "wait_ms")?.unwrap_or(0);
        if wait > MAX_WAIT_MS {
            return Err(format!(
                "`wait_ms` {wait} is over the limit of {MAX_WAIT_MS}"
            ));
        }
        let mut out = self
            .served
            .post(payload.as_bytes(), into, to.as_deref())
            .await?;
        if wait > 0 {
            let thread = out
                .get("thread")
                .and_then(Json::as_str)
                .and_then(|t| t.parse::<ThreadId>().ok())
                .ok_or_else(|| {
                    format!("the post was taken, but its answer names no thread: {out}")
                })?;
            let settled = self
                .served
                .settle(thread, Duration::from_millis(wait))
                .await?;
            out["settled"] = Json::from(settled.settled);
            out["state"] = settled.state;
            out["answers"] = self.served.answers(thread).await?;
        }
        Ok(out)
    }

    async fn history(&self, args: &serde_json::Map<String, Json>) -> Result<Json, String> {
        let thread = thread(args)?;
        let offset = integer(args, "offset")?.unwrap_or(0) as usize;
        let limit = integer(args, "limit")?.unwrap_or(DEFAULT_PAGE as u64) as usize;
        if limit == 0 || limit > MAX_PAGE {
            return Err(format!("`limit` must be 1 to {MAX_PAGE}; got {limit}"));
        }
        let records = self.served.history(thread).await?;
        let total = records.len();
        let page: Vec<_> = records.iter().skip(offset).take(limit).collect();
        let next = (offset + page.len() < total).then_some(offset + page.len());
        Ok(
            json!({ "thread": thread, "total": total, "offset": offset, "next_offset": next, "records": page }),
        )
    }
}

fn string(args: &serde_json::Map<String, Json>, key: &str) -> Result<Option<String>, String> {
    match args.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("`{key}` must be a string, not {other}")),
    }
}

fn integer(args: &serde_json::Map<String, Json>, key: &str) -> Result<Option<u64>, String> {
    match args.get(key) {
        None | Some(Json::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| format!("`{key}` must be a whole number of 0 or more, not {v}")),
    }
}

fn parse_thread(text: String) -> Result<ThreadId, String> {
    text.parse()
        .map_err(|_| format!("`thread` `{text}` is not a thread id"))
}

fn thread(args: &serde_json::Map<String, Json>) -> Result<ThreadId, String> {
    string(args, "thread")?
        .ok_or_else(|| "`thread` is required".to_owned())
        .and_then(parse_thread)
}

/// The budget a `resume` adds: `turns`, `tool_calls`, `tokens`, `wall_clock_ms`.
fn budget(args: &serde_json::Map<String, Json>) -> Result<Budget, String> {
    Ok(Budget {
        turns: integer(args, "turns")?,
        tool_calls: integer(args, "tool_calls")?,
        tokens: integer(args, "tokens")?,
        wall_clock: integer(args, "wall_clock_ms")?.map(Duration::from_millis),
        ..Budget::default()
    })
}

/// The tools, as `tools/list` gives them.
fn tools() -> Json {
    let thread = json!({"type": "string", "description": "a thread id"});
    let tool = |name: &str, description: &str, properties: Json, required: &[&str]| {
        json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": properties, "required": required},
        })
    };
    json!([
        tool(
            "post",
            "Posts an XML payload (or an envelope) into a new thread, or into `thread`; with `wait_ms`, waits that long for the thread to settle and returns what it answered.",
            json!({"payload": {"type": "string", "description": "the XML payload"}, "thread": thread, "to": {"type": "string", "description": "the listener to address"}, "wait_ms": {"type": "integer", "description": "how long to wait for the answer, at most 600000"}}),
            &["payload"]
        ),
        tool(
            "threads",
            "Lists the threads with their state.",
            json!({}),
            &[]
        ),
        tool(
            "history",
            "Reads a thread's records, a page at a time (`offset`, `limit` up to 500; `next_offset` is null on the last page).",
            json!({"thread": thread, "offset": {"type": "integer"}, "limit": {"type": "integer"}}),
            &["thread"]
        ),
        tool(
            "report",
            "Reads a halted thread's latest halting report.",
            json!({"thread": thread}),
            &["thread"]
        ),
        tool(
            "stop",
            "Stops a thread (the governor halts it with BACKPRESSURE).",
            json!({"thread": thread}),
            &["thread"]
        ),
        tool(
            "resume",
            "Resumes a halted thread, adding budget.",
            json!({"thread": thread, "turns": {"type": "integer"}, "tool_calls": {"type": "integer"}, "tokens": {"type": "integer"}, "wall_clock_ms": {"type": "integer"}}),
            &["thread"]
        ),
    ])
}

fn parse<T: serde::de::DeserializeOwned>(value: Json) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        rmcp::model::ServerConfig::new(capabilities)
            .with_server_info(rmcp::model::Implementation::new(
                "agentpump",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_instructions(
                "An agentpump organism: post XML payloads into threads, read their histories and halting reports, stop and resume them.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        parse(json!({ "tools": tools() }))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let offered = tools();
        let known = offered
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == request.name.as_ref()));
        if !known {
            // The spec's answer to an unknown tool: a JSON-RPC error, invalid params.
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool `{}`; agentpump offers post, threads, history, report, stop, resume",
                    request.name
                ),
                None,
            ));
        }
        let args = request.arguments.clone().unwrap_or_default();
        let result = match self.call(&request.name, &args).await {
            Ok(value) => CallToolResult::structured(value),
            Err(message) => CallToolResult::error(vec![rmcp::model::ContentBlock::text(message)]),
        };
        Ok(CallToolResponse::Complete(result))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut resources = vec![
            json!({"uri": "agentpump://listeners", "name": "listeners", "description": "the organism's listeners", "mimeType": "application/json"}),
        ];
        let threads = self
            .served
            .threads()
            .await
            .map_err(|e| ErrorData::internal_error(e, None))?;
        resources.extend(threads.iter().filter_map(|t| t.get("id")?.as_str()).map(|id| {
            json!({"uri": format!("agentpump://threads/{id}/history"), "name": format!("history of {id}"), "mimeType": "application/json"})
        }));
        parse(json!({ "resources": resources }))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _cx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let text = if uri == "agentpump://listeners" {
            serde_json::to_string(&self.served.listeners())
        } else if let Some(id) = uri
            .strip_prefix("agentpump://threads/")
            .and_then(|rest| rest.strip_suffix("/history"))
        {
            let thread: ThreadId = id.parse().map_err(|_| {
                ErrorData::resource_not_found(format!("`{id}` is not a thread id"), None)
            })?;
            let records = self
                .served
                .history(thread)
                .await
                .map_err(|e| ErrorData::internal_error(e, None))?;
            serde_json::to_string(&records)
        } else {
            return Err(ErrorData::resource_not_found(
                format!("no resource `{uri}`; agentpump serves agentpump://listeners and agentpump://threads/ID/history"),
                None,
            ));
        }
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let result: ReadResourceResult = parse(json!({
            "contents": [{"uri": uri, "mimeType": "application/json", "text": text}],
        }))?;
        Ok(result.into())
    }
}

/// The Streamable HTTP service of [`McpServer`] for `/mcp` (sessions kept in memory; requests
/// over `max_body` bytes refused). The route's token check is the API's, and so is its `Host`
/// check (`server/hosts.rs`, with a problem naming the host and `[server] allowed_hosts`):
/// rmcp's own, which answers a bare 403, is off.
pub fn http_service(
    server: McpServer,
    max_body: usize,
    sessions: tokio_util::sync::CancellationToken,
) -> rmcp::transport::StreamableHttpService<
    McpServer,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    let config = rmcp::transport::StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(max_body)
        .with_cancellation_token(sessions);
    rmcp::transport::StreamableHttpService::new(
        move || Ok(server.clone()),
        Default::default(),
        config,
    )
}

/// Serves [`McpServer`] on standard input and output until the client closes them.
///
/// # Errors
///
/// The MCP handshake fails or the transport breaks.
pub async fn serve_stdio(server: McpServer) -> Result<(), super::McpError> {
    serve_on_stdio(server, "agentpump").await
}

/// Serves `handler` (named `name` in errors) on standard input and output until the client
/// closes them.
///
/// # Errors
///
/// The MCP handshake fails or the transport breaks.
pub(super) async fn serve_on_stdio(
    handler: impl ServerHandler,
    name: &str,
) -> Result<(), super::McpError> {
    use rmcp::ServiceExt as _;
    let failed = |what: String| super::McpError::Connect {
        server: name.to_owned(),
        what,
    };
    let running = handler
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| failed(format!("the MCP handshake on stdio failed: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| failed(format!("serving MCP on stdio failed: {e}")))?;
    Ok(())
}
