//! # agentpump
//!
//! An agent runtime: a pump routes namespaced XML payloads between listeners on threads, and
//! keeps every accepted message in a hash-chained history. Start with [`PumpBuilder`].
//!
//! # Layout
//!
//! - [`Error`]: one error for callers, over each module's own (`?` converts).
//! - [`envelope`]: the wire format — envelopes, payloads, qualified names, ids and limits.
//! - [`extract`]: finding payload elements in listener or model text output.
//! - [`listener`]: the [`Listener`] trait, the [`Context`] a handler works through, registrations
//!   and the typed serde helper.
//! - [`listeners`]: ready-made listeners.
//! - [`thread`]: thread states and snapshots.
//! - [`pump`]: building the pump, sending into threads, routing, scheduling, shutdown.
//! - [`system`]: the pump's own messages (`huh`, `system-error`, `thread-result`, …) and the
//!   requests listeners may make (`spawn-thread`, `clear-context`, `thread-done`).
//! - [`governor`]: budgets, loop signals, halting certificates and halting reports.
//! - [`tool`]: the tool protocol (call, result, error), signatures, the [`Tool`](tool::Tool)
//!   trait and its adapter.
//! - [`value`]: exact JSON-like values, for tool arguments and results and processes.
//! - [`history`]: records, hash chains, the [`HistoryStore`](history::HistoryStore) trait and its
//!   paged reads.
//! - [`todo`](mod@todo): visible plans (seed 003's `<todo-until>`): read, written, read back from a
//!   thread's history; the pump holds a thread's `done` to its latest plan.
//! - [`tasks`]: seed 004's task files, the JSON Lines status ledger and the orchestrator that
//!   works each task in a thread.
//! - [`process`]: the process language: APS documents, parser, static AG checks, and the
//!   engine that runs processes on the pump ([`process::engine`]).
//! - [`host`]: the `agentpump` command line, the HTTP API and the history viewer (feature
//!   `host`, on by default).
//!
//! # Features
//!
//! - `host` (default): the [`host`] module and the `agentpump` binary — clap, axum, toml,
//!   tracing-subscriber, mimalloc. Enables `llm`.
//! - `llm` (default, through `host`): [`listeners::llm`], the LLM agent — reqwest and rustls.
//!
//! Without them (`default-features = false`) the crate is the library alone: pump, listeners,
//! governor, history and the process language front end.

pub mod envelope;
mod error;
pub mod extract;
pub mod governor;
pub mod history;
#[cfg(feature = "host")]
pub mod host;
pub mod listener;
pub mod listeners;
pub mod process;
pub mod pump;
pub mod system;
pub mod tasks;
pub mod thread;
pub mod todo;
pub mod tool;
pub mod value;

pub use envelope::{
    Dialect, Envelope, EnvelopeError, IdError, Incoming, Limits, MessageId, Payload, Position,
    QName, ThreadId,
};
pub use error::Error;
pub use listener::{
    Context, Delivery, Listener, ListenerError, Registration, Role, Typed, TypedListener, Usage,
};
pub use pump::{
    AgentServerConfig, Approval, BuildError, InboxChange, InboxFilter, InboxPolicy, IngressError,
    OpenRequest, PumpBuilder, PumpConfig, PumpHandle, Receipt, Reply, TelemetryConfig,
    TelemetryError, ask_tool,
};
pub use system::Spawn;
pub use thread::{Counters, ThreadInfo, ThreadState};

/// The attribute every `impl Listener` needs (the trait has an async method), re-exported so a
/// program needs no `async-trait` dependency of its own: `#[agentpump::async_trait]`.
pub use async_trait::async_trait;

/// The README's code, compiled and run as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The code of the reference pages in `docs/`, compiled and run as doc tests.
#[cfg(doctest)]
pub mod docs {
    #[doc = include_str!("../docs/listeners.md")]
    pub struct Listeners;
    #[doc = include_str!("../docs/organism.md")]
    pub struct Organism;
    #[doc = include_str!("../docs/http-api.md")]
    pub struct HttpApi;
    #[doc = include_str!("../docs/governor.md")]
    pub struct Governor;
    #[doc = include_str!("../docs/history.md")]
    pub struct History;
    #[doc = include_str!("../docs/reliability.md")]
    pub struct Reliability;
    #[doc = include_str!("../docs/performance.md")]
    pub struct Performance;
    #[doc = include_str!("../docs/tools.md")]
    pub struct Tools;
    #[doc = include_str!("../docs/processes.md")]
    pub struct Processes;
    #[doc = include_str!("../docs/tasks.md")]
    pub struct Tasks;
    #[doc = include_str!("../docs/plans.md")]
    pub struct Plans;
}
