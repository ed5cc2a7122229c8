//! [`PumpBuilder`] and [`PumpConfig`]: register listeners, choose a history store, validate, build.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::inbox::InboxPolicy;
use super::telemetry::{Telemetry, TelemetryConfig};
use super::{PumpHandle, Shared};
use crate::governor::GovernorPolicy;
use crate::history::{HistoryError, HistoryStore, MemoryHistory};
use crate::listener::{Registration, RegistrationError, Role};
use crate::system::is_reserved_namespace;
use crate::{Limits, QName};

/// Pump settings. Plain data; every field has a documented default.
///
/// # Example
///
/// ```
/// # use agentpump::{PumpBuilder, PumpConfig, QName, Registration, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let config = PumpConfig { queue_capacity: 2, ..PumpConfig::default() };
/// let say = QName::new("urn:example:say:v1", "say");
/// let pump = PumpBuilder::new().config(config).register(Registration::new("echo", Echo).accepts(say)).build()?;
/// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">1</say>"#).await?.thread();
/// pump.post(Some(thread), None, r#"<say xmlns="urn:example:say:v1">2</say>"#).await?;
/// let full = pump.post(Some(thread), None, r#"<say xmlns="urn:example:say:v1">3</say>"#).await.unwrap_err();
/// assert_eq!(full.code(), "queue-full"); // nothing ran yet: the queue holds two
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PumpConfig {
    /// Limits applied to every message and output (see [`Limits`]).
    pub limits: Limits,
    /// Most messages waiting in one thread's queue (default 1024). A message that does not fit
    /// is refused with `system-error code="queue-full"`; nothing is dropped silently.
    pub queue_capacity: usize,
    /// Deliveries a thread makes before yielding to other threads (default 128; in between, tokio's
    /// cooperative budget still makes a busy runner yield).
    pub batch: usize,
    /// Budgets, thresholds and the stop file (see [`GovernorPolicy`]).
    pub governor: GovernorPolicy,
    /// How AgentServer v2.1 payloads are taken in (see [`AgentServerConfig`]).
    pub agentserver: AgentServerConfig,
    /// A flood of identical refusals of outside input: past the first 8 in one thread within
    /// this window, the rest are answered but counted, not recorded one by one; the count is
    /// recorded as one `system-error code="refusals-repeated"` in reply to the first when the
    /// window closes (default 1 s; zero records every refusal).
    pub refusal_window: std::time::Duration,
    /// Eviction: a tree of threads (a root and its descendants) whose every thread has been
    /// done, halted or idle this long — nothing queued or running, no open child — leaves
    /// memory, and is reloaded from history when anything names one of its threads again.
    /// `None` (the default) keeps every thread in memory; so does a store that cannot reload
    /// a tree ([`MemoryHistory`], whose records are in memory anyway). See
    /// `docs/decisions/2026-11-26-eviction.md`.
    pub evict_idle_after: Option<std::time::Duration>,
    /// Which tool calls wait for a person's approval, the `questions` budget, and whether
    /// waiting counts against the wall clock (see [`InboxPolicy`]).
    pub inbox: InboxPolicy,
    /// OpenTelemetry export (see [`TelemetryConfig`]; off by default). The host applies the
    /// `OTEL_*` variables over it; an embedder calls [`TelemetryConfig::with_env`] to do so.
    pub telemetry: TelemetryConfig,
    /// The partition this pump holds when several pumps share the organism's threads (see
    /// [`Partition`](crate::thread::Partition)): every thread it makes gets an id in it, and a
    /// client-named thread outside it is refused. `None` (the default): one pump, every thread.
    pub partition: Option<crate::thread::Partition>,
}

