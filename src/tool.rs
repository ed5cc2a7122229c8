//! Tools: one call / result / error protocol for the whole runtime, in the pump-owned
//! namespace [`TOOL_NS`] (`docs/tools.md`, `schemas/tool.xsd`).
//!
//! A process's `USE`, an LLM agent's function call and a Rust listener all send the same
//! [`Call`]; the tool answers with a [`ToolResult`] or a [`ToolError`]. Each is a payload like
//! any other: routed, parsed again by the pump, recorded, and a call costs the caller's thread
//! one tool call of its budget.
//!
//! A tool written in Rust implements [`Tool`] (a [`Signature`] and a `call`) and is registered
//! with [`register`]; the [`Adapter`] does the protocol around it.
//!
//! - `wire`: the three messages, read from and written to XML.
//! - `signature`: name, description, arguments and result as JSON Schema; the argument check.
//! - `adapter`: the [`Tool`] trait, the [`Adapter`] listener, [`register`].

mod adapter;
mod signature;
mod wire;

#[cfg(feature = "host")]
pub(crate) use adapter::reply;
pub use adapter::{Adapter, Tool, answer, call_root, register};
pub use signature::Signature;
pub(crate) use signature::mismatch;
pub use wire::{Answer, Call, ErrorType, ToolError, ToolResult, WireError};
pub(crate) use wire::{items, written_fits, written_payload};

/// The namespace of tool calls, results and errors.
pub const TOOL_NS: &str = "urn:agentpump:tool:v1";
