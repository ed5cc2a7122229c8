//! The pump's own words at the lowest floor: the namespaces only the pump handles and the
//! sender names it injects. Every module above reads them from here (`system` re-exports them).

use super::{AGENTSERVER_NS, ENVELOPE_NS};

/// Namespace of the system messages and requests.
pub const SYSTEM_NS: &str = "urn:agentpump:system:v1";
/// Namespace of the governor messages (`goal`, `loop`, `residual`, `criterion`, `learning`).
pub const GOVERNOR_NS: &str = "urn:agentpump:governor:v1";

/// Namespace of a process's events (`tell`, `snap`, `milestone`, `par`, `join`, `return`,
/// `failed`) and of its `continue` (the next turn of a process that ran its steps for this one).
/// Only a listener registered with the process role may emit them; events are recorded, not
/// delivered.
pub const PROCESS_NS: &str = "urn:agentpump:process:v1";

/// Namespace of visible plans (seed 003's `<todo-until>`): written by agents, checked and
/// recorded by the pump, which holds a thread's `done` to its latest plan (module `todo`).
pub const TODO_NS: &str = "urn:agentpump:todo:v1";

/// Namespace of a person's part in a thread: `request` (a question or an approval put to a
/// person) and `answer` (how it was answered). Only the pump writes them (`pump/inbox`).
pub const INBOX_NS: &str = "urn:agentpump:inbox:v1";

/// The name the pump uses as the sender of the messages it emits.
pub const SYSTEM_SENDER: &str = "system";
/// The name the pump gives to senders outside the pump (API, CLI, [`PumpHandle`](crate::PumpHandle)).
pub const CLIENT_SENDER: &str = "client";

/// Whether `namespace` is one only the pump handles (system, governor, process, plan, inbox,
/// either envelope): no listener may accept a root in it, and a payload in it from a listener or client
/// is refused.
///
/// # Example
///
/// ```
/// use agentpump::envelope::is_reserved_namespace;
/// assert!(is_reserved_namespace("urn:agentpump:system:v1"));
/// assert!(is_reserved_namespace("urn:agentpump:todo:v1"));
/// assert!(is_reserved_namespace("urn:agentpump:inbox:v1"));
/// assert!(!is_reserved_namespace("urn:example:v1"));
/// ```
pub fn is_reserved_namespace(namespace: &str) -> bool {
    [
        SYSTEM_NS,
        GOVERNOR_NS,
        PROCESS_NS,
        TODO_NS,
        INBOX_NS,
        ENVELOPE_NS,
        AGENTSERVER_NS,
    ]
    .contains(&namespace)
}
