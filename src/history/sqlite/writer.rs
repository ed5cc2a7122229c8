//! The writer thread: takes batches in the order `append` fixed, commits as many as are waiting
//! in one transaction (group commit), then resolves their tickets. A prune is work of its own,
//! run between two groups, so it never races an append for the file.
//!
//! After a failed commit the writer refuses every batch until a [`Work::Heal`] reaches it: it
//! probes the file with a small write and, if that commits, tells the store the last committed
//! digest of every thread whose records it refused, so the store can seal new records on what
//! is really in the file (see [`super::SqliteHistory`]).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use rusqlite::{Connection, params};
use tokio::sync::oneshot;

use super::prune::PruneError;
use super::{Failure, Health, SqliteOptions};
use crate::governor::HaltingReport;
use crate::history::{Archive, Cause, Delivered, HistoryError, Pruned, Record};
use crate::{ThreadId, ThreadInfo};

/// What the writer is handed: a batch to commit, a prune to run, or a try at writing again.
pub(crate) enum Work {
    Batch(Job),
    Prune(Prune),
    /// Probe the file after a failure; the answer is the store's correction of its order.
    Heal(mpsc::SyncSender<Result<Healed, String>>),
}

/// What a successful heal hands back: each refused thread's last committed digest (`None`
/// when nothing of it was committed).
pub(crate) type Healed = Vec<(ThreadId, Option<[u8; 32]>)>;

/// A prune transaction to run (see [`super::prune::prune`]), and where its outcome goes.
pub(crate) struct Prune {
    pub step: super::prune::Step,
    pub archive: Option<Box<dyn Archive>>,
    pub done: oneshot::Sender<Result<Pruned, PruneError>>,
}

/// One appended batch, ordered and sealed.
pub(crate) struct Job {
    pub records: Vec<(Record, bool)>,
    pub threads: Vec<ThreadInfo>,
    pub reports: Vec<HaltingReport>,
    pub delivered: Option<Delivered>,
    pub done: oneshot::Sender<Result<(), HistoryError>>,
}

/// The highest seq whose batch the writer has resolved (committed, or failed and refused):
/// readers wait for it to reach what was appended before they read.
pub(crate) type Resolved = Arc<tokio::sync::watch::Sender<u64>>;

/// The writer thread; joining it gives why the final checkpoint failed, if it did.
pub(crate) type Writer = JoinHandle<Result<(), CheckpointError>>;

/// Why the writer's final checkpoint did not leave the whole history in the database file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckpointError {
    /// SQLite refused the checkpoint.
    #[error("checkpoint failed: {0}")]
    Failed(#[source] rusqlite::Error),
    /// Another connection was reading, so the log could not be truncated.
    #[error("checkpoint incomplete: another connection is reading the database")]
    Incomplete,
    /// The writer thread panicked.
    #[error("the history writer panicked")]
    Panicked,
}

/// Starts the writer on its own OS thread (SQLite calls block). The thread ends once every
/// sender is gone, after writing all it was handed and checkpointing the write-ahead log into
/// the database file; it returns why the checkpoint failed, if it did.
pub(crate) fn spawn(
    mut conn: Connection,
    failed: Failure,
    resolved: Resolved,
    options: SqliteOptions,
) -> Result<(mpsc::SyncSender<Work>, Writer), HistoryError> {
    let (jobs, inbox) = mpsc::sync_channel(options.backlog.max(1));
    let handle = std::thread::Builder::new()
        .name("agentpump-history".into())
        .spawn(move || {
            run(&mut conn, &inbox, &failed, &resolved, options.group.max(1));
            checkpoint(&conn)
        })
        .map_err(|e| {
            HistoryError::unavailable(format!("cannot start the history writer: {e}")).because(e)
        })?;
    Ok((jobs, handle))
}

