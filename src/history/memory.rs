//! [`MemoryHistory`]: history kept in process memory, for tests and ephemeral runs.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use crossbeam_utils::CachePadded;
use dashmap::DashMap;
use dashmap::mapref::entry::Entry;

use super::chain::verify_chain_from;
use super::{
    Anchor, Batch, ChainBreak, Delivered, HistoryError, HistoryStore, Mark, RECENT_DELIVERIES,
    Record, RecordKind, Recovery, Ticket, Timing, is_clear_context, verify_anchors,
};
#[cfg(feature = "nats")]
mod prune;
mod seq_block;

use crate::Counters;
use crate::governor::HaltingReport;
use crate::governor::Usage;
use crate::{MessageId, ThreadId, ThreadInfo, ThreadState};

/// History in memory: complete and hash-chained like the durable store, gone when dropped.
///
/// Each thread's records sit behind that thread's own lock, so threads append side by side;
/// the map of threads is sharded finely, and sequence numbers come to each OS thread in blocks
/// of 64 (one shared write per block, not per record): unique in the store and rising within
/// every thread; across threads in acceptance order within a window of 128 records (exactly,
/// on one OS thread). There is no index by message id: [`HistoryStore::record`] looks through
/// every thread.
///
/// # Example
///
/// ```
/// # use std::sync::Arc;
/// # use agentpump::{PumpBuilder, history::{HistoryStore, MemoryHistory}};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let store = Arc::new(MemoryHistory::new()); // what `PumpBuilder::new()` uses unless told
/// let pump = PumpBuilder::new().history(store.clone()).build()?;
/// assert_eq!(store.thread(pump.system_thread(), 0).await?.len(), 1); // `boot`
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct MemoryHistory {
    /// Which store this is, for the blocks of sequence numbers each OS thread holds.
    id: u64,
    /// How sequence numbers are handed out.
    numbering: Numbering,
    /// The last sequence number handed out (to a record or in a block), alone on its cache
    /// line: blocks are taken while other workers read the maps beside it.
    seq: CachePadded<AtomicU64>,
    logs: DashMap<ThreadId, Arc<Mutex<ThreadLog>>>,
    /// Saved snapshots, each with the order in which its thread was first saved.
    threads: DashMap<ThreadId, (u64, ThreadInfo)>,
    saved: AtomicU64,
    reports: DashMap<ThreadId, Vec<HaltingReport>>,
    /// The anchors of the prunes applied, in chain order (`memory/prune.rs`).
    anchors: Mutex<Vec<Anchor>>,
}

/// Shards of the maps by thread: many, so that two workers seldom write one shard's lock.
const SHARDS: usize = 256;

/// How a [`MemoryHistory`] numbers its records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Numbering {
    /// From blocks held per OS thread (the default).
    Blocks,
    /// One after the other, in the order of appends (a store whose numbers must be replayed
    /// exactly: the JetStream store's index).
    #[cfg_attr(not(feature = "nats"), allow(dead_code))]
    Serial,
}

impl Default for MemoryHistory {
    fn default() -> Self {
        Self::numbered(Numbering::Blocks)
    }
}

/// One thread's records.
#[derive(Debug, Default)]
struct ThreadLog {
    records: Chunks,
    last_digest: [u8; 32],
    /// The sequence number of the last record.
    last_seq: u64,
    /// Indexes of records still waiting for delivery, in order (deliveries take them from the
    /// front: a queue is delivered in history order).
    pending: VecDeque<usize>,
    /// Summed from the delivered marks.
    counters: Counters,
    /// Indexes of the last deliveries that cost a turn, oldest first (at most
    /// [`RECENT_DELIVERIES`]).
    delivered: VecDeque<usize>,
    /// Every handled delivery, in commit order.
    marks: Vec<Kept>,
    /// The digest the first record chains from when older ones were pruned: the last
    /// anchor's (`None`: 32 zero bytes).
    start: Option<[u8; 32]>,
}

/// A handled delivery as this store keeps it (see [`Mark`]).
#[derive(Debug)]
struct Kept {
    /// The index of the delivered record.
    index: usize,
    usage: Usage,
    timing: Option<Timing>,
    committed_us: i64,
}

