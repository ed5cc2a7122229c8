//! Reads: records by thread, id and state, thread snapshots, reports, recovery, verification.

use std::collections::HashMap;
use std::str::FromStr;

use super::tallies;
use crate::governor::HaltingReport;
use crate::history::{AnchorBreak, ChainBreak, Record, RecordKind, Recovery, verify_anchors};
use crate::{Counters, MessageId, QName, ThreadId, ThreadInfo, ThreadState};
use rusqlite::{Connection, OptionalExtension, Row, params};

pub(crate) const COLUMNS: &str =
    "seq, thread, id, time_us, kind, sender, recipient, in_reply_to, root, payload, digest";

/// Why verification stopped.
pub(crate) enum VerifyError {
    Sqlite(rusqlite::Error),
    Chain(ChainBreak),
    Anchor(AnchorBreak),
}

pub(crate) fn parse<T: FromStr>(column: usize, text: &str) -> rusqlite::Result<T> {
    text.parse().map_err(|_| {
        rusqlite::Error::InvalidColumnType(column, format!("`{text}`"), rusqlite::types::Type::Text)
    })
}

pub(crate) fn from_row(row: &Row<'_>) -> rusqlite::Result<Record> {
    let kind = match row.get_ref(4)?.as_str()? {
        "message" => RecordKind::Message,
        "egress" => RecordKind::Egress,
        "system" => RecordKind::System,
        "decision" => RecordKind::Decision,
        other => {
            return Err(rusqlite::Error::InvalidColumnType(
                4,
                other.to_owned(),
                rusqlite::types::Type::Text,
            ));
        }
    };
    let digest: Vec<u8> = row.get(10)?;
    Ok(Record {
        seq: row.get::<_, i64>(0)? as u64,
        thread: parse(1, row.get_ref(1)?.as_str()?)?,
        id: parse(2, row.get_ref(2)?.as_str()?)?,
        time_us: row.get(3)?,
        kind,
        from: row.get_ref(5)?.as_str()?.into(),
        to: row.get::<_, Option<String>>(6)?.map(Into::into),
        in_reply_to: row
            .get::<_, Option<String>>(7)?
            .map(|t| parse(7, &t))
            .transpose()?,
        root: QName::from_str(row.get_ref(8)?.as_str()?).unwrap_or_else(|never| match never {}),
        payload: row.get_ref(9)?.as_str()?.into(),
        digest: digest.try_into().map_err(|_| {
            rusqlite::Error::InvalidColumnType(10, "digest".into(), rusqlite::types::Type::Blob)
        })?,
    })
}

pub(crate) fn records(
    conn: &Connection,
    filter: &str,
    args: impl rusqlite::Params,
) -> rusqlite::Result<Vec<Record>> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {COLUMNS} FROM records {filter}"))?;
    let rows = stmt.query_map(args, from_row)?;
    rows.collect()
}

/// Where `append` continues: the seq after the highest ever given — past what a prune removed
/// too (a seq is never given twice). Two index look-ups.
pub(crate) fn next_seq(conn: &Connection) -> rusqlite::Result<u64> {
    conn.query_row(
        "SELECT max(coalesce((SELECT max(seq) FROM records), 0), coalesce((SELECT max(last_seq) FROM anchors), 0))",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as u64)
}

/// The digest a thread's next record chains from: its last record's, or, when a prune removed
/// them all, its latest anchor's; none for a thread with neither. Index look-ups.
pub(crate) fn last_digest(
    conn: &Connection,
    thread: ThreadId,
) -> rusqlite::Result<Option<[u8; 32]>> {
    let id = thread.to_string();
    let mut last = conn
        .prepare_cached("SELECT digest FROM records WHERE thread = ?1 ORDER BY seq DESC LIMIT 1")?;
    let mut anchored = conn.prepare_cached(
        "SELECT last_digest FROM anchors WHERE thread = ?1 ORDER BY n DESC LIMIT 1",
    )?;
    let digest = match last
        .query_row([&id], |r| r.get::<_, Vec<u8>>(0))
        .optional()?
    {
        Some(d) => d,
        None => match anchored
            .query_row([&id], |r| r.get::<_, Vec<u8>>(0))
            .optional()?
        {
            Some(d) => d,
            None => return Ok(None),
        },
    };
    digest.try_into().map(Some).map_err(|d: Vec<u8>| {
        rusqlite::Error::InvalidColumnType(
            0,
            format!("a digest of {} bytes, not 32", d.len()),
            rusqlite::types::Type::Blob,
        )
    })
}

