//! Retention in the SQLite file: which records a prune removes, the `anchors` table it leaves,
//! and the prune itself, run by the writer thread in one transaction between group commits.

use std::collections::{HashMap, HashSet};

use rusqlite::{Connection, OptionalExtension, params};

use super::queries::{parse, records};
use crate::ThreadId;
use crate::history::prune::{anchor_chain, archive_all, finished_trees};
use crate::history::{Anchor, Archive, ChainBreak, Pruned, Record};

/// The anchors table, created in every file this build opens for writing (older files too).
pub(crate) const ANCHORS: &str = "
CREATE TABLE IF NOT EXISTS anchors (
    n INTEGER PRIMARY KEY,
    thread TEXT NOT NULL,
    records INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    first_time_us INTEGER NOT NULL,
    last_time_us INTEGER NOT NULL,
    before_us INTEGER NOT NULL,
    pruned_us INTEGER NOT NULL,
    last_digest BLOB NOT NULL,
    digest BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS anchors_by_thread ON anchors (thread, n);
";

/// The schema version of a file with anchors (see [`super::SCHEMA_VERSION`]).
const PRUNED_VERSION: i64 = 2;

/// Why a prune removed nothing.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PruneError {
    /// SQLite failed.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The records that would go do not verify against their chain.
    #[error(transparent)]
    Chain(#[from] ChainBreak),
    /// The archive could not be written or finished.
    #[error("archive: {0}")]
    Archive(#[source] std::io::Error),
    /// The store refuses writes since an earlier commit failed.
    #[error("{0}")]
    Refused(String),
}

fn digest(column: usize, bytes: Vec<u8>) -> rusqlite::Result<[u8; 32]> {
    bytes.try_into().map_err(|_| {
        rusqlite::Error::InvalidColumnType(column, "digest".into(), rusqlite::types::Type::Blob)
    })
}

/// Every anchor in chain order; none in a file without the table (an older file opened
/// read-only).
pub(crate) fn anchors(conn: &Connection) -> rusqlite::Result<Vec<Anchor>> {
    let exists: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'anchors'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if exists.is_none() {
        return Ok(Vec::new());
    }
    let mut stmt = conn.prepare_cached(
        "SELECT n, thread, records, first_seq, last_seq, first_time_us, last_time_us, before_us, pruned_us, last_digest, digest FROM anchors ORDER BY n",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok(Anchor {
            n: r.get::<_, i64>(0)? as u64,
            thread: parse(1, r.get_ref(1)?.as_str()?)?,
            records: r.get::<_, i64>(2)? as u64,
            first_seq: r.get::<_, i64>(3)? as u64,
            last_seq: r.get::<_, i64>(4)? as u64,
            first_time_us: r.get(5)?,
            last_time_us: r.get(6)?,
            before_us: r.get(7)?,
            pruned_us: r.get(8)?,
            last_digest: digest(9, r.get(9)?)?,
            digest: digest(10, r.get(10)?)?,
        })
    })?;
    rows.collect()
}

/// Each anchored thread's latest anchor digest: where its remaining records chain from.
pub(crate) fn starts(anchors: &[Anchor]) -> HashMap<ThreadId, [u8; 32]> {
    anchors.iter().map(|a| (a.thread, a.last_digest)).collect()
}

/// Threads whose whole tree (the root and every thread below it) is done or halted with
/// nothing pending: the only ones a prune touches.
fn finished(conn: &Connection) -> rusqlite::Result<HashSet<String>> {
    let mut stmt = conn.prepare_cached("SELECT id, parent, state FROM threads")?;
    let threads: Vec<(String, Option<String>, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let mut stmt =
        conn.prepare_cached("SELECT thread FROM records WHERE pending = 1 ORDER BY seq")?;
    let busy: HashSet<String> = stmt
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let busy: HashSet<&str> = busy.iter().map(String::as_str).collect();
    let rows: Vec<(&str, Option<&str>, bool)> = threads
        .iter()
        .map(|(id, parent, state)| {
            let closed = matches!(state.as_str(), "done" | "halted");
            (id.as_str(), parent.as_deref(), closed)
        })
        .collect();
    Ok(finished_trees(&rows, &busy)
        .into_iter()
        .map(str::to_owned)
        .collect())
}

/// Threads with records accepted before `before_us` whose whole tree is finished, sorted: what
/// a prune looks at. Reads the records table once.
pub(crate) fn candidates(conn: &Connection, before_us: i64) -> rusqlite::Result<Vec<String>> {
    let finished = finished(conn)?;
    let mut stmt = conn.prepare_cached("SELECT DISTINCT thread FROM records WHERE time_us < ?1")?;
    let mut old: Vec<String> = stmt
        .query_map([before_us], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    old.retain(|t| finished.contains(t));
    old.sort();
    Ok(old)
}

/// Per thread, the records a prune before `before_us` removes: the longest prefix of the
/// thread's chain accepted before the cut, so what remains is never a chain with holes. Only
/// `threads` when given — each checked again for being finished, since a halted thread may have
/// been resumed since they were chosen — else every candidate.
pub(crate) fn doomed(
    conn: &Connection,
    before_us: i64,
    threads: Option<&[String]>,
) -> rusqlite::Result<Vec<Vec<Record>>> {
    let threads = match threads {
        None => candidates(conn, before_us)?,
        Some(only) => {
            let finished = finished(conn)?;
            only.iter()
                .filter(|t| finished.contains(*t))
                .cloned()
                .collect()
        }
    };
    let mut out = Vec::new();
    for thread in threads {
        let prefix = records(
            conn,
            "WHERE thread = ?1 AND seq < coalesce((SELECT min(seq) FROM records WHERE thread = ?1 AND time_us >= ?2), 9223372036854775807) ORDER BY seq",
            params![thread, before_us],
        )?;
        if !prefix.is_empty() {
            out.push(prefix);
        }
    }
    Ok(out)
}

/// One prune transaction: the cut, when the prune began (the same for all its transactions),
/// and the threads it may touch (none given: every candidate).
#[derive(Debug)]
pub(crate) struct Step {
    pub before_us: i64,
    pub pruned_us: i64,
    pub threads: Option<Vec<String>>,
}

/// Removes what [`doomed`] selects for `step` in one transaction: checks each thread's removed
/// records against its chain, writes them to `archive`, adds an anchor per thread, deletes
/// them, and finishes the archive before committing.
pub(crate) fn prune(
    conn: &mut Connection,
    step: &Step,
    archive: Option<Box<dyn Archive>>,
) -> Result<Pruned, PruneError> {
    let (before_us, now) = (step.before_us, step.pruned_us);
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let doomed = doomed(&tx, before_us, step.threads.as_deref())?;
    let existing = anchors(&tx)?;
    let starts = starts(&existing);
    let start = |thread| starts.get(&thread).copied();
    let anchors = anchor_chain(&doomed, existing.last(), start, before_us, now)?;
    if let Some(archive) = archive {
        archive_all(archive, &doomed).map_err(PruneError::Archive)?;
    }
    let mut pruned = Pruned {
        before_us,
        ..Pruned::default()
    };
    {
        let mut insert = tx.prepare_cached(
            "INSERT INTO anchors (n, thread, records, first_seq, last_seq, first_time_us, last_time_us, before_us, pruned_us, last_digest, digest)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?;
        // Plain DELETEs, so triggers of other tables over records (a search index) see them.
        let mut delete =
            tx.prepare_cached("DELETE FROM records WHERE thread = ?1 AND seq <= ?2")?;
        for anchor in anchors {
            let thread = anchor.thread;
            insert.execute(params![
                anchor.n as i64,
                thread.to_string(),
                anchor.records as i64,
                anchor.first_seq as i64,
                anchor.last_seq as i64,
                anchor.first_time_us,
                anchor.last_time_us,
                anchor.before_us,
                anchor.pruned_us,
                &anchor.last_digest[..],
                &anchor.digest[..],
            ])?;
            delete.execute(params![thread.to_string(), anchor.last_seq as i64])?;
            super::tallies::pruned(&tx, thread, anchor.records)?;
            pruned.records += anchor.records;
            pruned.anchors.push(anchor);
        }
    }
    if !pruned.anchors.is_empty() {
        tx.execute(
            "UPDATE meta SET value = ?1 WHERE key = 'schema_version' AND CAST(value AS INTEGER) < ?2",
            params![PRUNED_VERSION.to_string(), PRUNED_VERSION],
        )?;
    }
    tx.commit()?;
    Ok(pruned)
}
