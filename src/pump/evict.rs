//! Eviction: a tree of threads that stayed quiet for
//! [`PumpConfig::evict_idle_after`](super::PumpConfig::evict_idle_after) leaves memory, and
//! comes back from history — through the restart's own path, [`Shared::restore`] — the moment
//! anything names one of its threads (a post, a resume, a stop, a read through the handle).
//!
//! The unit is a whole tree (a root thread and its descendants): a child's account draws on
//! its parent's and its results go to its parent, so a tree is in memory entirely or not at
//! all. A sweeper task, holding only a `Weak` to the pump, looks at the resident roots every
//! quarter of the idle time; nothing is added to a delivery.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use super::Shared;
use super::builder::BuildError;
use crate::ThreadId;
use crate::history::HistoryError;
use crate::thread::registry::{ThreadEntry, ThreadInner};

/// The pump's eviction state.
#[derive(Debug, Default)]
pub(crate) struct Eviction {
    /// Serialises reloads with one another and with evictions (cold paths only), so that a
    /// tree is never rebuilt twice nor rebuilt while it is being let go.
    gate: tokio::sync::Mutex<()>,
    /// Per resident root: its tree's epoch when last seen changed, and since when.
    seen: Mutex<HashMap<ThreadId, (u64, Instant)>>,
    /// Per evicted thread whose wall-clock deadline has not passed: when it started and its
    /// deadline — instants of this process, which history does not keep. Forgotten once the
    /// deadline passes (the sweeper): a reloaded thread with a deadline and no entry here is
    /// past it. So this grows with the threads evicted within one wall-clock budget, not with
    /// the age of the host.
    clocks: Mutex<Clocks>,
    sweeper: OnceLock<()>,
    evicted: AtomicU64,
    reloaded: AtomicU64,
}

/// How many threads the pump holds in memory, and how many trees it let go and brought back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Residency {
    /// Threads in memory now, the pump's own system thread included.
    pub resident: usize,
    /// Trees evicted since the pump started.
    pub evicted: u64,
    /// Trees reloaded from history since the pump started.
    pub reloaded: u64,
}

/// Per evicted thread: when it started and its wall-clock deadline.
pub(crate) type Clocks = HashMap<ThreadId, (Instant, Instant)>;

/// Gives a reloaded thread the start and deadline it had (the replay gave it new ones); a
/// thread with a deadline and no clock kept is past it.
pub(crate) fn set_clock(entry: &ThreadEntry, clock: Option<&(Instant, Instant)>) {
    let ledger = &mut entry.lock().ledger;
    match clock {
        Some(&(started, deadline)) => {
            ledger.started = started;
            ledger.deadline = Some(deadline);
        }
        None if ledger.deadline.is_some() => ledger.deadline = Some(Instant::now()),
        None => {}
    }
}

/// How often the sweeper looks: a quarter of the idle time, between 5 ms and 10 s.
fn sweep_every(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(5), Duration::from_secs(10))
}

/// Whether a thread may leave memory: nothing running and nothing queued to run (a halted
/// thread's queue waits for a resume, and comes back with it: those messages are pending in
/// history), and no open child. A listener's `clear-context` view comes back with the tree:
/// reloading replays the requests from history.
fn evictable(inner: &ThreadInner) -> bool {
    inner.is_quiet() && inner.live_children == 0
}

impl Shared {
    /// The idle time after which trees leave memory: `None` when eviction is off, or when the
    /// store cannot reload a tree ([`HistoryStore::reloads`](crate::history::HistoryStore::reloads)).
    fn evict_after(&self) -> Option<Duration> {
        self.config
            .evict_idle_after
            .filter(|_| self.store.reloads())
    }

