//! Ready-made Rust listeners, also reachable by name from an organism file (`kind = "builtin"`).

pub mod calculator;
mod echo;
pub mod llm;
pub mod scripted;

use std::sync::Arc;

pub use calculator::Calculator;
pub use echo::Echo;
pub use llm::{LlmAgent, LlmConfig};

use scripted::{
    DEMO_NS, ScriptedAuthor, ScriptedNewton, ScriptedPingPong, ScriptedPlanner, ScriptedRunaway,
    ScriptedVerifier, ScriptedWorker,
};

use crate::{Listener, QName, Role};

/// A ready-made listener with the roots and role it comes with.
#[derive(Clone)]
pub struct Builtin {
    /// The listener.
    pub listener: Arc<dyn Listener>,
    /// The roots it accepts unless the organism file says otherwise.
    pub accepts: Vec<QName>,
    /// Its role.
    pub role: Role,
    /// One line on what it does.
    pub description: &'static str,
    /// An example payload it accepts (shown to LLM agents).
    pub example: &'static str,
    /// How long one delivery may run, when the pump's default is too short for it.
    pub timeout: Option<std::time::Duration>,
}

impl std::fmt::Debug for Builtin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builtin")
            .field("accepts", &self.accepts)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

/// The names [`builtin`] knows.
pub const BUILTINS: [&str; 10] = [
    "echo",
    "calculator",
    "scripted-newton",
    "scripted-planner",
    "scripted-worker",
    "scripted-author",
    "scripted-verifier",
    "scripted-runaway",
    "scripted-ping",
    "scripted-pong",
];

/// The ready-made listener called `name`, if there is one.
pub fn builtin(name: &str) -> Option<Builtin> {
    let demo = |locals: &[&str]| {
        locals
            .iter()
            .map(|l| QName::new(DEMO_NS, l))
            .collect::<Vec<_>>()
    };
    let (listener, accepts, role, description): (
        Arc<dyn Listener>,
        Vec<QName>,
        Role,
        &'static str,
    ) = match name {
        "echo" => (
            Arc::new(Echo),
            Vec::new(),
            Role::Tool,
            "answers every payload with itself",
        ),
        "calculator" => (
            Arc::new(Calculator),
            vec![Calculator::root()],
            Role::Tool,
            "evaluates arithmetic exactly, in decimals",
        ),
        "scripted-newton" => (
            Arc::new(ScriptedNewton),
            demo(&["sqrt", "guess"]),
            Role::Agent,
            "approaches a square root by Newton's method (scripted agent)",
        ),
        "scripted-planner" => (
            Arc::new(ScriptedPlanner),
            demo(&["plan"]),
            Role::Agent,
            "fans a plan out to child threads and collects the results (scripted agent)",
        ),
        "scripted-worker" => (
            Arc::new(ScriptedWorker),
            demo(&["task"]),
            Role::Agent,
            "does one task with the calculator and finishes its thread (scripted agent)",
        ),
        "scripted-author" => (
            Arc::new(ScriptedAuthor),
            demo(&["claim", "verdict"]),
            Role::Agent,
            "makes a claim and has it checked (scripted agent)",
        ),
        "scripted-verifier" => (
            Arc::new(ScriptedVerifier),
            demo(&["check"]),
            Role::Verifier,
            "checks a claim independently with the calculator (scripted verifier)",
        ),
        "scripted-runaway" => (
            Arc::new(ScriptedRunaway),
            demo(&["ruminate"]),
            Role::Agent,
            "never decides it is done (scripted agent)",
        ),
        "scripted-ping" => (
            Arc::new(ScriptedPingPong::new("scripted-pong")),
            demo(&["ball"]),
            Role::Tool,
            "returns every ball to scripted-pong (scripted agent)",
        ),
        "scripted-pong" => (
            Arc::new(ScriptedPingPong::new("scripted-ping")),
            demo(&["ball"]),
            Role::Tool,
            "returns every ball to scripted-ping (scripted agent)",
        ),
        _ => return None,
    };
    let example = match name {
        "calculator" => r#"<calc xmlns="urn:agentpump:calc:v1">(1 + 2) / 4</calc>"#,
        _ => "",
    };
    Some(Builtin {
        listener,
        accepts,
        role,
        description,
        example,
        timeout: None,
    })
}