pub(crate) fn thread(
    conn: &Connection,
    thread: ThreadId,
    since: u64,
) -> rusqlite::Result<Vec<Record>> {
    records(
        conn,
        "WHERE thread = ?1 AND seq >= ?2 ORDER BY seq",
        params![thread.to_string(), since as i64],
    )
}

pub(crate) fn record(conn: &Connection, id: MessageId) -> rusqlite::Result<Option<Record>> {
    let mut stmt = conn.prepare_cached(&format!("SELECT {COLUMNS} FROM records WHERE id = ?1"))?;
    stmt.query_row([id.to_string()], from_row).optional()
}

pub(crate) fn pending(conn: &Connection) -> rusqlite::Result<Vec<Record>> {
    records(conn, "WHERE pending = 1 ORDER BY seq", [])
}

pub(crate) fn reports(conn: &Connection, thread: ThreadId) -> rusqlite::Result<Vec<HaltingReport>> {
    let mut stmt =
        conn.prepare_cached("SELECT json FROM reports WHERE thread = ?1 ORDER BY rowid")?;
    let rows = stmt.query_map([thread.to_string()], |r| r.get::<_, String>(0))?;
    rows.map(|json| {
        let json = json?;
        serde_json::from_str(&json).map_err(|e| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
        })
    })
    .collect()
}

/// A saved thread snapshot from its JSON.
pub(crate) fn snapshot(json: &str) -> rusqlite::Result<ThreadInfo> {
    serde_json::from_str(json).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// Every snapshot in creation order: children filled in from the parent links, counters from
/// the tallies (summed from the delivered marks in a file without them), and an open thread's
/// state derived from its queue (`active` while it has undelivered messages, else `idle`) —
/// snapshots are saved on structural changes only.
pub(crate) fn threads(
    conn: &Connection,
    state: Option<ThreadState>,
    tallied: bool,
) -> rusqlite::Result<Vec<ThreadInfo>> {
    let (counters, _) = tallies::split(tallies::all(conn, tallied)?);
    with_counters(conn, state, counters)
}

/// The snapshots, with `counters` and their live state.
fn with_counters(
    conn: &Connection,
    state: Option<ThreadState>,
    mut counters: HashMap<ThreadId, Counters>,
) -> rusqlite::Result<Vec<ThreadInfo>> {
    let mut stmt = conn.prepare_cached("SELECT info FROM threads ORDER BY rowid")?;
    let all: Vec<ThreadInfo> = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .map(|json| snapshot(&json?))
        .collect::<rusqlite::Result<_>>()?;
    let mut busy = std::collections::HashSet::new();
    // Not `DISTINCT`: that walks the whole by-thread index; this reads the pending ones.
    let mut stmt =
        conn.prepare_cached("SELECT thread FROM records WHERE pending = 1 ORDER BY seq")?;
    for thread in stmt.query_map([], |r| r.get::<_, String>(0))? {
        busy.insert(parse::<ThreadId>(0, &thread?)?);
    }
    let mut children: HashMap<ThreadId, Vec<ThreadId>> = HashMap::new();
    for t in &all {
        if let Some(parent) = t.parent {
            children.entry(parent).or_default().push(t.id);
        }
    }
    Ok(all
        .into_iter()
        .map(|mut t| {
            t.children = children.remove(&t.id).unwrap_or_default();
            let counters = counters.remove(&t.id).unwrap_or_default();
            let busy = busy.contains(&t.id);
            t.with_live_state(busy, counters)
        })
        .filter(|t| state.is_none_or(|s| t.state == s))
        .collect())
}

/// What a restart reads, none of it a scan of the records: one tally and one snapshot per
/// thread, and through partial indexes the pending messages and the governor's records.
pub(crate) fn recovery(conn: &Connection) -> rusqlite::Result<Recovery> {
    let (counters, per_thread) = tallies::split(tallies::all(conn, true)?);
    let threads = with_counters(conn, None, counters.clone())?;
    let mut recovery = Recovery {
        counters,
        records: per_thread,
        pending: pending(conn)?,
        governor: governor(conn)?,
        ..Recovery::default()
    };
    super::views::fill(conn, &threads, &mut recovery)?;
    recovery.threads = threads;
    Ok(recovery)
}

/// What reloading one evicted tree reads, by index: the snapshots of the tree `thread` belongs
/// to (up the parent links to its root, then down), one tally per thread, and each thread's
/// pending and governor records by `records_by_thread`. `None` for a thread the file does not
/// know.
pub(crate) fn reload(conn: &Connection, thread: ThreadId) -> rusqlite::Result<Option<Recovery>> {
    let mut stmt = conn.prepare_cached(
        "WITH RECURSIVE up(id, parent) AS (SELECT id, parent FROM threads WHERE id = ?1
           UNION ALL SELECT t.id, t.parent FROM threads t JOIN up ON t.id = up.parent),
         sub(id) AS (SELECT id FROM up WHERE parent IS NULL
           UNION ALL SELECT t.id FROM threads t JOIN sub ON t.parent = sub.id)
         SELECT info FROM threads WHERE id IN sub ORDER BY rowid",
    )?;
    let threads: Vec<ThreadInfo> = stmt
        .query_map([thread.to_string()], |r| r.get::<_, String>(0))?
        .map(|json| snapshot(&json?))
        .collect::<rusqlite::Result<_>>()?;
    if threads.is_empty() {
        return Ok(None);
    }
    let mut recovery = Recovery::default();
    for t in &threads {
        let id = t.id.to_string();
        if let Some((records, counters)) = tallies::of(conn, &id)? {
            recovery.records.insert(t.id, records);
            recovery.counters.insert(t.id, counters);
        }
        recovery.pending.extend(records(
            conn,
            "WHERE thread = ?1 AND pending = 1 ORDER BY seq",
            [&id],
        )?);
        recovery.governor.extend(records(
            conn,
            "WHERE thread = ?1 AND (recipient = 'governor' AND kind = 'message' OR kind = 'decision') ORDER BY seq",
            [&id],
        )?);
    }
    recovery.pending.sort_by_key(|r| r.seq);
    recovery.governor.sort_by_key(|r| r.seq);
    super::views::fill(conn, &threads, &mut recovery)?;
    recovery.threads = threads;
    Ok(Some(recovery))
}

