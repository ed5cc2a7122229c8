//! `agentpump history prune | export`: retention of a history file. `prune` removes finished
//! threads' records older than a cut and leaves an anchor per thread (see
//! [`HistoryStore::prune`]); `export` writes what a prune with the same cut would remove as JSON
//! lines, gzip-compressed with `--gzip`. `prune --archive FILE` does both in one transaction.

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;

use crate::history::export::{parse_rfc3339, rfc3339};
use crate::history::{Anchor, Archive, HistoryStore, Pruned, Record, SqliteHistory};
use crate::host::HostError;

/// Microseconds in a day.
const DAY_US: i64 = 86_400_000_000;

/// The cut that keeps the last `days` days before `now_us` (saturating: a huge count keeps all).
pub(crate) fn keep_days(now_us: i64, days: u32) -> i64 {
    now_us.saturating_sub(i64::from(days).saturating_mul(DAY_US))
}

/// The cut of a prune or an export: exactly one of `--before` and `--keep-days`.
#[derive(Debug, Clone, Copy, clap::Args)]
#[group(id = "cut", required = true, multiple = false)]
pub struct Cut {
    /// Records accepted before this UTC time go: YYYY-MM-DD (midnight) or
    /// YYYY-MM-DDTHH:MM:SS[.ffffff]Z.
    #[arg(long, value_name = "DATE", value_parser = before)]
    pub before: Option<i64>,
    /// Keep the last N days: records accepted more than N×24 hours ago go.
    #[arg(long, value_name = "N")]
    pub keep_days: Option<u32>,
}

fn before(text: &str) -> Result<i64, String> {
    parse_rfc3339(text).map_err(|e| e.to_string())
}

impl Cut {
    /// The cut in microseconds since the Unix epoch (`--keep-days` counts back from `now_us`).
    pub fn before_us(&self, now_us: i64) -> i64 {
        match (self.before, self.keep_days) {
            (Some(before), _) => before,
            (None, Some(days)) => keep_days(now_us, days),
            (None, None) => unreachable!("clap requires one of --before and --keep-days"),
        }
    }
}

/// Now, in microseconds since the Unix epoch.
pub(crate) fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime starts")
        .block_on(f)
}

/// JSON lines, gzip-compressed, into a file that did not exist: a prune's archive.
#[derive(Debug)]
pub(crate) struct GzArchive {
    out: GzEncoder<BufWriter<File>>,
}

impl GzArchive {
    /// Creates `path`; refuses to replace an existing file.
    pub(crate) fn create(path: &Path) -> Result<Self, HostError> {
        let file = File::create_new(path).map_err(|e| HostError::io(path, e))?;
        Ok(Self {
            out: GzEncoder::new(BufWriter::new(file), Compression::default()),
        })
    }
}

impl Archive for GzArchive {
    fn write(&mut self, record: &Record) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.out, record)?;
        self.out.write_all(b"\n")
    }

    fn finish(self: Box<Self>) -> std::io::Result<()> {
        let file = self
            .out
            .finish()?
            .into_inner()
            .map_err(|e| e.into_error())?;
        file.sync_all()
    }
}

/// Prunes the history file `db` (a stopped host's: on a live host, prune through its API)
/// before `before_us`, archiving the removed records to `archive` first if given.
///
/// # Errors
///
/// The file does not exist or cannot be written, the archive exists already or cannot be
/// written (nothing is removed then), or a chain to be pruned does not verify.
pub fn prune(db: &Path, before_us: i64, archive: Option<&Path>) -> Result<String, HostError> {
    if !db.is_file() {
        return Err(HostError::Usage(format!("{}: no such file", db.display())));
    }
    let store = SqliteHistory::open(db)?;
    let sink = archive
        .map(|path| GzArchive::create(path).map(|a| Box::new(a) as Box<dyn Archive>))
        .transpose()?;
    let pruned = block_on(store.prune(before_us, sink));
    if pruned.is_err()
        && let Some(path) = archive
    {
        // Nothing was removed: an archive of nothing would only mislead.
        let _ = std::fs::remove_file(path);
    }
    let pruned = pruned?;
    store.close()?;
    let mut text = render(&db.display().to_string(), &pruned);
    if let Some(path) = archive {
        text.push_str(&format!(
            "archived {} records to {}\n",
            pruned.records,
            path.display()
        ));
    }
    Ok(text)
}

