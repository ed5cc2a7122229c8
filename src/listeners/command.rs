//! [`CommandTool`]: the `command` tool, which runs a program with arguments under a policy, in a
//! process group of its own that ends with the call ([`group`](kill_all)).

mod group;
mod program;

pub use group::kill_all;
pub use program::locate;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rust_decimal::Decimal;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::tool::{self, Call, ErrorType, Signature, Tool, ToolError, ToolResult};
use crate::value::Value;
use crate::{Context, Registration};

/// Programs that are shells: refused unless [`CommandConfig::allow_shell`] is set, whatever
/// the allow list says (compared by file name, so `/bin/sh` is `sh`).
pub const SHELLS: [&str; 10] = [
    "sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "csh", "tcsh", "busybox",
];

/// What the command tool may run, where, for how long, with how much output and which
/// environment. Plain data; the organism file's `[tools.command]` section fills it.
///
/// # Example
///
/// ```
/// use agentpump::listeners::CommandConfig;
/// let config = CommandConfig { allow: vec!["cargo".into(), "ls".into()], ..CommandConfig::default() };
/// assert_eq!(config.env, ["PATH"]); // the rest of the environment is cleared
/// assert!(config.check().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandConfig {
    /// The programs a call may name, exactly as the call writes them (`cargo`, not
    /// `/usr/bin/cargo` unless listed so). Default: none.
    pub allow: Vec<String>,
    /// The working directory of every run. Default: `.`.
    pub cwd: PathBuf,
    /// How long a run may take before it is killed (error `timeout`). Default: 60 s.
    pub timeout: Duration,
    /// How many bytes of stdout and of stderr each are kept; the rest is read and dropped, and
    /// the result's `truncated` is `true`. Default: 65 536.
    pub max_output: usize,
    /// The environment variables passed through from the host's; the rest is cleared.
    /// Default: `PATH`.
    pub env: Vec<String>,
    /// Whether programs of [`SHELLS`] may run (they must still be on the allow list).
    /// Default: `false`.
    pub allow_shell: bool,
    /// Words no argument or standard input of a call may contain (a file a caller must not
    /// touch, by name): such a call is refused `not-allowed`. Default: none.
    pub deny: Vec<Deny>,
}

/// A word the command tool refuses in a call, and what it names (for the refusal's message).
///
/// # Example
///
/// ```
/// use agentpump::listeners::{CommandConfig, Deny};
/// let ledger = Deny { word: "status.jsonl".into(), what: "the task ledger, which only the orchestrator writes".into() };
/// let config = CommandConfig { allow: vec!["cat".into()], deny: vec![ledger], ..CommandConfig::default() };
/// assert_eq!(config.deny[0].word, "status.jsonl");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Deny {
    /// The word, matched anywhere in an argument or the standard input.
    pub word: String,
    /// What it names and why it is refused, in words (`the task ledger, …`).
    pub what: String,
}

impl Default for CommandConfig {
    fn default() -> Self {
        Self {
            allow: Vec::new(),
            cwd: PathBuf::from("."),
            timeout: Duration::from_secs(60),
            max_output: 65_536,
            env: vec!["PATH".to_owned()],
            allow_shell: false,
            deny: Vec::new(),
        }
    }
}

/// Why a [`CommandConfig`] is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandConfigError {
    /// A shell on the allow list without `allow_shell`.
    #[error(
        "`{0}` on the allow list is a shell; set allow_shell = true to let the command tool run shells"
    )]
    Shell(String),
}

impl CommandConfig {
    /// Checks the policy for contradictions.
    ///
    /// # Errors
    ///
    /// [`CommandConfigError::Shell`] for a shell on the allow list without `allow_shell`.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::listeners::CommandConfig;
    /// let shells = CommandConfig { allow: vec!["bash".into()], ..CommandConfig::default() };
    /// assert_eq!(shells.check().unwrap_err().to_string(), "`bash` on the allow list is a shell; set allow_shell = true to let the command tool run shells");
    /// assert!(CommandConfig { allow_shell: true, ..shells }.check().is_ok());
    /// ```
    pub fn check(&self) -> Result<(), CommandConfigError> {
        match self.allow.iter().find(|p| is_shell(p)) {
            Some(shell) if !self.allow_shell => Err(CommandConfigError::Shell(shell.clone())),
            _ => Ok(()),
        }
    }
}

/// Whether `program` is one of [`SHELLS`], by file name.
///
/// # Example
///
/// ```
/// use agentpump::listeners::command::is_shell;
/// assert!(is_shell("/bin/sh") && is_shell("bash"));
/// assert!(!is_shell("cargo"));
/// ```
pub fn is_shell(program: &str) -> bool {
    let name = program.rsplit('/').next().unwrap_or(program);
    SHELLS.contains(&name)
}

