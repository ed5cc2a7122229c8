//! The pump: [`PumpBuilder`] validates listeners and builds a [`PumpHandle`], through which
//! messages enter threads, threads are watched until they settle, and history is read.
//!
//! Each thread has a bounded FIFO queue and at most one runner task; threads run concurrently.
//! A delivery's outputs are parsed again, routed (by root, `to`, peers, reply), recorded and
//! queued in one transaction.

mod agentserver;
mod apply;
mod builder;
mod control;
mod dispatch;
mod evict;
mod fork;
mod gate;
mod halt;
pub mod inbox;
mod ingress;
mod lifecycle;
mod notice;
mod plan;
mod recover;
mod refusals;
mod route;
mod runner;
mod shutdown;
pub mod spread;
mod stall;
mod telemetry;
mod tx;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

#[cfg(feature = "host")]
pub(crate) use builder::usable_namespace;
pub use builder::{AgentServerConfig, BuildError, PumpBuilder, PumpConfig};
pub use control::ControlError;
pub use evict::Residency;
pub use fork::{ForkError, ForkOptions};
pub use inbox::{
    Approval, InboxChange, InboxError, InboxFilter, InboxPolicy, OpenRequest, Reply, ask_tool,
};
pub use ingress::{IngressError, Receipt};
pub use recover::RecoveryReport;
pub use shutdown::ShutdownReport;
pub use telemetry::{PAYLOAD_TEXT_LIMIT, TelemetryConfig, TelemetryError};
#[cfg(feature = "host")]
pub(crate) use telemetry::{
    Telemetry, check_protocol as telemetry_protocol, ratio as telemetry_ratio, remote,
};

use crate::history::{Batch, HistoryError, HistoryStore, NewRecord, Record, RecordKind};
use crate::listener::Registration;
use crate::system::{SYSTEM_SENDER, SystemMessage};
use crate::thread::registry::{Registry, ThreadEntry, ThreadInner};
use crate::{Envelope, QName, ThreadId, ThreadInfo};

/// What the handle and the runner tasks share: the parts, each owning its fields with its
/// methods beside them — [`route::Routes`] (the routing tables and the pump's [`Names`]),
/// [`lifecycle::Lifecycle`] (closing, stopped, runners and their waiters),
/// [`refusals::Refusals`], [`evict::Eviction`], [`stall::Stall`], [`spread::Spread`] (the
/// courier to other partitions' pumps and the parcels waiting for it) — and the registry, the
/// store and the configuration they work on.
///
/// The steps of an envelope's path are `impl Shared` blocks, one per file, in the order an
/// envelope meets them:
///
/// | file | methods |
/// | --- | --- |
/// | `pump/ingress.rs` | outside input admitted or refused (`admit`, `new_root`, `refuse`…) |
/// | `pump/agentserver.rs` | AgentServer payloads opening threads under a client's id |
/// | `pump/tx.rs` | one commit: records, queue pushes, wakes (`Tx::commit`, `await_commit`) |
/// | `pump/runner.rs` | a thread's runner task (`wake`, `run`, `finish_run`), a stall and its revival |
/// | `pump/gate.rs` | the governor's gate before a delivery (`gate`) |
/// | `pump/dispatch.rs` | one delivery: gate, handler, apply, commit (`deliver`) |
/// | `pump/plan.rs` | a handler's outputs checked and planned (`plan`) |
/// | `pump/apply/spawn.rs` | a child thread opened (`new_child`) |
/// | `pump/notice.rs` | notices into threads, governor decisions recorded, results to a parent here or on another pump (`notice`, `decide`, `tell_parent`) |
/// | `pump/inbox/hold.rs` | a call held for a person (`held`, `Applying::ask`); answers in `inbox/answer.rs` |
/// | `pump/halt.rs` | a halt, its report and its cascade (`halt_locked`, `halt_before`) |
/// | `pump/spread.rs` | children on other pumps: where a child goes, its grant (`spread_to`, `place_remote`); parcels sent (`spread/send.rs`), taken (`spread/take.rs`) and sent again after a restart (`spread/replay.rs`) |
/// | `pump/recover.rs` | a restart: pending work read back from history |
/// | this file | construction and the system thread's records |
///
/// (`docs/decisions/2026-11-26-layering.md` says why the type's methods are not in one file.)
#[derive(Debug)]
pub(crate) struct Shared {
    /// Every listener's registration, by index, name and root, and the pump's own sender names
    /// (`pump/route.rs`).
    routes: route::Routes,
    registry: Registry,
    store: Arc<dyn HistoryStore>,
    config: PumpConfig,
    system_thread: Arc<ThreadEntry>,
    /// What the pump tells an OpenTelemetry receiver; nothing when off (`pump/telemetry.rs`).
    telemetry: telemetry::Telemetry,
    /// Open requests to a person and the questions each thread asked (`pump/inbox.rs`).
    inbox: inbox::Inbox,
    /// Taking input, closing, stopped; runners alive and who waits for them
    /// (`pump/lifecycle.rs`).
    lifecycle: lifecycle::Lifecycle,
    /// Identical refusals of outside input, counted per thread (`pump/refusals.rs`).
    refusals: refusals::Refusals,
    /// Trees let go from memory and brought back (`pump/evict.rs`).
    eviction: evict::Eviction,
    /// A failed commit: whether runners take work, and the threads parked meanwhile
    /// (`pump/stall.rs`).
    stall: stall::Stall,
    /// Children on other pumps: the courier and the turn of partitions (`pump/spread.rs`).
    spread: spread::Spread,
}