/// Copies every committed page from the write-ahead log into the database file and truncates
/// the log, so the file alone holds the whole history once the store is closed.
fn checkpoint(conn: &Connection) -> Result<(), CheckpointError> {
    let (busy, _, _): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .map_err(CheckpointError::Failed)?;
    if busy == 0 {
        Ok(())
    } else {
        Err(CheckpointError::Incomplete)
    }
}

fn run(
    conn: &mut Connection,
    inbox: &mpsc::Receiver<Work>,
    failed: &Mutex<Health>,
    resolved: &tokio::sync::watch::Sender<u64>,
    group: usize,
) {
    let mut terms = Terms::default();
    let mut held = None;
    // Threads whose records were refused since the last failure: their digests need fixing.
    let mut dirty = HashSet::new();
    // `recv` fails once every sender is gone and the inbox is empty: everything handed over
    // has been written by then.
    while let Some(work) = held.take().or_else(|| inbox.recv().ok()) {
        let first = match work {
            Work::Prune(prune) => {
                run_prune(conn, prune, failed);
                // This connection's deletes leave `data_version` as it was: forget here.
                terms.forget();
                continue;
            }
            Work::Heal(reply) => {
                let _ = reply.send(heal(conn, failed, &mut dirty));
                terms.forget();
                continue;
            }
            Work::Batch(job) => job,
        };
        let mut jobs = vec![first];
        while jobs.len() < group {
            match inbox.try_recv() {
                Ok(Work::Batch(job)) => jobs.push(job),
                // Batches handed over before the prune commit before it runs.
                Ok(prune) => {
                    held = Some(prune);
                    break;
                }
                Err(_) => break,
            }
        }
        commit(conn, jobs, failed, resolved, &mut terms, &mut dirty);
    }
}

/// Bytes a probe writes (and removes again) before the store takes writes after a failure: a
/// write of one page could land in log space the failed commit left allocated, and the store
/// would flap between taking and refusing writes on a disk that is still full.
pub(crate) const PROBE_BYTES: i64 = 1 << 20;

/// Tries the file again after a failure: commits [`PROBE_BYTES`] into `meta` and removes them.
/// If both commit, the store takes writes again, sealed on each refused thread's last committed
/// digest.
fn heal(
    conn: &mut Connection,
    failed: &Mutex<Health>,
    dirty: &mut HashSet<ThreadId>,
) -> Result<Healed, String> {
    let probe = |conn: &mut Connection| -> rusqlite::Result<Healed> {
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('probe', zeroblob(?1))",
            [PROBE_BYTES],
        )?;
        conn.execute("DELETE FROM meta WHERE key = 'probe'", [])?;
        dirty
            .iter()
            .map(|&thread| Ok((thread, super::queries::last_digest(conn, thread)?)))
            .collect()
    };
    let healed = probe(conn).map_err(|e| e.to_string())?;
    dirty.clear();
    failed.lock().unwrap_or_else(|p| p.into_inner()).healed();
    Ok(healed)
}

/// Runs a prune, unless the store already refuses writes. A failed prune rolls back and
/// leaves the store writable: it never leaves a hole in a chain.
fn run_prune(conn: &mut Connection, prune: Prune, failed: &Mutex<Health>) {
    let already = failed.lock().unwrap_or_else(|p| p.into_inner()).why.clone();
    let outcome = match already {
        Some(why) => Err(PruneError::Refused(why)),
        None => super::prune::prune(conn, &prune.step, prune.archive),
    };
    let _ = prune.done.send(outcome);
}