impl ThreadLog {
    /// Takes message `id` off the pending list; its index, or `None` when it is not pending.
    fn take_pending(&mut self, id: MessageId) -> Option<usize> {
        let records = &self.records;
        let at = self
            .pending
            .iter()
            .position(|&i| records.get(i).is_some_and(|r| r.id == id));
        at.and_then(|at| self.pending.remove(at))
    }

    /// Verifies this log (thread `thread`'s) from its anchor, or from 32 zero bytes; how many
    /// records.
    fn verify(&self, thread: ThreadId) -> Result<u64, ChainBreak> {
        let start = self.start.map(|d| (thread, d)).into_iter().collect();
        verify_chain_from(self.records.iter(), start)
    }

    /// Remembers that the record at `index` was delivered and cost a turn.
    fn mark_delivered(&mut self, index: usize) {
        if self.delivered.len() == RECENT_DELIVERIES {
            self.delivered.pop_front();
        }
        self.delivered.push_back(index);
    }
}

impl MemoryHistory {
    /// An empty history.
    ///
    /// # Example
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # use agentpump::{PumpBuilder, history::MemoryHistory};
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = Arc::new(MemoryHistory::new());
    /// let pump = PumpBuilder::new().history(store).build()?;
    /// assert_eq!(pump.verify().await?, 1); // the boot record
    /// # Ok(())
    /// # }
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty history that numbers its records one after the other in the order of appends,
    /// whichever OS thread appends (what a store replaying its numbers needs).
    #[cfg_attr(not(feature = "nats"), allow(dead_code))]
    pub(crate) fn serial() -> Self {
        Self::numbered(Numbering::Serial)
    }

    fn numbered(numbering: Numbering) -> Self {
        static STORES: AtomicU64 = AtomicU64::new(0);
        Self {
            id: STORES.fetch_add(1, Ordering::Relaxed),
            numbering,
            seq: CachePadded::new(AtomicU64::new(0)),
            logs: DashMap::with_shard_amount(SHARDS),
            threads: DashMap::with_shard_amount(SHARDS),
            saved: AtomicU64::new(0),
            reports: DashMap::new(),
            anchors: Mutex::new(Vec::new()),
        }
    }

    /// The next sequence number for a record of a thread whose last record has `after`.
    fn next_seq(&self, after: u64) -> u64 {
        match self.numbering {
            Numbering::Serial => self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            Numbering::Blocks => seq_block::next(self.id, after, &self.seq),
        }
    }

    /// The log of `thread`, created when it has none yet.
    fn log(&self, thread: ThreadId) -> Arc<Mutex<ThreadLog>> {
        if let Some(log) = self.logs.get(&thread) {
            return Arc::clone(&log);
        }
        Arc::clone(&self.logs.entry(thread).or_default())
    }

    /// Every thread's log, locked one after the other, with `f` applied to each.
    fn each_log(&self, mut f: impl FnMut(ThreadId, &ThreadLog)) {
        let logs: Vec<_> = self
            .logs
            .iter()
            .map(|e| (*e.key(), Arc::clone(e.value())))
            .collect();
        for (thread, log) in logs {
            f(thread, &lock(&log));
        }
    }

    /// Every record still waiting for delivery, in sequence order.
    fn pending_records(&self) -> Vec<Record> {
        let mut out = Vec::new();
        self.each_log(|_, log| {
            out.extend(
                log.pending
                    .iter()
                    .filter_map(|&i| log.records.get(i).cloned()),
            );
        });
        out.sort_by_key(|r| r.seq);
        out
    }

    /// The records of every thread that `keep` selects, in sequence order.
    fn select(&self, keep: impl Fn(&Record) -> bool) -> Vec<Record> {
        let mut out = Vec::new();
        self.each_log(|_, log| out.extend(log.records.iter().filter(|r| keep(r)).cloned()));
        out.sort_by_key(|r| r.seq);
        out
    }
}

/// What appending a batch sealed, for a store that keeps a [`MemoryHistory`] as its index.
#[derive(Debug, Default)]
pub(crate) struct Sealing {
    /// Each new record's sequence number and digest, in the batch's order.
    pub records: Vec<(u64, [u8; 32])>,
    /// The seq of the record the batch's delivered mark names, when it names one.
    pub marked: Option<u64>,
}

