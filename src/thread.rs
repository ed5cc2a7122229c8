//! Threads: [`ThreadState`], the [`ThreadInfo`] snapshot users read, and the registry the pump
//! keeps of every thread (states, parent/child tree, depth, display path, counters).
//!
//! A thread is one conversation, processed one delivery at a time. A root thread starts when a
//! message arrives without `<thread>`; a child thread starts when a listener emits `spawn-thread`.

mod partition;
pub(crate) mod registry;

pub use partition::Partition;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Dialect, ThreadId};

/// Where a thread is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadState {
    /// It has queued or in-flight deliveries.
    Active,
    /// Its queue is empty; it accepts new messages.
    Idle,
    /// Its queue is empty and a question or approval of it waits for a person's answer
    /// (`PumpHandle::answer`); it takes no turns until then and accepts new messages.
    Waiting,
    /// A listener emitted `thread-done`; it accepts no new messages.
    Done,
    /// The governor stopped it; it accepts no new messages unless resumed.
    Halted,
}

impl ThreadState {
    /// The state as written in output and queries.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::ThreadState;
    /// assert_eq!(ThreadState::Halted.as_str(), "halted");
    /// assert_eq!("idle".parse::<ThreadState>().map(ThreadState::as_str), Ok("idle"));
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Idle => "idle",
            Self::Waiting => "waiting",
            Self::Done => "done",
            Self::Halted => "halted",
        }
    }

    /// Whether the thread refuses new messages.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::ThreadState;
    /// assert!(ThreadState::Done.is_closed() && ThreadState::Halted.is_closed());
    /// assert!(!ThreadState::Idle.is_closed());
    /// ```
    pub fn is_closed(self) -> bool {
        matches!(self, Self::Done | Self::Halted)
    }
}

impl fmt::Display for ThreadState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A state name that is not one of `active`, `idle`, `waiting`, `done`, `halted`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown thread state `{0}`, expected active, idle, waiting, done or halted")]
pub struct StateError(String);

impl FromStr for ThreadState {
    type Err = StateError;

    fn from_str(s: &str) -> Result<Self, StateError> {
        match s {
            "active" => Ok(Self::Active),
            "idle" => Ok(Self::Idle),
            "waiting" => Ok(Self::Waiting),
            "done" => Ok(Self::Done),
            "halted" => Ok(Self::Halted),
            other => Err(StateError(other.to_owned())),
        }
    }
}

impl ThreadInfo {
    /// The snapshot as a store reports it: an open thread is `active` while it has undelivered
    /// messages (`busy`), else `idle`; snapshots are saved on structural changes only.
    pub(crate) fn with_live_state(mut self, busy: bool, counters: Counters) -> Self {
        self.counters = counters;
        if !self.state.is_closed() {
            self.state = if busy {
                ThreadState::Active
            } else {
                ThreadState::Idle
            };
        }
        self
    }
}

pub use crate::governor::Counters;

/// A snapshot of one thread.
///
/// # Example
///
/// ```
/// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let say = QName::new("urn:example:say:v1", "say");
/// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
/// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
/// pump.settle(thread).await;
/// let info = pump.thread(thread).expect("in memory");
/// assert_eq!((info.depth, info.children.len(), info.counters.deliveries), (0, 0, 1));
/// assert_eq!(&*info.path, &thread.to_string()[..8]); // a root's path is its short id
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// The thread's id.
    pub id: ThreadId,
    /// The spawning thread, for a child.
    pub parent: Option<ThreadId>,
    /// The listener that spawned it, for a child.
    pub spawner: Option<Arc<str>>,
    /// 0 for a root thread, parent's depth + 1 for a child.
    pub depth: u32,
    /// Display path: the root's short id, then each child's suggested sub-id (`1a2b3c4d.research.web`).
    pub path: Arc<str>,
    /// Current state.
    pub state: ThreadState,
    /// Direct children, in spawn order.
    pub children: Vec<ThreadId>,
    /// Use so far.
    pub counters: Counters,
    /// The envelope dialect of the outside sender that started it: answers go out in kind.
    /// Listed only when it is not the agentpump dialect.
    #[serde(default, skip_serializing_if = "Dialect::is_agentpump")]
    pub dialect: Dialect,
}
