//! The registry of live threads: one [`ThreadEntry`] per thread, each with its own lock, so no
//! lock is shared by all threads on the delivery path.

use std::collections::VecDeque;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};

use dashmap::DashMap;

use super::{Counters, ThreadInfo, ThreadState};
use crate::governor::Budget;
use crate::governor::budget::Account;
use crate::governor::ledger::Ledger;
use crate::{Dialect, Envelope, Payload, ThreadId};

/// One accepted message waiting in a thread's queue for one listener.
#[derive(Debug)]
pub(crate) struct Queued {
    /// The message, `to` set to the listener.
    pub envelope: Envelope,
    /// Index of the listener in the pump's registration list.
    pub target: usize,
}

/// Where a listener's view of history starts after its last `clear-context`.
#[derive(Debug, Clone)]
pub(crate) struct View {
    pub listener: Arc<str>,
    /// Position of the `clear-context` request in the thread (records before it).
    pub cleared_at: u64,
    /// How many records before it stay visible.
    pub keep: usize,
}

/// A live thread: fixed facts, plus the mutable part behind its own lock.
#[derive(Debug)]
pub(crate) struct ThreadEntry {
    pub id: ThreadId,
    pub parent: Option<ThreadId>,
    pub spawner: Option<Arc<str>>,
    pub depth: u32,
    pub path: Arc<str>,
    /// The envelope dialect answers to outside senders use.
    pub dialect: Dialect,
    /// The pump's own thread: it records boot, shutdown and refused input that names no thread.
    pub is_system: bool,
    /// Shared by a whole tree; bumped (under the thread's lock) whenever one of its threads
    /// starts a runner, so `settle` can tell a quiet scan from one that raced with new work.
    pub tree_epoch: Arc<AtomicU64>,
    inner: Mutex<ThreadInner>,
}

/// The mutable part of a thread. Its state changes only through the transition methods
/// ([`activate`](Self::activate), [`go_idle`](Self::go_idle), [`finish`](Self::finish),
/// [`halt`](Self::halt), [`resume`](Self::resume)), so every change is in one place.
#[derive(Debug)]
pub(crate) struct ThreadInner {
    state: ThreadState,
    pub queue: VecDeque<Queued>,
    /// A runner task owns the queue.
    pub running: bool,
    pub children: Vec<ThreadId>,
    /// The children's paths, so that a new child's is unique without looking at each sibling
    /// (allocated at the first child).
    #[expect(
        clippy::box_collection,
        reason = "a thread without children (most of a million idle ones) pays one pointer, not an empty set's 48 bytes"
    )]
    child_paths: Option<Box<std::collections::HashSet<Arc<str>>>>,
    /// Children that have not ended yet.
    pub live_children: usize,
    pub counters: Counters,
    /// Records in this thread so far.
    pub records: u64,
    pub views: Vec<View>,
    /// The last payload a listener emitted here (carried by `thread-result` when the thread ends);
    /// always `None` in a root thread, which has no parent to tell.
    pub last_payload: Option<Payload>,
    /// The thread's latest plan (`<todo-until>`, checked when it was written): a `done` waits
    /// until its steps are closed.
    pub plan: Option<Payload>,
    /// The governor's account and ledger of this thread.
    pub ledger: Ledger,
    /// Questions and approvals of this thread a person has not answered yet (`pump/inbox`).
    pub waiting: u32,
}

impl ThreadInner {
    /// Whether a child of this thread has `path`.
    pub fn has_child_path(&self, path: &str) -> bool {
        self.child_paths.as_ref().is_some_and(|p| p.contains(path))
    }

    /// Adds child `id` at `path`.
    pub fn add_child(&mut self, id: ThreadId, path: Arc<str>) {
        self.children.push(id);
        self.child_paths.get_or_insert_default().insert(path);
    }

    /// Where the thread is in its life.
    pub fn state(&self) -> ThreadState {
        self.state
    }

    /// An idle thread has work again (an open thread's state; a closed one stays closed).
    pub fn activate(&mut self) {
        if matches!(self.state, ThreadState::Idle | ThreadState::Waiting) {
            self.state = ThreadState::Active;
        }
    }