/// Records in chunks that are never moved once allocated: a thread's first chunks hold 1, 2, 4,
/// … 256 records (short threads stay small), later ones [`Chunks::SIZE`] each. A long thread
/// grows by adding a chunk, never by copying what it holds to a bigger allocation.
#[derive(Debug, Default)]
struct Chunks(Vec<Vec<Record>>);

impl Chunks {
    /// The size of every chunk after the growing ones.
    const SIZE: usize = 512;
    /// How many chunks grow (1, 2, 4, … `SIZE / 2` records; `SIZE - 1` in all).
    const GROWING: usize = Self::SIZE.trailing_zeros() as usize;

    fn capacity_of(chunk: usize) -> usize {
        if chunk < Self::GROWING {
            1 << chunk
        } else {
            Self::SIZE
        }
    }

    /// The index of the first record of `chunk`.
    fn start_of(chunk: usize) -> usize {
        if chunk < Self::GROWING {
            (1 << chunk) - 1
        } else {
            Self::SIZE - 1 + (chunk - Self::GROWING) * Self::SIZE
        }
    }

    /// The chunk holding record `index`, and its place there.
    fn locate(index: usize) -> (usize, usize) {
        if index < Self::SIZE - 1 {
            let chunk = (usize::BITS - 1 - (index + 1).leading_zeros()) as usize;
            (chunk, index - Self::start_of(chunk))
        } else {
            let past = index - (Self::SIZE - 1);
            (Self::GROWING + past / Self::SIZE, past % Self::SIZE)
        }
    }

    fn len(&self) -> usize {
        self.0
            .last()
            .map_or(0, |last| Self::start_of(self.0.len() - 1) + last.len())
    }

    fn push(&mut self, record: Record) {
        let chunks = self.0.len();
        match self.0.last_mut() {
            Some(last) if last.len() < Self::capacity_of(chunks - 1) => last.push(record),
            _ => {
                let mut chunk = Vec::with_capacity(Self::capacity_of(chunks));
                chunk.push(record);
                self.0.push(chunk);
            }
        }
    }

    fn get(&self, index: usize) -> Option<&Record> {
        let (chunk, at) = Self::locate(index);
        self.0.get(chunk)?.get(at)
    }

    fn iter(&self) -> impl Iterator<Item = &Record> {
        self.0.iter().flatten()
    }

    /// The records from the first with `seq >= since` on.
    fn since(&self, since: u64) -> Vec<Record> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.get(mid).is_some_and(|r| r.seq < since) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let (chunk, at) = Self::locate(lo);
        let from = self.0.get(chunk..).unwrap_or_default();
        from.iter().flatten().skip(at).cloned().collect()
    }
}

/// The locked log of `thread` among a batch's, which are sorted by thread id (a fan-out's batch
/// locks one log per child: a linear search per record made it quadratic).
fn log_of<'a>(
    logs: &'a mut [(ThreadId, MutexGuard<'_, ThreadLog>)],
    thread: ThreadId,
) -> &'a mut ThreadLog {
    let at = logs
        .binary_search_by_key(&thread, |(t, _)| *t)
        .expect("every thread of the batch is locked");
    &mut logs[at].1
}

fn lock(log: &Mutex<ThreadLog>) -> MutexGuard<'_, ThreadLog> {
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn lock_anchors(anchors: &Mutex<Vec<Anchor>>) -> MutexGuard<'_, Vec<Anchor>> {
    anchors
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Microseconds since the Unix epoch, now.
pub(crate) fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
}

#[async_trait]
impl HistoryStore for MemoryHistory {
    fn append(&self, batch: Batch) -> Result<Ticket, HistoryError> {
        self.append_at(batch, now_us(), None);
        Ok(Ticket::ready())
    }

    async fn thread(&self, thread: ThreadId, since: u64) -> Result<Vec<Record>, HistoryError> {
        let Some(log) = self.logs.get(&thread).map(|l| Arc::clone(&l)) else {
            return Ok(Vec::new());
        };
        let log = lock(&log);
        Ok(log.records.since(since))
    }

    async fn record(&self, id: MessageId) -> Result<Option<Record>, HistoryError> {
        let mut found = None;
        self.each_log(|_, log| {
            if found.is_none() {
                found = log.records.iter().find(|r| r.id == id).cloned();
            }
        });
        Ok(found)
    }

