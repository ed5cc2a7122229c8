//! Schema 4's `tallies`: per thread, how many records it holds and what its deliveries used
//! (the sums of its delivered marks). The writer keeps them in the transaction of each group
//! commit and a prune takes its records off, so a restart reads one row per thread instead of
//! summing every record the file ever kept.

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, Transaction, params};
use rust_decimal::Decimal;

use super::queries::parse;
use crate::history::Delivered;
use crate::{Counters, ThreadId};

/// The table, created in a new file and by the migration to schema 4.
pub(crate) const TABLE: &str = "
CREATE TABLE tallies (
    thread TEXT PRIMARY KEY,
    records INTEGER NOT NULL DEFAULT 0,
    deliveries INTEGER NOT NULL DEFAULT 0,
    notices INTEGER NOT NULL DEFAULT 0,
    failures INTEGER NOT NULL DEFAULT 0,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    tool_calls INTEGER NOT NULL DEFAULT 0,
    cost TEXT NOT NULL DEFAULT '0',
    usage_estimated INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
";

/// One thread's tally: its record count and its counters.
#[derive(Debug, Default, Clone)]
pub(crate) struct Tally {
    records: u64,
    counters: Counters,
}

impl Tally {
    /// Adds a delivered mark, counted as the records' `handled` column counts it.
    fn deliver(&mut self, d: &Delivered) {
        // A refused message (not handled, not failed) counts nothing, as `handled = 0` does.
        if !d.handled && !d.failed {
            return;
        }
        let c = &mut self.counters;
        match (d.handled, d.free) {
            (true, false) => c.deliveries += 1,
            (true, true) => c.notices += 1,
            (false, _) => {}
        }
        c.failures += u64::from(d.failed);
        c.add_usage(&d.usage);
    }

    fn add(&mut self, other: &Tally) {
        let (c, o) = (&mut self.counters, &other.counters);
        self.records += other.records;
        c.deliveries += o.deliveries;
        c.notices += o.notices;
        c.failures += o.failures;
        c.tokens_in += o.tokens_in;
        c.tokens_out += o.tokens_out;
        c.tool_calls += o.tool_calls;
        c.cost += o.cost;
        c.estimated_usage += o.estimated_usage;
    }
}

/// What one group commit adds, per thread: summed in memory, written once per thread.
#[derive(Debug, Default)]
pub(crate) struct Deltas(HashMap<ThreadId, Tally>);

impl Deltas {
    /// Counts one new record of `thread`.
    pub(crate) fn record(&mut self, thread: ThreadId) {
        self.0.entry(thread).or_default().records += 1;
    }

    /// Counts a delivered mark.
    pub(crate) fn deliver(&mut self, d: &Delivered) {
        self.0.entry(d.thread).or_default().deliver(d);
    }

    /// Adds the deltas to the stored tallies, in the commit's transaction: one upsert per
    /// thread, and a read first only when a cost is added (a decimal SQLite cannot add).
    pub(crate) fn write(self, tx: &Transaction<'_>) -> rusqlite::Result<()> {
        let mut add = tx.prepare_cached(&format!(
            "INSERT INTO tallies (thread, {COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, '0', ?9)
             ON CONFLICT (thread) DO UPDATE SET records = records + excluded.records,
                 deliveries = deliveries + excluded.deliveries, notices = notices + excluded.notices,
                 failures = failures + excluded.failures, tokens_in = tokens_in + excluded.tokens_in,
                 tokens_out = tokens_out + excluded.tokens_out,
                 tool_calls = tool_calls + excluded.tool_calls,
                 usage_estimated = usage_estimated + excluded.usage_estimated"
        ))?;
        for (thread, delta) in self.0 {
            let id = thread.to_string();
            if !delta.counters.cost.is_zero() {
                let mut tally = read_one(tx, &id)?.unwrap_or_default();
                tally.add(&delta);
                store(tx, &id, &tally)?;
                continue;
            }
            let (t, c) = (delta.records, &delta.counters);
            add.execute(params![
                id,
                t as i64,
                c.deliveries as i64,
                c.notices as i64,
                c.failures as i64,
                c.tokens_in as i64,
                c.tokens_out as i64,
                c.tool_calls as i64,
                c.estimated_usage as i64,
            ])?;
        }
        Ok(())
    }
}

const COLUMNS: &str = "records, deliveries, notices, failures, tokens_in, tokens_out, tool_calls, cost, usage_estimated";

fn from_row(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Tally> {
    let cost = parse::<Decimal>(at + 7, r.get_ref(at + 7)?.as_str()?)?;
    with_cost(r, at, cost)
}

/// The [`COLUMNS`] from column `at` on, with the cost (column `at + 7`) as read by the caller.
fn with_cost(r: &rusqlite::Row<'_>, at: usize, cost: Decimal) -> rusqlite::Result<Tally> {
    let n = |i: usize| r.get::<_, i64>(at + i).map(|v| v as u64);
    Ok(Tally {
        records: n(0)?,
        counters: Counters {
            deliveries: n(1)?,
            notices: n(2)?,
            failures: n(3)?,
            tokens_in: n(4)?,
            tokens_out: n(5)?,
            tool_calls: n(6)?,
            cost,
            estimated_usage: n(8)?,
        },
    })
}

/// One thread's record count and counters (a reloaded thread's), by the table's key.
pub(crate) fn of(conn: &Connection, thread: &str) -> rusqlite::Result<Option<(u64, Counters)>> {
    Ok(read_one(conn, thread)?.map(|t| (t.records, t.counters)))
}

fn read_one(conn: &Connection, thread: &str) -> rusqlite::Result<Option<Tally>> {
    let mut stmt =
        conn.prepare_cached(&format!("SELECT {COLUMNS} FROM tallies WHERE thread = ?1"))?;
    stmt.query_row([thread], |r| from_row(r, 0)).optional()
}

fn store(conn: &Connection, thread: &str, t: &Tally) -> rusqlite::Result<()> {
    let c = &t.counters;
    let mut stmt = conn.prepare_cached(&format!(
        "INSERT OR REPLACE INTO tallies (thread, {COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
    ))?;
    stmt.execute(params![
        thread,
        t.records as i64,
        c.deliveries as i64,
        c.notices as i64,
        c.failures as i64,
        c.tokens_in as i64,
        c.tokens_out as i64,
        c.tool_calls as i64,
        c.cost.to_string(),
        c.estimated_usage as i64,
    ])?;
    Ok(())
}

/// Takes `n` pruned records off a thread's count (its counters stay: what it used was used).
pub(crate) fn pruned(tx: &Transaction<'_>, thread: ThreadId, n: u64) -> rusqlite::Result<()> {
    let mut stmt =
        tx.prepare_cached("UPDATE tallies SET records = max(records - ?2, 0) WHERE thread = ?1")?;
    stmt.execute(params![thread.to_string(), n as i64])?;
    Ok(())
}

/// Whether the file has the tallies (schema 4; an older file opened read-only has not been
/// migrated, and its counters are summed from its records).
pub(crate) fn exist(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'tallies'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// Every thread's counters and record count: one row per thread from the tallies, or, in a
/// file without them, sums over every record.
pub(crate) fn all(conn: &Connection, stored: bool) -> rusqlite::Result<HashMap<ThreadId, Tally>> {
    if !stored {
        return from_records(conn);
    }
    let mut stmt = conn.prepare_cached(&format!("SELECT thread, {COLUMNS} FROM tallies"))?;
    let rows = stmt.query_map([], |r| {
        Ok((
            parse::<ThreadId>(0, r.get_ref(0)?.as_str()?)?,
            from_row(r, 1)?,
        ))
    })?;
    rows.collect()
}

/// The counters and record counts of `tallies`, split as a `Recovery` holds them.
pub(crate) fn split(
    all: HashMap<ThreadId, Tally>,
) -> (HashMap<ThreadId, Counters>, HashMap<ThreadId, u64>) {
    let records = all.iter().map(|(id, t)| (*id, t.records)).collect();
    let counters = all.into_iter().map(|(id, t)| (id, t.counters)).collect();
    (counters, records)
}

/// Every thread's tally summed from its records (a full read of the file): for an older file
/// opened read-only, and to fill the table when a file is migrated.
fn from_records(conn: &Connection) -> rusqlite::Result<HashMap<ThreadId, Tally>> {
    let mut stmt = conn.prepare_cached(
        "SELECT thread, count(*), sum((handled & 3) = 1), sum((handled & 3) = 2), sum(handled >= 4), sum(tokens_in), sum(tokens_out), sum(tool_calls), group_concat(cost, ' '), sum(usage_estimated) FROM records GROUP BY thread",
    )?;
    let rows = stmt.query_map([], |r| {
        let cost = r
            .get_ref(8)?
            .as_str()?
            .split(' ')
            .map(|c| parse::<Decimal>(8, c))
            .sum::<rusqlite::Result<Decimal>>()?;
        let tally = with_cost(r, 1, cost)?;
        Ok((parse::<ThreadId>(0, r.get_ref(0)?.as_str()?)?, tally))
    })?;
    rows.collect()
}

/// Creates (or recreates) and fills the table from the records of an older file, in the
/// migration's transaction.
pub(crate) fn create(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch("DROP TABLE IF EXISTS tallies;")?;
    tx.execute_batch(TABLE)?;
    for (thread, tally) in from_records(tx)? {
        store(tx, &thread.to_string(), &tally)?;
    }
    Ok(())
}
