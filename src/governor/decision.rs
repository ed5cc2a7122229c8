//! [`Decision`]: what the governor records it did — declared a goal, carved a budget for a
//! child (and noted whom it was spawned to), resumed a thread, halted it. Written into the thread as `<decision>` (kind
//! `decision`, from `governor`), and read back when a restarted pump replays the ledgers.

use std::fmt::Write as _;
use std::sync::Arc;

use quick_xml::escape::escape;
use quick_xml::events::Event;

use super::messages::{budget_xml, parse_budget};
use super::{Budget, Verdict};
use crate::ThreadId;
use crate::envelope::GOVERNOR_NS;

/// One governor decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// A goal was declared: how many criteria, and the budget it tightened.
    Goal { criteria: usize, budget: Budget },
    /// A child was spawned: the listeners its first message was addressed to (`to`, none in a
    /// record from before they were noted) and the limits it was granted (none: it shares
    /// the spawner's).
    Carve {
        thread: ThreadId,
        to: Vec<Arc<str>>,
        granted: Budget,
    },
    /// A halted thread was resumed with this much more budget.
    Resume { added: Budget },
    /// The thread halted.
    Halt { class: String, reason: String },
    /// The thread was forked from record `at` of `source` (its chain digest `digest`, the head
    /// of the source's chain up to it): in `Context` mode the source records `carried` follow
    /// this one, re-chained; the thread's budget is `budget`.
    Fork(Fork),
    /// A parcel to or from a pump of another partition (`pump/spread.rs`), as JSON: `sent` in
    /// the thread it leaves (a child handed to another pump, a child's result going back),
    /// received in the thread it opens (an adopted child's first record).
    Parcel { sent: bool, json: String },
    /// A child on another pump returned: what it spent (the rest of its grant went back).
    Returned { thread: ThreadId, spent: Budget },
    /// This adopted child's result reached its parent's pump (`thread`: the parent).
    Delivered { thread: ThreadId },
}

/// What a fork decision names: the first record of a forked thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fork {
    /// The thread forked from.
    pub source: ThreadId,
    /// The seq of the record forked from (delivered again).
    pub at: u64,
    /// That record's chain digest, hex: the head of the source's chain up to it.
    pub digest: String,
    /// Context (the history carried) or first message.
    pub mode: ForkMode,
    /// The source seqs carried over as context, in order (none in first-message mode).
    pub carried: Vec<u64>,
    /// When the message delivered again was edited: the SHA-256 (hex) of the payload
    /// delivered instead of the source's. The delivered record is then a new message from
    /// the client, proven by this digest, not a copy.
    pub edited: Option<String>,
    /// The new thread's budget.
    pub budget: Budget,
}

/// What a fork starts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForkMode {
    /// The source's records up to the chosen one are carried over as context (already
    /// delivered, not re-run); the chosen message is delivered again.
    #[default]
    Context,
    /// The source's first message is posted again into an empty thread.
    FirstMessage,
}

impl ForkMode {
    /// The mode as written in the decision and the API (`context`, `first-message`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Context => "context",
            Self::FirstMessage => "first-message",
        }
    }
}

impl std::str::FromStr for ForkMode {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        match s {
            "context" => Ok(Self::Context),
            "first-message" => Ok(Self::FirstMessage),
            _ => Err(()),
        }
    }
}

impl Decision {
    /// The halt decision for a verdict.
    pub fn halt(verdict: &Verdict) -> Self {
        Self::Halt {
            class: verdict.class.as_str().to_owned(),
            reason: verdict.reason.clone(),
        }
    }

    /// The `<decision>` element.
    pub fn to_xml(&self) -> String {
        let mut x = format!("<decision xmlns=\"{GOVERNOR_NS}\"");
        let budget = match self {
            Self::Goal { criteria, budget } => {
                let _ = write!(x, " action=\"goal\" criteria=\"{criteria}\"");
                budget
            }
            Self::Carve {
                thread,
                to,
                granted,
            } => {
                let _ = write!(x, " action=\"carve\" thread=\"{thread}\"");
                if !to.is_empty() {
                    // Listener names are `[A-Za-z0-9_.-]`: nothing to escape, no space inside.
                    let _ = write!(x, " to=\"{}\"", to.join(" "));
                }
                granted
            }
            Self::Resume { added } => {
                x.push_str(" action=\"resume\"");
                added
            }
            Self::Fork(f) => {
                let _ = write!(
                    x,
                    " action=\"fork\" source=\"{}\" at=\"{}\" digest=\"{}\" mode=\"{}\"",
                    f.source,
                    f.at,
                    f.digest,
                    f.mode.as_str()
                );
                if !f.carried.is_empty() {
                    let seqs: Vec<String> = f.carried.iter().map(u64::to_string).collect();
                    let _ = write!(x, " carried=\"{}\"", seqs.join(" "));
                }
                if let Some(edited) = &f.edited {
                    let _ = write!(x, " edited=\"{edited}\"");
                }
                &f.budget
            }
            Self::Returned { thread, spent } => {
                let _ = write!(x, " action=\"returned\" thread=\"{thread}\"");
                spent
            }
            Self::Parcel { sent, json } => {
                let action = if *sent { "sent" } else { "received" };
                let json = escape(json.as_str());
                let _ = write!(x, " action=\"{action}\" parcel=\"{json}\"/>");
                return x;
            }
            Self::Delivered { thread } => {
                let _ = write!(x, " action=\"delivered\" thread=\"{thread}\"/>");
                return x;
            }
            Self::Halt { class, reason } => {
                let reason = escape(reason.as_str());
                let _ = write!(
                    x,
                    " action=\"halt\" class=\"{class}\" reason=\"{reason}\"/>"
                );
                return x;
            }
        };
        match budget_xml(budget, "") {
            b if b.is_empty() => x.push_str("/>"),
            b => {
                let _ = write!(x, ">{b}</decision>");
            }
        }
        x
    }

