//! [`Registration`]: a listener's name, the roots it accepts, its peers, role and limits.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::Listener;
use crate::QName;

/// What part a listener plays. Agents' roots are exclusive: no two agents accept the same root.
///
/// # Example
///
/// ```
/// use agentpump::{Registration, Role, listeners::Echo};
/// let planner = Registration::new("planner", Echo).role(Role::Agent);
/// assert_eq!((planner.listener_role().as_str(), planner.loops()), ("agent", true));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// Does one job on request (a calculator, a search).
    Tool,
    /// Decides what to do next (usually a model); iterates by messaging itself.
    Agent,
    /// Checks work against acceptance criteria.
    Verifier,
    /// Runs a deterministic workflow over other listeners.
    Process,
}

impl Role {
    /// The role as written in configuration.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::Role;
    /// assert_eq!(Role::Agent.as_str(), "agent");
    /// assert_eq!(Role::Tool.as_str(), "tool");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tool => "tool",
            Self::Agent => "agent",
            Self::Verifier => "verifier",
            Self::Process => "process",
        }
    }
}

/// A listener and how the pump should treat it. Built with [`Registration::new`] and the
/// methods that follow; checked by [`PumpBuilder::build`](crate::PumpBuilder::build).
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use agentpump::{PumpBuilder, QName, Registration, Role, listeners::Echo};
///
/// let echo = Registration::new("echo", Echo)
///     .accepts(QName::new("urn:example:say:v1", "say"))
///     .description("says back what it is told")
///     .timeout(Duration::from_secs(5));
/// assert_eq!((echo.name(), echo.listener_role()), ("echo", Role::Tool)); // a tool unless told
/// assert_eq!(echo.roots().len(), 1);
/// let twice = Registration::new("echo", Echo).accepts(QName::new("urn:example:say:v1", "shout"));
/// let refused = PumpBuilder::new().register(echo).register(twice).build().unwrap_err();
/// assert_eq!(refused.to_string(), "listener name `echo` is registered twice");
/// ```
#[derive(Clone)]
pub struct Registration {
    pub(crate) name: Arc<str>,
    pub(crate) accepts: Vec<QName>,
    pub(crate) description: String,
    pub(crate) example: Option<String>,
    pub(crate) peers: Vec<Arc<str>>,
    pub(crate) role: Role,
    pub(crate) timeout: Duration,
    pub(crate) may_loop: Option<bool>,
    pub(crate) blocking: bool,
    /// Peers this listener calls as processes (a process's RUN/USE of another process of its
    /// file): each must be registered with [`Role::Process`] (AG-034 otherwise).
    pub(crate) process_peers: Vec<Arc<str>>,
    /// Processes of this process's file with a trigger on one of its roots: a payload only
    /// their pattern matches is left to them, so each must be registered too.
    pub(crate) trigger_siblings: Vec<Arc<str>>,
    pub(crate) listener: Arc<dyn Listener>,
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("name", &self.name)
            .field("accepts", &self.accepts)
            .field("peers", &self.peers)
            .field("role", &self.role)
            .field("timeout", &self.timeout)
            .field("blocking", &self.blocking)
            .finish_non_exhaustive()
    }
}

