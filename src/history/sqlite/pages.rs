//! Paged reads for the viewer: root threads by keyset on the `threads` rowid (newest first, the
//! cursor is the rowid of the last thread shown), with filters as `EXISTS` subqueries that stop
//! at the first match; each thread of a page gets its counters, start, state and halt from
//! indexed lookups of that thread alone, never from a scan of the whole history.

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params};

use super::queries::{parse, records, snapshot};
use crate::governor::HaltingReport;
use crate::history::Record;
use crate::history::page::{ThreadFilter, ThreadPage, ThreadSummary, halt_class};
use crate::{Counters, ThreadId, ThreadInfo, ThreadState};

/// The SQL condition and arguments of `filter` (without the cursor).
fn conditions(filter: &ThreadFilter) -> (String, Vec<Value>) {
    let mut sql = String::from("parent IS NULL");
    let mut args: Vec<Value> = Vec::new();
    const PENDING: &str =
        "EXISTS (SELECT 1 FROM records r WHERE r.thread = threads.id AND r.pending = 1)";
    match filter.state {
        Some(ThreadState::Done) => sql.push_str(" AND state = 'done'"),
        Some(ThreadState::Halted) => sql.push_str(" AND state = 'halted'"),
        Some(ThreadState::Active) => {
            sql.push_str(&format!(" AND state IN ('active', 'idle') AND {PENDING}"));
        }
        Some(ThreadState::Idle) => {
            sql.push_str(&format!(
                " AND state IN ('active', 'idle') AND NOT {PENDING}"
            ));
        }
        None => {}
    }
    if let Some(class) = &filter.class {
        // The latest report decides, as in the list. The reports are read once into a set
        // (far fewer than threads), not looked up per thread.
        sql.push_str(
            " AND threads.id IN (SELECT thread FROM reports r WHERE (json_extract(r.json, '$.class') = ?1 OR json_extract(r.json, '$.halting_certificate.type') = ?1) AND r.rowid = (SELECT max(rowid) FROM reports r2 WHERE r2.thread = r.thread))",
        );
        let n = args.len() + 1;
        sql = sql.replace("?1", &format!("?{n}"));
        args.push(Value::Text(class.clone()));
    }
    if let Some(text) = filter.text.as_deref().filter(|t| !t.is_empty()) {
        // The records of the root and of every thread below it (a recursive walk down the
        // parent index from this root), each thread's read by the records index.
        let n = args.len() + 1;
        sql.push_str(&format!(
            " AND (json_extract(info, '$.path') LIKE ?{n} ESCAPE '\\' OR EXISTS (WITH RECURSIVE sub(id) AS (SELECT threads.id UNION ALL SELECT t.id FROM threads t JOIN sub ON t.parent = sub.id) SELECT 1 FROM sub CROSS JOIN records r ON r.thread = sub.id WHERE r.root LIKE ?{n} ESCAPE '\\' OR r.sender LIKE ?{n} ESCAPE '\\' OR r.recipient LIKE ?{n} ESCAPE '\\'))"
        ));
        let escaped = text
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_");
        args.push(Value::Text(format!("%{escaped}%")));
    }
    (sql, args)
}

/// A page of root threads, newest first.
pub(crate) fn roots(conn: &Connection, filter: &ThreadFilter) -> rusqlite::Result<ThreadPage> {
    let (mut sql, mut args) = conditions(filter);
    if let Some(before) = filter.before {
        sql.push_str(&format!(" AND rowid < ?{}", args.len() + 1));
        args.push(Value::Integer(before as i64));
    }
    let size = filter.page_size();
    let query = format!(
        "SELECT rowid, info FROM threads WHERE {sql} ORDER BY rowid DESC LIMIT {}",
        size + 1
    );
    let mut stmt = conn.prepare_cached(&query)?;
    let rows: Vec<(i64, String)> = stmt
        .query_map(rusqlite::params_from_iter(args), |r| {
            Ok((r.get(0)?, r.get(1)?))
        })?
        .collect::<rusqlite::Result<_>>()?;
    let more = rows.len() > size;
    let mut threads = Vec::with_capacity(size);
    for (rowid, json) in rows.into_iter().take(size) {
        threads.push(summary(conn, rowid as u64, &json)?);
    }
    let next = if more {
        threads.last().map(|t| t.cursor)
    } else {
        None
    };
    Ok(ThreadPage { threads, next })
}

