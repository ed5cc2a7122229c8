//! Paged reads for the viewer: root threads by keyset on the `threads` rowid (newest first, the
//! cursor is the rowid of the last thread shown), with filters as `EXISTS` subqueries that stop
//! at the first match; each thread of a page gets its counters, start, state and halt from
//! indexed lookups of that thread alone, never from a scan of the whole history.

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params};

use super::queries::{parse, records, snapshot};
use crate::governor::HaltingReport;
use crate::history::Record;
use crate::history::page::{
    OPENING_READ, Opening, ThreadFilter, ThreadPage, ThreadSummary, halt_class,
};
use crate::{Counters, QName, ThreadId, ThreadInfo, ThreadState};

/// Most threads a search may find through the index before it counts as common; past it the
/// roots are walked newest first instead, each looked up in the index.
const RARE: usize = 2_000;

/// How a text filter is answered.
enum TextPlan<'a> {
    /// No index (a schema 1 file opened read-only): every record of each root's subtree is
    /// read until one matches.
    Walk,
    /// A rare text: the only roots that can match, found through the index (and the ids).
    Roots(&'a [String]),
    /// A common text: the terms it matches, looked up per root; with `LIKE` pattern of a short
    /// id when the text could be part of one.
    Terms(&'a [String], Option<&'a str>),
}

/// The `LIKE` pattern of `text` as part of a root's path when it could be: a root's path is its
/// short id (the id's first 8 hex digits), which the index leaves to the ids.
fn short_id_like(text: &str) -> Option<String> {
    (text.len() <= 8 && text.chars().all(|c| c.is_ascii_hexdigit())).then(|| like(text))
}

/// `%text%` for `LIKE … ESCAPE '\'`.
fn like(text: &str) -> String {
    let escaped = text
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{escaped}%")
}

fn json(list: &[String]) -> String {
    serde_json::to_string(list).expect("strings serialize")
}

/// The terms of the search index (payload roots, senders, addressees, the system thread's path) that contain
/// `text`, ignoring ASCII case as `LIKE` does: found by the FTS5 trigram index when `text` has
/// three characters or more (a trigram index needs three), else by reading the vocabulary.
fn matching_terms(conn: &Connection, text: &str) -> rusqlite::Result<Vec<String>> {
    let pattern = like(text);
    if text.chars().count() < 3 {
        let mut stmt =
            conn.prepare_cached("SELECT text FROM terms WHERE text LIKE ?1 ESCAPE '\\'")?;
        return stmt.query_map([pattern], |r| r.get(0))?.collect();
    }
    // A phrase of the text's trigrams: its substrings; LIKE then keeps exactly what the scan would.
    let phrase = format!("\"{}\"", text.replace('"', "\"\""));
    let mut stmt = conn.prepare_cached(
        "SELECT text FROM terms WHERE id IN (SELECT rowid FROM terms_fts WHERE terms_fts MATCH ?1) AND text LIKE ?2 ESCAPE '\\'",
    )?;
    stmt.query_map(params![phrase, pattern], |r| r.get(0))?
        .collect()
}

/// The threads with a record whose payload contains `text` (ASCII case ignored, as `LIKE`):
/// at most [`RARE`] + 1 of them, read from every payload (a scan: about 0.1 s a million
/// records of ~130 bytes, warm; it stops at the limit, so a common text costs little). There
/// is no index of payload text: an FTS5 trigram index measured 16 times slower for batched
/// appends and 3.5 times the file (docs/decisions/2026-12-07-history-cli.md).
fn payload_threads(conn: &Connection, text: &str) -> rusqlite::Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT DISTINCT thread FROM records WHERE payload LIKE ?1 ESCAPE '\\' LIMIT {}",
        RARE + 1
    ))?;
    stmt.query_map([like(text)], |r| r.get(0))?.collect()
}

