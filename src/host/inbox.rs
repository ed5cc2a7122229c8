//! `agentpump inbox` and `agentpump answer`: a person's open requests, from a history file
//! (`--db`, read-only) or a running host (`--url`), and the answer to one (on a running host
//! only: an answer is applied with its effect by the pump that holds the call).

use std::path::Path;

use serde_json::json;

use super::HostError;
use super::inspect;
use super::remote::Host;
use crate::history::export::rfc3339;
use crate::history::{HistoryStore, SqliteHistory};
use crate::pump::inbox::{RequestKind, open_requests};
use crate::{OpenRequest, ThreadId};

/// Output formats of `inbox`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum InboxFormat {
    /// One block per request: what is asked, where, and how to answer it.
    Text,
    /// A JSON array of open requests, as `GET /inbox` gives them.
    Json,
}

/// What `answer` decides: exactly one of these.
#[derive(Debug, Clone, clap::Args)]
#[group(id = "decision", required = true, multiple = false)]
pub struct DecisionArgs {
    /// Forward the held call as it is.
    #[arg(long)]
    pub approve: bool,
    /// Answer the caller `denied` with this reason.
    #[arg(long, value_name = "REASON")]
    pub deny: Option<String>,
    /// Forward the held call with these arguments instead (a JSON object).
    #[arg(long, value_name = "JSON")]
    pub edit: Option<String>,
    /// Answer the question with this value (JSON; text that is not JSON is taken as a string).
    #[arg(long, value_name = "JSON")]
    pub value: Option<String>,
}

impl DecisionArgs {
    /// The body of `POST /inbox/{id}`, or a usage error naming the flag whose JSON is wrong.
    fn body(self, by: &str) -> Result<serde_json::Value, HostError> {
        let mut body = if self.approve {
            json!({ "decision": "approve" })
        } else if let Some(reason) = self.deny {
            json!({ "decision": "deny", "reason": reason })
        } else if let Some(edit) = self.edit {
            let arguments: serde_json::Value = serde_json::from_str(&edit)
                .ok()
                .filter(serde_json::Value::is_object)
                .ok_or_else(|| {
                    HostError::usage(format!(
                        "--edit takes a JSON object of arguments; got `{edit}`"
                    ))
                })?;
            json!({ "decision": "edit", "arguments": arguments })
        } else {
            let value = self.value.unwrap_or_default();
            let value = serde_json::from_str(&value).unwrap_or(serde_json::Value::String(value));
            json!({ "decision": "answer", "value": value })
        };
        body["by"] = json!(by);
        Ok(body)
    }
}

/// The open requests of the history file `db`, oldest first, only `thread`'s (an id, a unique
/// prefix, or a path) and `listener`'s when given.
///
/// # Errors
///
/// The file cannot be opened or read, or `thread` names no thread of it.
pub fn list_file(
    db: &Path,
    thread: Option<&str>,
    listener: Option<&str>,
    format: InboxFormat,
) -> Result<String, HostError> {
    let store = SqliteHistory::open_read_only(db)?;
    inspect::block_on(async {
        let thread = match thread {
            Some(text) => Some(inspect::thread_id(&store, db, text).await?),
            None => None,
        };
        let open = open_requests(&store as &dyn HistoryStore).await?;
        Ok(render(&filter(open, thread, listener), format))
    })
}

/// The open requests of the host, as [`list_file`] for a file.
///
/// # Errors
///
/// The host cannot be reached or refuses, or `thread` names no thread of it.
pub fn list_host(
    host: &Host,
    thread: Option<&str>,
    listener: Option<&str>,
    format: InboxFormat,
) -> Result<String, HostError> {
    let thread = thread.map(|t| host.resolve(t)).transpose()?;
    let open: Vec<OpenRequest> = host.json("/inbox")?;
    Ok(render(&filter(open, thread, listener), format))
}

/// Answers request `id` on the host as `by`; prints the answer recorded.
///
/// # Errors
///
/// A malformed `--edit`, or the host's refusal: unknown (404), answered already (409, naming
/// who and when), expired (410), a decision that does not fit the request (422).
pub fn answer(
    host: &Host,
    id: &str,
    decision: DecisionArgs,
    by: &str,
) -> Result<String, HostError> {
    let body = decision.body(by)?;
    let path = format!("/inbox/{}", super::remote::encode(id));
    let recorded = host.call(
        reqwest::Method::POST,
        &path,
        Some(body.to_string().into_bytes()),
    )?;
    Ok(format!("answered {id}: {recorded}\n"))
}

fn filter(
    open: Vec<OpenRequest>,
    thread: Option<ThreadId>,
    listener: Option<&str>,
) -> Vec<OpenRequest> {
    open.into_iter()
        .filter(|r| thread.is_none_or(|t| r.thread == t))
        .filter(|r| listener.is_none_or(|l| r.request.listener == l))
        .collect()
}

fn render(open: &[OpenRequest], format: InboxFormat) -> String {
    match format {
        InboxFormat::Json => serde_json::to_string_pretty(open).expect("requests serialize") + "\n",
        InboxFormat::Text if open.is_empty() => "no open requests\n".to_owned(),
        InboxFormat::Text => open.iter().map(block).collect(),
    }
}

/// One request as text: its id, thread, who asks what, and how to answer it.
fn block(r: &OpenRequest) -> String {
    let q = &r.request;
    let asked = rfc3339(r.asked_at_ms.saturating_mul(1000));
    let mut text = format!("{}  thread {}  {asked}\n", r.id, r.thread);
    match q.kind {
        RequestKind::Ask => {
            text += &format!("  {} asks: {}\n", q.listener, q.question);
            if !q.choices.is_empty() {
                text += &format!("  choices: {}\n", q.choices.join(", "));
            }
        }
        RequestKind::Approval => {
            text += &format!("  {} calls {}: {}\n", q.listener, q.tool, q.question);
            if let Some(arguments) = &q.arguments {
                text += &format!("  arguments: {arguments}\n");
            }
        }
    }
    if let Some(default) = &q.default {
        let at = q.expires_at_ms.map(|ms| rfc3339(ms.saturating_mul(1000)));
        text += &format!(
            "  default: {default}{}\n",
            at.map(|a| format!(" at {a}")).unwrap_or_default()
        );
    }
    let how = match q.kind {
        RequestKind::Ask => "--value JSON",
        RequestKind::Approval => "--approve | --deny REASON | --edit JSON",
    };
    text += &format!("  answer: agentpump answer {} {how}\n", r.id);
    text
}
