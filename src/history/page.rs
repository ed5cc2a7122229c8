//! Paged reads for browsing a history: root threads newest first with a keyset cursor, filtered
//! by state, halt class or certificate and text; a thread's records a page at a time. The
//! defaults here work over any store by reading everything; [`super::SqliteHistory`] answers
//! them with indexed queries, so a page costs the same in a history of ten threads or a million.

mod opening;

use serde::{Deserialize, Serialize};

pub(crate) use opening::OPENING_READ;
pub use opening::{OPENING_CHARS, Opening};

use super::{HistoryError, HistoryStore, Record};
use crate::governor::HaltingReport;
use crate::{ThreadId, ThreadInfo, ThreadState};

/// Most threads or records one page holds.
pub const MAX_PAGE: usize = 500;

/// Which root threads to list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadFilter {
    /// Only threads in this state.
    pub state: Option<ThreadState>,
    /// Only threads whose halting report has this class or certificate (`CONVERGED`, `no-progress`).
    pub class: Option<String>,
    /// Only threads with a record — of their own or of any thread below them — whose payload
    /// (the XML as kept: its root, its text, its attributes), sender or addressee contains
    /// this text (case-insensitive), or whose path does.
    pub text: Option<String>,
    /// Only threads older than this cursor (the `next` of the previous page).
    pub before: Option<u64>,
    /// Page size (clamped to 1..=[`MAX_PAGE`]; 0 means 50).
    pub limit: usize,
}

impl ThreadFilter {
    /// The page size in force.
    pub fn page_size(&self) -> usize {
        match self.limit {
            0 => 50,
            n => n.min(MAX_PAGE),
        }
    }
}

/// One root thread in a list: its snapshot and what a list shows about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadSummary {
    /// The snapshot (live state and counters as the store knows them).
    #[serde(flatten)]
    pub info: ThreadInfo,
    /// Where this thread sits in creation order: the cursor of the page after it.
    pub cursor: u64,
    /// When its first record was accepted (µs since the Unix epoch).
    pub started_us: Option<i64>,
    /// When its latest record was accepted (µs since the Unix epoch): with `started_us`, how
    /// long it ran (or has run so far).
    #[serde(default)]
    pub last_us: Option<i64>,
    /// Its first message: what the thread is.
    #[serde(default)]
    pub opening: Option<Opening>,
    /// The class of its latest halt (`CONVERGED`, `no-progress`, …).
    pub class: Option<String>,
    /// The certificate of its latest halt, for classes that carry one.
    pub certificate: Option<String>,
}

/// A page of root threads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadPage {
    /// Newest first.
    pub threads: Vec<ThreadSummary>,
    /// The cursor of the next (older) page, if there is one.
    pub next: Option<u64>,
}

/// The class and certificate of the latest of `reports`.
pub(crate) fn halt_class(reports: &[HaltingReport]) -> (Option<String>, Option<String>) {
    reports.last().map_or((None, None), |r| {
        (
            Some(r.class.clone()),
            r.halting_certificate.as_ref().map(|c| c.kind.clone()),
        )
    })
}

/// Whether `summary` with `records` passes `filter`'s state, class and text tests.
pub(crate) fn matches(filter: &ThreadFilter, summary: &ThreadSummary, records: &[Record]) -> bool {
    if filter.state.is_some_and(|s| s != summary.info.state) {
        return false;
    }
    if let Some(class) = &filter.class {
        let hit =
            summary.class.as_ref() == Some(class) || summary.certificate.as_ref() == Some(class);
        if !hit {
            return false;
        }
    }
    match filter.text.as_deref().map(str::to_lowercase) {
        Some(text) if !text.is_empty() => {
            summary.info.path.to_lowercase().contains(&text)
                || records.iter().any(|r| {
                    r.root.to_string().to_lowercase().contains(&text)
                        || r.payload.to_lowercase().contains(&text)
                        || r.from.to_lowercase().contains(&text)
                        || r.to
                            .as_deref()
                            .is_some_and(|t| t.to_lowercase().contains(&text))
                })
        }
        _ => true,
    }
}

/// [`HistoryStore::roots`] for any store: reads every root thread and filters in memory. A
/// thread's place (its cursor) is the seq of its first record, so creation order holds whatever
/// order the store lists snapshots in (for the in-memory store on several workers, within its
/// window of 128 records); a thread with no record yet sorts last, cursor 0.
pub(crate) async fn roots_by_scan(
    store: &(impl HistoryStore + ?Sized),
    filter: &ThreadFilter,
) -> Result<ThreadPage, HistoryError> {
    let mut all = Vec::new();
    for info in store.threads(None).await? {
        if info.parent.is_some() {
            continue;
        }
        let records = store.thread(info.id, 0).await?;
        let cursor = records.first().map_or(0, |r| r.seq);
        if filter.before.is_some_and(|b| cursor >= b) {
            continue;
        }
        all.push((cursor, info, records));
    }
    all.sort_by_key(|t| std::cmp::Reverse(t.0));
    let size = filter.page_size();
    let mut threads: Vec<ThreadSummary> = Vec::new();
    for (cursor, info, mut records) in all {
        let last_us = records.last().map(|r| r.time_us);
        if filter.text.is_some() {
            // The search reads the threads below the root too (`subtree` lists the root first).
            for below in store.subtree(info.id).await?.iter().skip(1) {
                records.extend(store.thread(below.id, 0).await?);
            }
        }
        let (class, certificate) = halt_class(&store.reports(info.id).await?);
        let summary = ThreadSummary {
            started_us: records.first().map(|r| r.time_us),
            last_us,
            opening: records
                .first()
                .map(|r| Opening::new(r.root.clone(), r.to.as_deref(), &r.payload)),
            info,
            cursor,
            class,
            certificate,
        };
        if !matches(filter, &summary, &records) {
            continue;
        }
        if threads.len() == size {
            let next = threads.last().map(|t| t.cursor);
            return Ok(ThreadPage { threads, next });
        }
        threads.push(summary);
    }
    Ok(ThreadPage {
        threads,
        next: None,
    })
}

/// [`HistoryStore::records_after`] for any store.
pub(crate) async fn records_by_scan(
    store: &(impl HistoryStore + ?Sized),
    thread: ThreadId,
    after: u64,
    limit: usize,
) -> Result<Vec<Record>, HistoryError> {
    let mut records = store.thread(thread, after + 1).await?;
    records.truncate(limit.clamp(1, MAX_PAGE));
    Ok(records)
}

/// [`HistoryStore::records_before`] for any store.
pub(crate) async fn records_before_by_scan(
    store: &(impl HistoryStore + ?Sized),
    thread: ThreadId,
    before: u64,
    limit: usize,
) -> Result<Vec<Record>, HistoryError> {
    let mut records = store.thread(thread, 0).await?;
    records.retain(|r| r.seq < before);
    let keep = limit.clamp(1, MAX_PAGE);
    Ok(records.split_off(records.len().saturating_sub(keep)))
}

/// [`HistoryStore::records_in`] for any store.
pub(crate) async fn records_in_by_scan(
    store: &(impl HistoryStore + ?Sized),
    thread: ThreadId,
    namespace: &str,
    after: u64,
    limit: usize,
) -> Result<Vec<Record>, HistoryError> {
    let mut records = store.thread(thread, after + 1).await?;
    records.retain(|r| r.root.namespace() == namespace);
    records.truncate(limit.clamp(1, MAX_PAGE));
    Ok(records)
}
