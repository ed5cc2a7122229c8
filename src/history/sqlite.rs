//! [`SqliteHistory`]: the durable, embedded history store — one SQLite file in WAL mode, one
//! writer thread that commits batches from many threads together (group commit), and a reader
//! connection for queries.
//!
//! `append` fixes order and digests in memory and hands the batch to the writer; its
//! [`Ticket`] resolves once the batch's transaction has committed. A batch is one transaction:
//! a delivery's outputs and its delivered mark are committed together or not at all. If a
//! commit fails (disk full, a file that cannot be written) the store refuses every later write
//! with [`HistoryError::Unavailable`] — nothing acknowledged is lost, nothing half-written is
//! kept — until a retry finds the file writable again: then it seals new records on what was
//! committed and takes writes again, without a restart.

mod lock;
mod marks;
mod pages;
mod prune;
mod queries;
mod schema;
mod tallies;
mod views;
mod writer;

use std::collections::HashMap;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use rusqlite::Connection;

use super::memory::now_us;
use super::{
    Anchor, Archive, Batch, HistoryError, HistoryStore, Mark, Pruned, Record, Recovery,
    ThreadFilter, ThreadPage, Ticket,
};
use crate::governor::HaltingReport;
use crate::{MessageId, QName, ThreadId, ThreadInfo, ThreadState};

pub use schema::SCHEMA_VERSION;

/// Most threads one prune transaction touches on a live store, so that appends never wait for
/// a whole large prune (see [`HistoryStore::prune`]).
pub const PRUNE_STEP: usize = 256;

/// How hard a commit waits for the disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL`: a commit survives a power loss (the default).
    #[default]
    Full,
    /// `synchronous=NORMAL`: a commit survives a crash of the process (`kill -9`), not
    /// necessarily a power loss; much faster on slow disks.
    Normal,
}

/// Settings of a [`SqliteHistory`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SqliteOptions {
    /// Commit durability (default [`Durability::Full`]).
    pub durability: Durability,
    /// Most batches committed in one transaction (default 1024).
    pub group: usize,
    /// Batches waiting for the writer before `append` blocks (default 8192).
    pub backlog: usize,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            durability: Durability::Full,
            group: 1024,
            backlog: 8192,
        }
    }
}

/// History in one SQLite file.
///
/// # Example
///
/// ```
/// # use std::sync::Arc;
/// # use agentpump::{PumpBuilder, QName, Registration, history::SqliteHistory, listeners::Echo};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = std::env::temp_dir().join(format!("agentpump-doc-sqlite-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir)?;
/// let store = Arc::new(SqliteHistory::open(dir.join("history.db"))?);
/// # let say = QName::new("urn:example:say:v1", "say");
/// let pump = PumpBuilder::new().register(Registration::new("echo", Echo).accepts(say)).history(store).build()?;
/// let thread = pump.post(None, None, r#"<say xmlns="urn:example:say:v1">hi</say>"#).await?.thread(); // durable once Ok
/// pump.settle(thread).await;
/// let reader = SqliteHistory::open_read_only(dir.join("history.db"))?; // as `agentpump history` reads it
/// assert_eq!(agentpump::history::HistoryStore::thread(&reader, thread, 0).await?.len(), 2);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct SqliteHistory {
    path: PathBuf,
    order: Mutex<Order>,
    failed: Failure,
    jobs: Mutex<Option<mpsc::SyncSender<writer::Work>>>,
    writer: Mutex<Option<writer::Writer>>,
    reader: Mutex<Connection>,
    /// This store alone writes the file (`None` once closed, or opened read-only).
    lock: Mutex<Option<lock::WriterLock>>,
    /// The highest seq handed to the writer, and the highest it has resolved: a read waits
    /// until every record appended before it is committed, so it sees them.
    appended: std::sync::atomic::AtomicU64,
    resolved: writer::Resolved,
    /// Whether the file has the search index (schema 3; an older file opened read-only has
    /// not been migrated, and its searches read records).
    search: bool,
    /// Whether the file has the tallies (schema 4; an older file opened read-only has not been
    /// migrated, and its counters are summed from its records).
    tallied: bool,
}