/// One thread of a page, completed from indexed lookups of that thread.
fn summary(conn: &Connection, cursor: u64, json: &str) -> rusqlite::Result<ThreadSummary> {
    let info = snapshot(json)?;
    let id = info.id.to_string();
    let busy: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM records WHERE thread = ?1 AND pending = 1)",
        [&id],
        |r| r.get(0),
    )?;
    let started_us: Option<i64> = conn
        .query_row(
            "SELECT time_us FROM records WHERE thread = ?1 ORDER BY seq LIMIT 1",
            [&id],
            |r| r.get(0),
        )
        .optional()?;
    let mut children = Vec::new();
    let mut stmt =
        conn.prepare_cached("SELECT id FROM threads WHERE parent = ?1 ORDER BY rowid")?;
    for child in stmt.query_map([&id], |r| r.get::<_, String>(0))? {
        children.push(parse::<ThreadId>(0, &child?)?);
    }
    let report: Option<String> = conn
        .query_row(
            "SELECT json FROM reports WHERE thread = ?1 ORDER BY rowid DESC LIMIT 1",
            [&id],
            |r| r.get(0),
        )
        .optional()?;
    let reports: Vec<HaltingReport> = report
        .map(|json| {
            serde_json::from_str(&json).map_err(|e| {
                rusqlite::Error::FromSqlConversionFailure(
                    0,
                    rusqlite::types::Type::Text,
                    Box::new(e),
                )
            })
        })
        .transpose()?
        .into_iter()
        .collect();
    let (class, certificate) = halt_class(&reports);
    let mut info = info.with_live_state(busy, counters(conn, &id)?);
    info.children = children;
    Ok(ThreadSummary {
        info,
        cursor,
        started_us,
        class,
        certificate,
    })
}

/// One thread's deliveries and reported usage.
fn counters(conn: &Connection, thread: &str) -> rusqlite::Result<Counters> {
    conn.query_row(
        "SELECT coalesce(sum((handled & 3) = 1), 0), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0), coalesce(group_concat(cost, ' '), '0'), coalesce(sum(tool_calls), 0), coalesce(sum(usage_estimated), 0), coalesce(sum((handled & 3) = 2), 0), coalesce(sum(handled >= 4), 0) FROM records WHERE thread = ?1 AND handled > 0",
        [thread],
        |r| {
            let costs: String = r.get(3)?;
            let cost = costs
                .split(' ')
                .map(|c| parse::<rust_decimal::Decimal>(3, c))
                .sum::<rusqlite::Result<_>>()?;
            Ok(Counters {
                deliveries: r.get::<_, i64>(0)? as u64,
                failures: r.get::<_, i64>(7)? as u64,
                tokens_in: r.get::<_, i64>(1)? as u64,
                tokens_out: r.get::<_, i64>(2)? as u64,
                tool_calls: r.get::<_, i64>(4)? as u64,
                cost,
                estimated_usage: r.get::<_, i64>(5)? as u64,
                notices: r.get::<_, i64>(6)? as u64,
            })
        },
    )
}

/// Up to `limit` records of `thread` after seq `after`.
pub(crate) fn records_after(
    conn: &Connection,
    thread: ThreadId,
    after: u64,
    limit: usize,
) -> rusqlite::Result<Vec<Record>> {
    records(
        conn,
        "WHERE thread = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
        params![thread.to_string(), after as i64, limit as i64],
    )
}

/// Up to `limit` records of `thread` before seq `before`, the last ones, in order.
pub(crate) fn records_before(
    conn: &Connection,
    thread: ThreadId,
    before: u64,
    limit: usize,
) -> rusqlite::Result<Vec<Record>> {
    let mut page = records(
        conn,
        "WHERE thread = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
        params![
            thread.to_string(),
            i64::try_from(before).unwrap_or(i64::MAX),
            limit as i64
        ],
    )?;
    page.reverse();
    Ok(page)
}

/// `root` and every thread below it, parents before children (creation order), each with its
/// live state, counters and children.
pub(crate) fn subtree(conn: &Connection, root: ThreadId) -> rusqlite::Result<Vec<ThreadInfo>> {
    let mut stmt = conn.prepare_cached(
        "WITH RECURSIVE sub(id) AS (SELECT ?1 UNION ALL SELECT t.id FROM threads t JOIN sub ON t.parent = sub.id) SELECT rowid, info FROM threads WHERE id IN sub ORDER BY rowid",
    )?;
    let rows: Vec<(i64, String)> = stmt
        .query_map([root.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<rusqlite::Result<_>>()?;
    rows.into_iter()
        .map(|(rowid, json)| summary(conn, rowid as u64, &json).map(|s| s.info))
        .collect()
}
