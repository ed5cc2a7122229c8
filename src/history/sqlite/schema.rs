//! The file's tables, and the checks that it is ours and not from a newer version.

use rusqlite::{Connection, OptionalExtension};

use super::Durability;

/// The newest schema version this build reads. A new file is version 1; the first prune that
/// leaves anchors raises it to 2, so that an older build (which would verify a pruned thread
/// from 32 zero bytes and call it broken) refuses the file instead.
pub const SCHEMA_VERSION: i64 = 2;

/// The version of a file that has never been pruned.
const FIRST_VERSION: i64 = 1;

/// Why a file cannot be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SchemaError {
    /// SQLite itself failed.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// The file has tables, but not ours.
    #[error("not an agentpump database")]
    Foreign,
    /// Written by a newer agentpump.
    #[error(
        "database schema version {0} is newer than this agentpump understands ({SCHEMA_VERSION}); upgrade agentpump"
    )]
    Newer(i64),
}

const TABLES: &str = "
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE records (
    seq INTEGER PRIMARY KEY,
    thread TEXT NOT NULL,
    id TEXT NOT NULL UNIQUE,
    time_us INTEGER NOT NULL,
    kind TEXT NOT NULL,
    sender TEXT NOT NULL,
    recipient TEXT,
    in_reply_to TEXT,
    root TEXT NOT NULL,
    payload TEXT NOT NULL,
    digest BLOB NOT NULL,
    pending INTEGER NOT NULL DEFAULT 0,
    handled INTEGER NOT NULL DEFAULT 0,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    cost TEXT NOT NULL DEFAULT '0',
    tool_calls INTEGER NOT NULL DEFAULT 0,
    usage_estimated INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX records_by_thread ON records (thread, seq);
CREATE INDEX records_pending ON records (seq) WHERE pending = 1;
CREATE INDEX records_to_governor ON records (seq) WHERE recipient = 'governor';
CREATE TABLE threads (
    id TEXT PRIMARY KEY,
    parent TEXT,
    state TEXT NOT NULL,
    info TEXT NOT NULL
);
CREATE INDEX threads_by_state ON threads (state);
CREATE INDEX threads_by_parent ON threads (parent);
CREATE TABLE reports (halt_id TEXT PRIMARY KEY, thread TEXT NOT NULL, json TEXT NOT NULL);
CREATE INDEX reports_by_thread ON reports (thread);
";

/// Sets the pragmas, creates the tables in a new file, and checks an existing one.
pub(crate) fn prepare(conn: &mut Connection, durability: Durability) -> Result<(), SchemaError> {
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    let tables: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table'",
        [],
        |r| r.get(0),
    )?;
    // Check a file that is not new before changing anything in it: a foreign database must come
    // out of a refused open exactly as it went in (not switched to WAL).
    if tables > 0 {
        check(conn)?;
    }
    conn.pragma_update(None, "journal_mode", "WAL")?;
    let sync = match durability {
        Durability::Full => "FULL",
        Durability::Normal => "NORMAL",
    };
    conn.pragma_update(None, "synchronous", sync)?;
    if tables == 0 {
        let tx = conn.transaction()?;
        tx.execute_batch(TABLES)?;
        tx.execute("INSERT INTO meta (key, value) VALUES ('application', 'agentpump'), ('schema_version', ?1)", [FIRST_VERSION.to_string()])?;
        tx.commit()?;
    }
    // Added after schema 1 shipped: created in older files too (recovery reads decisions).
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS records_decisions ON records (seq) WHERE kind = 'decision';",
    )?;
    conn.execute_batch(super::prune::ANCHORS)?;
    Ok(())
}

/// Checks that an existing file is an agentpump history this build can read.
pub(crate) fn check(conn: &Connection) -> Result<(), SchemaError> {
    let has_meta: i64 = conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
        [],
        |r| r.get(0),
    )?;
    if has_meta == 0 {
        return Err(SchemaError::Foreign);
    }
    let get = |key: &str| -> Result<Option<String>, rusqlite::Error> {
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
    };
    if get("application")?.as_deref() != Some("agentpump") {
        return Err(SchemaError::Foreign);
    }
    let version: i64 = get("schema_version")?
        .and_then(|v| v.parse().ok())
        .ok_or(SchemaError::Foreign)?;
    if version > SCHEMA_VERSION {
        return Err(SchemaError::Newer(version));
    }
    Ok(())
}
