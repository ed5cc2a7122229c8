//! The system namespace `urn:agentpump:system:v1`: every message only the pump may emit
//! ([`SystemMessage`]) and the requests a listener may make of the pump ([`Request`]).
//!
//! A listener or client that emits a pump-only element gets `<huh code="reserved-namespace">`,
//! whatever prefix it used; the attempt is recorded, not acted on.

mod codes;
mod message;
mod request;

pub use codes::{ErrorCode, HuhCode, ThreadErrorCode};
pub(crate) use message::attempt;
pub use message::{ORIGINAL_ATTEMPT_LIMIT, SystemMessage, ThreadStatus};
pub use request::{Request, Spawn};

pub use crate::envelope::{
    CLIENT_SENDER, GOVERNOR_NS, SYSTEM_NS, SYSTEM_SENDER, is_reserved_namespace,
};
