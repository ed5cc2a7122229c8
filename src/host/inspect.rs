//! `agentpump threads | history | report | verify --db FILE`: reading a history file without a
//! running host. Each returns its output as text, or one line saying precisely what failed.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use crate::governor::HaltingReport;
use crate::governor::report::RUNG_REPLAYED;
use crate::history::{HistoryStore, Record, SqliteHistory, export};
use crate::host::HostError;
use crate::{ThreadId, ThreadInfo, ThreadState};

/// Output formats of `threads`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ThreadsFormat {
    /// A table and counts per state.
    Text,
    /// A JSON array of thread snapshots.
    Json,
}

/// Output formats of `history`. `json` and `jsonl` mean what they mean everywhere (the HTTP
/// API's `?format=` included): a JSON array, and one JSON object per line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum HistoryFormat {
    /// A readable transcript.
    Text,
    /// One envelope per record inside `<history>`.
    Xml,
    /// A JSON array of records.
    Json,
    /// One JSON object per record per line.
    Jsonl,
}

/// How a halted thread ended, for the `threads` table: its latest report's class and goal.
pub(crate) type Halts = HashMap<ThreadId, (String, Option<String>)>;

/// The class and goal of each thread's latest halting report.
pub(crate) fn halts_of(reports: impl IntoIterator<Item = HaltingReport>) -> Halts {
    reports
        .into_iter()
        .map(|r| (r.thread, (r.class, r.goal)))
        .collect()
}

/// Records in `format`.
pub(crate) fn render_records(records: &[Record], format: HistoryFormat) -> String {
    match format {
        HistoryFormat::Jsonl => export::to_jsonl(records),
        HistoryFormat::Json => {
            serde_json::to_string_pretty(records).expect("records serialize") + "\n"
        }
        HistoryFormat::Xml => export::to_xml(records),
        HistoryFormat::Text => export::transcript(records, 0),
    }
}

fn open(db: &Path) -> Result<SqliteHistory, HostError> {
    Ok(SqliteHistory::open_read_only(db)?)
}

pub(super) fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime starts")
        .block_on(f)
}

/// The thread `text` names in `db`: an id, a unique id prefix, or a displayed path.
pub(super) async fn thread_id(
    store: &SqliteHistory,
    db: &Path,
    text: &str,
) -> Result<ThreadId, HostError> {
    if let Ok(id) = text.parse() {
        return Ok(id);
    }
    let threads = store.threads(None).await?;
    super::resolve::resolve(&threads, text, &db.display().to_string())
}

/// Lists threads, optionally only those in `state`; with `search`, only the root threads the
/// viewer's search finds (`GET /view/threads?q=`): a record of theirs or of a thread below
/// them holds the text in its payload, root, sender or addressee, or their path does.
///
/// # Errors
///
/// The file cannot be opened or read.
pub fn threads(
    db: &Path,
    state: Option<ThreadState>,
    search: Option<&str>,
    format: ThreadsFormat,
) -> Result<String, HostError> {
    let store = open(db)?;
    block_on(async {
        let threads = match search {
            Some(text) => roots_matching(&store, state, text).await?,
            None => store.threads(state).await?,
        };
        let mut reports = Vec::new();
        for t in threads.iter().filter(|t| t.state == ThreadState::Halted) {
            reports.extend(store.reports(t.id).await?);
        }
        let mut halts = halts_of(reports);
        // A thread that has not halted has no report: its goal is the last one it declared.
        for t in threads.iter().filter(|t| t.state != ThreadState::Halted) {
            if let Some(goal) = declared_goal(&store.thread(t.id, 0).await?) {
                halts.insert(t.id, ("-".to_owned(), Some(goal)));
            }
        }
        Ok(render_threads(&threads, &halts, format))
    })
}

/// The root threads in `state` whose search finds `text`, newest first, every page read.
async fn roots_matching(
    store: &SqliteHistory,
    state: Option<ThreadState>,
    text: &str,
) -> Result<Vec<ThreadInfo>, HostError> {
    let mut filter = crate::history::ThreadFilter {
        state,
        text: Some(text.to_owned()),
        limit: crate::history::page::MAX_PAGE,
        ..Default::default()
    };
    let mut found = Vec::new();
    loop {
        let page = store.roots(&filter).await?;
        found.extend(page.threads.into_iter().map(|t| t.info));
        match page.next {
            Some(next) => filter.before = Some(next),
            None => return Ok(found),
        }
    }
}

/// The text of the last goal declared in `records`, if any.
fn declared_goal(records: &[Record]) -> Option<String> {
    let limits = crate::Limits::default();
    records
        .iter()
        .rev()
        .filter(|r| r.root.is(crate::envelope::GOVERNOR_NS, "goal"))
        .find_map(|r| {
            let payload = crate::Payload::parse(&r.payload, &limits).ok()?;
            match crate::governor::GovernorMessage::parse(&payload).ok()? {
                crate::governor::GovernorMessage::Goal(goal) => Some(goal.text),
                _ => None,
            }
        })
}