/// The root threads whose subtrees hold one of `terms` or a record of `payloads`, or whose
/// short id matches `short`, when at most [`RARE`] threads do. Threads whose ids match are
/// candidates as they are: the listing keeps the roots among them.
fn rare_roots(
    conn: &Connection,
    terms: &[String],
    short: Option<&str>,
    payloads: &[String],
) -> rusqlite::Result<Option<Vec<String>>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT thread FROM thread_terms WHERE term IN (SELECT value FROM json_each(?1)) LIMIT {}",
        RARE + 1
    ))?;
    let mut threads: Vec<String> = stmt
        .query_map([json(terms)], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    threads.extend_from_slice(payloads);
    let mut ids: Vec<String> = match short {
        Some(pattern) => {
            let mut by_id = conn.prepare_cached(&format!(
                "SELECT id FROM threads WHERE substr(id, 1, 8) LIKE ?1 ESCAPE '\\' LIMIT {}",
                RARE + 1
            ))?;
            by_id
                .query_map([pattern], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?
        }
        None => Vec::new(),
    };
    if threads.len() + ids.len() > RARE {
        return Ok(None);
    }
    let mut up = conn.prepare_cached(
        "WITH RECURSIVE up(id, parent) AS (SELECT id, parent FROM threads WHERE id IN (SELECT value FROM json_each(?1)) UNION SELECT t.id, t.parent FROM threads t JOIN up ON t.id = up.parent) SELECT id FROM up WHERE parent IS NULL",
    )?;
    let roots = up.query_map([json(&threads)], |r| r.get::<_, String>(0))?;
    for root in roots {
        ids.push(root?);
    }
    Ok(Some(ids))
}

/// The SQL condition and arguments of `filter` (without the cursor).
/// A thread with a person's request that no answer replies to (`pump/inbox`).
fn waiting_sql() -> String {
    let request = crate::QName::new(crate::envelope::INBOX_NS, "request");
    let answer = crate::QName::new(crate::envelope::INBOX_NS, "answer");
    format!(
        "EXISTS (SELECT 1 FROM records q WHERE q.thread = threads.id AND q.root = '{request}' \
         AND NOT EXISTS (SELECT 1 FROM records a WHERE a.thread = q.thread \
         AND a.in_reply_to = q.id AND a.root = '{answer}'))"
    )
}

fn conditions(filter: &ThreadFilter, text_plan: TextPlan<'_>) -> (String, Vec<Value>) {
    // With the few candidate roots known, they are looked up by id; `+` keeps the planner from
    // walking every root through the parent index instead (it would, to save a sort).
    let roots_known = filter.text.is_some() && matches!(text_plan, TextPlan::Roots(_));
    let mut sql = String::from(if roots_known {
        "+parent IS NULL"
    } else {
        "parent IS NULL"
    });
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
                " AND state IN ('active', 'idle') AND NOT {PENDING} AND NOT {}",
                waiting_sql()
            ));
        }
        Some(ThreadState::Waiting) => {
            sql.push_str(&format!(
                " AND state IN ('active', 'idle', 'waiting') AND NOT {PENDING} AND {}",
                waiting_sql()
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
        let n = args.len() + 1;
        match text_plan {
            TextPlan::Walk => {
                // The records of the root and of every thread below it (a recursive walk down
                // the parent index from this root), each thread's read by the records index.
                sql.push_str(&format!(
                    " AND (json_extract(info, '$.path') LIKE ?{n} ESCAPE '\\' OR EXISTS (WITH RECURSIVE sub(id) AS (SELECT threads.id UNION ALL SELECT t.id FROM threads t JOIN sub ON t.parent = sub.id) SELECT 1 FROM sub CROSS JOIN records r ON r.thread = sub.id WHERE r.root LIKE ?{n} ESCAPE '\\' OR r.sender LIKE ?{n} ESCAPE '\\' OR r.recipient LIKE ?{n} ESCAPE '\\' OR r.payload LIKE ?{n} ESCAPE '\\'))"
                ));
                args.push(Value::Text(like(text)));
            }
            TextPlan::Roots(roots) => {
                sql.push_str(&format!(
                    " AND threads.id IN (SELECT value FROM json_each(?{n}))"
                ));
                args.push(Value::Text(json(roots)));
            }
            TextPlan::Terms(terms, short) => {
                // Common terms: walk the roots newest first; a root's subtree is looked up in
                // the index, term by term, and the walk stops once the page is full.
                let by_id = match short {
                    Some(_) => format!("substr(threads.id, 1, 8) LIKE ?{} ESCAPE '\\' OR ", n + 1),
                    None => String::new(),
                };
                // A payload is read per record of the subtree: a common text is found in the
                // first records of most roots, and the walk stops once the page is full.
                let p = n + 1 + usize::from(short.is_some());
                sql.push_str(&format!(
                    " AND ({by_id}EXISTS (WITH RECURSIVE sub(id) AS (SELECT threads.id UNION ALL SELECT t.id FROM threads t JOIN sub ON t.parent = sub.id) SELECT 1 FROM sub WHERE EXISTS (SELECT 1 FROM thread_terms tt WHERE tt.thread = sub.id AND tt.term IN (SELECT value FROM json_each(?{n}))) OR EXISTS (SELECT 1 FROM records r WHERE r.thread = sub.id AND r.payload LIKE ?{p} ESCAPE '\\')))"
                ));
                args.push(Value::Text(json(terms)));
                if let Some(pattern) = short {
                    args.push(Value::Text(pattern.to_owned()));
                }
                args.push(Value::Text(like(text)));
            }
        }
    }
    (sql, args)
}

/// A page of root threads, newest first. With the search index (`search`), a text is looked
/// up in it: a rare one gives the only roots to list, a common one the terms to look for.
pub(crate) fn roots(
    conn: &Connection,
    filter: &ThreadFilter,
    search: bool,
) -> rusqlite::Result<ThreadPage> {
    let text = filter.text.as_deref().filter(|t| !t.is_empty());
    let short = text.and_then(short_id_like);
    let (terms, roots) = match text {
        Some(text) if search => {
            let terms = matching_terms(conn, text)?;
            let payloads = payload_threads(conn, text)?;
            if terms.is_empty() && short.is_none() && payloads.is_empty() {
                return Ok(ThreadPage {
                    threads: Vec::new(),
                    next: None,
                });
            }
            let roots = rare_roots(conn, &terms, short.as_deref(), &payloads)?;
            (terms, roots)
        }
        _ => (Vec::new(), None),
    };
    let plan = match (&roots, search) {
        (Some(roots), _) => TextPlan::Roots(roots),
        (None, true) => TextPlan::Terms(&terms, short.as_deref()),
        (None, false) => TextPlan::Walk,
    };
    let (mut sql, mut args) = conditions(filter, plan);
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
    let first: Option<(i64, String, Option<String>, String)> = conn
        .query_row(
            &format!("SELECT time_us, root, recipient, substr(payload, 1, {OPENING_READ}) FROM records WHERE thread = ?1 ORDER BY seq LIMIT 1"),
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    let last_us: Option<i64> = conn
        .query_row(
            "SELECT time_us FROM records WHERE thread = ?1 ORDER BY seq DESC LIMIT 1",
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
        started_us: first.as_ref().map(|f| f.0),
        last_us,
        opening: first.map(|(_, root, to, payload)| {
            Opening::new(
                root.parse().unwrap_or_else(|never| match never {}),
                to.as_deref(),
                &payload,
            )
        }),
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

/// The threads with a record whose payload root is `root`: a lookup in the search index (a
/// term may be a listener's name too, so the records confirm it), else a scan of the records.
pub(crate) fn threads_with_root(
    conn: &Connection,
    root: &QName,
    search: bool,
) -> rusqlite::Result<Vec<ThreadId>> {
    let sql = if search {
        "SELECT thread FROM thread_terms tt WHERE term = ?1 AND EXISTS (SELECT 1 FROM records r WHERE r.thread = tt.thread AND r.root = ?1)"
    } else {
        "SELECT DISTINCT thread FROM records WHERE root = ?1"
    };
    let mut stmt = conn.prepare_cached(sql)?;
    stmt.query_map([root.to_string()], |r| r.get::<_, String>(0))?
        .map(|t| parse::<ThreadId>(0, &t?))
        .collect()
}

/// Up to `limit` records of `thread` after seq `after` whose payload root is in `namespace`.
/// Process events have a partial index (`search`: the file has it), so a thread's TELLs and
/// MILESTONEs are read without reading its other records; another namespace reads the
/// thread's records from `after` on.
pub(crate) fn records_in(
    conn: &Connection,
    thread: ThreadId,
    namespace: &str,
    after: u64,
    limit: usize,
    search: bool,
) -> rusqlite::Result<Vec<Record>> {
    if search && namespace == crate::envelope::PROCESS_NS {
        let sql = format!(
            "WHERE thread = ?1 AND seq > ?2 AND {} ORDER BY seq LIMIT ?3",
            super::schema::process_event()
        );
        return records(
            conn,
            &sql,
            params![thread.to_string(), after as i64, limit as i64],
        );
    }
    let prefix = format!("{{{namespace}}}");
    records(
        conn,
        "WHERE thread = ?1 AND seq > ?2 AND substr(root, 1, ?4) = ?5 ORDER BY seq LIMIT ?3",
        params![
            thread.to_string(),
            after as i64,
            limit as i64,
            prefix.chars().count() as i64,
            prefix
        ],
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