/// AgentServer v2.1 interop. AgentServer payloads usually have no namespace, and no listener
/// can register a root in none: an organism that serves AgentServer clients declares the
/// namespace those payloads are taken into.
///
/// # Example
///
/// ```
/// # use agentpump::{AgentServerConfig, PumpBuilder, PumpConfig, QName, Registration, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let agentserver = AgentServerConfig { namespace: Some("urn:example:app:v1".into()) };
/// let config = PumpConfig { agentserver, ..PumpConfig::default() };
/// let greeting = QName::new("urn:example:app:v1", "Greeting");
/// let pump = PumpBuilder::new().config(config).register(Registration::new("echo", Echo).accepts(greeting)).build()?;
/// let xml = r#"<message xmlns="https://xml-pipeline.org/ns/envelope/v1"><meta><from>app</from></meta><Greeting xmlns="">hi</Greeting></message>"#;
/// let receipt = pump.send(xml).await?; // routed as {urn:example:app:v1}Greeting
/// assert_eq!(receipt.ids().len(), 1);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentServerConfig {
    /// The namespace an AgentServer payload whose root is in no namespace is moved into on
    /// ingress (`<Greeting xmlns="">` becomes `<Greeting xmlns="urn:…">`, and routes as
    /// `{urn:…}Greeting`); answers in that namespace go back to AgentServer clients in no
    /// namespace. `None` (the default): such payloads are refused with `no-route`. The namespace
    /// must be writable literally (no spaces, quotes, `<` or `&`) and not pump-owned, or
    /// [`PumpBuilder::build`] refuses it.
    pub namespace: Option<String>,
}

impl PumpConfig {
    /// A new thread id: in this pump's partition, if it holds one.
    pub(crate) fn new_thread(&self) -> crate::ThreadId {
        self.partition
            .map_or_else(crate::ThreadId::new, crate::thread::Partition::new_thread)
    }

    /// Default for [`PumpConfig::queue_capacity`].
    pub const DEFAULT_QUEUE_CAPACITY: usize = 1024;
    /// Default for [`PumpConfig::batch`].
    pub const DEFAULT_BATCH: usize = 128;
    /// Default for [`PumpConfig::refusal_window`].
    pub const DEFAULT_REFUSAL_WINDOW: std::time::Duration = std::time::Duration::from_secs(1);
}

impl Default for PumpConfig {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            queue_capacity: Self::DEFAULT_QUEUE_CAPACITY,
            batch: Self::DEFAULT_BATCH,
            governor: GovernorPolicy::default(),
            agentserver: AgentServerConfig::default(),
            refusal_window: Self::DEFAULT_REFUSAL_WINDOW,
            evict_idle_after: None,
            inbox: InboxPolicy::default(),
            telemetry: TelemetryConfig::default(),
            partition: None,
        }
    }
}

/// Why [`PumpBuilder::build`] refused.
///
/// # Example
///
/// ```
/// use agentpump::{BuildError, PumpBuilder, PumpConfig};
/// let config = PumpConfig { batch: 0, ..PumpConfig::default() };
/// assert!(matches!(PumpBuilder::new().config(config).build(), Err(BuildError::Config(_))));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    /// A registration is invalid or clashes with another.
    #[error(transparent)]
    Registration(#[from] RegistrationError),
    /// The history store refused the boot record.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// A configuration value that cannot work.
    #[error("invalid configuration: {0}")]
    Config(String),
}

/// Builds a pump: listeners, history store, configuration.
///
/// # Example
///
/// ```
/// use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let pump = PumpBuilder::new()
///     .register(Registration::new("echo", Echo).accepts(QName::new("urn:example:echo", "say")))
///     .build()?;
/// let receipt = pump.post(None, None, r#"<say xmlns="urn:example:echo">hi</say>"#).await?;
/// pump.settle(receipt.thread()).await;
/// assert_eq!(pump.history(receipt.thread()).await?.len(), 2);
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct PumpBuilder {
    registrations: Vec<Registration>,
    store: Option<Arc<dyn HistoryStore>>,
    config: PumpConfig,
    courier: Option<Arc<dyn super::spread::Courier>>,
}

impl PumpBuilder {
    /// A builder with no listeners, in-memory history and default configuration.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::PumpBuilder;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let pump = PumpBuilder::new().build()?; // no listeners, in-memory history
    /// assert!(pump.post(None, None, r#"<say xmlns="urn:example:say:v1"/>"#).await.is_err()); // nobody accepts it
    /// # Ok(())
    /// # }
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a listener.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let receipt = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?;
    /// assert_eq!(receipt.ids().len(), 1); // delivered to the echo
    /// # Ok(())
    /// # }
    /// ```
    pub fn register(mut self, registration: Registration) -> Self {
        self.registrations.push(registration);
        self
    }