/// How the pump names itself: the names it writes as senders and recipients, `system` (its
/// notices), `governor` (its decisions) and `client` (outside senders), one allocation each
/// shared by every record.
#[derive(Debug)]
pub(crate) struct Names {
    system: Arc<str>,
    governor: Arc<str>,
    client: Arc<str>,
}

impl Names {
    fn new() -> Self {
        Self {
            system: Arc::from(SYSTEM_SENDER),
            governor: Arc::from("governor"),
            client: Arc::from(crate::system::CLIENT_SENDER),
        }
    }
}

impl Shared {
    fn new(
        listeners: Vec<Registration>,
        by_name: HashMap<Arc<str>, usize>,
        by_root: HashMap<QName, Vec<usize>>,
        store: Arc<dyn HistoryStore>,
        config: PumpConfig,
        system_id: Option<ThreadId>,
        telemetry: telemetry::Telemetry,
    ) -> Self {
        let system_id = system_id.unwrap_or_else(|| config.new_thread());
        let system_thread = Arc::new(ThreadEntry::system(system_id));
        let registry = Registry::default();
        registry.insert(Arc::clone(&system_thread));
        Self {
            routes: route::Routes::new(listeners, by_name, by_root),
            registry,
            store,
            config,
            system_thread,
            telemetry,
            inbox: inbox::Inbox::default(),
            lifecycle: lifecycle::Lifecycle::default(),
            refusals: refusals::Refusals::default(),
            eviction: evict::Eviction::default(),
            stall: stall::Stall::default(),
            spread: spread::Spread::default(),
        }
    }

    /// Records a lifecycle message in the system thread; the ticket resolves once it is committed.
    fn record_system(
        &self,
        message: SystemMessage,
    ) -> Result<crate::history::Ticket, HistoryError> {
        let entry = &self.system_thread;
        let mut inner = entry.lock();
        inner.records += 1;
        let envelope = Envelope::new(
            Arc::clone(&self.routes.names.system),
            entry.id,
            message.to_payload(),
        );
        let batch = Batch {
            records: vec![NewRecord {
                envelope,
                kind: RecordKind::System,
                pending: false,
            }],
            threads: vec![entry.stored_info(&inner)],
            ..Batch::default()
        };
        self.store.append(batch)
    }

    fn record_boot(&self) -> Result<(), HistoryError> {
        self.record_system(SystemMessage::Boot {
            listeners: self.routes.len(),
        })
        .map(drop)
    }
}