/// What a prune did, one line (`--url` prints the same from the host's answer).
pub(crate) fn render(origin: &str, pruned: &Pruned) -> String {
    if pruned.anchors.is_empty() {
        return format!(
            "{origin}: nothing to prune before {} (finished threads only)\n",
            rfc3339(pruned.before_us)
        );
    }
    if pruned.partitions > 1 {
        // Each partition numbers its records and chains its anchors alone: one range of each
        // across them would read as one chain.
        return format!(
            "{origin}: pruned {} records of {} threads before {} in {} partitions (each its own seq numbers and anchor chain)\n",
            pruned.records,
            pruned.anchors.len(),
            rfc3339(pruned.before_us),
            pruned.partitions,
        );
    }
    let seqs = (
        pruned.anchors.iter().map(|a| a.first_seq).min(),
        pruned.anchors.iter().map(|a| a.last_seq).max(),
    );
    format!(
        "{origin}: pruned {} records of {} threads before {} (seq {}..{}), anchors {}..{}\n",
        pruned.records,
        pruned.anchors.len(),
        rfc3339(pruned.before_us),
        seqs.0.unwrap_or(0),
        seqs.1.unwrap_or(0),
        pruned.anchors[0].n,
        pruned.anchors[pruned.anchors.len() - 1].n,
    )
}

/// Writes the records a prune of `db` before `before_us` would remove to `out`, as JSON lines
/// (gzip-compressed with `gzip`). Reads the file only: a running host's file can be exported.
///
/// # Errors
///
/// The file cannot be read, or `out` exists already or cannot be written.
pub fn export(db: &Path, before_us: i64, gzip: bool, out: &Path) -> Result<String, HostError> {
    let store = SqliteHistory::open_read_only(db)?;
    let records = block_on(store.prunable(before_us))?;
    let write = || -> std::io::Result<()> {
        let file = BufWriter::new(File::create_new(out)?);
        let mut sink: Box<dyn Write> = if gzip {
            Box::new(GzEncoder::new(file, Compression::default()))
        } else {
            Box::new(file)
        };
        for r in &records {
            serde_json::to_writer(&mut sink, r)?;
            sink.write_all(b"\n")?;
        }
        sink.flush()
    };
    write().map_err(|e| HostError::io(out, e))?;
    let threads: HashSet<_> = records.iter().map(|r| r.thread).collect();
    let (kept, open) = block_on(left_out(&store, &threads, before_us))?;
    let cut = rfc3339(before_us);
    let mut text = if records.is_empty() {
        format!(
            "{}: nothing to export: no finished thread has a record accepted before {cut} ({} written, empty)\n",
            db.display(),
            out.display()
        )
    } else {
        format!(
            "{}: exported {} records of {} threads accepted before {cut} to {}\n",
            db.display(),
            records.len(),
            threads.len(),
            out.display()
        )
    };
    if kept > 0 {
        text.push_str(&format!(
            "left out: {kept} records of {open} threads accepted before the cut whose trees are not finished (idle, active or waiting); export and prune take only trees that are done or halted with nothing pending, and a root thread stays idle until it is stopped (`agentpump stop THREAD`)\n"
        ));
    }
    if records.is_empty() || kept > 0 {
        text.push_str(&format!(
            "every record, as JSON lines: agentpump history --all --format jsonl --db {}\n",
            db.display()
        ));
    }
    Ok(text)
}

/// The records accepted before `before_us` of the threads an export leaves out (not among
/// `exported`, so not finished), and how many threads hold them.
async fn left_out(
    store: &SqliteHistory,
    exported: &HashSet<crate::ThreadId>,
    before_us: i64,
) -> Result<(usize, usize), HostError> {
    let (mut records, mut threads) = (0, 0);
    for t in store.threads(None).await? {
        if exported.contains(&t.id) {
            continue;
        }
        let n = store
            .thread(t.id, 0)
            .await?
            .iter()
            .take_while(|r| r.time_us < before_us)
            .count();
        records += n;
        threads += usize::from(n > 0);
    }
    Ok((records, threads))
}

/// Where the history was cut, for `verify`: one line per prune (anchors sharing a cut and a
/// time), saying what it removed.
pub(crate) fn cuts(anchors: &[Anchor]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < anchors.len() {
        let run: Vec<&Anchor> = anchors[i..]
            .iter()
            .take_while(|a| {
                (a.before_us, a.pruned_us) == (anchors[i].before_us, anchors[i].pruned_us)
            })
            .collect();
        i += run.len();
        let records: u64 = run.iter().map(|a| a.records).sum();
        let first = run.iter().map(|a| a.first_time_us).min().unwrap_or(0);
        let last = run.iter().map(|a| a.last_time_us).max().unwrap_or(0);
        out.push_str(&format!(
            "  cut before {} (pruned {}): {records} records of {} threads, accepted {} to {}, anchors {}..{}\n",
            rfc3339(run[0].before_us),
            rfc3339(run[0].pruned_us),
            run.len(),
            rfc3339(first),
            rfc3339(last),
            run[0].n,
            run[run.len() - 1].n,
        ));
    }
    out
}
