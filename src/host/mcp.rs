//! MCP both ways (issue 30; `docs/tools.md`, "MCP servers as tools"), on the official Rust SDK,
//! rmcp.
//!
//! An organism's `[[mcp]]` servers become tools of the pump: each tool the server lists is a
//! listener named `server.tool` with a [`Signature`](crate::tool::Signature) made from its JSON
//! Schema; a call goes through the pump like any call (checked, counted, recorded, timed) and
//! the pump never knows the tool is remote. The host is also an MCP server (`agentpump mcp`,
//! `/mcp` on `agentpump run`), a thin face over [`PumpHandle`](crate::PumpHandle).
//!
//! - `config`: the `[[mcp]]` table and its checks.
//! - `schema`: JSON Schema → signature, refusals naming the tool and the keyword.
//! - `content`: an MCP answer → a `<result>`'s fields or an `<error>`.
//! - `launch`: a stdio server's program, found on the host's `PATH`, and its environment.
//! - `connection`: one server: start, list, call, restart with backoff, `list_changed`.
//! - `http`: the Streamable HTTP client transport.
//! - `server`: the host as an MCP server, over `served`: one pump, or a partitioned organism.
//! - `tool`: one MCP tool as a listener.
//! - `units`: `agentpump mcp-units`, a small MCP server of agentpump's own (the demo's).

mod config;
mod connection;
mod content;
mod error;
mod http;
mod launch;
mod schema;
pub mod served;
pub mod server;
mod tool;
pub mod units;

use std::sync::Arc;

pub use config::{DEFAULT_TIMEOUT, McpSection, ServerConfig, Transport};
pub use connection::{
    CallFailure, Connection, FIRST_BACKOFF, MAX_BACKOFF, RESTART_AFTER_TIMEOUTS, backoff,
};
pub use error::McpError;
pub use schema::{SchemaError, example, signature};
pub use tool::McpTool;

use crate::Registration;
use crate::listeners::llm::PeerDoc;

/// An organism's MCP servers, started, with the registrations of their tools.
#[derive(Debug, Default)]
pub struct McpTools {
    tools: Vec<McpTool>,
    docs: Vec<PeerDoc>,
    skipped: Vec<McpError>,
}

impl McpTools {
    /// Starts each server, lists its tools and maps those its allow list names (every tool,
    /// without one). `max_bytes` is the organism's largest message: an answer over it is a
    /// `failed` error naming its size.
    ///
    /// # Errors
    ///
    /// A server that cannot be started or listed; a tool on an allow list that the server
    /// does not list or whose schema cannot be mapped. Without an allow list, a tool whose
    /// schema cannot be mapped is left out and logged ([`McpTools::skipped`]).
    pub async fn start(servers: &[ServerConfig], max_bytes: usize) -> Result<Self, McpError> {
        let mut all = Self::default();
        for config in servers {
            let connection = Connection::start(config.clone()).await?;
            all.add(&connection, max_bytes)?;
        }
        Ok(all)
    }

    fn add(&mut self, connection: &Arc<Connection>, max_bytes: usize) -> Result<(), McpError> {
        let server = connection.name().to_owned();
        let listed = connection.tools();
        let chosen: Vec<&rmcp::model::Tool> = match &connection.config().tools {
            Some(allow) => allow
                .iter()
                .map(|name| {
                    listed.get(name).ok_or_else(|| McpError::UnknownTool {
                        server: server.clone(),
                        tool: name.clone(),
                        listed: listed.keys().cloned().collect::<Vec<_>>().join(", "),
                    })
                })
                .collect::<Result<_, _>>()?,
            None => listed.values().collect(),
        };
        let strict = connection.config().tools.is_some();
        for tool in chosen {
            let signature = match signature(&server, tool) {
                Ok(s) => s,
                Err(source) if strict => {
                    return Err(McpError::Schema {
                        server: server.clone(),
                        source,
                    });
                }
                Err(source) => {
                    let skipped = McpError::Schema {
                        server: server.clone(),
                        source,
                    };
                    tracing::warn!("{skipped}; the tool is left out");
                    self.skipped.push(skipped);
                    continue;
                }
            };
            self.docs.push(PeerDoc {
                name: signature.name.clone(),
                description: signature.description.clone(),
                example: example(&signature),
            });
            let tool = McpTool::new(Arc::clone(connection), tool, signature, max_bytes);
            self.tools.push(tool);
        }
        Ok(())
    }

    /// How LLM agents that name these tools as peers see them.
    pub fn docs(&self) -> &[PeerDoc] {
        &self.docs
    }

    /// The tools left out because their schema cannot be mapped (servers without an allow
    /// list), each naming the tool and the keyword.
    pub fn skipped(&self) -> &[McpError] {
        &self.skipped
    }

    /// The tools' registrations; the servers run as long as one of them is registered.
    pub fn into_registrations(self) -> Vec<Registration> {
        self.tools.into_iter().map(McpTool::registration).collect()
    }
}
