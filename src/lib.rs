//! # agentpump
//!
//! An agent runtime: a pump routes namespaced XML payloads between listeners on threads.
//!
//! # Layout
//!
//! - [`envelope`]: the wire format — envelopes, payloads, names, ids and limits.

pub mod envelope;

pub use envelope::{
    Dialect, Envelope, EnvelopeError, IdError, Incoming, Limits, MessageId, Payload, Position,
    QName, ThreadId,
};
pub mod extract;
pub mod history;
pub mod host;
pub mod listener;
pub mod listeners;
pub mod pump;
pub mod system;
pub mod thread;

pub use listener::{
    Context, Delivery, Listener, ListenerError, Registration, Role, Typed, TypedListener, Usage,
};
pub use pump::{BuildError, IngressError, PumpBuilder, PumpConfig, PumpHandle, Receipt};
pub use thread::{Counters, ThreadInfo, ThreadState};