    async fn marks(&self, thread: ThreadId) -> Result<Vec<Mark>, HistoryError> {
        let Some(log) = self.logs.get(&thread).map(|l| Arc::clone(&l)) else {
            return Ok(Vec::new());
        };
        let log = lock(&log);
        let marks = log.marks.iter().filter_map(|k| {
            let r = log.records.get(k.index)?;
            Some(Mark {
                seq: r.seq,
                id: r.id,
                listener: r.to.clone(),
                time_us: r.time_us,
                usage: k.usage.clone(),
                timing: k.timing,
                committed_us: Some(k.committed_us),
            })
        });
        Ok(marks.collect())
    }

    async fn pending(&self) -> Result<Vec<Record>, HistoryError> {
        Ok(self.pending_records())
    }

    async fn reports(&self, thread: ThreadId) -> Result<Vec<HaltingReport>, HistoryError> {
        Ok(self
            .reports
            .get(&thread)
            .map(|r| r.clone())
            .unwrap_or_default())
    }

    async fn threads(&self, state: Option<ThreadState>) -> Result<Vec<ThreadInfo>, HistoryError> {
        let saved = self.saved_in_order();
        let mut children: HashMap<ThreadId, Vec<ThreadId>> = HashMap::new();
        for info in &saved {
            if let Some(parent) = info.parent {
                children.entry(parent).or_default().push(info.id);
            }
        }
        let mut live: HashMap<ThreadId, (bool, Counters)> = HashMap::new();
        self.each_log(|thread, log| {
            live.insert(thread, (!log.pending.is_empty(), log.counters.clone()));
        });
        let mut out: Vec<ThreadInfo> = saved
            .into_iter()
            .map(|mut t| {
                t.children = children.remove(&t.id).unwrap_or_default();
                let (busy, counters) = live.remove(&t.id).unwrap_or_default();
                t.with_live_state(busy, counters)
            })
            .filter(|t| state.is_none_or(|s| t.state == s))
            .collect();
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    fn recovery(&self) -> Result<Recovery, HistoryError> {
        let threads = self.saved_in_order();
        let state: HashMap<ThreadId, ThreadState> =
            threads.iter().map(|t| (t.id, t.state)).collect();
        let mut counters = HashMap::new();
        let mut records = HashMap::new();
        let (mut cleared, mut started, mut delivered) =
            (Vec::new(), HashMap::new(), HashMap::new());
        self.each_log(|thread, log| {
            counters.insert(thread, log.counters.clone());
            records.insert(thread, log.records.len() as u64);
            let state = state.get(&thread).copied().unwrap_or(ThreadState::Done);
            if let Some(first) = log.records.get(0).filter(|_| state != ThreadState::Done) {
                started.insert(thread, first.time_us);
            }
            if !state.is_closed() {
                let last = log.delivered.iter().filter_map(|&i| log.records.get(i));
                delivered.insert(thread, last.cloned().collect());
            }
            cleared.extend(
                log.records
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| is_clear_context(r))
                    .map(|(i, r)| (r.clone(), i as u64)),
            );
        });
        cleared.sort_by_key(|(r, _)| r.seq);
        Ok(Recovery {
            threads,
            cleared,
            started,
            delivered,
            counters,
            records,
            pending: self.pending_records(),
            governor: self.select(|r| {
                (r.kind == RecordKind::Message && r.to.as_deref() == Some("governor"))
                    || r.kind == RecordKind::Decision
            }),
        })
    }

    async fn verify(&self) -> Result<u64, HistoryError> {
        verify_anchors(lock_anchors(&self.anchors).iter())?;
        let mut checked = 0;
        let mut first_break: Option<ChainBreak> = None;
        self.each_log(|thread, log| match log.verify(thread) {
            Ok(n) => checked += n,
            Err(b) => {
                if first_break.as_ref().is_none_or(|f| b.seq < f.seq) {
                    first_break = Some(b);
                }
            }
        });
        match first_break {
            Some(b) => Err(b.into()),
            None => Ok(checked),
        }
    }

    async fn anchors(&self) -> Result<Vec<Anchor>, HistoryError> {
        Ok(lock_anchors(&self.anchors).clone())
    }
}

