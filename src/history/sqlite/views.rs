//! What a restart reads besides the governor's records to rebuild a thread's memory exactly
//! (seed 003: "Thread history is the sole memory"): the `clear-context` requests with their
//! positions, each thread's start, and an open thread's last deliveries — each by an index.

use rusqlite::Connection;

use super::queries::{COLUMNS, from_row, records};
use crate::envelope::SYSTEM_NS;
use crate::history::{RECENT_DELIVERIES, Recovery};
use crate::{ThreadInfo, ThreadState};

/// The condition of the `clear-context` requests' partial index, word for word as the query
/// repeats it.
fn clear_context() -> String {
    format!("kind = 'message' AND root = '{{{SYSTEM_NS}}}clear-context'")
}

/// The partial index of `clear-context` requests: created in older files too, as the file
/// opens (a request is rare, the index small).
pub(crate) fn index() -> String {
    format!(
        "CREATE INDEX IF NOT EXISTS records_clear_context ON records (thread, seq) WHERE {};",
        clear_context()
    )
}

/// Fills `recovery`'s `cleared`, `started` and `delivered` for `threads`: the requests of a
/// thread with the count of its records before each (by `records_by_thread`), the time of a
/// thread's first record unless it is done, an open thread's last deliveries that cost a turn
/// (`handled = 1`).
pub(crate) fn fill(
    conn: &Connection,
    threads: &[ThreadInfo],
    recovery: &mut Recovery,
) -> rusqlite::Result<()> {
    let mut cleared = conn.prepare_cached(&format!(
        "SELECT {COLUMNS}, (SELECT count(*) FROM records b WHERE b.thread = records.thread AND b.seq < records.seq)
         FROM records WHERE thread = ?1 AND {} ORDER BY seq",
        clear_context()
    ))?;
    let mut first =
        conn.prepare_cached("SELECT time_us FROM records WHERE thread = ?1 ORDER BY seq LIMIT 1")?;
    for t in threads {
        let id = t.id.to_string();
        let rows = cleared.query_map([&id], |r| Ok((from_row(r)?, r.get::<_, i64>(11)? as u64)))?;
        for row in rows {
            recovery.cleared.push(row?);
        }
        if t.state == ThreadState::Done {
            continue;
        }
        let mut at = first.query_map([&id], |r| r.get::<_, i64>(0))?;
        if let Some(time) = at.next().transpose()? {
            recovery.started.insert(t.id, time);
        }
        if !t.state.is_closed() {
            let mut last = records(
                conn,
                &format!(
                    "WHERE thread = ?1 AND handled = 1 ORDER BY seq DESC LIMIT {RECENT_DELIVERIES}"
                ),
                [&id],
            )?;
            last.reverse();
            recovery.delivered.insert(t.id, last);
        }
    }
    recovery.cleared.sort_by_key(|(r, _)| r.seq);
    Ok(())
}