/// Commits a group of batches in one transaction and resolves their tickets. Refused batches'
/// threads go into `dirty`, their queued messages into the store's refused ids.
fn commit(
    conn: &mut Connection,
    jobs: Vec<Job>,
    failed: &Mutex<Health>,
    resolved: &tokio::sync::watch::Sender<u64>,
    terms: &mut Terms,
    dirty: &mut HashSet<ThreadId>,
) {
    let already = failed.lock().unwrap_or_else(|p| p.into_inner()).why.clone();
    let result: Result<(), (String, Option<Cause>)> = match already {
        Some(why) => Err((why, None)),
        None => write(conn, &jobs, terms).map_err(|e| (e.to_string(), Some(Arc::new(e) as Cause))),
    };
    if let Err((why, _)) = &result {
        // Rolled back: the pairs it noted may not be in the file.
        terms.forget();
        let mut health = failed.lock().unwrap_or_else(|p| p.into_inner());
        if health.why.is_none() {
            tracing::error!(error = %why, "history commit failed; writes are refused until the file takes one again");
            health.fail(why.clone());
        }
        for (record, pending) in jobs.iter().flat_map(|job| &job.records) {
            dirty.insert(record.thread);
            if *pending {
                health.refused.insert(record.id);
            }
        }
    }
    let last = jobs
        .iter()
        .filter_map(|job| job.records.last().map(|(r, _)| r.seq))
        .max();
    if let Some(last) = last {
        resolved.send_if_modified(|seq| {
            let raised = last > *seq;
            *seq = (*seq).max(last);
            raised
        });
    }
    for job in jobs {
        let outcome = result.clone().map_err(|(why, cause)| {
            let e = HistoryError::unavailable(format!("commit failed: {why}"));
            match cause {
                Some(cause) => e.because_shared(cause),
                None => e,
            }
        });
        let _ = job.done.send(outcome);
    }
}

/// Most threads whose search terms the writer remembers; past it, it forgets them all (a
/// forgotten pair costs one `INSERT OR IGNORE` that finds it there).
const KNOWN_THREADS: usize = 65_536;

/// Most words of the vocabulary the writer remembers; past it, it forgets them all.
const KNOWN_WORDS: usize = 65_536;

/// The (thread, term) pairs of the search index this writer has written, so that a record
/// whose root, sender and addressee its thread has used before costs no write to the index
/// (a thread's terms are few, its records many), and the words of the vocabulary it has seen.
/// Both are forgotten when another connection has committed since the last transaction (a
/// prune may have deleted pairs and words): SQLite's `data_version` says so.
#[derive(Default)]
struct Terms {
    known: HashMap<ThreadId, Vec<Box<str>>>,
    words: HashSet<Box<str>>,
    data_version: Option<i64>,
}

impl Terms {
    /// Forgets everything if another connection changed the file since the last call.
    fn check(&mut self, tx: &rusqlite::Transaction<'_>) -> rusqlite::Result<()> {
        let version: i64 = tx.query_row("PRAGMA data_version", [], |r| r.get(0))?;
        if self.data_version != Some(version) {
            self.forget();
            self.data_version = Some(version);
        }
        Ok(())
    }

    fn forget(&mut self) {
        self.known.clear();
        self.words.clear();
    }

    /// Whether `word` may be missing from the vocabulary (and remembers it is there now).
    fn is_new_word(&mut self, word: &str) -> bool {
        if self.words.contains(word) {
            return false;
        }
        if self.words.len() >= KNOWN_WORDS {
            self.words.clear();
        }
        self.words.insert(word.into());
        true
    }

    /// Whether `term` is new for `thread` (and remembers it).
    fn is_new(&mut self, thread: ThreadId, term: &str) -> bool {
        if self.known.len() >= KNOWN_THREADS && !self.known.contains_key(&thread) {
            self.known.clear();
        }
        let terms = self.known.entry(thread).or_default();
        if terms.iter().any(|t| &**t == term) {
            return false;
        }
        terms.push(term.into());
        true
    }
}

