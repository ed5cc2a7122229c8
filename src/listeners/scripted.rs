//! Scripted agents for the demo organism: honest Rust listeners that follow exactly the protocol
//! an LLM agent would (goals, residuals, criteria, loop signals, spawns, tool calls through the
//! pump), with the decisions a model would make written out as code. Named `scripted-*` so no
//! one mistakes them for models.

mod author;
mod phuc_roles;
mod pingpong;
mod runaway;

pub use author::{ScriptedAuthor, ScriptedVerifier};
pub use phuc_roles::{ScriptedScout, ScriptedSkeptic, ScriptedSolver};
pub use pingpong::ScriptedPingPong;
pub use runaway::ScriptedRunaway;

use crate::Delivery;

/// Namespace of the demo's own payloads.
pub const DEMO_NS: &str = "urn:agentpump:demo:v1";

/// The text content of a payload's root element (`""` for an empty element).
pub(crate) fn text(msg: &Delivery) -> &str {
    let t = msg.payload().as_str();
    match (t.find('>'), t.rfind("</")) {
        (Some(open), Some(close)) if open < close => t[open + 1..close].trim(),
        _ => "",
    }
}

/// The value of attribute `name` on a payload's root element.
pub(crate) fn attribute<'a>(msg: &'a Delivery, name: &str) -> Option<&'a str> {
    let t = msg.payload().as_str();
    let head = &t[..t.find('>')?];
    let start = head.find(&format!(" {name}=\""))? + name.len() + 3;
    head[start..].split('"').next()
}