    /// The entry of thread `id`, brought back with its tree from history if it was evicted.
    /// Holding the entry pins its tree in memory. `None` for a thread neither the registry nor
    /// the store knows.
    pub(crate) async fn load(
        self: &Arc<Self>,
        id: ThreadId,
    ) -> Result<Option<Arc<ThreadEntry>>, HistoryError> {
        if let Some(entry) = self.registry.get(id) {
            return Ok(Some(entry));
        }
        if self.evict_after().is_none() {
            return Ok(None);
        }
        let _gate = self.eviction.gate.lock().await;
        // Another caller may have brought it back meanwhile.
        if let Some(entry) = self.registry.get(id) {
            return Ok(Some(entry));
        }
        let Some(recovery) = self.store.reload(id).await? else {
            return Ok(None);
        };
        let clocks: Clocks = {
            let mut kept = self
                .eviction
                .clocks
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let tree = recovery.threads.iter();
            tree.filter_map(|t| Some((t.id, kept.remove(&t.id)?)))
                .collect()
        };
        let report = self.restore(recovery, Some(&clocks)).map_err(|e| match e {
            BuildError::History(e) => e,
            other => HistoryError::unavailable(other.to_string()),
        })?;
        self.eviction.reloaded.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(thread = %id, threads = report.threads, "reloaded from history");
        Ok(self.registry.get(id))
    }

    /// Starts the sweeper once, when eviction is on and a runtime is there to run it.
    pub(crate) fn sweep_evictions(self: &Arc<Self>) {
        let Some(idle) = self.evict_after() else {
            return;
        };
        if self.eviction.sweeper.get().is_some()
            || tokio::runtime::Handle::try_current().is_err()
            || self.eviction.sweeper.set(()).is_err()
        {
            return;
        }
        let weak = Arc::downgrade(self);
        let every = sweep_every(idle);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(shared) = weak.upgrade() else { return };
                shared.evict_idle(idle).await;
            }
        });
    }

    /// One sweep: every resident tree whose epoch (bumped whenever one of its threads starts a
    /// runner) has not moved for `idle` is let go, if it can be; one that cannot waits `idle`
    /// again.
    async fn evict_idle(self: &Arc<Self>, idle: Duration) {
        let now = Instant::now();
        let roots = self.registry.roots();
        let mut due = Vec::new();
        {
            let mut seen = self.eviction.seen.lock().unwrap_or_else(|p| p.into_inner());
            let mut next = HashMap::with_capacity(roots.len());
            for (root, epoch) in roots {
                let since = match seen.get(&root) {
                    Some(&(e, since)) if e == epoch => since,
                    _ => now,
                };
                if now.duration_since(since) >= idle {
                    due.push((root, epoch));
                }
                next.insert(root, (epoch, since));
            }
            *seen = next;
        }
        self.eviction
            .clocks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|_, (_, deadline)| *deadline > now);
        if due.is_empty() {
            return;
        }
        let _gate = self.eviction.gate.lock().await;
        for (root, epoch) in due {
            let clocks = std::cell::RefCell::new(Vec::new());
            // A child run by another pump (`pump/spread.rs`) is not in this pump's tree.
            let elsewhere = |c| self.config.partition.is_some_and(|p| !p.holds(c));
            let gone = self.registry.evict(root, elsewhere, |entry, inner| {
                let l = &inner.ledger;
                if let Some(deadline) = l.deadline.filter(|d| *d > now) {
                    clocks.borrow_mut().push((entry.id, (l.started, deadline)));
                }
                evictable(inner) && entry.tree_epoch.load(Ordering::SeqCst) == epoch
            });
            if gone {
                let mut kept = self
                    .eviction
                    .clocks
                    .lock()
                    .unwrap_or_else(|p| p.into_inner());
                kept.extend(clocks.into_inner());
            }
            let mut seen = self.eviction.seen.lock().unwrap_or_else(|p| p.into_inner());
            if gone {
                seen.remove(&root);
                self.eviction.evicted.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(thread = %root, "evicted");
            } else if let Some(seen) = seen.get_mut(&root) {
                *seen = (epoch, now);
            }
        }
    }

    /// What [`PumpHandle::residency`](super::PumpHandle::residency) reports.
    pub(crate) fn residency(&self) -> Residency {
        Residency {
            resident: self.registry.len(),
            evicted: self.eviction.evicted.load(Ordering::Relaxed),
            reloaded: self.eviction.reloaded.load(Ordering::Relaxed),
        }
    }
}