    /// Reads a `<decision>` element the pump wrote; `None` for anything else.
    pub fn parse(xml: &str) -> Option<Self> {
        let mut reader = quick_xml::Reader::from_str(xml);
        let (root, empty) = match reader.read_event().ok()? {
            Event::Start(e) => (e.into_owned(), false),
            Event::Empty(e) => (e.into_owned(), true),
            _ => return None,
        };
        let attribute = |name: &str| -> Option<String> {
            let a = root.try_get_attribute(name).ok()??;
            let value = a
                .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                .ok()?;
            Some(value.into_owned())
        };
        let mut budget = Budget::default();
        if !empty
            && let Ok(Event::Empty(e) | Event::Start(e)) = reader.read_event()
            && e.local_name().as_ref() == "budget"
        {
            budget = parse_budget(&format!("<budget {}/>", e.attributes_raw())).ok()?;
        }
        Some(match attribute("action")?.as_str() {
            "goal" => Self::Goal {
                criteria: attribute("criteria")?.parse().ok()?,
                budget,
            },
            "carve" => Self::Carve {
                thread: attribute("thread")?.parse().ok()?,
                to: attribute("to")
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(Arc::from)
                    .collect(),
                granted: budget,
            },
            "resume" => Self::Resume { added: budget },
            "fork" => Self::Fork(Fork {
                source: attribute("source")?.parse().ok()?,
                at: attribute("at")?.parse().ok()?,
                digest: attribute("digest")?,
                mode: attribute("mode")?.parse().ok()?,
                carried: attribute("carried")
                    .unwrap_or_default()
                    .split_whitespace()
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .ok()?,
                edited: attribute("edited"),
                budget,
            }),
            "halt" => Self::Halt {
                class: attribute("class")?,
                reason: attribute("reason")?,
            },
            "returned" => Self::Returned {
                thread: attribute("thread")?.parse().ok()?,
                spent: budget,
            },
            action @ ("sent" | "received") => Self::Parcel {
                sent: action == "sent",
                json: attribute("parcel")?,
            },
            "delivered" => Self::Delivered {
                thread: attribute("thread")?.parse().ok()?,
            },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_decision_reads_back_as_written() {
        let budget = Budget {
            turns: Some(20),
            cost: Some(rust_decimal::Decimal::new(5, 1)),
            ..Budget::default()
        };
        let all = [
            Decision::Goal {
                criteria: 2,
                budget: budget.clone(),
            },
            Decision::Carve {
                thread: ThreadId::new(),
                to: vec!["skeptic".into()],
                granted: budget.clone(),
            },
            Decision::Carve {
                thread: ThreadId::new(),
                to: vec!["a".into(), "b.c".into()],
                granted: Budget::default(),
            },
            Decision::Resume {
                added: budget.clone(),
            },
            Decision::Resume {
                added: Budget::default(),
            },
            Decision::Fork(Fork {
                source: ThreadId::new(),
                at: 7,
                digest: "ab".repeat(32),
                mode: ForkMode::Context,
                carried: vec![1, 2, 5],
                edited: None,
                budget: budget.clone(),
            }),
            Decision::Fork(Fork {
                source: ThreadId::new(),
                at: 1,
                digest: "00".repeat(32),
                mode: ForkMode::FirstMessage,
                carried: Vec::new(),
                edited: Some("cd".repeat(32)),
                budget: Budget::default(),
            }),
            Decision::Halt {
                class: "TIMEOUT".into(),
                reason: "max-tokens max-cost & <more>".into(),
            },
            Decision::Returned {
                thread: ThreadId::new(),
                spent: budget.clone(),
            },
            Decision::Parcel {
                sent: true,
                json: r#"{"kind":"adopt","payload":"<a x=\"1\">\n&amp;</a>"}"#.into(),
            },
            Decision::Parcel {
                sent: false,
                json: "{}".into(),
            },
            Decision::Delivered {
                thread: ThreadId::new(),
            },
        ];
        for decision in all {
            assert_eq!(Decision::parse(&decision.to_xml()), Some(decision));
        }
        assert_eq!(Decision::parse("<decision action=\"dance\"/>"), None);
    }
}