/// The way into a running pump. Cheap to clone; every clone talks to the same pump.
///
/// Its methods, by what they are for:
///
/// | purpose | methods |
/// | --- | --- |
/// | send into threads | [`post`](Self::post), [`send`](Self::send), [`receive`](Self::receive) |
/// | wait | [`settle`](Self::settle) |
/// | read history | [`history`](Self::history), [`tree_history`](Self::tree_history), [`answers`](Self::answers), [`reports`](Self::reports), [`verify`](Self::verify), [`store`](Self::store) |
/// | see threads | [`thread`](Self::thread), [`threads`](Self::threads), [`tree`](Self::tree), [`system_thread`](Self::system_thread) |
/// | control a thread | [`stop`](Self::stop), [`resume`](Self::resume) |
/// | the pump's life | [`health`](Self::health), [`recovered`](Self::recovered), [`shutdown`](Self::shutdown) |
///
/// # Send into threads
///
/// [`post`](Self::post) takes a payload, into a new thread (`None`) or an existing one, to
/// every listener of its root or to one (`to`); [`send`](Self::send) takes a whole envelope
/// (agentpump's or AgentServer's); [`receive`](Self::receive) is the HTTP API's door (bytes,
/// and the thread a URL names). Each answers with a [`Receipt`] once the message is recorded,
/// or an [`IngressError`] whose answer is recorded too.
///
/// ```
/// # use agentpump::{PumpBuilder, Registration, QName, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let say = QName::new("urn:example:say:v1", "say");
/// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
/// let first = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?;
/// let thread = first.thread(); // a new root thread
/// let again = pump.post(Some(thread), Some("echo"), r#"<say xmlns="urn:example:say:v1">again</say>"#).await?;
/// assert_eq!(again.thread(), thread);
/// let envelope = format!(
///     r#"<message xmlns="urn:agentpump:envelope:v1"><meta><thread>{thread}</thread></meta>
///        <say xmlns="urn:example:say:v1">and again</say></message>"#
/// );
/// assert_eq!(pump.send(envelope).await?.thread(), thread);
/// let refused = pump.post(None, None, r#"<shout xmlns="urn:example:say:v1"/>"#).await.unwrap_err();
/// assert_eq!(refused.code(), "unknown-root"); // nobody accepts <shout>
/// # Ok(())
/// # }
/// ```
///
/// # Wait, read, see
///
/// [`settle`](Self::settle) waits until a thread and its children have nothing left to do.
/// Then [`history`](Self::history) gives its records in order ([`tree_history`](Self::tree_history)
/// with its children's), [`answers`](Self::answers) what went back out to the sender,
/// [`thread`](Self::thread) a snapshot (state, counters), [`tree`](Self::tree) the thread and
/// its children, [`threads`](Self::threads) every thread, and [`verify`](Self::verify) checks
/// every hash chain.
///
/// ```
/// # use agentpump::{PumpBuilder, Registration, QName, ThreadState, history::RecordKind, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let say = QName::new("urn:example:say:v1", "say");
/// # let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
/// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
/// pump.settle(thread).await;
/// let history = pump.history(thread).await?;
/// assert_eq!((history[0].kind, history[1].kind), (RecordKind::Message, RecordKind::Egress));
/// assert_eq!(&*history[1].payload, r#"<say xmlns="urn:example:say:v1">hi</say>"#);
/// assert_eq!(pump.answers(thread).await?.len(), 1); // the echo, as an envelope
/// let info = pump.thread(thread).expect("the thread exists");
/// assert_eq!((info.state, info.counters.deliveries), (ThreadState::Idle, 1));
/// assert_eq!(pump.tree(thread).len(), 1); // no children
/// assert!(pump.verify().await? >= 2);
/// # Ok(())
/// # }
/// ```
///
/// # Control a thread
///
/// [`stop`](Self::stop) halts a thread (BACKPRESSURE, with a halting report that
/// [`reports`](Self::reports) reads); [`resume`](Self::resume) lets a halted thread go on with
/// added budget, from the message it halted before.
///
/// ```
/// # use agentpump::{PumpBuilder, Registration, QName, ThreadState, governor::Budget, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let say = QName::new("urn:example:say:v1", "say");
/// # let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
/// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
/// pump.settle(thread).await;
/// pump.stop(thread).await?;
/// assert_eq!(pump.thread(thread).map(|t| t.state), Some(ThreadState::Halted));
/// assert_eq!(pump.reports(thread).await?[0].class, "BACKPRESSURE");
/// pump.resume(thread, &Budget { turns: Some(5), ..Budget::default() }).await?;
/// assert_ne!(pump.thread(thread).map(|t| t.state), Some(ThreadState::Halted));
/// # Ok(())
/// # }
/// ```
///
/// # The pump's life
///
/// [`health`](Self::health) says whether new input would be accepted,
/// [`recovered`](Self::recovered) what building the pump brought back from a durable store,
/// [`system_thread`](Self::system_thread) the pump's own thread (boot, shutdown, refusals of
/// input that named no usable thread), and [`shutdown`](Self::shutdown) stops it: decide, tell,
/// wait.
///
/// ```
/// # use std::time::Duration;
/// # use agentpump::{PumpBuilder, Registration, QName, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let say = QName::new("urn:example:say:v1", "say");
/// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
/// assert!(pump.health().is_ok());
/// assert_eq!(pump.recovered().threads, 0); // a fresh in-memory store
/// let report = pump.shutdown(Duration::from_secs(1)).await;
/// assert!(report.drained);
/// assert_eq!(pump.health().unwrap_err().code(), "shutting-down");
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PumpHandle {
    shared: Arc<Shared>,
}