/// The `command` tool: runs a program directly (never through a shell unless the policy
/// allows shells), with arguments, optional stdin, in the configured directory, under a time
/// limit, an output cap and an environment allowlist.
///
/// Arguments: `program` (string), `args` (list of strings, optional), `stdin` (string,
/// optional). Result fields: `exit_code` (number; 128 + the signal for a program killed by
/// one), `stdout`, `stderr` (strings, invalid UTF-8 replaced), `truncated` (boolean),
/// `duration_ms` (number). A program that exits non-zero is a result, not an error. Errors:
/// `not-allowed` (not on the allow list, a shell without `allow_shell`, or a call naming a
/// [`Deny`] word), `timeout` (killed
/// at the time limit), `failed` (it could not be started).
///
/// The program runs in a new process group; when it exits, times out or the call is dropped,
/// the whole group is killed (SIGKILL) and the call ends once no process of it runs: a
/// background job it left behind never outlives the call.
///
/// # Example
///
/// ```
/// # use agentpump::{PumpBuilder, listeners::{CommandConfig, CommandTool}};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let tool = CommandTool::new(CommandConfig { allow: vec!["echo".into()], ..CommandConfig::default() });
/// let pump = PumpBuilder::new().register(tool.registration()).build()?;
/// let call = r#"<call xmlns="urn:agentpump:tool:v1" tool="command" id="t1"><arg name="program">echo</arg><arg name="args" type="json">["hi"]</arg></call>"#;
/// let thread = pump.post(None, None, call).await?.thread();
/// pump.settle(thread).await;
/// let result = &pump.history(thread).await?[1].payload;
/// assert!(result.contains(r#"<field name="exit_code" type="number">0</field>"#) && result.contains(r#"<field name="stdout">hi"#));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct CommandTool {
    config: CommandConfig,
}

impl CommandTool {
    /// The tool with its policy.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, listeners::{CommandConfig, CommandTool}};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let tool = CommandTool::new(CommandConfig { allow: vec!["ls".into()], ..CommandConfig::default() });
    /// let pump = PumpBuilder::new().register(tool.registration()).build()?;
    /// let call = r#"<call xmlns="urn:agentpump:tool:v1" tool="command"><arg name="program">rm</arg></call>"#;
    /// let thread = pump.post(None, None, call).await?.thread();
    /// pump.settle(thread).await;
    /// assert!(pump.history(thread).await?[1].payload.contains(r#"type="not-allowed""#)); // not on `allow`
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(config: CommandConfig) -> Self {
        Self { config }
    }

    /// Registered as `command`, with a delivery timeout 5 s above the run's time limit (so
    /// the tool's own `timeout` error answers first).
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use agentpump::{Role, listeners::{CommandConfig, CommandTool}};
    /// let registration = CommandTool::new(CommandConfig::default()).registration();
    /// assert_eq!((registration.name(), registration.listener_role()), ("command", Role::Tool));
    /// assert_eq!(registration.delivery_timeout(), Duration::from_secs(65)); // the run's 60 s, plus 5
    /// ```
    pub fn registration(self) -> Registration {
        let timeout = self.config.timeout + Duration::from_secs(5);
        tool::register(self).timeout(timeout)
    }

    fn refuse(&self, call: &Call, program: &str) -> Option<ToolError> {
        let message = if !self.config.allow.iter().any(|p| p == program) {
            let allowed = self.config.allow.join(", ");
            format!("`{program}` is not on the command tool's allow list ({allowed})")
        } else if is_shell(program) && !self.config.allow_shell {
            format!("`{program}` is a shell, and this organism does not allow shells")
        } else {
            return None;
        };
        Some(call.error(ErrorType::NotAllowed, message))
    }

    /// The refusal of a call whose arguments or input contain a [`Deny`] word.
    fn denied<'a>(
        &self,
        call: &Call,
        mut texts: impl Iterator<Item = &'a String>,
    ) -> Option<ToolError> {
        let found = texts.find_map(|t| self.config.deny.iter().find(|d| t.contains(&d.word)))?;
        Some(call.error(
            ErrorType::NotAllowed,
            format!("the call names {}", found.what),
        ))
    }

    fn command(&self, program: &Path, args: &[String], stdin: bool) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .current_dir(&self.config.cwd)
            .env_clear()
            .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        // A group of its own: everything it starts can be killed with it (`group`).
        #[cfg(unix)]
        cmd.process_group(0);
        for name in &self.config.env {
            if let Some(value) = std::env::var_os(name) {
                cmd.env(name, value);
            }
        }
        cmd
    }
}

