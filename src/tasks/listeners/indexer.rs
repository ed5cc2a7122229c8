//! [`TaskIndexer`]: the seed's `task-indexer` skill as a tool — the latest ledger line of the
//! tasks asked for, read from the ledger's end, so a worker never reads the whole ledger.

use std::path::PathBuf;

use async_trait::async_trait;
use quick_xml::escape::escape;

use crate::tasks::latest;
use crate::tasks::wire::{TOOL_NS, attributes, children};
use crate::{Context, Delivery, Listener, ListenerError};

/// The tool's name.
pub const TASK_INDEXER: &str = "task-indexer";

/// Answers `<call tool="task-indexer"><arg name="ids" type="json">["T-001"]</arg></call>` with
/// `<result><field name="lines" type="json">[…]</field></result>`: the latest line of each id
/// found, in the order asked.
#[derive(Debug, Clone)]
pub struct TaskIndexer {
    ledger: PathBuf,
}

impl TaskIndexer {
    /// An indexer of the ledger at `ledger`.
    pub fn new(ledger: impl Into<PathBuf>) -> Self {
        Self {
            ledger: ledger.into(),
        }
    }

    fn answer(&self, xml: &str) -> String {
        let call = attributes(xml)
            .ok()
            .and_then(|a| a.get("id").cloned())
            .unwrap_or_default();
        let error = |kind: &str, message: &str| {
            format!(
                "<error xmlns=\"{TOOL_NS}\" tool=\"{TASK_INDEXER}\" call=\"{}\" type=\"{kind}\" retry=\"false\">{}</error>",
                escape(call.as_str()),
                escape(message)
            )
        };
        let ids: Vec<String> = match children(xml, "arg").map(|a| a.get("ids").cloned()) {
            Ok(Some(ids)) => match serde_json::from_str(&ids) {
                Ok(ids) => ids,
                Err(e) => return error("invalid-argument", &format!("`ids`: {e}")),
            },
            Ok(None) => return error("invalid-argument", "missing argument `ids`"),
            Err(e) => return error("invalid-argument", &e.to_string()),
        };
        if ids.is_empty() {
            return error("invalid-argument", "`ids` names no task");
        }
        match latest(&self.ledger, &ids) {
            Ok(found) => {
                let lines: Vec<_> = ids.iter().filter_map(|id| found.lines.get(id)).collect();
                let json = serde_json::to_string(&lines).expect("lines serialize");
                format!(
                    "<result xmlns=\"{TOOL_NS}\" tool=\"{TASK_INDEXER}\" call=\"{}\"><field name=\"lines\" type=\"json\">{}</field></result>",
                    escape(call.as_str()),
                    escape(json.as_str())
                )
            }
            Err(e) => error("failed", &e.to_string()),
        }
    }
}

#[async_trait]
impl Listener for TaskIndexer {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        cx.reply(self.answer(msg.payload().as_str()));
        Ok(())
    }
}