fn write(conn: &mut Connection, jobs: &[Job], terms: &mut Terms) -> rusqlite::Result<()> {
    // The commit's instant, kept with each delivered mark for the viewer's waterfall.
    let committed_us = crate::history::now_us();
    let tx = conn.transaction()?;
    terms.check(&tx)?;
    let mut tallies = super::tallies::Deltas::default();
    {
        let mut pair =
            tx.prepare_cached("INSERT OR IGNORE INTO thread_terms (term, thread) VALUES (?1, ?2)")?;
        let mut word = tx.prepare_cached("INSERT OR IGNORE INTO terms (text) VALUES (?1)")?;
        let mut insert = tx.prepare_cached(
            "INSERT INTO records (seq, thread, id, time_us, kind, sender, recipient, in_reply_to, root, payload, digest, pending)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        )?;
        let mut deliver = tx.prepare_cached(
"UPDATE records SET pending = 0, handled = ?2, tokens_in = ?3, tokens_out = ?4, cost = ?5, tool_calls = ?6, usage_estimated = ?7,
             started_us = ?8, handled_us = ?9, committed_us = ?10, llm_us = ?11 WHERE id = ?1",
        )?;
        let mut thread = tx.prepare_cached(
            "INSERT INTO threads (id, parent, state, info) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (id) DO UPDATE SET state = excluded.state, info = excluded.info",
        )?;
        let mut report = tx.prepare_cached(
            "INSERT OR REPLACE INTO reports (halt_id, thread, json) VALUES (?1, ?2, ?3)",
        )?;
        for job in jobs {
            if let Some(d) = &job.delivered {
                tallies.deliver(d);
                let u = &d.usage;
                deliver.execute(params![
                    d.id.to_string(),
                    // 0 refused, 1 handled (a turn), 2 handled notice that cost no turn;
                    // plus 4 when the handler failed.
                    i64::from(d.handled) * if d.free { 2 } else { 1 }
                        + if d.failed { 4 } else { 0 },
                    u.tokens_in as i64,
                    u.tokens_out as i64,
                    u.cost.to_string(),
                    u.tool_calls as i64,
                    u.estimated,
                    d.timing.map(|t| t.started_us),
                    d.timing.map(|t| t.handled_us),
                    committed_us,
                    u.llm_us as i64,
                ])?;
            }
            for (r, pending) in &job.records {
                tallies.record(r.thread);
                let (thread_id, root) = (r.thread.to_string(), r.root.to_string());
                insert.execute(params![
                    r.seq as i64,
                    &thread_id,
                    r.id.to_string(),
                    r.time_us,
                    r.kind.as_str(),
                    &*r.from,
                    r.to.as_deref(),
                    r.in_reply_to.map(|id| id.to_string()),
                    &root,
                    &*r.payload,
                    &r.digest[..],
                    pending,
                ])?;
                for term in [Some(root.as_str()), Some(&*r.from), r.to.as_deref()]
                    .into_iter()
                    .flatten()
                {
                    if terms.is_new(r.thread, term) {
                        pair.execute(params![term, &thread_id])?;
                        if terms.is_new_word(term) {
                            word.execute([term])?;
                        }
                    }
                }
            }
            for info in &job.threads {
                let mut info = info.clone();
                info.children.clear();
                let json = serde_json::to_string(&info).expect("a thread snapshot serializes");
                thread.execute(params![
                    info.id.to_string(),
                    info.parent.map(|p| p.to_string()),
                    info.state.as_str(),
                    json
                ])?;
                // A root thread is found by its path too; a short id is found from the ids.
                let short = info.id.to_string();
                if info.parent.is_none()
                    && *info.path != short[..8]
                    && terms.is_new(info.id, &info.path)
                {
                    pair.execute(params![&*info.path, info.id.to_string()])?;
                    if terms.is_new_word(&info.path) {
                        word.execute([&*info.path])?;
                    }
                }
            }
            for r in &job.reports {
                let json = serde_json::to_string(r).expect("a report serializes");
                report.execute(params![r.halt_id.to_string(), r.thread.to_string(), json])?;
            }
        }
    }
    tallies.write(&tx)?;
    tx.commit()
}