    /// An active thread ran out of work.
    pub fn go_idle(&mut self) {
        if matches!(self.state, ThreadState::Active | ThreadState::Idle) {
            self.state = if self.waiting > 0 {
                ThreadState::Waiting
            } else {
                ThreadState::Idle
            };
        }
    }

    /// The count of this thread's requests a person has not answered changed: a thread with
    /// no runner shows whether it waits.
    pub fn set_waiting(&mut self, waiting: u32) {
        self.waiting = waiting;
        if !self.running {
            self.go_idle();
        }
        if self.waiting == 0 && self.state == ThreadState::Waiting {
            self.state = ThreadState::Idle;
        }
    }

    /// The thread is done: `thread-done`, or a child that ran out of work.
    pub fn finish(&mut self) {
        self.state = ThreadState::Done;
    }

    /// The governor halted the thread.
    pub fn halt(&mut self) {
        self.state = ThreadState::Halted;
    }

    /// A halted thread resumes, idle until its runner takes the next message.
    pub fn resume(&mut self) {
        debug_assert_eq!(
            self.state,
            ThreadState::Halted,
            "only a halted thread resumes"
        );
        self.state = ThreadState::Idle;
    }
}

impl ThreadEntry {
    pub fn new(
        id: ThreadId,
        parent: Option<&ThreadEntry>,
        spawner: Option<Arc<str>>,
        path: Arc<str>,
        dialect: Dialect,
        ledger: Ledger,
    ) -> Self {
        Self {
            id,
            parent: parent.map(|p| p.id),
            spawner,
            depth: parent.map_or(0, |p| p.depth + 1),
            path,
            dialect,
            is_system: false,
            tree_epoch: parent
                .map(|p| Arc::clone(&p.tree_epoch))
                .unwrap_or_default(),
            inner: Mutex::new(ThreadInner {
                state: ThreadState::Idle,
                queue: VecDeque::new(),
                running: false,
                children: Vec::new(),
                child_paths: None,
                live_children: 0,
                counters: Counters::default(),
                records: 0,
                views: Vec::new(),
                last_payload: None,
                plan: None,
                ledger,
                waiting: 0,
            }),
        }
    }

    /// A thread that lived before a restart, from its saved snapshot. The pump's earlier system
    /// threads (path `system`) come back as system threads: closed to input.
    pub fn restore(info: &ThreadInfo, ledger: Ledger) -> Self {
        let mut entry = Self::new(
            info.id,
            None,
            info.spawner.clone(),
            Arc::clone(&info.path),
            info.dialect,
            ledger,
        );
        entry.parent = info.parent;
        entry.depth = info.depth;
        entry.is_system = info.parent.is_none() && &*info.path == "system";
        let mut inner = entry.lock();
        inner.state = match info.state {
            ThreadState::Active | ThreadState::Idle | ThreadState::Waiting => ThreadState::Idle,
            closed => closed,
        };
        drop(inner);
        entry
    }

    /// The pump's own thread, `id` (an earlier run's, continued after a restart, or a new one).
    pub fn system(id: ThreadId) -> Self {
        let ledger = Ledger::new(Account::root(&Budget::unlimited()), None, None);
        let path = Arc::from("system");
        let mut entry = Self::new(id, None, None, path, Dialect::default(), ledger);
        entry.is_system = true;
        entry
    }

    pub fn lock(&self) -> MutexGuard<'_, ThreadInner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A snapshot, taken with the lock held by the caller.
    pub fn info(&self, inner: &ThreadInner) -> ThreadInfo {
        ThreadInfo {
            children: inner.children.clone(),
            ..self.stored_info(inner)
        }
    }

    /// The snapshot a store keeps: without the children list, which stores rebuild from parent
    /// links (copying it on every spawn made a fan-out quadratic).
    pub fn stored_info(&self, inner: &ThreadInner) -> ThreadInfo {
        ThreadInfo {
            id: self.id,
            parent: self.parent,
            spawner: self.spawner.clone(),
            depth: self.depth,
            path: Arc::clone(&self.path),
            state: inner.state(),
            children: Vec::new(),
            counters: inner.counters.clone(),
            dialect: self.dialect,
        }
    }
}

