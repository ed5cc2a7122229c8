//! The organism's `[inbox]` section and `approve` on `[tools.command]`: which tool calls wait
//! for a person's approval, the `questions` budget, and whether waiting counts against the
//! wall clock (`InboxPolicy`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::listener::Registration;
use crate::listeners::llm::PeerDoc;
use crate::pump::inbox::ASK_TOOL;
use crate::pump::{Approval, InboxPolicy};

/// `approve = true | false | ["pattern*", …]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum Approve {
    /// `true`: every call; `false`: none.
    All(bool),
    /// The calls whose line matches a pattern.
    Patterns(Vec<String>),
}

impl Approve {
    fn approval(&self) -> Option<Approval> {
        match self {
            Self::All(true) => Some(Approval::Every),
            Self::All(false) => None,
            Self::Patterns(p) => Some(Approval::Matching(p.clone())),
        }
    }
}

/// `[inbox]`: `ask` (the `ask` tool registered, default `true`), `questions`,
/// `waiting_counts`, `approval_timeout_ms`, and `[inbox.approve]` (tool listener name →
/// `approve`), for any tool — MCP tools included — by its name.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub(super) struct InboxSection {
    ask: bool,
    questions: Option<u32>,
    waiting_counts: bool,
    approval_timeout_ms: Option<u64>,
    approve: BTreeMap<String, Approve>,
}

impl Default for InboxSection {
    fn default() -> Self {
        Self {
            ask: true,
            questions: None,
            waiting_counts: false,
            approval_timeout_ms: None,
            approve: BTreeMap::new(),
        }
    }
}

impl InboxSection {
    /// The `ask` tool, unless `ask = false`.
    pub(super) fn ask_tool(&self) -> Option<Registration> {
        self.ask.then(crate::pump::ask_tool)
    }

    /// How the `ask` tool is described to the LLM agents that name it as a peer.
    pub(super) fn ask_doc(&self) -> Option<PeerDoc> {
        self.ask.then(|| PeerDoc {
            name: ASK_TOOL.to_owned(),
            description: "asks a person and waits for the answer (question; optional choices, default, timeout_seconds)".to_owned(),
            example: "<call tool=\"ask\"><arg name=\"question\">May I delete build/?</arg></call>".to_owned(),
        })
    }

    /// The policy, with `command`'s `approve` from `[tools.command]` (which wins).
    pub(super) fn policy(&self, command: Option<&Approve>) -> InboxPolicy {
        let mut approvals: BTreeMap<String, Approval> = self
            .approve
            .iter()
            .filter_map(|(tool, a)| Some((tool.clone(), a.approval()?)))
            .collect();
        if let Some(a) = command {
            match a.approval() {
                Some(a) => approvals.insert("command".to_owned(), a),
                None => approvals.remove("command"),
            };
        }
        InboxPolicy {
            approvals,
            questions: self.questions,
            waiting_counts: self.waiting_counts,
            approval_timeout: self.approval_timeout_ms.map(Duration::from_millis),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::host::organism::Organism;
    use crate::pump::Approval;

    /// "`[tools.command] approve = true`, `approve = [\"rm *\", \"git push*\"]`, and the same
    /// on MCP servers" (any tool listener by name, under `[inbox.approve]`).
    #[test]
    fn approvals_are_read_from_the_tools_and_the_inbox_sections() {
        let text = "[tools.command]\nenabled = true\nallow = [\"ls\"]\napprove = [\"rm *\", \"git push*\"]\n\n[inbox]\nquestions = 3\n\n[inbox.approve]\nsearch = true\n";
        let organism = Organism::parse(text, "o.toml").unwrap();
        let inbox = organism.config("o.toml").unwrap().inbox;
        assert_eq!(inbox.questions, Some(3));
        assert_eq!(
            inbox.approvals.get("command"),
            Some(&Approval::Matching(vec!["rm *".into(), "git push*".into()]))
        );
        assert_eq!(inbox.approvals.get("search"), Some(&Approval::Every));
    }

    /// "Any listener, LLM agent or process can ask a person": every organism has the `ask`
    /// tool unless `[inbox] ask = false`; a listener of its own named `ask` is refused by line.
    #[test]
    fn every_organism_has_the_ask_tool_unless_it_says_otherwise() {
        let asks = |text: &str| {
            let organism = Organism::parse(text, "o.toml").unwrap();
            organism
                .registrations("o.toml")
                .map(|all| all.iter().filter(|r| r.name() == "ask").count())
                .map_err(|e| e.to_string())
        };
        assert_eq!(asks(""), Ok(1));
        assert_eq!(asks("[inbox]\nask = false\n"), Ok(0));
        let mine = "[[listener]]\nname = \"ask\"\nkind = \"builtin\"\nbuiltin = \"echo\"\n";
        let refused = asks(mine).unwrap_err();
        assert!(
            refused.starts_with("o.toml:2:") && refused.contains("[inbox] ask = false"),
            "{refused}"
        );
        assert_eq!(asks(&format!("{mine}[inbox]\nask = false\n")), Ok(1));
    }

    /// "LLM agents learn it from their prompt": an organism's LLM agent that lists `ask` among
    /// its peers builds, with the `ask` tool beside it.
    #[test]
    fn an_llm_agent_may_name_ask_as_a_peer() {
        let text = "[[listener]]\nname = \"a\"\nkind = \"llm\"\nbase_url = \"http://h/v1\"\n\
                    model = \"m\"\nprompt = \"p\"\naccepts = [\"{urn:a}q\"]\npeers = [\"ask\"]\n";
        let organism = Organism::parse(text, "o.toml").unwrap();
        assert!(organism.builder("o.toml").unwrap().build().is_ok());
        let off = format!("{text}[inbox]\nask = false\n");
        let organism = Organism::parse(&off, "o.toml").unwrap();
        let refused = organism.builder("o.toml").unwrap().build();
        assert!(refused.is_err(), "a peer that is not there is refused");
    }
}
