//! # agentpump
//!
//! An agent runtime: a pump routes namespaced XML payloads between listeners on threads, and
//! keeps every accepted message in a hash-chained history. Start with [`PumpBuilder`].
//!
//! # Layout
//!
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
//! - [`history`]: records, hash chains and the [`HistoryStore`](history::HistoryStore) trait.
//! - [`process`]: the process language front end: APS documents, parser, AST, static AG checks.
//! - [`host`]: the `agentpump` command line.

pub mod envelope;
pub mod extract;
pub mod governor;
pub mod history;
pub mod host;
pub mod listener;
pub mod listeners;
pub mod process;
pub mod pump;
pub mod system;
pub mod thread;

pub use envelope::{
    Dialect, Envelope, EnvelopeError, IdError, Incoming, Limits, MessageId, Payload, Position,
    QName, ThreadId,
};
pub use listener::{
    Context, Delivery, Listener, ListenerError, Registration, Role, Typed, TypedListener, Usage,
};
pub use pump::{BuildError, IngressError, PumpBuilder, PumpConfig, PumpHandle, Receipt};
pub use thread::{Counters, ThreadInfo, ThreadState};

/// The README's code, compiled and run as a doc test.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
