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

/// Namespace of the system messages and requests.
pub const SYSTEM_NS: &str = "urn:agentpump:system:v1";
/// Namespace of the governor messages (`goal`, `loop`, `residual`, `criterion`, `learning`).
pub const GOVERNOR_NS: &str = "urn:agentpump:governor:v1";

/// The name the pump uses as the sender of the messages it emits.
pub const SYSTEM_SENDER: &str = "system";
/// The name the pump gives to senders outside the pump (API, CLI, [`PumpHandle`](crate::PumpHandle)).
pub const CLIENT_SENDER: &str = "client";

/// Whether `namespace` is one only the pump handles (system, governor, either envelope): no
/// listener may accept a root in it, and a payload in it from a listener or client is refused.
pub fn is_reserved_namespace(namespace: &str) -> bool {
    [
        SYSTEM_NS,
        GOVERNOR_NS,
        crate::envelope::ENVELOPE_NS,
        crate::envelope::AGENTSERVER_NS,
    ]
    .contains(&namespace)
}