impl PumpHandle {
    fn new(shared: Arc<Shared>) -> Self {
        Self { shared }
    }

    /// Waits until `thread` and every thread below it have nothing queued and nothing running,
    /// and every child they sent to another pump (`[store] spread_children`) is back.
    /// A thread that never settles (a listener that loops forever) keeps this waiting; wrap it in
    /// a timeout when that can happen.
    /// Returns at once for an unknown thread.
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
    /// pump.settle(thread).await; // the echo has answered
    /// assert_eq!(pump.history(thread).await?.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn settle(&self, thread: ThreadId) {
        self.settle_where(thread, ThreadInner::is_settled).await;
    }

    /// As [`PumpHandle::settle`], without waiting for children on other pumps: what this pump
    /// alone still has to do (a shutdown drains that; a parcel cannot come back then).
    pub(crate) async fn settle_here(&self, thread: ThreadId) {
        self.settle_where(thread, ThreadInner::is_quiet).await;
    }

    /// Waits until `thread` and every thread below it here are `done`.
    async fn settle_where(&self, thread: ThreadId, done: fn(&ThreadInner) -> bool) {
        let shared = &self.shared;
        let Some(top) = shared.registry.get(thread) else {
            return;
        };
        shared
            .lifecycle
            .wait_until(|| {
                loop {
                    // A scan that raced with a runner starting somewhere in the tree is repeated.
                    let before = top.tree_epoch.load(Ordering::SeqCst);
                    {
                        // A thread without children (the usual case) is checked under one lock.
                        let inner = top.lock();
                        if inner.children.is_empty() {
                            return done(&inner);
                        }
                    }
                    let subtree = shared.registry.subtree(thread);
                    if !subtree.iter().all(|e| done(&e.lock())) {
                        return false;
                    }
                    if top.tree_epoch.load(Ordering::SeqCst) == before {
                        return true;
                    }
                }
            })
            .await;
    }

    /// The records of one thread, in order.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
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
    /// let records = pump.history(thread).await?;
    /// assert_eq!((&*records[0].from, &*records[1].from), ("client", "echo"));
    /// assert_eq!(records[1].payload, records[0].payload); // echoed byte for byte
    /// # Ok(())
    /// # }
    /// ```
    pub async fn history(&self, thread: ThreadId) -> Result<Vec<Record>, HistoryError> {
        self.shared.store.thread(thread, 0).await
    }

    /// The records of `root` and every thread spawned below it, in `seq` order: acceptance
    /// order within each thread, and across the tree's threads too except, for the in-memory
    /// store on several workers, within a window of 128 records (`docs/history.md`). A whole
    /// tree's history in one read.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the store cannot be read.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, Spawn, listeners::Echo};
    /// # use agentpump::{Context, Delivery, Listener, ListenerError};
    /// struct Parent; // spawns one child thread with a `say` for the echo
    /// #[agentpump::async_trait]
    /// impl Listener for Parent {
    ///     async fn handle(&self, msg: &Delivery, cx: &mut Context) -> Result<(), ListenerError> {
    ///         if msg.qname().local() == "go" { // not the echo's answer in the child
    ///             cx.spawn(Spawn::new(r#"<say xmlns="urn:example:say:v1">hi</say>"#).sub_id("child"));
    ///         }
    ///         Ok(())
    ///     }
    /// }
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let (go, say) = (QName::new("urn:example:go:v1", "go"), QName::new("urn:example:say:v1", "say"));
    /// let pump = PumpBuilder::new()
    ///     .register(Registration::new("parent", Parent).accepts(go).peers(["echo"]))
    ///     .register(Registration::new("echo", Echo).accepts(say))
    ///     .build()?;
    /// let root = pump.post(None, None, r#"<go xmlns="urn:example:go:v1"/>"#).await?.thread();
    /// pump.settle(root).await;
    /// let all = pump.tree_history(root).await?;
    /// assert!(all.len() > pump.history(root).await?.len()); // the child's records too
    /// assert!(all.windows(2).all(|w| w[0].seq < w[1].seq)); // in seq order
    /// # Ok(())
    /// # }
    /// ```
    pub async fn tree_history(&self, root: ThreadId) -> Result<Vec<Record>, HistoryError> {
        let mut records = Vec::new();
        let _pinned = self.shared.load(root).await?;
        for t in self.tree(root) {
            records.extend(self.shared.store.thread(t.id, 0).await?);
        }
        records.sort_by_key(|r| r.seq);
        Ok(records)
    }

    /// Makes sure thread `id` is in memory: a thread of a tree that was evicted (see
    /// [`PumpConfig::evict_idle_after`]) is reloaded from history with its tree. False for a
    /// thread that neither memory nor history knows. The readers of live state ([`thread`],
    /// [`tree`], [`budget`](Self::budget)) see resident threads only: call this first for
    /// a thread that may have been evicted. Posting, stopping and resuming reload by
    /// themselves.
    ///
    /// [`thread`]: Self::thread
    /// [`tree`]: Self::tree
    ///
    /// # Errors
    ///
    /// [`HistoryError`] when the store cannot be read.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, Registration, QName, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let thread = pump.post(None, Some("echo"), r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
    /// assert!(pump.load(thread).await?);
    /// assert!(pump.thread(thread).is_some());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn load(&self, id: ThreadId) -> Result<bool, HistoryError> {
        Ok(self.shared.load(id).await?.is_some())
    }

    /// How many threads are in memory, and how many trees were evicted and reloaded.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?;
    /// let residency = pump.residency();
    /// assert_eq!(residency.resident, 2); // the new thread and the system thread
    /// assert_eq!(residency.evicted, 0); // no eviction configured
    /// # Ok(())
    /// # }
    /// ```
    pub fn residency(&self) -> Residency {
        self.shared.residency()
    }

    /// A snapshot of one thread, if it is in memory (see [`load`](Self::load)).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// # use agentpump::{ThreadId, ThreadState};
    /// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
    /// pump.settle(thread).await;
    /// let info = pump.thread(thread).expect("in memory");
    /// assert_eq!((info.state, info.depth, info.parent), (ThreadState::Idle, 0, None));
    /// assert!(pump.thread(ThreadId::new()).is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn thread(&self, id: ThreadId) -> Option<ThreadInfo> {
        self.shared.registry.get(id).map(|e| e.info(&e.lock()))
    }

    /// Snapshots of every thread (the system thread included), sorted by display path.
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
    /// let ids: Vec<_> = pump.threads().iter().map(|t| t.id).collect();
    /// assert!(ids.contains(&thread) && ids.contains(&pump.system_thread()));
    /// assert_eq!(ids.len(), 2);
    /// # Ok(())
    /// # }
    /// ```
    pub fn threads(&self) -> Vec<ThreadInfo> {
        let mut all: Vec<ThreadInfo> = self
            .shared
            .registry
            .all()
            .iter()
            .map(|e| e.info(&e.lock()))
            .collect();
        all.sort_by(|a, b| a.path.cmp(&b.path));
        all
    }

    /// `root` and every thread below it, parents before children.
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
    /// let tree = pump.tree(thread);
    /// assert_eq!(tree.len(), 1); // a root with no children
    /// assert_eq!(tree[0].id, thread);
    /// # Ok(())
    /// # }
    /// ```
    pub fn tree(&self, root: ThreadId) -> Vec<ThreadInfo> {
        self.shared
            .registry
            .subtree(root)
            .iter()
            .map(|e| e.info(&e.lock()))
            .collect()
    }

    /// What building this pump recovered from the history store (threads restored, messages
    /// re-queued); zero for a fresh store.
    ///
    /// # Example
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use agentpump::{PumpBuilder, QName, Registration, history::SqliteHistory, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = std::env::temp_dir().join(format!("agentpump-doc-recovered-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// # let path = dir.join("history.db");
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let echo = Registration::new("echo", Echo).accepts(say);
    /// let first = PumpBuilder::new().register(echo.clone()).history(Arc::new(SqliteHistory::open(&path)?)).build()?;
    /// assert_eq!(first.recovered().threads, 0); // a fresh file
    /// let thread = first.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread();
    /// first.shutdown(std::time::Duration::from_secs(1)).await;
    /// # drop(first);
    /// let second = PumpBuilder::new().register(echo).history(Arc::new(SqliteHistory::open(&path)?)).build()?;
    /// assert_eq!(second.recovered().threads, 2); // the system thread and `thread`
    /// assert!(second.thread(thread).is_some());
    /// # std::fs::remove_dir_all(&dir)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn recovered(&self) -> RecoveryReport {
        self.shared
            .lifecycle
            .recovered
            .get()
            .copied()
            .unwrap_or_default()
    }

    /// The pump's own thread: `boot`, `shutdown`, and refusals of input that named no usable thread.
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, QName, Registration, listeners::Echo};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).build()?;
    /// let boot = &pump.history(pump.system_thread()).await?[0];
    /// assert_eq!(boot.root.local(), "boot");
    /// # Ok(())
    /// # }
    /// ```
    pub fn system_thread(&self) -> ThreadId {
        self.shared.system_thread.id
    }

    /// The registered listeners, in registration order: name, what it does and the roots it
    /// accepts (what the viewer's organism view and compose form offer).
    ///
    /// # Example
    ///
    /// ```
    /// # use agentpump::{PumpBuilder, Registration, QName, listeners::Echo};
    /// let say = QName::new("urn:example:say:v1", "say");
    /// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say.clone())).build()?;
    /// let listed = pump.listeners();
    /// assert_eq!((listed[0].name(), listed[0].roots()), ("echo", &[say][..]));
    /// # Ok::<(), agentpump::BuildError>(())
    /// ```
    pub fn listeners(&self) -> Vec<crate::Registration> {
        (0..self.shared.routes.len())
            .map(|i| self.shared.routes[i].clone())
            .collect()
    }

    /// The history store, for reading (records by id, pending messages, threads by state,
    /// reports, verification). Do not `append` through it: records written around the pump
    /// bypass its thread locks and queues, so queue order and history order could differ.
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
    /// let records = pump.store().thread(thread, 0).await?; // from seq 0 on
    /// assert_eq!(records, pump.history(thread).await?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn store(&self) -> &Arc<dyn HistoryStore> {
        &self.shared.store
    }

    /// Recomputes every thread's hash chain; returns how many records verified.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Chain`] naming the first record that does not verify.
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
    /// assert_eq!(pump.verify().await?, 3); // boot, the say and its echo
    /// # Ok(())
    /// # }
    /// ```
    pub async fn verify(&self) -> Result<u64, HistoryError> {
        self.shared.store.verify().await
    }
}