impl MemoryHistory {
    /// Appends `batch` as accepted at `time_us`: what [`HistoryStore::append`] does with the
    /// time now. With `sealed`, each new record's sequence number and digest are pushed to it,
    /// in the batch's order (a store that keeps this one as its index checks a replay by them),
    /// and the seq of the record the batch's delivered mark names is set there.
    pub(crate) fn append_at(&self, batch: Batch, time_us: i64, sealed: Option<&mut Sealing>) {
        // A mark for a thread this store has never seen names no record: nothing to lock.
        let delivered = batch.delivered.as_ref().filter(|d| {
            let among_records = || {
                batch
                    .records
                    .iter()
                    .any(|r| r.envelope.thread() == d.thread)
            };
            among_records() || self.logs.contains_key(&d.thread)
        });
        let touched = || {
            batch
                .records
                .iter()
                .map(|r| r.envelope.thread())
                .chain(delivered.map(|d| d.thread))
        };
        let first = touched().next();
        if let Some(thread) = first.filter(|&t| touched().all(|other| other == t)) {
            // The common case: one thread (a delivery and its outputs).
            let log = self.log(thread);
            self.write(
                &mut [(thread, lock(&log))],
                &batch,
                delivered,
                time_us,
                sealed,
            );
        } else if first.is_some() {
            // Lock every thread the batch touches, in id order (no deadlock between batches),
            // so each thread sees the batch whole.
            let mut threads: Vec<ThreadId> = touched().collect();
            threads.sort_unstable();
            threads.dedup();
            let logs: Vec<_> = threads.iter().map(|&t| (t, self.log(t))).collect();
            let mut guards: Vec<_> = logs.iter().map(|(t, log)| (*t, lock(log))).collect();
            self.write(&mut guards, &batch, delivered, time_us, sealed);
        }
        for info in batch.threads {
            let order = || self.saved.fetch_add(1, Ordering::Relaxed);
            match self.threads.entry(info.id) {
                Entry::Occupied(mut e) => e.get_mut().1 = info,
                Entry::Vacant(e) => {
                    e.insert((order(), info));
                }
            }
        }
        for report in batch.reports {
            self.reports.entry(report.thread).or_default().push(report);
        }
    }

