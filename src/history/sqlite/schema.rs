//! The file's tables, the checks that it is ours and not from a newer version, and the
//! migration of an older file to this version.
//!
//! Schema 3 adds the search index: `thread_terms` pairs every thread with each payload root,
//! sender and addressee of its records (and a root thread with its path when that is not its
//! short id, which the ids answer: the system thread's `system`), `terms` is the
//! vocabulary of those texts, and `terms_fts` an FTS5 trigram index over the vocabulary, so a
//! substring finds its terms, the terms their threads. The writer adds the pairs and the words
//! in the transaction of the append; triggers keep the FTS index with the vocabulary, and the
//! pairs and the vocabulary right when records or threads are deleted. It also adds a partial
//! index of process events.

use rusqlite::{Connection, OptionalExtension};

use super::Durability;
use crate::envelope::PROCESS_NS;

/// The newest schema version this build reads and writes. Version 1: the tables; 2: a prune
/// left anchors, so that an older build (which would verify a pruned thread from 32 zero bytes
/// and call it broken) refuses the file; 3: the search index, which this build's writer keeps
/// and an older one would not — every file a writer opens is raised to 3, so an older build
/// refuses it; 4: the tallies (each thread's record count and counters, kept by the writer so
/// that a restart reads one row per thread, not every record), which an older writer would let
/// fall behind. Read-only opens change nothing: a version 1 or 2 file is searched by reading
/// records, a file before 4 has its counters summed from its records.
pub const SCHEMA_VERSION: i64 = 4;

/// The version of a file with the search index.
const SEARCH_VERSION: i64 = 3;

/// The version of a file with the tallies.
const TALLIES_VERSION: i64 = 4;

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

/// Schema 3: the search index (see the module's docs) and the process events' index. A pair
/// leaves `thread_terms` when the last record of the thread that used the term is deleted (the
/// check walks the thread's remaining records and stops at the first that uses it), a term
/// leaves the vocabulary and its FTS index with its last pair.
const SEARCH: &str = "
CREATE TABLE thread_terms (term TEXT NOT NULL, thread TEXT NOT NULL, PRIMARY KEY (term, thread)) WITHOUT ROWID;
CREATE TABLE terms (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
CREATE VIRTUAL TABLE terms_fts USING fts5 (text, content = 'terms', content_rowid = 'id', tokenize = 'trigram');
CREATE TRIGGER terms_added AFTER INSERT ON terms BEGIN
    INSERT INTO terms_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER terms_removed AFTER DELETE ON terms BEGIN
    INSERT INTO terms_fts (terms_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;
CREATE TRIGGER thread_terms_removed AFTER DELETE ON thread_terms
WHEN NOT EXISTS (SELECT 1 FROM thread_terms WHERE term = old.term) BEGIN
    DELETE FROM terms WHERE text = old.term;
END;
CREATE TRIGGER records_removed AFTER DELETE ON records BEGIN
    DELETE FROM thread_terms WHERE thread = old.thread AND term IN (old.root, old.sender, old.recipient)
        AND NOT EXISTS (SELECT 1 FROM records r WHERE r.thread = old.thread
            AND (r.root = thread_terms.term OR r.sender = thread_terms.term OR r.recipient = thread_terms.term));
END;
CREATE TRIGGER threads_removed AFTER DELETE ON threads BEGIN
    DELETE FROM thread_terms WHERE thread = old.id AND term = json_extract(old.info, '$.path');
END;
";

/// Fills the search index from the records and threads already in an older file.
const FILL: &str = "
INSERT OR IGNORE INTO thread_terms (term, thread) SELECT root, thread FROM records;
INSERT OR IGNORE INTO thread_terms (term, thread) SELECT sender, thread FROM records;
INSERT OR IGNORE INTO thread_terms (term, thread) SELECT recipient, thread FROM records WHERE recipient IS NOT NULL;
INSERT OR IGNORE INTO thread_terms (term, thread) SELECT json_extract(info, '$.path'), id FROM threads
    WHERE parent IS NULL AND json_extract(info, '$.path') <> substr(id, 1, 8);
INSERT OR IGNORE INTO terms (text) SELECT DISTINCT term FROM thread_terms;
";

/// The condition of the process events' partial index. A query that repeats it word for word
/// can use the index.
pub(crate) fn process_event() -> String {
    let prefix = format!("{{{PROCESS_NS}}}");
    format!("substr(root, 1, {}) = '{prefix}'", prefix.len())
}

/// Schema 3's tables, triggers and indexes.
fn search_schema() -> String {
    format!(
        "{SEARCH}CREATE INDEX records_process ON records (thread, seq) WHERE {};",
        process_event()
    )
}

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
        tx.execute_batch(&search_schema())?;
        tx.execute_batch(super::tallies::TABLE)?;
        tx.execute("INSERT INTO meta (key, value) VALUES ('application', 'agentpump'), ('schema_version', ?1)", [TALLIES_VERSION.to_string()])?;
        tx.commit()?;
    } else {
        if version(conn)? < SEARCH_VERSION {
            migrate_to_search(conn)?;
        }
        if version(conn)? < TALLIES_VERSION {
            migrate_to_tallies(conn)?;
        }
    }
    // Added after schema 1 shipped: created in older files too (recovery reads decisions).
    conn.execute_batch(
        "CREATE INDEX IF NOT EXISTS records_decisions ON records (seq) WHERE kind = 'decision';",
    )?;
    conn.execute_batch(&super::views::index())?;
    conn.execute_batch(super::prune::ANCHORS)?;
    super::marks::add_timing(conn)?;
    Ok(())
}

/// Schema 1 or 2 → 3: the search index, filled from what the file holds, in one transaction (a
/// crash leaves the file as it was, and the next open migrates again).
fn migrate_to_search(conn: &mut Connection) -> Result<(), SchemaError> {
    let started = std::time::Instant::now();
    let tx = conn.transaction()?;
    tx.execute_batch(&search_schema())?;
    tx.execute_batch(FILL)?;
    tx.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
        [SEARCH_VERSION.to_string()],
    )?;
    tx.commit()?;
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "history migrated to schema 3: search index built"
    );
    Ok(())
}

/// Schema 3 → 4: the tallies, summed from the records the file holds, in one transaction (a
/// crash leaves the file as it was, and the next open migrates again). The one open of a file
/// that reads every record.
fn migrate_to_tallies(conn: &mut Connection) -> Result<(), SchemaError> {
    let started = std::time::Instant::now();
    let tx = conn.transaction()?;
    super::tallies::create(&tx)?;
    tx.execute(
        "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
        [TALLIES_VERSION.to_string()],
    )?;
    tx.commit()?;
    tracing::info!(
        elapsed_ms = started.elapsed().as_millis() as u64,
        "history migrated to schema 4: tallies summed"
    );
    Ok(())
}

/// The file's schema version.
fn version(conn: &Connection) -> Result<i64, SchemaError> {
    let value: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = 'schema_version'",
            [],
            |r| r.get(0),
        )
        .optional()?;
    value
        .and_then(|v| v.parse().ok())
        .ok_or(SchemaError::Foreign)
}

/// Whether the file has the search index (schema 3; an older file opened read-only has not
/// been migrated).
pub(crate) fn has_search(conn: &Connection) -> rusqlite::Result<bool> {
    conn.query_row(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'thread_terms'",
        [],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n > 0)
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
    let version = version(conn)?;
    if version > SCHEMA_VERSION {
        return Err(SchemaError::Newer(version));
    }
    Ok(())
}
