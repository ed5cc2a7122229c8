//! [`CommandTool`]: a minimal `command` tool speaking the tool protocol (docs/tools.md), for
//! organisms that declare none. Runs `program` with `args` (a JSON list of strings) and answers
//! `exit_code`, `stdout`, `stderr`. Registered blocking, so its delivery timeout is the time
//! limit.

use async_trait::async_trait;
use quick_xml::escape::escape;

use crate::tasks::wire::{TOOL_NS, attributes, children};
use crate::{Context, Delivery, Listener, ListenerError};

/// Runs a program and answers with its exit code and output.
#[derive(Debug, Clone, Copy, Default)]
pub struct CommandTool;

/// A tool `<error>` answering `call`.
fn error(call: &str, kind: &str, message: &str) -> String {
    format!(
        "<error xmlns=\"{TOOL_NS}\" tool=\"command\" call=\"{}\" type=\"{kind}\" retry=\"false\">{}</error>",
        escape(call),
        escape(message)
    )
}

/// Runs the call `xml`; returns the answer.
fn run(xml: &str) -> String {
    let call = attributes(xml)
        .ok()
        .and_then(|a| a.get("id").cloned())
        .unwrap_or_default();
    let args = match children(xml, "arg") {
        Ok(args) => args,
        Err(e) => return error(&call, "invalid-argument", &e),
    };
    let Some(program) = args.get("program") else {
        return error(&call, "invalid-argument", "missing argument `program`");
    };
    let list: Vec<String> = match args.get("args").map(|a| serde_json::from_str(a)) {
        None => Vec::new(),
        Some(Ok(list)) => list,
        Some(Err(e)) => {
            return error(&call, "invalid-argument", &format!("`args`: {e}"));
        }
    };
    let output = match std::process::Command::new(program)
        .args(&list)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(output) => output,
        Err(e) => return error(&call, "failed", &format!("cannot run `{program}`: {e}")),
    };
    let Some(code) = output.status.code() else {
        return error(&call, "failed", &format!("`{program}` ended by a signal"));
    };
    format!(
        "<result xmlns=\"{TOOL_NS}\" tool=\"command\" call=\"{}\"><field name=\"exit_code\" type=\"number\">{code}</field><field name=\"stdout\">{}</field><field name=\"stderr\">{}</field></result>",
        escape(call.as_str()),
        escape(clean(&output.stdout).as_str()),
        escape(clean(&output.stderr).as_str()),
    )
}

/// Output kept in a result: the last 32 KiB of characters, control characters XML forbids
/// replaced by U+FFFD.
fn clean(bytes: &[u8]) -> String {
    const KEEP: usize = 32 * 1024;
    let text = String::from_utf8_lossy(bytes);
    let skip = text.chars().count().saturating_sub(KEEP);
    text.chars()
        .skip(skip)
        .map(|c| {
            if c < ' ' && !matches!(c, '\t' | '\n' | '\r') {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect()
}

#[async_trait]
impl Listener for CommandTool {
    async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
        if msg.is_system() {
            return Ok(());
        }
        if !msg.qname().is(TOOL_NS, "call") {
            return Err(ListenerError::InvalidPayload(
                "the command tool reads <call>".into(),
            ));
        }
        cx.reply(run(msg.payload().as_str()));
        Ok(())
    }
}