    /// Uses `store` for history (default: a fresh [`MemoryHistory`]).
    ///
    /// # Example
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use agentpump::{PumpBuilder, history::{HistoryStore, MemoryHistory}};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = Arc::new(MemoryHistory::new());
    /// let pump = PumpBuilder::new().history(store.clone()).build()?;
    /// let boot = &store.thread(pump.system_thread(), 0).await?[0]; // the store the pump writes
    /// assert_eq!(boot.root.local(), "boot");
    /// # Ok(())
    /// # }
    /// ```
    pub fn history(mut self, store: Arc<dyn HistoryStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Sets the configuration.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, PumpConfig};
    /// let config = PumpConfig { queue_capacity: 0, ..PumpConfig::default() };
    /// let refused = PumpBuilder::new().config(config).check().unwrap_err();
    /// assert!(refused.to_string().contains("queue_capacity"));
    /// let config = PumpConfig { queue_capacity: 16, ..PumpConfig::default() };
    /// assert!(PumpBuilder::new().config(config).check().is_ok());
    /// ```
    pub fn config(mut self, config: PumpConfig) -> Self {
        self.config = config;
        self
    }

    /// The courier that carries children to the pumps of other partitions, and their results
    /// back (`agentpump run` sets it with `[store] spread_children`). With a
    /// [`PumpConfig::partition`] of more than one, a spawned child that its carve-out bounds in
    /// every dimension its parent's chain limits is placed in the partitions in turn; without
    /// a courier (the default) every child stays with its parent.
    #[must_use]
    pub fn courier(mut self, courier: Arc<dyn super::spread::Courier>) -> Self {
        self.courier = Some(courier);
        self
    }

    /// Validates the configuration and the registrations as [`build`](Self::build) does, and
    /// builds nothing: what a checker reports before anything runs.
    ///
    /// # Errors
    ///
    /// [`BuildError::Registration`] or [`BuildError::Config`], as [`build`](Self::build).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// let echo = Registration::new("echo", Echo).accepts(QName::new("urn:example:say:v1", "say"));
    /// let builder = PumpBuilder::new().register(echo.clone().peers(["nobody"]));
    /// let refused = builder.check().unwrap_err();
    /// assert_eq!(refused.to_string(), "listener `echo` names unknown peer `nobody`");
    /// assert!(PumpBuilder::new().register(echo).check().is_ok());
    /// ```
    pub fn check(&self) -> Result<(), BuildError> {
        check_config(&self.config)?;
        validate(&self.registrations)?;
        Ok(())
    }

    /// Validates the registrations, records `boot`, recovers what the history store kept from an
    /// earlier run (threads, governor ledgers, and every accepted message not yet delivered,
    /// re-queued in order), and returns the handle. Deliveries run on the tokio runtime of the
    /// caller that starts them; recovered messages need `build` to be called inside one.
    ///
    /// # Errors
    ///
    /// [`BuildError::Registration`] for an invalid or duplicate name, an unknown peer, two agents
    /// sharing a root, or a root in a pump-owned namespace; [`BuildError::History`] when the store
    /// cannot be read or refuses the boot record; [`BuildError::Config`] for a configuration that
    /// cannot work, or recovered messages without a tokio runtime.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let reserved = QName::new("urn:agentpump:system:v1", "huh");
    /// let refused = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(reserved)).build();
    /// assert!(refused.unwrap_err().to_string().contains("namespace only the pump handles"));
    /// let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// assert!(pump.health().is_ok());
    /// # Ok(())
    /// # }
    /// ```
    pub fn build(self) -> Result<PumpHandle, BuildError> {
        check_config(&self.config)?;
        let telemetry = Telemetry::start(&self.config.telemetry)
            .map_err(|e| BuildError::Config(e.to_string()))?;
        let (by_name, by_root) = validate(&self.registrations)?;
        let store = self.store.unwrap_or_else(|| Arc::new(MemoryHistory::new()));
        let recovery = store.recovery()?;
        // One system thread across restarts: an earlier run's is continued.
        let system_id = recovery
            .threads
            .iter()
            .find(|t| t.parent.is_none() && &*t.path == "system")
            .map(|t| t.id);
        let mut shared = Shared::new(
            self.registrations,
            by_name,
            by_root,
            store,
            self.config,
            system_id,
            telemetry,
        );
        shared.spread = super::spread::Spread::new(self.courier);
        let shared = Arc::new(shared);
        shared.start_sending();
        let observed = Arc::downgrade(&shared);
        shared.telemetry.observe_queues(move || {
            observed
                .upgrade()
                .map_or((0, 0, 0), |shared| shared.registry.queued())
        });
        shared.record_boot()?;
        let report = shared.recover(recovery)?;
        let _ = shared.lifecycle.recovered.set(report);
        shared.sweep_evictions();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            // Open requests of an earlier run are listed, waited on and timed again.
            let reopening = Arc::clone(&shared);
            runtime.spawn(async move { reopening.reopen().await });
        }
        Ok(PumpHandle::new(shared))
    }
}

