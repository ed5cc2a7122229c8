//! The organism's `[inbox]` section and `approve` on `[tools.command]`: which tool calls wait
//! for a person's approval, the `questions` budget, and whether waiting counts against the
//! wall clock (`InboxPolicy`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

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

/// `[inbox]`: `questions`, `waiting_counts`, `approval_timeout_ms`, and `[inbox.approve]`
/// (tool listener name → `approve`), for any tool — MCP tools included — by its name.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct InboxSection {
    questions: Option<u32>,
    #[serde(default)]
    waiting_counts: bool,
    approval_timeout_ms: Option<u64>,
    #[serde(default)]
    approve: BTreeMap<String, Approve>,
}

impl InboxSection {
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
}