/// Messages to the governor and its decisions, in order: a union of two partial indexes (an
/// `OR` of the two conditions would read every record).
fn governor(conn: &Connection) -> rusqlite::Result<Vec<Record>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM records WHERE recipient = 'governor' AND kind = 'message'
         UNION ALL SELECT {COLUMNS} FROM records WHERE kind = 'decision' ORDER BY seq"
    ))?;
    let rows = stmt.query_map([], from_row)?;
    rows.collect()
}

/// Checks the anchor chain, then walks every record in seq order, checking each thread's
/// chain (from its latest anchor, if it was pruned).
pub(crate) fn verify(conn: &Connection) -> Result<u64, VerifyError> {
    let anchors = super::prune::anchors(conn).map_err(VerifyError::Sqlite)?;
    verify_anchors(&anchors).map_err(VerifyError::Anchor)?;
    let mut stmt = conn
        .prepare(&format!("SELECT {COLUMNS} FROM records ORDER BY seq"))
        .map_err(VerifyError::Sqlite)?;
    let rows = stmt.query_map([], from_row).map_err(VerifyError::Sqlite)?;
    let mut last = super::prune::starts(&anchors);
    let mut checked = 0;
    for row in rows {
        let r = row.map_err(VerifyError::Sqlite)?;
        let previous = last.entry(r.thread).or_insert([0; 32]);
        let expected = r.chained_digest(previous);
        if expected != r.digest {
            return Err(VerifyError::Chain(ChainBreak {
                thread: r.thread,
                seq: r.seq,
                expected: hex::encode(expected),
                found: hex::encode(r.digest),
            }));
        }
        *previous = r.digest;
        checked += 1;
    }
    Ok(checked)
}