/// Threads as the `threads` command prints them, from the store or from a host.
pub(crate) fn render_threads(
    threads: &[ThreadInfo],
    halts: &Halts,
    format: ThreadsFormat,
) -> String {
    match format {
        ThreadsFormat::Json => {
            serde_json::to_string_pretty(threads).expect("snapshots serialize") + "\n"
        }
        ThreadsFormat::Text => thread_table(threads, halts),
    }
}

/// How much of a goal the table shows.
const GOAL_CHARS: usize = 48;

fn thread_table(threads: &[ThreadInfo], halts: &Halts) -> String {
    let mut out = format!(
        "{:<36}  {:<8}  {:>10}  {:<16}  {:<24}  GOAL\n",
        "ID", "STATE", "DELIVERIES", "CLASS", "PATH"
    );
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for t in threads {
        let (class, goal) = match halts.get(&t.id) {
            Some((class, goal)) => (class.as_str(), goal.as_deref().unwrap_or("-")),
            None => ("-", "-"),
        };
        let goal: String = match goal.chars().nth(GOAL_CHARS) {
            Some(_) => goal.chars().take(GOAL_CHARS - 1).chain(['…']).collect(),
            None => goal.to_owned(),
        };
        out.push_str(&format!(
            "{:<36}  {:<8}  {:>10}  {:<16}  {:<24}  {goal}\n",
            t.id, t.state, t.counters.deliveries, class, t.path
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

/// Every record of every thread in `db`, in the order the history accepted them.
///
/// # Errors
///
/// The file cannot be read.
pub fn whole_history(db: &Path, format: HistoryFormat) -> Result<String, HostError> {
    let store = open(db)?;
    block_on(async {
        let mut records = Vec::new();
        for t in store.threads(None).await? {
            records.extend(store.thread(t.id, 0).await?);
        }
        Ok(render_all(records, format))
    })
}

/// `records` of many threads in `format`, in the order the history accepted them (by seq).
pub(crate) fn render_all(mut records: Vec<Record>, format: HistoryFormat) -> String {
    records.sort_unstable_by_key(|r| r.seq);
    render_records(&records, format)
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
) -> Result<String, HostError> {
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
        }?;
        if threads.is_empty() {
            return Err(HostError::usage(format!(
                "no thread {id} in {}",
                db.display()
            )));
        }
        let mut records = Vec::new();
        for t in &threads {
            records.extend(store.thread(t.id, 0).await?);
        }
        let mut cuts = Cuts::new();
        for a in store.anchors().await? {
            let removed = cuts.get(&a.thread).map_or(0, |(n, _)| *n) + a.records;
            cuts.insert(a.thread, (removed, a));
        }
        Ok(render_tree(&threads, &records, &cuts, format))
    })
}

/// Per pruned thread: how many records all its prunes removed, and its latest anchor (where
/// its transcript starts).
pub(crate) type Cuts = HashMap<ThreadId, (u64, crate::history::Anchor)>;

/// The records of `threads` (a thread and, for `--tree`, its subtree, parents first) in
/// `format`; the transcript is indented by depth under one heading per thread, with a line
/// saying what was pruned before its first record when `cuts` knows.
pub(crate) fn render_tree(
    threads: &[ThreadInfo],
    records: &[Record],
    cuts: &Cuts,
    format: HistoryFormat,
) -> String {
    if format != HistoryFormat::Text {
        return render_records(records, format);
    }
    let base = threads.first().map_or(0, |t| t.depth);
    let mut out = String::new();
    for t in threads {
        let indent = 2 * (t.depth - base) as usize;
        out.push_str(&format!(
            "{}== thread {} [{}] {}\n",
            " ".repeat(indent),
            t.path,
            t.state,
            t.id
        ));
        if let Some((removed, a)) = cuts.get(&t.id) {
            out.push_str(&format!(
                "{}  [pruned: {removed} records up to seq {}, accepted before {}; the chain continues from {}…]\n",
                " ".repeat(indent),
                a.last_seq,
                export::rfc3339(a.before_us),
                &hex::encode(a.last_digest)[..16],
            ));
        }
        let own: Vec<Record> = records
            .iter()
            .filter(|r| r.thread == t.id)
            .cloned()
            .collect();
        out.push_str(&export::transcript(&own, indent));
    }
    out
}

/// The halting reports of a thread as a JSON array, oldest first (one per halt; a resumed thread
/// can halt again). `--url` prints the same shape.
///
/// # Errors
///
/// A malformed or unknown thread id, a thread that never halted, or the file cannot be read.
pub fn report(db: &Path, thread: &str) -> Result<String, HostError> {
    let store = open(db)?;
    block_on(async {
        let id = thread_id(&store, db, thread).await?;
        let reports = store.reports(id).await?;
        if reports.is_empty() {
            let known = store.threads(None).await?.into_iter().find(|t| t.id == id);
            return Err(HostError::Usage(match known {
                None => format!("no thread {id} in {}", db.display()),
                Some(t) => format!("thread {id} has no halting report: it is {}", t.state),
            }));
        }
        Ok(serde_json::to_string_pretty(&reports).expect("reports serialize") + "\n")
    })
}

/// Re-derives every halt from the recorded history and checks it against its stored report
/// ([`history::replay`](crate::history::replay)): twice, from two reads of each thread, so that
/// a certified halt reaches phuc-loop's verification rung 274177 ("at least 2 replays … produce
/// same certificate").
///
/// # Errors
///
/// Each halt the history does not support, naming its thread and halt; or the file cannot be
/// read.
pub fn verify_certificates(db: &Path) -> Result<String, HostError> {
    let store = open(db)?;
    block_on(async {
        let mut halted = Vec::new();
        for thread in store.threads(None).await? {
            let reports = store.reports(thread.id).await?;
            if reports.is_empty() {
                continue;
            }
            let reads = [
                store.thread(thread.id, 0).await?,
                store.thread(thread.id, 0).await?,
            ];
            halted.push((thread, reports, reads));
        }
        certificates_agree(&db.display().to_string(), halted)
    })
}

/// A thread that halted: its snapshot, its halting reports, and two reads of its records.
pub(super) type Halted = (
    crate::ThreadInfo,
    Vec<crate::governor::HaltingReport>,
    [Vec<crate::history::Record>; 2],
);

/// Re-derives every halt of `halted` (read from `source`) and says whether every certificate
/// agrees with the records (see [`verify_certificates`]).
///
/// # Errors
///
/// Each halt the history does not support, naming its thread and halt.
pub(super) fn certificates_agree(
    source: &str,
    halted: impl IntoIterator<Item = Halted>,
) -> Result<String, HostError> {
    let (mut checked, mut replayed) = (0, 0);
    let mut wrong = Vec::new();
    for (thread, reports, reads) in halted {
        for report in reports {
            checked += 1;
            match crate::history::replay(&reads, &report) {
                Ok(rung) => replayed += usize::from(rung == Some(RUNG_REPLAYED)),
                Err(why) => wrong.push(format!(
                    "thread {} ({}), halt {}: {why}",
                    thread.id, thread.path, report.halt_id
                )),
            }
        }
    }
    if wrong.is_empty() {
        Ok(format!(
            "{source}: {checked} halts re-derived from the history, every certificate agrees; \
             {replayed} certified halts replayed twice to the same certificate: each halt's \
             class and certificate follow from its recorded messages alone, the same on every \
             replay, so the report can be trusted without trusting the run that wrote it \
             (phuc-loop's verification rung {RUNG_REPLAYED}: at least 2 replays produce the \
             same certificate)\n"
        ))
    } else {
        Err(HostError::Check(format!(
            "{} of {checked} halts are not what the history supports:\n{}",
            wrong.len(),
            wrong.join("\n")
        )))
    }
}

/// Checks every forked thread against its source ([`history::verify_fork`]); how many.
///
/// [`history::verify_fork`]: crate::history::verify_fork
async fn verify_forks(store: &SqliteHistory) -> Result<usize, HostError> {
    let mut forks = 0;
    for thread in store.threads(None).await? {
        let records = store.thread(thread.id, 0).await?;
        let Some(source) = crate::history::forked_from(&records) else {
            continue;
        };
        let source = store.thread(source, 0).await?;
        crate::history::verify_fork(&records, &source)
            .map_err(|e| HostError::Check(e.to_string()))?;
        forks += 1;
    }
    Ok(forks)
}

/// Recomputes every hash chain, the chain of prune anchors and every fork against its source;
/// says where the history was cut.
///
/// # Errors
///
/// The first record that does not verify (thread, seq, expected and found digests), the first
/// anchor that does not, the first fork that does not agree with its source (naming the
/// record), or the file cannot be read.
pub fn verify(db: &Path) -> Result<String, HostError> {
    let store = open(db)?;
    let (checked, anchors, forks) = block_on(async {
        let checked = store.verify().await?;
        Ok::<_, HostError>((checked, store.anchors().await?, verify_forks(&store).await?))
    })?;
    let mut text = format!(
        "{}: {checked} records verified, every chain intact\n",
        db.display()
    );
    if forks > 0 {
        text.push_str(&format!(
            "{forks} forks verified against the records they name in their sources\n"
        ));
    }
    if !anchors.is_empty() {
        text.push_str(&format!(
            "{} anchors verified, for {} threads whose older records were pruned:\n",
            anchors.len(),
            anchors
                .iter()
                .map(|a| a.thread)
                .collect::<std::collections::HashSet<_>>()
                .len()
        ));
        text.push_str(&super::retention::cuts(&anchors));
    }
    Ok(text)
}
