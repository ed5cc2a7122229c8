//! [`HostError`]: why a command of the host failed.

use std::path::PathBuf;

use crate::EnvelopeError;
use crate::history::HistoryError;
use crate::host::server::TokenError;
use crate::pump::{BuildError, ControlError, IngressError};

/// A cause kept as a [`HostError`]'s `source()` (a `reqwest::Error`, a `serde_json::Error`, …).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a command of the host (the CLI, the HTTP client, the organism file) failed.
///
/// Each message is the one line the CLI prints after `agentpump: `, complete in itself (it
/// includes the cause's own text); the `source()` keeps the cause for programs that inspect it.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// NATS or JetStream is unusable for remote listeners, or `[cluster]` is wrong
    /// (`cannot connect to NATS at nats://…: …`).
    #[error("{0}")]
    Cluster(String),
    /// An organism file is wrong: the file, the line when known, and the key or value at fault
    /// (`organism.toml:2: unknown kind `nope`, expected builtin, llm, process or loop`).
    #[error("{origin}{}: {message}", line.map(|l| format!(":{l}")).unwrap_or_default())]
    Organism {
        /// The file, as the user named it.
        origin: String,
        /// The 1-based line at fault, when the parser knows it.
        line: Option<usize>,
        /// What is wrong there.
        message: String,
    },
    /// A file could not be read or written (`notes.xml: No such file or directory`).
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A file is not a valid envelope or payload (`agentpump check`): the file and the
    /// parser's message.
    #[error("{}: {source}", path.display())]
    Envelope {
        /// The file.
        path: PathBuf,
        /// The parser's error.
        #[source]
        source: EnvelopeError,
    },
    /// A file the command replaces could not be removed (`demo.db: cannot replace it: …`).
    #[error("{}: cannot replace it: {source}", path.display())]
    Replace {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// An address could not be listened on (`127.0.0.1:7700: cannot listen: Address already in
    /// use; listen elsewhere with --port N …`): what to change follows the cause.
    #[error("{addr}: cannot listen: {source}; {remedy}")]
    Listen {
        /// The address, as configured.
        addr: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
        /// How to listen elsewhere, in the command's own words (its flags, its config key).
        remedy: &'static str,
    },
    /// The operating system refused something that has no file: starting the async runtime,
    /// serving, writing the output.
    #[error("{0}")]
    System(#[source] std::io::Error),
    /// The HTTP API's bearer token could not be read or created.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The history store failed (cannot be opened, read or written).
    #[error(transparent)]
    History(#[from] HistoryError),
    /// The organism's pump could not be built.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// Telemetry is configured wrong (`OTEL_TRACES_SAMPLER="sometimes" is not accepted: …`).
    #[error(transparent)]
    Telemetry(#[from] crate::pump::TelemetryError),
    /// The pump refused a message the host sent into it (boxed: it holds the refused input).
    #[error(transparent)]
    Ingress(Box<IngressError>),
    /// The pump refused a stop or resume.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// A running host could not be reached, or its answer could not be read: the message names
    /// the URL and what went wrong.
    #[error("{message}")]
    Http {
        /// What failed, with the URL.
        message: String,
        /// The client or decoding error, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// A running host answered with an error: its problem detail and code, or the status.
    #[error("{0}")]
    Remote(String),
    /// What the command was asked cannot be done: a thread that is not an id, matches nothing
    /// or several threads, has no report; a database the demo will not replace; no token.
    #[error("{0}")]
    Usage(String),
    /// The user interrupted the command (Ctrl-C); the message says where what ran is kept.
    #[error("{0}")]
    Interrupted(String),
    /// A thread did not settle (idle, done or halted) in the time given.
    #[error("{0}")]
    Unsettled(String),
    /// A check found problems (`agentpump process check`, `verify --certificates`, the demo's
    /// own checks): the summary.
    #[error("{0}")]
    Check(String),
    /// An organism's MCP server cannot be used, or the host cannot serve MCP.
    #[error(transparent)]
    Mcp(#[from] crate::host::mcp::McpError),
    /// A task command failed (`agentpump tasks …`): task files, the graph or the ledger.
    #[error(transparent)]
    Tasks(#[from] crate::tasks::TasksError),
    /// An inbox request could not be listed or answered (the demo's approval).
    #[error(transparent)]
    Inbox(#[from] crate::pump::InboxError),
}

impl From<IngressError> for HostError {
    fn from(e: IngressError) -> Self {
        Self::Ingress(Box::new(e))
    }
}

impl HostError {
    /// A file error at `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    /// An error talking to a running host, with its cause.
    pub fn http(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Http {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A command that cannot be done as asked.
    pub fn usage(message: impl Into<String>) -> Self {
        Self::Usage(message.into())
    }
}