#[async_trait]
impl Tool for CommandTool {
    fn signature(&self) -> Signature {
        Signature::new(
            "command",
            "runs an allowed program with arguments, without a shell",
        )
        .arg(
            "program",
            "string",
            "the program, as on the allow list",
            true,
        )
        .arg_schema(
            "args",
            json!({"type": "array", "items": {"type": "string"}, "description": "its arguments"}),
            false,
        )
        .arg(
            "stdin",
            "string",
            "text written to its standard input",
            false,
        )
        .field(
            "exit_code",
            "number",
            "its exit code (128 + signal if killed)",
        )
        .field("stdout", "string", "its standard output, up to the cap")
        .field("stderr", "string", "its standard error, up to the cap")
        .field("truncated", "boolean", "whether output was cut at the cap")
        .field("duration_ms", "number", "how long it ran")
    }

    async fn call(&self, call: &Call, _cx: &mut Context) -> Result<ToolResult, ToolError> {
        let program = call.args["program"].to_string();
        if let Some(refusal) = self.refuse(call, &program) {
            return Err(refusal);
        }
        let args: Vec<String> = match call.args.get("args") {
            Some(Value::List(items)) => items.iter().map(Value::to_string).collect(),
            _ => Vec::new(),
        };
        let stdin = call.args.get("stdin").map(Value::to_string);
        if let Some(refusal) = self.denied(call, args.iter().chain(&stdin)) {
            return Err(refusal);
        }
        // Found on the host's PATH: the child's own environment may have none (`env`).
        let path = std::env::var_os("PATH");
        let located = locate(&program, &self.config.cwd, path.as_deref())
            .map_err(|e| call.error(ErrorType::Failed, format!("cannot run `{program}`: {e}")))?;
        let started = Instant::now();
        let mut child = self
            .command(&located, &args, stdin.is_some())
            .spawn()
            .map_err(|e| call.error(ErrorType::Failed, format!("cannot run `{program}`: {e}")))?;
        let (feed, out, err) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let group = group::Group::of(&child);
        let cap = self.config.max_output;
        let run = async {
            let feed = async move {
                if let (Some(mut pipe), Some(text)) = (feed, stdin) {
                    // A program that exits without reading its input is not an error.
                    let _ = pipe.write_all(text.as_bytes()).await;
                }
            };
            let leader = async {
                let status = child.wait().await;
                // What it left running dies with it, closing the pipes it held.
                group.kill();
                status
            };
            let (_, out, err, status) =
                tokio::join!(feed, read_capped(out, cap), read_capped(err, cap), leader);
            (out, err, status)
        };
        let ran = tokio::time::timeout(self.config.timeout, run).await;
        group.kill();
        let _ = child.wait().await;
        group.kill_and_wait().await;
        let Ok((out, err, status)) = ran else {
            let limit = self.config.timeout.as_millis();
            return Err(call.error(
                ErrorType::Timeout,
                format!(
                    "`{program}` ran past {limit} ms and was killed with every process it started"
                ),
            ));
        };
        let status = status.map_err(|e| call.error(ErrorType::Failed, e.to_string()))?;
        let millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Ok(call
            .result()
            .field("exit_code", Decimal::from(exit_code(status)))
            .field("stdout", String::from_utf8_lossy(&out.0).into_owned())
            .field("stderr", String::from_utf8_lossy(&err.0).into_owned())
            .field("truncated", out.1 || err.1)
            .field("duration_ms", Decimal::from(millis)))
    }
}

/// The exit code, or 128 + the signal that ended the program.
fn exit_code(status: std::process::ExitStatus) -> i32 {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return 128 + signal;
        }
    }
    status.code().unwrap_or(-1)
}

/// Reads a pipe to its end, keeping the first `cap` bytes; whether more came.
async fn read_capped(pipe: Option<impl AsyncRead + Unpin>, cap: usize) -> (Vec<u8>, bool) {
    let Some(mut pipe) = pipe else {
        return (Vec::new(), false);
    };
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut buf = [0u8; 8192];
    // Read to the end even past the cap, so the program never blocks on a full pipe.
    while let Ok(n @ 1..) = pipe.read(&mut buf).await {
        let room = cap - kept.len();
        truncated |= n > room;
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    (kept, truncated)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shells_on_the_allow_list_need_allow_shell() {
        let mut config = CommandConfig {
            allow: vec!["cargo".into(), "/bin/sh".into()],
            ..CommandConfig::default()
        };
        assert_eq!(
            config.check(),
            Err(CommandConfigError::Shell("/bin/sh".into()))
        );
        config.allow_shell = true;
        assert_eq!(config.check(), Ok(()));
        assert!(!is_shell("shellcheck"));
    }
}
