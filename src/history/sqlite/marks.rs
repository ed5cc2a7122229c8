//! The handled deliveries of a thread, read from the usage and timing columns the delivery's
//! commit wrote on its record (`handled` is 1 or 2 for a handled delivery, plus 4 when it
//! failed).
//!
//! The timing columns (`started_us`, `handled_us`, `committed_us`, and `llm_us`, the time the
//! handler waited for a model) came after schema 4: a writer
//! adds them to an older file when it opens it (nullable, so no version change: an older build
//! writes on without filling them, and its deliveries read as not timed); a read-only open of a
//! file without them reads every timing as `NULL`.

use rusqlite::{Connection, params};
use rust_decimal::Decimal;

use super::queries::parse;
use crate::ThreadId;
use crate::governor::Usage;
use crate::history::{Mark, Timing};

/// The timing columns, in the order [`marks`] reads them.
const TIMING: [&str; 4] = ["started_us", "handled_us", "committed_us", "llm_us"];

/// Whether the records table has `column`.
fn has_column(conn: &Connection, column: &str) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM pragma_table_info('records') WHERE name = ?1",
        [column],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
}

/// Whether the records table has all the timing columns.
fn has_timing(conn: &Connection) -> rusqlite::Result<bool> {
    for column in TIMING {
        if !has_column(conn, column)? {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Adds the timing columns a file lacks (a writer's open).
pub(crate) fn add_timing(conn: &Connection) -> rusqlite::Result<()> {
    let tx = conn.unchecked_transaction()?;
    for column in TIMING {
        if !has_column(&tx, column)? {
            tx.execute_batch(&format!("ALTER TABLE records ADD COLUMN {column} INTEGER"))?;
        }
    }
    tx.commit()
}

/// The marks of `thread`, in record order.
pub(crate) fn marks(conn: &Connection, thread: ThreadId) -> rusqlite::Result<Vec<Mark>> {
    let timing = if has_timing(conn)? {
        TIMING.join(", ")
    } else {
        "NULL, NULL, NULL, NULL".to_owned()
    };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT seq, id, recipient, time_us, tokens_in, tokens_out, cost, tool_calls, usage_estimated, {timing}
         FROM records WHERE thread = ?1 AND handled % 4 != 0 ORDER BY seq"
    ))?;
    let rows = stmt.query_map(params![thread.to_string()], |row| {
        Ok(Mark {
            seq: row.get::<_, i64>(0)? as u64,
            id: parse(1, row.get_ref(1)?.as_str()?)?,
            listener: row.get::<_, Option<String>>(2)?.map(Into::into),
            time_us: row.get(3)?,
            usage: Usage {
                tokens_in: row.get::<_, i64>(4)? as u64,
                tokens_out: row.get::<_, i64>(5)? as u64,
                cost: parse::<Decimal>(6, row.get_ref(6)?.as_str()?)?,
                tool_calls: row.get::<_, i64>(7)? as u64,
                estimated: row.get(8)?,
                llm_us: row.get::<_, Option<i64>>(12)?.unwrap_or(0) as u64,
            },
            timing: match (row.get(9)?, row.get(10)?) {
                (Some(started_us), Some(handled_us)) => Some(Timing {
                    started_us,
                    handled_us,
                }),
                _ => None,
            },
            committed_us: row.get(11)?,
        })
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use rusqlite::Connection;

    use super::{add_timing, has_timing, marks};
    use crate::ThreadId;
    use crate::history::sqlite::{Durability, schema};

    /// Issue 33: "Old records without timings show as \"not recorded\", not zero" — a file from
    /// before the timing columns reads its deliveries untimed, and a writer's open adds the
    /// columns without touching what the file holds.
    #[test]
    fn a_file_without_timing_columns_reads_untimed_and_gains_them() {
        let mut conn = Connection::open_in_memory().unwrap();
        schema::prepare(&mut conn, Durability::Normal).unwrap();
        for column in super::TIMING {
            conn.execute_batch(&format!("ALTER TABLE records DROP COLUMN {column}"))
                .unwrap();
        }
        assert!(!has_timing(&conn).unwrap());
        let thread = ThreadId::new();
        conn.execute(
            "INSERT INTO records (seq, thread, id, time_us, kind, sender, recipient, root, payload, digest, handled, tokens_in, cost)
             VALUES (1, ?1, ?2, 42, 'message', 'client', 'alpha', 'x', '<x/>', zeroblob(32), 1, 7, '0.5')",
            rusqlite::params![thread.to_string(), crate::MessageId::new().to_string()],
        )
        .unwrap();
        let old = marks(&conn, thread).unwrap();
        assert_eq!(old.len(), 1);
        assert_eq!((old[0].timing, old[0].committed_us), (None, None));
        assert_eq!((old[0].time_us, old[0].usage.tokens_in), (42, 7));
        add_timing(&conn).unwrap();
        add_timing(&conn).unwrap();
        assert!(has_timing(&conn).unwrap());
        assert_eq!(marks(&conn, thread).unwrap(), old);
    }
}