    /// Writes a batch's delivered mark and records into the locked logs of its threads.
    fn write(
        &self,
        logs: &mut [(ThreadId, MutexGuard<'_, ThreadLog>)],
        batch: &Batch,
        delivered: Option<&Delivered>,
        time_us: i64,
        mut sealed: Option<&mut Sealing>,
    ) {
        if let Some(d) = delivered {
            let log = log_of(logs, d.thread);
            // A mark counts once it names a record of the thread, pending or not (as the
            // durable store, which marks the record by id).
            let known = log
                .take_pending(d.id)
                .or_else(|| log.records.iter().position(|r| r.id == d.id));
            if let (Some(sealed), Some(index)) = (sealed.as_deref_mut(), known) {
                sealed.marked = log.records.get(index).map(|r| r.seq);
            }
            if let Some(index) = known.filter(|_| d.handled) {
                if d.free {
                    log.counters.notices += 1;
                } else {
                    log.counters.deliveries += 1;
                    log.mark_delivered(index);
                }
                log.counters.add_usage(&d.usage);
                log.marks.push(Kept {
                    index,
                    usage: d.usage.clone(),
                    timing: d.timing,
                    committed_us: time_us,
                });
                log.counters.failures += u64::from(d.failed);
            }
        }
        for new in &batch.records {
            let log = log_of(logs, new.envelope.thread());
            let seq = self.next_seq(log.last_seq);
            log.last_seq = seq;
            let mut record = Record::from_new(new, seq, time_us);
            record.seal(&log.last_digest);
            log.last_digest = record.digest;
            if let Some(sealed) = sealed.as_deref_mut() {
                sealed.records.push((seq, record.digest));
            }
            let index = log.records.len();
            if new.pending {
                log.pending.push_back(index);
            }
            log.records.push(record);
        }
    }

    /// Every saved snapshot, in the order threads were first saved.
    fn saved_in_order(&self) -> Vec<ThreadInfo> {
        let mut saved: Vec<(u64, ThreadInfo)> =
            self.threads.iter().map(|e| e.value().clone()).collect();
        saved.sort_by_key(|(order, _)| *order);
        saved.into_iter().map(|(_, info)| info).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governor::Usage;
    use crate::history::NewRecord;
    use crate::{Envelope, Limits, Payload};

    fn append_one(h: &MemoryHistory, thread: ThreadId, pending: bool) -> MessageId {
        let payload = Payload::parse("<ping/>", &Limits::default()).unwrap();
        let envelope = Envelope::new(Arc::from("a"), thread, payload);
        let id = envelope.id();
        let record = NewRecord {
            envelope,
            kind: RecordKind::Message,
            pending,
        };
        h.append(Batch {
            records: vec![record],
            ..Batch::default()
        })
        .unwrap();
        id
    }

    fn mark(h: &MemoryHistory, thread: ThreadId, id: MessageId) {
        let delivered = Delivered {
            thread,
            id,
            handled: true,
            usage: Usage {
                tool_calls: 1,
                ..Usage::default()
            },
            free: false,
            failed: false,
            timing: None,
        };
        h.append(Batch {
            delivered: Some(delivered),
            ..Batch::default()
        })
        .unwrap();
    }

    #[test]
    fn chunks_find_every_record_and_never_grow_a_chunk() {
        let payload = Payload::parse("<ping/>", &Limits::default()).unwrap();
        let new = NewRecord {
            envelope: Envelope::new(Arc::from("a"), ThreadId::new(), payload),
            kind: RecordKind::Message,
            pending: false,
        };
        let mut chunks = Chunks::default();
        let n = 3 * Chunks::SIZE + 7;
        for seq in 0..n {
            chunks.push(Record::from_new(&new, seq as u64 * 2, 0));
            assert_eq!(chunks.len(), seq + 1);
        }
        for (i, chunk) in chunks.0.iter().enumerate() {
            assert_eq!(
                chunk.capacity(),
                Chunks::capacity_of(i),
                "chunk {i} was allocated once"
            );
        }
        for i in 0..n {
            assert_eq!(chunks.get(i).map(|r| r.seq), Some(i as u64 * 2));
        }
        assert!(chunks.get(n).is_none());
        let seqs: Vec<u64> = chunks.iter().map(|r| r.seq).collect();
        assert_eq!(seqs, (0..n as u64).map(|s| s * 2).collect::<Vec<_>>());
        for since in [
            0,
            1,
            2,
            509,
            510,
            511,
            1021,
            1022,
            1023,
            2 * n as u64 - 2,
            2 * n as u64,
        ] {
            let expected = seqs.iter().filter(|&&s| s >= since).count();
            let got = chunks.since(since);
            assert_eq!(got.len(), expected, "since {since}");
            assert!(
                got.first()
                    .is_none_or(|r| r.seq >= since && r.seq < since + 2)
            );
        }
    }

    #[tokio::test]
    async fn a_delivered_mark_takes_its_record_off_pending_and_counts() {
        let h = MemoryHistory::new();
        let t = ThreadId::new();
        let (first, second) = (append_one(&h, t, true), append_one(&h, t, true));
        // Out of order: the second is delivered first (a queue normally goes front to back).
        mark(&h, t, second);
        let pending: Vec<MessageId> = h.pending().await.unwrap().iter().map(|r| r.id).collect();
        assert_eq!(pending, [first]);
        mark(&h, t, first);
        assert!(h.pending().await.unwrap().is_empty());
        // A record appended as not pending counts too, like the durable store counts it.
        let direct = append_one(&h, t, false);
        mark(&h, t, direct);
        let counters = &h.recovery().unwrap().counters[&t];
        assert_eq!((counters.deliveries, counters.tool_calls), (3, 3));
        // A mark naming a thread the store never saw changes nothing and creates no thread.
        let stranger = ThreadId::new();
        mark(&h, stranger, MessageId::new());
        assert!(!h.recovery().unwrap().counters.contains_key(&stranger));
        // Records are found by id in any thread.
        assert_eq!(h.record(second).await.unwrap().map(|r| r.id), Some(second));
        assert_eq!(h.record(MessageId::new()).await.unwrap(), None);
    }
}
