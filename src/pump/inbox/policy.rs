//! [`InboxPolicy`]: which tool calls wait for a person's approval ([`Approval`]), how many
//! questions a thread may ask, and whether waiting counts against the wall clock.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::tool::Call;
use crate::value::Value;

/// Which calls of one tool wait for a person's approval before the tool sees them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// Every call (`approve = true`).
    Every,
    /// The calls whose line matches one of these patterns (`approve = ["rm *", "git push*"]`):
    /// `*` stands for any run of characters, everything else for itself.
    Matching(Vec<String>),
}

impl Approval {
    /// Whether `call` waits for approval. A pattern matches the call's *line* — its string
    /// arguments, then the items of its list arguments, each group in argument-name order,
    /// joined by spaces (`command` with `program = "rm"`, `args = ["-rf", "x"]` reads
    /// `rm -rf x`) — or any one string argument on its own.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::pump::Approval;
    /// use agentpump::tool::Call;
    /// use agentpump::value::Value;
    /// let rm = Call::new("command")
    ///     .arg("program", "rm")
    ///     .arg("args", Value::List(vec!["-rf".into(), "x".into()]));
    /// let approval = Approval::Matching(vec!["rm *".into(), "git push*".into()]);
    /// assert!(approval.applies(&rm));
    /// assert!(!approval.applies(&Call::new("command").arg("program", "ls")));
    /// ```
    pub fn applies(&self, call: &Call) -> bool {
        let Self::Matching(patterns) = self else {
            return true;
        };
        let line = line(call);
        let single = call.args.values().filter_map(|v| match v {
            Value::Str(s) => Some(s.as_str()),
            _ => None,
        });
        let texts: Vec<&str> = std::iter::once(line.as_str()).chain(single).collect();
        patterns
            .iter()
            .any(|p| texts.iter().any(|text| glob(p.as_bytes(), text.as_bytes())))
    }
}

/// The inbox's rules, part of [`PumpConfig`](crate::PumpConfig).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxPolicy {
    /// Tools (by listener name) whose calls wait for approval, and which of their calls.
    /// Default: none.
    pub approvals: BTreeMap<String, Approval>,
    /// How many questions and approvals one thread may put to a person; past it a call is
    /// answered `not-allowed` and nobody is asked. Default: unlimited.
    pub questions: Option<u32>,
    /// Whether time spent waiting for a person counts against the wall-clock budget.
    /// Default: `false` (a thread's deadline moves by the time it waited).
    pub waiting_counts: bool,
    /// How long an approval waits before its default (deny) applies. Default: for ever.
    pub approval_timeout: Option<Duration>,
}

/// The call's line: string arguments, then the items of list arguments, joined by spaces.
fn line(call: &Call) -> String {
    let strings = call.args.values().filter_map(|v| match v {
        Value::Str(s) => Some(s.clone()),
        _ => None,
    });
    let items = call.args.values().flat_map(|v| match v {
        Value::List(items) => items.iter().map(Value::to_string).collect(),
        _ => Vec::new(),
    });
    strings.chain(items).collect::<Vec<_>>().join(" ")
}

/// Whether `text` matches `pattern`, where `*` is any run of bytes (iterative, no
/// backtracking blow-up: the last star is the only one retried).
fn glob(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            star = Some((p, t));
            p += 1;
        } else if p < pattern.len() && pattern[p] == text[t] {
            p += 1;
            t += 1;
        } else if let Some((sp, st)) = star {
            p = sp + 1;
            t = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn stars_match_any_run() {
        for (pattern, text, expected) in [
            ("rm *", "rm -rf x", true),
            ("rm *", "rmdir x", false),
            ("git push*", "git push origin", true),
            ("*", "", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
        ] {
            assert_eq!(
                glob(pattern.as_bytes(), text.as_bytes()),
                expected,
                "{pattern} ~ {text}"
            );
        }
    }
}
