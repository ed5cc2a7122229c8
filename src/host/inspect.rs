//! `agentpump threads | history | report | verify --db FILE`: reading a history file without a
//! running host. Each returns its output as text, or one line saying precisely what failed.

use std::collections::BTreeMap;
use std::path::Path;

use crate::history::{HistoryStore, Record, SqliteHistory, export};
use crate::{ThreadId, ThreadInfo, ThreadState};

/// Output formats of `threads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ThreadsFormat {
    /// A table and counts per state.
    Text,
    /// A JSON array of thread snapshots.
    Json,
}

/// Output formats of `history`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HistoryFormat {
    /// A readable transcript.
    Text,
    /// One envelope per record inside `<history>`.
    Xml,
    /// One JSON object per record per line.
    Jsonl,
}

fn open(db: &Path) -> Result<SqliteHistory, String> {
    SqliteHistory::open_read_only(db).map_err(|e| e.to_string())
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime starts")
        .block_on(f)
}

/// The thread `text` names in `db`: an id, a unique id prefix, or a displayed path.
async fn thread_id(store: &SqliteHistory, db: &Path, text: &str) -> Result<ThreadId, String> {
    if let Ok(id) = text.parse() {
        return Ok(id);
    }
    let threads = store.threads(None).await.map_err(|e| e.to_string())?;
    super::resolve::resolve(&threads, text, &db.display().to_string())
}

/// Lists threads, optionally only those in `state`.
///
/// # Errors
///
/// The file cannot be opened or read.
pub fn threads(
    db: &Path,
    state: Option<ThreadState>,
    format: ThreadsFormat,
) -> Result<String, String> {
    let store = open(db)?;
    let threads = block_on(store.threads(state)).map_err(|e| e.to_string())?;
    Ok(render_threads(&threads, format))
}

/// Threads as the `threads` command prints them, from the store or from a host.
pub(crate) fn render_threads(threads: &[ThreadInfo], format: ThreadsFormat) -> String {
    match format {
        ThreadsFormat::Json => {
            serde_json::to_string_pretty(threads).expect("snapshots serialize") + "\n"
        }
        ThreadsFormat::Text => thread_table(threads),
    }
}

fn thread_table(threads: &[ThreadInfo]) -> String {
    let mut out = format!("{:<36}  {:<8}  {:>10}  PATH\n", "ID", "STATE", "DELIVERIES");
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in threads {
        out.push_str(&format!(
            "{:<36}  {:<8}  {:>10}  {}\n",
            t.id, t.state, t.counters.deliveries, t.path
        ));
        *counts.entry(t.state.as_str()).or_default() += 1;
    }
    let summary: Vec<String> = counts
        .iter()
        .map(|(state, n)| format!("{n} {state}"))
        .collect();
    out.push_str(&format!(
        "{} threads: {}\n",
        threads.len(),
        summary.join(", ")
    ));
    out
}

/// One thread's history (with `tree`, its whole subtree, indented by depth).
///
/// # Errors
///
/// A malformed or unknown thread id, or the file cannot be read.
pub fn history(
    db: &Path,
    thread: &str,
    format: HistoryFormat,
    tree: bool,
) -> Result<String, String> {
    let store = open(db)?;
    block_on(async {
        let id = thread_id(&store, db, thread).await?;
        let threads = if tree {
            store.subtree(id).await
        } else {
            store
                .threads(None)
                .await
                .map(|all| all.into_iter().filter(|t| t.id == id).collect())
        }
        .map_err(|e| e.to_string())?;
        let Some(top) = threads.first() else {
            return Err(format!("no thread {id} in {}", db.display()));
        };
        let base = top.depth;
        let mut records: Vec<(u32, Record)> = Vec::new();
        for t in &threads {
            let rs = store.thread(t.id, 0).await.map_err(|e| e.to_string())?;
            records.extend(rs.into_iter().map(|r| (t.depth - base, r)));
        }
        let plain: Vec<Record> = records.iter().map(|(_, r)| r.clone()).collect();
        Ok(match format {
            HistoryFormat::Jsonl => export::to_jsonl(&plain),
            HistoryFormat::Xml => export::to_xml(&plain),
            HistoryFormat::Text => {
                let mut out = String::new();
                for t in &threads {
                    let indent = 2 * (t.depth - base) as usize;
                    out.push_str(&format!(
                        "{}== thread {} [{}] {}\n",
                        " ".repeat(indent),
                        t.path,
                        t.state,
                        t.id
                    ));
                    let own: Vec<Record> = records
                        .iter()
                        .filter(|(_, r)| r.thread == t.id)
                        .map(|(_, r)| r.clone())
                        .collect();
                    out.push_str(&export::transcript(&own, indent));
                }
                out
            }
        })
    })
}

/// The halting reports of a thread as JSON (an array when it halted more than once).
///
/// # Errors
///
/// A malformed or unknown thread id, a thread that never halted, or the file cannot be read.
pub fn report(db: &Path, thread: &str) -> Result<String, String> {
    let store = open(db)?;
    block_on(async {
        let id = thread_id(&store, db, thread).await?;
        let mut reports = store.reports(id).await.map_err(|e| e.to_string())?;
        if reports.is_empty() {
            let known = store
                .threads(None)
                .await
                .map_err(|e| e.to_string())?
                .into_iter()
                .find(|t| t.id == id);
            return Err(match known {
                None => format!("no thread {id} in {}", db.display()),
                Some(t) => format!("thread {id} has no halting report: it is {}", t.state),
            });
        }
        let json = if reports.len() == 1 {
            serde_json::to_string_pretty(&reports.pop())
        } else {
            serde_json::to_string_pretty(&reports)
        };
        Ok(json.expect("reports serialize") + "\n")
    })
}

/// Recomputes every hash chain.
///
/// # Errors
///
/// The first record that does not verify (thread, seq, expected and found digests), or the file
/// cannot be read.
pub fn verify(db: &Path) -> Result<String, String> {
    let store = open(db)?;
    let checked = block_on(store.verify()).map_err(|e| e.to_string())?;
    Ok(format!(
        "{}: {checked} records verified, every chain intact\n",
        db.display()
    ))
}