/// Why a registration was refused by [`PumpBuilder::build`](crate::PumpBuilder::build).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistrationError {
    /// Two listeners share a name.
    #[error("listener name `{0}` is registered twice")]
    DuplicateName(String),
    /// A name that is empty, too long, reserved or has characters other than `A-Z a-z 0-9 _ - .`.
    #[error(
        "listener name `{0}` is invalid: use 1-64 of A-Z a-z 0-9 _ - . (and not `system`, `client` or `governor`)"
    )]
    InvalidName(String),
    /// A peer that is not registered.
    #[error("listener `{listener}` names unknown peer `{peer}`")]
    UnknownPeer {
        /// The listener.
        listener: String,
        /// The peer it names.
        peer: String,
    },
    /// Two agents accept the same root.
    #[error("agents `{first}` and `{second}` both accept {root}; an agent's root is its own")]
    SharedAgentRoot {
        /// The first agent.
        first: String,
        /// The second agent.
        second: String,
        /// The root they share, in Clark notation.
        root: String,
    },
    /// A listener that accepts a root in no namespace; payloads are namespaced XML.
    #[error(
        "listener `{listener}` accepts <{root}> in no namespace; give the root a namespace URI"
    )]
    NoNamespace {
        /// The listener.
        listener: String,
        /// The root's local name.
        root: String,
    },
    /// A listener that accepts a root in a namespace the pump owns.
    #[error("listener `{listener}` accepts {root}, which is in a namespace only the pump handles")]
    ReservedRoot {
        /// The listener.
        listener: String,
        /// The root, in Clark notation.
        root: String,
    },
    /// AG-034 PredefinedToolCollision: a process calls another process of its file by a name
    /// the pump has registered with another role (a tool, an agent): the call has two targets.
    #[error(
        "AG-034 PredefinedToolCollision: process `{listener}` calls `{peer}` as a process of its file, but the pump registers `{peer}` with role {role}; rename the process or that listener"
    )]
    ToolCollision {
        /// The calling process.
        listener: String,
        /// The name both a process and a listener of another role have.
        peer: String,
        /// The role it is registered with.
        role: &'static str,
    },
    /// A process shares a trigger root with a process of its file that is not registered: a
    /// payload only that one's pattern matches would start nothing and be answered by nobody.
    #[error(
        "process `{listener}` shares a trigger root with process `{sibling}` of its file, which is not registered as a process: a payload only `{sibling}`'s pattern matches would go unanswered; register `{sibling}` too"
    )]
    UnregisteredTriggerSibling {
        /// The registered process.
        listener: String,
        /// The process of its file that is missing.
        sibling: String,
    },
}

impl Registration {
    /// Default delivery timeout: a handler running longer gets `system-error code="handler-timeout"`.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

    /// Registers `listener` under `name`, as a [`Role::Tool`] accepting nothing yet.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Registration, Role, listeners::Echo};
    /// let echo = Registration::new("echo", Echo);
    /// assert_eq!((echo.name(), echo.listener_role()), ("echo", Role::Tool));
    /// assert!(echo.roots().is_empty()); // accepts nothing yet
    /// ```
    pub fn new(name: impl AsRef<str>, listener: impl Listener) -> Self {
        Self::from_shared(name, Arc::new(listener))
    }

    /// Registers a shared listener (one built elsewhere, e.g. from a builtin name).
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agentpump::{Listener, Registration, listeners::Echo};
    /// let shared: Arc<dyn Listener> = Arc::new(Echo); // one listener under two names
    /// let (a, b) = (Registration::from_shared("a", shared.clone()), Registration::from_shared("b", shared));
    /// assert_eq!((a.name(), b.name()), ("a", "b"));
    /// ```
    pub fn from_shared(name: impl AsRef<str>, listener: Arc<dyn Listener>) -> Self {
        Self {
            name: Arc::from(name.as_ref()),
            accepts: Vec::new(),
            description: String::new(),
            example: None,
            peers: Vec::new(),
            role: Role::Tool,
            timeout: Self::DEFAULT_TIMEOUT,
            may_loop: None,
            blocking: false,
            process_peers: Vec::new(),
            trigger_siblings: Vec::new(),
            listener,
        }
    }

    /// Names peers this listener calls as processes: [`PumpBuilder::build`](crate::PumpBuilder::build)
    /// refuses one registered with another role (AG-034 PredefinedToolCollision).
    pub(crate) fn process_peers(mut self, names: Vec<String>) -> Self {
        self.process_peers = names.into_iter().map(Arc::from).collect();
        self
    }