/// What `append` decides before the writer sees a batch.
#[derive(Debug, Default)]
pub(crate) struct Order {
    next_seq: u64,
    /// Each thread's last digest and the seq of that record, learnt at its first append since
    /// the open (or since it was forgotten: see [`KNOWN_DIGESTS`]).
    last_digest: HashMap<ThreadId, ([u8; 32], u64)>,
    /// Where that first append looks its thread's last digest up (none when read-only): a
    /// connection of its own, so an append never waits for a long query of the reader.
    lookup: Option<Connection>,
}

/// Most threads whose last digest `append` remembers: past it, it forgets those whose last
/// record is committed (`committed`: every seq up to it is), whose digest the file gives back
/// — so the memory a host holds for the chains does not grow with every thread it ever had.
const KNOWN_DIGESTS: usize = 4096;

impl Order {
    /// The last digest of `thread` and its record's seq: remembered, or else (its first append
    /// since the open, or since it was forgotten) read from its last committed record or, when
    /// a prune removed them all, its latest anchor. A thread not remembered has appended
    /// nothing since the open, or only records up to `committed`, so the file's committed
    /// records are all it has.
    fn last_digest(
        &mut self,
        thread: ThreadId,
        committed: u64,
    ) -> rusqlite::Result<&mut ([u8; 32], u64)> {
        use std::collections::hash_map::Entry;
        if self.last_digest.len() >= KNOWN_DIGESTS && !self.last_digest.contains_key(&thread) {
            self.last_digest.retain(|_, (_, seq)| *seq > committed);
        }
        match self.last_digest.entry(thread) {
            Entry::Occupied(e) => Ok(e.into_mut()),
            Entry::Vacant(e) => {
                let digest = match &self.lookup {
                    Some(conn) => queries::last_digest(conn, thread)?,
                    None => None,
                };
                Ok(e.insert((digest.unwrap_or([0; 32]), 0)))
            }
        }
    }
}

/// Whether the store takes writes; shared with the writer. Kept apart from [`Order`] so the
/// writer never waits for a lock an appender holds.
pub(crate) type Failure = Arc<Mutex<Health>>;

/// First wait before the file is tried again after a failed commit; it doubles with every
/// failed try, up to [`RETRY_MAX`].
pub const RETRY_MIN: Duration = Duration::from_millis(100);

/// Longest wait between two tries of a failing file.
pub const RETRY_MAX: Duration = Duration::from_secs(5);

/// Why writes are refused, and when to try the file again.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// Set by the writer when a commit failed (or at a read-only open); `None` while healthy.
    pub why: Option<String>,
    /// When the next write may try the file again; `None` never (opened read-only).
    retry_at: Option<Instant>,
    backoff: Duration,
    /// When the file last took writes again after a failure.
    healed_at: Option<Instant>,
    /// Queued messages whose records the writer refused since the last failure began.
    pub refused: HashSet<MessageId>,
}

impl Health {
    /// A commit failed: refuse writes, and try again after [`RETRY_MIN`] — or, when the file
    /// failed again soon after it healed, after twice the last wait.
    pub fn fail(&mut self, why: String) {
        let relapse = self
            .healed_at
            .is_some_and(|at| at.elapsed() < RETRY_MAX + self.backoff);
        self.backoff = if relapse {
            (self.backoff * 2).min(RETRY_MAX)
        } else {
            RETRY_MIN
        };
        self.why = Some(why);
        self.refused.clear();
        self.retry_at = Some(Instant::now() + self.backoff);
    }

    /// The file takes writes again.
    pub fn healed(&mut self) {
        self.why = None;
        self.healed_at = Some(Instant::now());
    }

    /// Whether a refused store may try the file again now.
    fn due(&self) -> bool {
        self.why.is_some() && self.retry_at.is_some_and(|at| Instant::now() >= at)
    }

    /// A try failed: wait twice as long before the next.
    fn retry_later(&mut self) {
        self.backoff = (self.backoff * 2).min(RETRY_MAX);
        self.retry_at = Some(Instant::now() + self.backoff);
    }
}

