//! The handled deliveries of a thread, read from the usage columns the delivery's commit wrote
//! on its record (`handled` is 1 or 2 for a handled delivery, plus 4 when it failed).

use rusqlite::{Connection, params};
use rust_decimal::Decimal;

use super::queries::parse;
use crate::ThreadId;
use crate::governor::Usage;
use crate::history::Mark;

/// The marks of `thread`, in record order.
pub(crate) fn marks(conn: &Connection, thread: ThreadId) -> rusqlite::Result<Vec<Mark>> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, id, recipient, time_us, tokens_in, tokens_out, cost, tool_calls, usage_estimated
         FROM records WHERE thread = ?1 AND handled % 4 != 0 ORDER BY seq",
    )?;
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
            },
        })
    })?;
    rows.collect()
}
