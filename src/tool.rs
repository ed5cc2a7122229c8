//! Tools: one call / result / error protocol for the whole runtime, in the pump-owned
//! namespace [`TOOL_NS`] (`docs/tools.md`, `schemas/tool.xsd`).
//!
//! A process's `USE`, an LLM agent's function call and a Rust listener all send the same
//! [`Call`]; the tool answers with a [`ToolResult`] or a [`ToolError`]. Each is a payload like
//! any other: routed, parsed again by the pump, recorded, and a call costs the caller's thread
//! one tool call of its budget.

mod wire;

pub(crate) use wire::items;
pub use wire::{Answer, Call, ErrorType, ToolError, ToolResult, WireError};

/// The namespace of tool calls, results and errors.
pub const TOOL_NS: &str = "urn:agentpump:tool:v1";