fn check_config(config: &PumpConfig) -> Result<(), BuildError> {
    if let Some(ns) = &config.agentserver.namespace
        && !usable_namespace(ns)
    {
        return Err(BuildError::Config(format!(
            "agentserver.namespace `{ns}` must be a namespace URI (`urn:…`): not empty, no spaces, quotes, `<` or `&`"
        )));
    }
    let limits = &config.limits;
    let zero = [
        ("batch", config.batch),
        ("queue_capacity", config.queue_capacity),
        ("limits.max_bytes", limits.max_bytes),
        ("limits.max_depth", limits.max_depth),
        ("limits.max_outputs", limits.max_outputs),
    ];
    match zero.iter().find(|(_, v)| *v == 0) {
        Some((name, _)) => Err(BuildError::Config(format!("{name} must be at least 1"))),
        None => Ok(()),
    }
}

/// Whether `ns` can be written literally as a namespace declaration (XML allows no references
/// there) and is not a pump-owned namespace.
pub(crate) fn usable_namespace(ns: &str) -> bool {
    !ns.is_empty()
        && !ns.contains(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '&'))
        && !crate::system::is_reserved_namespace(ns)
}

type Indexes = (HashMap<Arc<str>, usize>, HashMap<QName, Vec<usize>>);

fn validate(registrations: &[Registration]) -> Result<Indexes, RegistrationError> {
    let mut by_name = HashMap::new();
    for (i, r) in registrations.iter().enumerate() {
        if !crate::listener::registration::valid_name(&r.name) {
            return Err(RegistrationError::InvalidName(r.name.to_string()));
        }
        if by_name.insert(Arc::clone(&r.name), i).is_some() {
            return Err(RegistrationError::DuplicateName(r.name.to_string()));
        }
    }
    let mut by_root: HashMap<QName, Vec<usize>> = HashMap::new();
    let mut agent_roots: HashMap<&QName, &str> = HashMap::new();
    for (i, r) in registrations.iter().enumerate() {
        if let Some(peer) = r.peers.iter().find(|p| !by_name.contains_key(*p)) {
            return Err(RegistrationError::UnknownPeer {
                listener: r.name.to_string(),
                peer: peer.to_string(),
            });
        }
        for peer in &r.process_peers {
            if let Some(&at) = by_name.get(peer)
                && registrations[at].role != Role::Process
            {
                return Err(RegistrationError::ToolCollision {
                    listener: r.name.to_string(),
                    peer: peer.to_string(),
                    role: registrations[at].role.as_str(),
                });
            }
        }
        for sibling in &r.trigger_siblings {
            let registered = by_name
                .get(sibling)
                .is_some_and(|&at| registrations[at].role == Role::Process);
            if !registered {
                return Err(RegistrationError::UnregisteredTriggerSibling {
                    listener: r.name.to_string(),
                    sibling: sibling.to_string(),
                });
            }
        }
        for root in r.accepts.iter().collect::<HashSet<_>>() {
            if root.namespace().is_empty() {
                return Err(RegistrationError::NoNamespace {
                    listener: r.name.to_string(),
                    root: root.local().to_owned(),
                });
            }
            if is_reserved_namespace(root.namespace()) {
                return Err(RegistrationError::ReservedRoot {
                    listener: r.name.to_string(),
                    root: root.to_string(),
                });
            }
            if r.role == Role::Agent
                && let Some(first) = agent_roots.insert(root, &r.name)
            {
                return Err(RegistrationError::SharedAgentRoot {
                    first: first.to_owned(),
                    second: r.name.to_string(),
                    root: root.to_string(),
                });
            }
            by_root.entry(root.clone()).or_default().push(i);
        }
    }
    Ok((by_name, by_root))
}
