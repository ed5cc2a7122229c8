//! [`McpError`]: why MCP servers could not be used as tools, or the host served as one.

use super::schema::SchemaError;

/// Why an organism's MCP servers cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The server could not be started, reached or listed (`MCP server `fs`: cannot start
    /// `npx`: No such file or directory`).
    #[error("MCP server `{server}`: {what}")]
    Connect {
        /// The server's name.
        server: String,
        /// What failed.
        what: String,
    },
    /// A tool on the allow list cannot be registered: its schema or its name.
    #[error("MCP server `{server}`: {source}")]
    Schema {
        /// The server's name.
        server: String,
        /// Why.
        #[source]
        source: SchemaError,
    },
    /// The allow list names a tool the server does not list.
    #[error("MCP server `{server}` lists no tool `{tool}`; it lists {listed}")]
    UnknownTool {
        /// The server's name.
        server: String,
        /// The tool asked for.
        tool: String,
        /// What it lists.
        listed: String,
    },
}