impl SqliteHistory {
    /// Opens (or creates) the history file at `path` with default options.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Unavailable`] naming the file and the problem: it cannot be opened, it is
    /// not an agentpump database, its schema is newer than this build, it is locked, or it or its
    /// disk is read-only.
    ///
    /// # Example
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = std::env::temp_dir().join(format!("agentpump-doc-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let store = agentpump::history::SqliteHistory::open(dir.join("history.db"))?;
    /// let pump = agentpump::PumpBuilder::new().history(std::sync::Arc::new(store)).build()?;
    /// # drop(pump); std::fs::remove_dir_all(&dir)?; Ok(()) }
    /// ```
    pub fn open(path: impl AsRef<Path>) -> Result<Self, HistoryError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens (or creates) the history file at `path`.
    ///
    /// # Errors
    ///
    /// As [`SqliteHistory::open`].
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::history::{Durability, SqliteHistory, SqliteOptions};
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = std::env::temp_dir().join(format!("agentpump-doc-open-with-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let options = SqliteOptions { durability: Durability::Normal, ..SqliteOptions::default() }; // survives kill -9
    /// let store = SqliteHistory::open_with(dir.join("history.db"), options)?;
    /// assert!(store.path().ends_with("history.db"));
    /// # drop(store); std::fs::remove_dir_all(&dir)?; Ok(()) }
    /// ```
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, HistoryError> {
        let path = path.as_ref().to_path_buf();
        let fail = |e: rusqlite::Error| unavailable(&path, e);
        let mut conn = Connection::open(&path).map_err(fail)?;
        // SQLite quietly opens a file it may not write read-only; every commit would fail.
        if conn.is_readonly(rusqlite::MAIN_DB).map_err(fail)? {
            return Err(HistoryError::unavailable(format!(
                "{}: read-only (the file or its disk cannot be written)",
                path.display()
            )));
        }
        let lock = lock::WriterLock::acquire(&path)?;
        schema::prepare(&mut conn, options.durability).map_err(|e| match e {
            schema::SchemaError::Sqlite(e) => unavailable(&path, e),
            other => HistoryError::unavailable(format!("{}: {other}", path.display())),
        })?;
        let reader = read_only(&path, std::time::Duration::from_secs(5))?;
        let order = Order {
            next_seq: queries::next_seq(&conn).map_err(fail)?,
            last_digest: HashMap::new(),
            lookup: Some(read_only(&path, std::time::Duration::from_secs(5))?),
        };
        let failed = Failure::default();
        let appended = order.next_seq;
        let resolved = Arc::new(tokio::sync::watch::Sender::new(appended));
        let (jobs, handle) =
            writer::spawn(conn, Arc::clone(&failed), Arc::clone(&resolved), options)?;
        Ok(Self {
            appended: appended.into(),
            resolved,
            search: true,
            tallied: true,
            path,
            order: Mutex::new(order),
            failed,
            jobs: Mutex::new(Some(jobs)),
            writer: Mutex::new(Some(handle)),
            reader: Mutex::new(reader),
            lock: Mutex::new(Some(lock)),
        })
    }

    /// Opens an existing history file read-only (the inspection commands): nothing is created or
    /// changed, and every write is refused. A running pump may keep writing meanwhile.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Unavailable`] when the file does not exist, is not an agentpump database,
    /// is from a newer schema, or stays locked for more than a second.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::history::SqliteHistory;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = std::env::temp_dir().join(format!("agentpump-doc-read-only-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let path = dir.join("history.db");
    /// assert!(SqliteHistory::open_read_only(&path).is_err()); // nothing is created
    /// drop(SqliteHistory::open(&path)?);
    /// assert!(SqliteHistory::open_read_only(&path).is_ok());
    /// # std::fs::remove_dir_all(&dir)?; Ok(()) }
    /// ```
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self, HistoryError> {
        let path = path.as_ref().to_path_buf();
        if !path.is_file() {
            return Err(HistoryError::unavailable(format!(
                "{}: no such file",
                path.display()
            )));
        }
        let fail = |e: rusqlite::Error| unavailable(&path, e);
        let reader = read_only(&path, std::time::Duration::from_secs(1))?;
        schema::check(&reader).map_err(|e| match e {
            schema::SchemaError::Sqlite(e) => unavailable(&path, e),
            other => HistoryError::unavailable(format!("{}: {other}", path.display())),
        })?;
        let search = schema::has_search(&reader).map_err(fail)?;
        let tallied = tallies::exist(&reader).map_err(fail)?;
        // No append order: every write is refused.
        Ok(Self {
            search,
            tallied,
            appended: 0.into(),
            resolved: Arc::new(tokio::sync::watch::Sender::new(0)),
            path,
            order: Mutex::new(Order::default()),
            failed: Arc::new(Mutex::new(Health {
                why: Some("opened read-only".into()),
                ..Health::default()
            })),
            jobs: Mutex::new(None),
            writer: Mutex::new(None),
            reader: Mutex::new(reader),
            lock: Mutex::new(None),
        })
    }

    /// Closes the store: the writer commits every batch it was handed, then checkpoints the
    /// write-ahead log into the database file and truncates it, so the file alone holds the
    /// whole history (it can be copied or moved without its `-wal`). Later appends are refused
    /// with [`HistoryError::Unavailable`]; queries keep working. Closing twice is harmless, and
    /// dropping the store closes it.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Unavailable`] when the checkpoint failed or could not complete (another
    /// process was reading the file); the history is then still whole, in the file and its
    /// `-wal` together.
    ///
    /// # Example
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let dir = std::env::temp_dir().join(format!("agentpump-close-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// let store = agentpump::history::SqliteHistory::open(dir.join("history.db"))?;
    /// store.close()?;
    /// # std::fs::remove_dir_all(&dir)?; Ok(()) }
    /// ```
    pub fn close(&self) -> Result<(), HistoryError> {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take();
        let writer = self.writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(handle) = writer else {
            return Ok(());
        };
        let outcome = handle
            .join()
            .unwrap_or_else(|_| Err(writer::CheckpointError::Panicked));
        // The writer is gone: another store may write the file now.
        self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
        // Nothing more will be committed: reads wait for nothing from now on.
        self.resolved.send_replace(u64::MAX);
        outcome.map_err(|why| {
            HistoryError::unavailable(format!("{}: {why}", self.path.display())).because(why)
        })
    }

    /// The records [`HistoryStore::prune`] with the same cut would remove now, thread by thread,
    /// each thread's in seq order: what to archive before pruning. Works on a store opened
    /// read-only too.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Query`] when the file cannot be read.
    pub async fn prunable(&self, before_us: i64) -> Result<Vec<Record>, HistoryError> {
        self.caught_up().await;
        let doomed =
            prune::doomed(&self.read(), before_us, None).map_err(|e| self.query_error(e))?;
        Ok(doomed.into_iter().flatten().collect())
    }

    /// The file this store writes.
    ///
    /// # Example
    ///
    /// ```
    /// use agentpump::history::SqliteHistory;
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = std::env::temp_dir().join(format!("agentpump-doc-path-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir)?;
    /// let store = SqliteHistory::open(dir.join("history.db"))?;
    /// assert_eq!(store.path(), dir.join("history.db"));
    /// # drop(store); std::fs::remove_dir_all(&dir)?; Ok(()) }
    /// ```
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits until every record appended so far has been committed (or its commit failed), so
    /// that a read sees what was appended before it — a listener reading its thread sees the
    /// message it is handling, though that message's commit may still be in flight.
    async fn caught_up(&self) {
        let target = self.appended.load(std::sync::atomic::Ordering::Acquire);
        let mut resolved = self.resolved.subscribe();
        // The sender lives in `self`, so the wait ends only by reaching the target.
        let _ = resolved.wait_for(|seq| *seq >= target).await;
    }

    fn health(&self) -> MutexGuard<'_, Health> {
        self.failed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Tries the file again after a failed commit. With the append order locked (nothing new
    /// is sealed meanwhile), the writer — once it has refused every batch handed to it before —
    /// probes the file; if that commits, each thread whose records were refused continues from
    /// its last committed digest, and the store takes writes again. Sequence numbers are not
    /// reused: the refused ones stay a gap.
    fn heal(&self) {
        let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        if !self.health().due() {
            return; // another caller tried meanwhile
        }
        let (reply, answer) = mpsc::sync_channel(1);
        let sent = self
            .jobs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|jobs| jobs.send(writer::Work::Heal(reply)).is_ok());
        let outcome = if sent {
            answer
                .recv()
                .unwrap_or_else(|_| Err("history writer stopped".into()))
        } else {
            Err("history store is closed".into())
        };
        match outcome {
            Ok(healed) => {
                for (thread, last) in healed {
                    match last {
                        // Committed: forgettable, like a digest read from the file.
                        Some(digest) => order.last_digest.insert(thread, (digest, 0)),
                        None => order.last_digest.remove(&thread),
                    };
                }
                tracing::info!(path = %self.path.display(), "history writable again");
            }
            Err(error) => {
                tracing::warn!(%error, "history still not writable");
                self.health().retry_later();
            }
        }
    }

    fn read(&self) -> MutexGuard<'_, Connection> {
        self.reader.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Hands one prune transaction to the writer and waits for its outcome.
    async fn prune_step(
        &self,
        step: prune::Step,
        archive: Option<Box<dyn Archive>>,
    ) -> Result<Pruned, HistoryError> {
        let (done, outcome) = tokio::sync::oneshot::channel();
        {
            let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
            let sender = jobs
                .as_ref()
                .ok_or_else(|| HistoryError::unavailable("history store is closed"))?;
            let work = writer::Work::Prune(writer::Prune {
                step,
                archive,
                done,
            });
            sender
                .send(work)
                .map_err(|_| HistoryError::unavailable("history writer stopped"))?;
        }
        let path = self.path.display();
        let outcome = outcome
            .await
            .map_err(|_| HistoryError::unavailable(format!("{path}: history writer stopped")))?;
        outcome.map_err(|e| match e {
            prune::PruneError::Chain(b) => HistoryError::Chain(b),
            prune::PruneError::Sqlite(e) => {
                HistoryError::unavailable(format!("{path}: prune failed: {e}")).because(e)
            }
            prune::PruneError::Archive(e) => {
                HistoryError::unavailable(format!("{path}: prune failed, archive: {e}")).because(e)
            }
            prune::PruneError::Refused(why) => HistoryError::unavailable(format!("{path}: {why}")),
        })
    }

    fn query_error(&self, e: rusqlite::Error) -> HistoryError {
        HistoryError::query(format!("{}: {e}", self.path.display())).because(e)
    }
}

/// A read-only connection to the file, waiting up to `busy` for a lock.
fn read_only(path: &Path, busy: std::time::Duration) -> Result<Connection, HistoryError> {
    let fail = |e: rusqlite::Error| unavailable(path, e);
    let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(fail)?;
    conn.busy_timeout(busy).map_err(fail)?;
    Ok(conn)
}

fn unavailable(path: &Path, e: rusqlite::Error) -> HistoryError {
    let busy = matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    );
    let what = if busy {
        format!("{}: database is locked by another process", path.display())
    } else if e.sqlite_error_code() == Some(rusqlite::ErrorCode::NotADatabase) {
        format!("{}: not an agentpump database", path.display())
    } else {
        format!("{}: {e}", path.display())
    };
    HistoryError::unavailable(what).because(e)
}

impl Drop for SqliteHistory {
    /// Closes the store (see [`SqliteHistory::close`]); a failure is logged. A store that
    /// wrote the file then leaves it alone, without the `-wal` and `-shm` files beside it.
    fn drop(&mut self) {
        // Only a store opened to write has a lookup connection, closed or not.
        let wrote = self
            .order
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .lookup
            .is_some();
        match self.close() {
            Ok(()) if wrote => self.leave_alone(),
            Ok(()) => {}
            Err(e) => tracing::error!(error = %e, "closing the history store"),
        }
    }
}

impl SqliteHistory {
    /// Leaves the file whole and alone: its read-only connections close first, then one that
    /// may write turns the write-ahead log off (`journal_mode=DELETE`, which SQLite allows only
    /// to the last connection) and closes — the `-wal` and `-shm` files beside it are gone, and
    /// the file opens read-only even on read-only media (a file in WAL mode needs its `-shm`
    /// there). The next writable open turns WAL on again. Another process reading the file
    /// keeps it as it is.
    fn leave_alone(&mut self) {
        if let Ok(memory) = Connection::open_in_memory() {
            let reader = self.reader.get_mut().unwrap_or_else(|p| p.into_inner());
            drop(std::mem::replace(reader, memory));
        }
        let order = self.order.get_mut().unwrap_or_else(|p| p.into_inner());
        drop(order.lookup.take());
        let Ok(last) = Connection::open(&self.path) else {
            return;
        };
        let closed = last
            .query_row("PRAGMA journal_mode=DELETE", [], |row| {
                row.get::<_, String>(0)
            })
            .and_then(move |_| last.close().map_err(|(_, e)| e));
        if let Err(e) = closed {
            tracing::debug!(error = %e, "the history's -wal and -shm files stay");
        }
    }
}

#[async_trait]
impl HistoryStore for SqliteHistory {
    /// While writes are refused, a call at least the current backoff after the last try
    /// tries the file again (a probe of 1 MiB committed and removed): a caller may wait for two small
    /// commits then.
    fn writable(&self) -> Result<(), HistoryError> {
        let due = {
            let health = self.health();
            match &health.why {
                None => return Ok(()),
                Some(_) => health.due(),
            }
        };
        if due {
            self.heal();
        }
        match &self.health().why {
            Some(why) => Err(HistoryError::unavailable(format!(
                "{}: {why}",
                self.path.display()
            ))),
            None => Ok(()),
        }
    }

    fn was_refused(&self, id: MessageId) -> bool {
        self.health().refused.contains(&id)
    }

    fn append(&self, batch: Batch) -> Result<Ticket, HistoryError> {
        self.writable()?;
        let mut order = self.order.lock().unwrap_or_else(|p| p.into_inner());
        let time_us = now_us();
        let committed = *self.resolved.borrow();
        // Every thread's last digest first: a failed look-up leaves the order as it was.
        for new in &batch.records {
            order
                .last_digest(new.envelope.thread(), committed)
                .map_err(|e| self.query_error(e))?;
        }
        let mut records = Vec::with_capacity(batch.records.len());
        for new in &batch.records {
            order.next_seq += 1;
            let mut record = Record::from_new(new, order.next_seq, time_us);
            let last = order
                .last_digest(record.thread, committed)
                .map_err(|e| self.query_error(e))?;
            record.seal(&last.0);
            *last = (record.digest, record.seq);
            records.push((record, new.pending));
        }
        let (done, wait) = tokio::sync::oneshot::channel();
        let job = writer::Job {
            records,
            threads: batch.threads,
            reports: batch.reports,
            delivered: batch.delivered,
            done,
        };
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let sender = jobs
            .as_ref()
            .ok_or_else(|| HistoryError::unavailable("history store is closed"))?;
        sender
            .send(writer::Work::Batch(job))
            .map_err(|_| HistoryError::unavailable("history writer stopped"))?;
        // Only once the writer has the batch: it will resolve these seqs.
        self.appended
            .fetch_max(order.next_seq, std::sync::atomic::Ordering::AcqRel);
        drop(order);
        let path = self.path.display().to_string();
        Ok(Ticket::pending(async move {
            wait.await
                .map_err(|_| HistoryError::unavailable(format!("{path}: history writer stopped")))?
        }))
    }

    async fn thread(&self, thread: ThreadId, since: u64) -> Result<Vec<Record>, HistoryError> {
        self.caught_up().await;
        queries::thread(&self.read(), thread, since).map_err(|e| self.query_error(e))
    }

    async fn record(&self, id: MessageId) -> Result<Option<Record>, HistoryError> {
        self.caught_up().await;
        queries::record(&self.read(), id).map_err(|e| self.query_error(e))
    }

    async fn marks(&self, thread: ThreadId) -> Result<Vec<Mark>, HistoryError> {
        self.caught_up().await;
        marks::marks(&self.read(), thread).map_err(|e| self.query_error(e))
    }

    async fn pending(&self) -> Result<Vec<Record>, HistoryError> {
        queries::pending(&self.read()).map_err(|e| self.query_error(e))
    }

    async fn reports(&self, thread: ThreadId) -> Result<Vec<HaltingReport>, HistoryError> {
        self.caught_up().await;
        queries::reports(&self.read(), thread).map_err(|e| self.query_error(e))
    }

    async fn threads(&self, state: Option<ThreadState>) -> Result<Vec<ThreadInfo>, HistoryError> {
        self.caught_up().await;
        queries::threads(&self.read(), state, self.tallied).map_err(|e| self.query_error(e))
    }

    fn recovery(&self) -> Result<Recovery, HistoryError> {
        queries::recovery(&self.read()).map_err(|e| self.query_error(e))
    }

    /// Waits for the writer to commit what was appended, then reads the tree by index (see
    /// `queries::reload`): its snapshots, tallies and each thread's pending and governor
    /// records, never the whole file.
    async fn reload(&self, thread: ThreadId) -> Result<Option<Recovery>, HistoryError> {
        self.caught_up().await;
        queries::reload(&self.read(), thread).map_err(|e| self.query_error(e))
    }

    fn reloads(&self) -> bool {
        self.tallied
    }

    async fn roots(&self, filter: &ThreadFilter) -> Result<ThreadPage, HistoryError> {
        pages::roots(&self.read(), filter, self.search).map_err(|e| self.query_error(e))
    }

    async fn subtree(&self, root: ThreadId) -> Result<Vec<ThreadInfo>, HistoryError> {
        pages::subtree(&self.read(), root).map_err(|e| self.query_error(e))
    }

    async fn records_after(
        &self,
        thread: ThreadId,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Record>, HistoryError> {
        let limit = limit.clamp(1, super::page::MAX_PAGE);
        pages::records_after(&self.read(), thread, after, limit).map_err(|e| self.query_error(e))
    }

    async fn records_before(
        &self,
        thread: ThreadId,
        before: u64,
        limit: usize,
    ) -> Result<Vec<Record>, HistoryError> {
        let limit = limit.clamp(1, super::page::MAX_PAGE);
        pages::records_before(&self.read(), thread, before, limit).map_err(|e| self.query_error(e))
    }

    async fn records_in(
        &self,
        thread: ThreadId,
        namespace: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<Record>, HistoryError> {
        let limit = limit.clamp(1, super::page::MAX_PAGE);
        pages::records_in(&self.read(), thread, namespace, after, limit, self.search)
            .map_err(|e| self.query_error(e))
    }

    async fn threads_with_root(&self, root: &QName) -> Result<Vec<ThreadId>, HistoryError> {
        self.caught_up().await;
        pages::threads_with_root(&self.read(), root, self.search).map_err(|e| self.query_error(e))
    }

    async fn verify(&self) -> Result<u64, HistoryError> {
        self.caught_up().await;
        queries::verify(&self.read()).map_err(|e| match e {
            queries::VerifyError::Sqlite(e) => self.query_error(e),
            queries::VerifyError::Chain(b) => HistoryError::Chain(b),
            queries::VerifyError::Anchor(b) => HistoryError::Anchor(b),
        })
    }

    async fn anchors(&self) -> Result<Vec<Anchor>, HistoryError> {
        self.caught_up().await;
        prune::anchors(&self.read()).map_err(|e| self.query_error(e))
    }

    /// Runs on the writer thread between group commits, in `IMMEDIATE` transactions of at
    /// most [`PRUNE_STEP`] threads (one transaction for everything when archiving, so the
    /// archive holds exactly what went): batches appended before each commit first, appends
    /// made meanwhile wait in the writer's queue — never for a whole large prune. The threads
    /// are chosen with a read, and each step checks its own again.
    async fn prune(
        &self,
        before_us: i64,
        archive: Option<Box<dyn Archive>>,
    ) -> Result<Pruned, HistoryError> {
        self.writable()?;
        let pruned_us = now_us();
        if archive.is_some() {
            let step = prune::Step {
                before_us,
                pruned_us,
                threads: None,
            };
            return self.prune_step(step, archive).await;
        }
        self.caught_up().await;
        let candidates =
            prune::candidates(&self.read(), before_us).map_err(|e| self.query_error(e))?;
        let mut total = Pruned {
            before_us,
            ..Pruned::default()
        };
        for threads in candidates.chunks(PRUNE_STEP) {
            let step = prune::Step {
                before_us,
                pruned_us,
                threads: Some(threads.to_vec()),
            };
            let part = self.prune_step(step, None).await?;
            total.records += part.records;
            total.anchors.extend(part.anchors);
        }
        Ok(total)
    }
}