impl ThreadInner {
    /// No running delivery and nothing that will run: an empty queue, or a halted thread
    /// (whose queue waits for a resume).
    pub fn is_quiet(&self) -> bool {
        !self.running && (self.queue.is_empty() || self.state == ThreadState::Halted)
    }

    /// Quiet, with no child on another pump still out: what [`PumpHandle::settle`] waits for.
    ///
    /// [`PumpHandle::settle`]: crate::PumpHandle::settle
    pub fn is_settled(&self) -> bool {
        self.is_quiet() && self.ledger.remote_children.is_empty()
    }

    /// `listener` cleared its context: its view starts `keep` records (at most all of them)
    /// before position `cleared_at`, replacing any earlier view of its.
    pub fn clear_view(&mut self, listener: Arc<str>, cleared_at: u64, keep: usize) -> usize {
        let kept = keep.min(usize::try_from(cleared_at).unwrap_or(usize::MAX));
        self.views.retain(|v| v.listener != listener);
        self.views.push(View {
            listener,
            cleared_at,
            keep: kept,
        });
        kept
    }

    /// Where `listener`'s view starts: `(cleared_at, keep)`, or `None` for the whole thread.
    pub fn view_of(&self, listener: &str) -> Option<(u64, usize)> {
        self.views
            .iter()
            .find(|v| &*v.listener == listener)
            .map(|v| (v.cleared_at, v.keep))
    }
}

/// A thread and its parent, which the pump locks together — parent first, then the thread: the
/// one lock order of the whole pump (a thread's effects reach its parent: results, reservations).
#[derive(Debug)]
pub(crate) struct Family {
    /// The parent, for a child thread that is still registered.
    pub parent: Option<Arc<ThreadEntry>>,
}

/// The locked parent of a [`Family`], if it has one.
pub(crate) type ParentGuard<'a> = Option<MutexGuard<'a, ThreadInner>>;

impl Family {
    /// Locks the parent (if any), then `entry`.
    pub fn lock<'a>(
        &'a self,
        entry: &'a ThreadEntry,
    ) -> (MutexGuard<'a, ThreadInner>, ParentGuard<'a>) {
        let parent = self.parent.as_ref().map(|p| p.lock());
        (entry.lock(), parent)
    }

    /// The locked parent as the pump's functions take it: the entry with its state.
    pub fn pair<'a>(
        &'a self,
        guard: &'a mut ParentGuard<'_>,
    ) -> Option<(&'a Arc<ThreadEntry>, &'a mut ThreadInner)> {
        self.parent.as_ref().zip(guard.as_deref_mut())
    }
}

/// Every live thread by id.
///
/// A tree leaves ([`evict`](Self::evict)) only while nothing but the registry holds any of its
/// entries (an `Arc` strong count of one): whoever holds an entry pins its whole tree, so no
/// one can be left working on an entry the registry no longer has while a reload makes another.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    threads: DashMap<ThreadId, Arc<ThreadEntry>>,
    /// The entries of the tree being evicted, between their removal and the end of the
    /// eviction: a look-up meanwhile finds them here (and, by holding one, cancels it).
    limbo: Mutex<Vec<Arc<ThreadEntry>>>,
    /// Held while a thread is opened under an id chosen outside the pump (an AgentServer
    /// client's), so two messages naming the same new id open one thread.
    adopting: Mutex<()>,
}

impl Registry {
    /// Holds off every other adoption of an outside id until the guard is dropped: look the id
    /// up again under it, and open the thread only if it is still unknown.
    pub fn adopting(&self) -> std::sync::MutexGuard<'_, ()> {
        self.adopting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The family of `entry`: its parent, to be locked with it.
    pub fn family(&self, entry: &ThreadEntry) -> Family {
        Family {
            parent: entry.parent.and_then(|p| self.get(p)),
        }
    }

