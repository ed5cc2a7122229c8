//! Ready-made Rust listeners, also reachable by name from an organism file (`kind = "builtin"`).
//!
//! Every builtin is one row of [`TABLE`]: its name, how to make it, its roots, role, description
//! and example. [`BUILTINS`] and [`builtin`] are read from it; adding a builtin is adding a row.
//! `llm` (the LLM agent) needs the `llm` feature, on by default. The `command` tool
//! ([`CommandTool`]) is not a builtin: it needs a policy, and an organism enables it in its
//! `[tools.command]` section.

pub mod calculator;
pub mod capsule;
pub mod command;
mod digest;
mod echo;
#[cfg(feature = "llm")]
pub mod llm;
pub mod phuc_loop;
pub mod scripted;
mod sleep;

use std::sync::Arc;

pub use calculator::Calculator;
pub use command::{CommandConfig, CommandTool, Deny};
pub use digest::{DIGEST_MAX_ROUNDS, DIGEST_NS, Digest};
pub use echo::Echo;
#[cfg(feature = "llm")]
pub use llm::{LlmAgent, LlmConfig};
pub use phuc_loop::{LoopConfig, PhucLoop};
pub use sleep::{SLEEP_MAX, Sleep};

use scripted::{
    DEMO_NS, ScriptedAuthor, ScriptedPingPong, ScriptedRunaway, ScriptedScout, ScriptedSkeptic,
    ScriptedSolver, ScriptedVerifier,
};

use crate::tool::TOOL_NS;
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

/// One builtin listener: everything [`builtin`] hands out under its name.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinRow {
    /// The name an organism file gives as `builtin = "…"`.
    pub name: &'static str,
    /// Makes the listener.
    pub make: fn() -> Arc<dyn Listener>,
    /// The roots it accepts unless the organism file says otherwise: `(namespace, local name)`.
    pub roots: &'static [(&'static str, &'static str)],
    /// Its role.
    pub role: Role,
    /// One line on what it does.
    pub description: &'static str,
    /// An example payload it accepts (shown to LLM agents), or `""`.
    pub example: &'static str,
}

impl BuiltinRow {
    /// A fresh listener of this row, with its roots and role.
    pub fn to_builtin(&self) -> Builtin {
        Builtin {
            listener: (self.make)(),
            accepts: self
                .roots
                .iter()
                .map(|(ns, local)| QName::new(ns, local))
                .collect(),
            role: self.role,
            description: self.description,
            example: self.example,
            timeout: None,
        }
    }
}

/// Every builtin listener, in the order error messages list them.
pub const TABLE: [BuiltinRow; 12] = [
    BuiltinRow {
        name: "echo",
        make: || Arc::new(Echo),
        roots: &[],
        role: Role::Tool,
        description: "answers every payload with itself",
        example: "",
    },
    BuiltinRow {
        name: "sleep",
        make: || Arc::new(Sleep),
        roots: &[],
        role: Role::Tool,
        description: "waits the milliseconds its payload's `ms` attribute says, then answers with the payload",
        example: "",
    },
    BuiltinRow {
        name: "digest",
        make: || Arc::new(Digest),
        roots: &[],
        role: Role::Tool,
        description: "hashes its payload the number of times its `rounds` attribute says (a fixed amount of CPU), then answers with the digest",
        example: "",
    },
    BuiltinRow {
        name: "calculator",
        make: || Arc::new(Calculator),
        roots: &[(calculator::CALC_NS, "calc"), (TOOL_NS, "call")],
        role: Role::Tool,
        description: "evaluates arithmetic exactly, in decimals",
        example: r#"<calc xmlns="urn:agentpump:calc:v1">(1 + 2) / 4</calc>"#,
    },
    BuiltinRow {
        name: "scripted-author",
        make: || Arc::new(ScriptedAuthor),
        roots: &[(DEMO_NS, "claim"), (DEMO_NS, "verdict")],
        role: Role::Agent,
        description: "makes a claim and has it checked (scripted agent)",
        example: "",
    },
    BuiltinRow {
        name: "scripted-verifier",
        make: || Arc::new(ScriptedVerifier),
        roots: &[(DEMO_NS, "check")],
        role: Role::Verifier,
        description: "checks a claim independently with the calculator (scripted verifier)",
        example: "",
    },
    BuiltinRow {
        name: "scripted-runaway",
        make: || Arc::new(ScriptedRunaway),
        roots: &[(DEMO_NS, "ruminate")],
        role: Role::Agent,
        description: "never decides it is done (scripted agent)",
        example: "",
    },
    BuiltinRow {
        name: "scripted-ping",
        make: || Arc::new(ScriptedPingPong::new("scripted-pong")),
        roots: &[(DEMO_NS, "ball")],
        role: Role::Tool,
        description: "returns every ball to scripted-pong (scripted agent)",
        example: "",
    },
    BuiltinRow {
        name: "scripted-pong",
        make: || Arc::new(ScriptedPingPong::new("scripted-ping")),
        roots: &[(DEMO_NS, "ball")],
        role: Role::Tool,
        description: "returns every ball to scripted-ping (scripted agent)",
        example: "",
    },
    BuiltinRow {
        name: "scripted-scout",
        make: || Arc::new(ScriptedScout),
        roots: &[(phuc_loop::LOOP_NS, "scout")],
        role: Role::Agent,
        description: "plans a Newton step for √2 as a phuc-loop Scout (scripted agent)",
        example: "",
    },
    BuiltinRow {
        name: "scripted-solver",
        make: || Arc::new(ScriptedSolver),
        roots: &[(phuc_loop::LOOP_NS, "solver")],
        role: Role::Agent,
        description: "takes the Newton step and hands in the guess as a phuc-loop Solver (scripted agent)",
        example: "",
    },
    BuiltinRow {
        name: "scripted-skeptic",
        make: || Arc::new(ScriptedSkeptic),
        roots: &[(phuc_loop::LOOP_NS, "skeptic")],
        role: Role::Agent,
        description: "checks the guess by its sha256 and measures |x² − 2| as a phuc-loop Skeptic (scripted agent)",
        example: "",
    },
];

/// The names [`builtin`] knows, in [`TABLE`]'s order.
pub const BUILTINS: [&str; TABLE.len()] = {
    let mut names = [""; TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        names[i] = TABLE[i].name;
        i += 1;
    }
    names
};

/// The ready-made listener called `name`, if there is one.
pub fn builtin(name: &str) -> Option<Builtin> {
    TABLE
        .iter()
        .find(|row| row.name == name)
        .map(BuiltinRow::to_builtin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_is_named_once_and_found_by_its_name() {
        for (i, name) in BUILTINS.iter().enumerate() {
            assert!(!BUILTINS[..i].contains(name), "`{name}` twice in TABLE");
            let found = builtin(name).expect("every name of TABLE is a builtin");
            assert_eq!(found.accepts.len(), TABLE[i].roots.len());
        }
        assert!(builtin("oracle").is_none());
    }
}