    /// Names the processes of this process's file that share a trigger root with it:
    /// [`PumpBuilder::build`](crate::PumpBuilder::build) refuses the pump unless each is
    /// registered as a process (a payload only its pattern matches would go unanswered).
    pub(crate) fn trigger_siblings(mut self, names: Vec<String>) -> Self {
        self.trigger_siblings = names.into_iter().map(Arc::from).collect();
        self
    }

    /// Adds a root this listener accepts.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{QName, Registration, listeners::Echo};
    /// let echo = Registration::new("echo", Echo)
    ///     .accepts(QName::new("urn:example:v1", "say"))
    ///     .accepts(QName::new("urn:example:v1", "shout"));
    /// assert_eq!(echo.roots()[1].local(), "shout");
    /// ```
    pub fn accepts(mut self, root: QName) -> Self {
        self.accepts.push(root);
        self
    }

    /// Sets the one-line description shown to agents and in listings.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Registration, listeners::Echo};
    /// let echo = Registration::new("echo", Echo).description("says back what it is told");
    /// assert_eq!(echo.about(), "says back what it is told");
    /// ```
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = text.into();
        self
    }

    /// Sets a payload this listener accepts from a client, as written: what the viewer's
    /// compose form offers to start from when the history sent it nothing.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Registration, listeners::Echo};
    /// let echo = Registration::new("echo", Echo).example(r#"<say xmlns="urn:example:v1">hi</say>"#);
    /// assert_eq!(echo.example_payload(), Some(r#"<say xmlns="urn:example:v1">hi</say>"#));
    /// ```
    pub fn example(mut self, payload: impl Into<String>) -> Self {
        self.example = Some(payload.into());
        self
    }

    /// Sets the listeners this one may address (besides itself and the sender it replies to).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// let say = QName::new("urn:example:v1", "say");
    /// let a = Registration::new("a", Echo).accepts(say.clone()).peers(["b"]);
    /// assert!(PumpBuilder::new().register(a.clone()).check().is_err()); // `b` is unknown
    /// assert!(PumpBuilder::new().register(a).register(Registration::new("b", Echo).accepts(say)).check().is_ok());
    /// ```
    pub fn peers<I, S>(mut self, peers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.peers = peers.into_iter().map(|p| Arc::from(p.as_ref())).collect();
        self
    }

    /// Sets the role.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{PumpBuilder, QName, Registration, Role, listeners::Echo};
    /// let root = QName::new("urn:example:v1", "plan");
    /// let agent = |name| Registration::new(name, Echo).accepts(root.clone()).role(Role::Agent);
    /// assert!(agent("a").loops()); // agents may iterate
    /// let refused = PumpBuilder::new().register(agent("a")).register(agent("b")).check();
    /// assert!(refused.unwrap_err().to_string().contains("an agent's root is its own"));
    /// ```
    pub fn role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }

    /// Runs this listener's handler on tokio's blocking pool (`spawn_blocking`), for handlers
    /// that call blocking code. Other threads keep being served while it blocks, and its
    /// delivery timeout is enforced when it passes: the delivery fails with `handler-timeout`
    /// at once, and whatever the handler does afterwards is dropped — except what it withdrew
    /// with [`Context::spend`](crate::Context::spend) before that, which stays charged to the
    /// budget but is missing from the thread's counters (its context never came back). Costs a
    /// thread handoff per delivery (a few microseconds); async handlers should not use it.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{Context, Delivery, Listener, ListenerError, PumpBuilder, QName, Registration};
    /// struct Slow; // calls blocking code
    /// #[agentpump::async_trait]
    /// impl Listener for Slow {
    ///     async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    ///         let text = std::fs::read_to_string("/dev/null").map_err(ListenerError::failed)?; // blocks
    ///         if !msg.is_system() { cx.reply(format!(r#"<read xmlns="urn:example:v1">{}</read>"#, text.len())); }
    ///         Ok(())
    ///     }
    /// }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let slow = Registration::new("slow", Slow).accepts(QName::new("urn:example:v1", "ask")).blocking();
    /// let pump = PumpBuilder::new().register(slow).build()?;
    /// let thread = pump.post(None, None, r#"<ask xmlns="urn:example:v1"/>"#).await?.thread();
    /// pump.settle(thread).await;
    /// assert_eq!(&*pump.history(thread).await?[1].payload, r#"<read xmlns="urn:example:v1">0</read>"#);
    /// # Ok(())
    /// # }
    /// ```
    pub fn blocking(mut self) -> Self {
        self.blocking = true;
        self
    }

    /// Sets the delivery timeout.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    /// use agentpump::{Registration, listeners::Echo};
    /// let echo = Registration::new("echo", Echo).timeout(Duration::from_secs(5));
    /// assert_eq!(echo.delivery_timeout(), Duration::from_secs(5));
    /// ```
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Allows or forbids messaging itself (iterating). Default: allowed for [`Role::Agent`] and
    /// [`Role::Process`], forbidden otherwise — a tool that addresses itself gets
    /// `system-error code="loop-not-permitted"`.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Registration, Role, listeners::Echo};
    /// assert!(!Registration::new("t", Echo).loops()); // a tool does not iterate by default
    /// assert!(Registration::new("t", Echo).may_loop(true).loops());
    /// assert!(!Registration::new("a", Echo).role(Role::Agent).may_loop(false).loops());
    /// ```
    pub fn may_loop(mut self, allowed: bool) -> Self {
        self.may_loop = Some(allowed);
        self
    }

    /// Whether this listener may message itself.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Registration, Role, listeners::Echo};
    /// assert!(Registration::new("p", Echo).role(Role::Process).loops());
    /// assert!(!Registration::new("v", Echo).role(Role::Verifier).loops());
    /// ```
    pub fn loops(&self) -> bool {
        self.may_loop
            .unwrap_or(matches!(self.role, Role::Agent | Role::Process))
    }

    /// The registered name.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Registration, listeners::Echo};
    /// assert_eq!(Registration::new("echo", Echo).name(), "echo");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The roots it accepts.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{QName, Registration, listeners::Echo};
    /// let say = QName::new("urn:example:v1", "say");
    /// assert_eq!(Registration::new("echo", Echo).accepts(say.clone()).roots(), [say]);
    /// ```
    pub fn roots(&self) -> &[QName] {
        &self.accepts
    }

    /// The one-line description.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Registration, listeners::Echo};
    /// assert_eq!(Registration::new("echo", Echo).about(), ""); // none given
    /// assert_eq!(Registration::new("echo", Echo).description("repeats").about(), "repeats");
    /// ```
    pub fn about(&self) -> &str {
        &self.description
    }

    /// The listeners this one may address, as declared (see [`Registration::peers`]).
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Registration, listeners::Echo};
    /// let echo = Registration::new("echo", Echo).peers(["calculator"]);
    /// assert_eq!(echo.declared_peers().collect::<Vec<_>>(), ["calculator"]);
    /// ```
    pub fn declared_peers(&self) -> impl Iterator<Item = &str> {
        self.peers.iter().map(|p| &**p)
    }

    /// The example payload set with [`Registration::example`], if any.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Registration, listeners::Echo};
    /// assert_eq!(Registration::new("echo", Echo).example_payload(), None); // none given
    /// ```
    pub fn example_payload(&self) -> Option<&str> {
        self.example.as_deref()
    }

    /// The role.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Registration, Role, listeners::Echo};
    /// assert_eq!(Registration::new("v", Echo).role(Role::Verifier).listener_role(), Role::Verifier);
    /// ```
    pub fn listener_role(&self) -> Role {
        self.role
    }

    /// How long one delivery may run before the pump cancels it.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::{Registration, listeners::Echo};
    /// assert_eq!(Registration::new("echo", Echo).delivery_timeout(), Registration::DEFAULT_TIMEOUT); // 30 s
    /// ```
    pub fn delivery_timeout(&self) -> Duration {
        self.timeout
    }
}

/// Whether `name` is a usable listener name.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
        && !matches!(name, "system" | "client" | "governor")
}