    pub fn get(&self, id: ThreadId) -> Option<Arc<ThreadEntry>> {
        let found = self.threads.get(&id).map(|e| Arc::clone(&e));
        // A miss (rare: an unknown or evicted thread) waits for an eviction under way.
        found.or_else(|| self.in_limbo(id))
    }

    fn in_limbo(&self, id: ThreadId) -> Option<Arc<ThreadEntry>> {
        let limbo = self.limbo.lock().unwrap_or_else(|p| p.into_inner());
        limbo.iter().find(|e| e.id == id).cloned()
    }

    /// How many threads are in memory (the system thread included).
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// The root threads in memory (not the system thread), with their tree's epoch now.
    pub fn roots(&self) -> Vec<(ThreadId, u64)> {
        self.threads
            .iter()
            .filter(|e| e.parent.is_none() && !e.is_system)
            .map(|e| (e.id, e.tree_epoch.load(std::sync::atomic::Ordering::SeqCst)))
            .collect()
    }

    /// Removes the tree of `root` if nothing but the registry holds any of its entries, and
    /// `evictable` then holds for every entry, locked (the entries and their children lists
    /// as they are once no one can reach them); otherwise puts back what it took. A child
    /// `elsewhere` (run by another pump) is not part of the tree. True when the tree is gone.
    pub fn evict(
        &self,
        root: ThreadId,
        elsewhere: impl Fn(ThreadId) -> bool,
        evictable: impl Fn(&ThreadEntry, &ThreadInner) -> bool,
    ) -> bool {
        let members: Vec<ThreadId> = self.subtree(root).iter().map(|e| e.id).collect();
        let set: std::collections::HashSet<ThreadId> = members.iter().copied().collect();
        let mut limbo = self.limbo.lock().unwrap_or_else(|p| p.into_inner());
        for id in &members {
            match self.threads.remove_if(id, |_, e| Arc::strong_count(e) == 1) {
                Some((_, entry)) => limbo.push(entry),
                None => return self.put_back(&mut limbo),
            }
        }
        // No one can reach these entries now: what they hold is final.
        let whole = limbo.iter().all(|e| {
            let inner = e.lock();
            let inside = |c: &ThreadId| set.contains(c) || elsewhere(*c);
            inner.children.iter().all(inside) && evictable(e, &inner)
        });
        if !whole {
            return self.put_back(&mut limbo);
        }
        limbo.clear();
        true
    }

    fn put_back(&self, limbo: &mut Vec<Arc<ThreadEntry>>) -> bool {
        for entry in limbo.drain(..) {
            self.threads.insert(entry.id, entry);
        }
        false
    }

    pub fn insert(&self, entry: Arc<ThreadEntry>) {
        self.threads.insert(entry.id, entry);
    }

    /// Forgets thread `id` (one whose first records did not become durable).
    pub fn forget(&self, id: ThreadId) {
        self.threads.remove(&id);
    }

    /// Deliveries queued over every thread in memory, the deepest thread's queue, and the
    /// threads in memory (for the telemetry gauges). The entries are collected first: a
    /// thread's lock is never waited for under the map's (whose writers may hold one).
    pub fn queued(&self) -> (u64, u64, u64) {
        let (mut total, mut deepest, mut threads) = (0u64, 0u64, 0u64);
        for entry in self.all() {
            let queued = entry.lock().queue.len() as u64;
            total += queued;
            deepest = deepest.max(queued);
            threads += 1;
        }
        (total, deepest, threads)
    }

    pub fn all(&self) -> Vec<Arc<ThreadEntry>> {
        self.threads.iter().map(|e| Arc::clone(e.value())).collect()
    }

    /// `root` and all its descendants, parents first.
    pub fn subtree(&self, root: ThreadId) -> Vec<Arc<ThreadEntry>> {
        let mut out: Vec<Arc<ThreadEntry>> = self.get(root).into_iter().collect();
        let mut i = 0;
        while i < out.len() {
            let children = out[i].lock().children.clone();
            out.extend(children.into_iter().filter_map(|c| self.get(c)));
            i += 1;
        }
        out
    }
}
