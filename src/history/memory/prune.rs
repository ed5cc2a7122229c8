//! Retention in a [`MemoryHistory`] kept as the index of a history in a stream
//! (`JetStreamHistory`): which records a prune before a cut removes, the anchors that say what
//! went, and the removal itself, which the index applies again when it reads a prune back from
//! its stream, checking every anchor against the records it removes.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::{Chunks, MemoryHistory, ThreadLog, lock};
use crate::ThreadId;
use crate::history::prune::{Carried, anchor_chain, finished_trees, parcels_open, root_of};
use crate::history::{Anchor, ChainBreak, Record};

impl Chunks {
    fn get_mut(&mut self, index: usize) -> Option<&mut Record> {
        let (chunk, at) = Self::locate(index);
        self.0.get_mut(chunk)?.get_mut(at)
    }
}

impl ThreadLog {
    /// Drops the first `n` records, and every delivery mark and queue place that named them.
    fn drop_front(&mut self, n: usize) {
        let rest: Vec<Record> = std::mem::take(&mut self.records.0)
            .into_iter()
            .flatten()
            .skip(n)
            .collect();
        self.records = Chunks::default();
        for record in rest {
            self.records.push(record);
        }
        let shift = |indexes: &mut std::collections::VecDeque<usize>| {
            indexes.retain(|&i| i >= n);
            indexes.iter_mut().for_each(|i| *i -= n);
        };
        shift(&mut self.pending);
        shift(&mut self.delivered);
        self.marks.retain(|k| k.index >= n);
        self.marks.iter_mut().for_each(|k| k.index -= n);
    }
}

impl MemoryHistory {
    /// Moves the numbering on so that the next record gets a seq above `seq` (a replay past
    /// messages a prune deleted: their records' numbers are not handed out again).
    pub(crate) fn skip_to(&self, seq: u64) {
        self.seq
            .fetch_max(seq, std::sync::atomic::Ordering::Relaxed);
    }

    /// Gives record `seq` of `thread` the digest its stream recorded (a replay whose record
    /// chains from one a prune deleted); the thread's next record chains from it.
    pub(crate) fn reseal(&self, thread: ThreadId, seq: u64, digest: [u8; 32]) {
        let Some(log) = self.logs.get(&thread).map(|l| Arc::clone(&l)) else {
            return;
        };
        let mut log = lock(&log);
        let Some(at) = (0..log.records.len())
            .rev()
            .find(|&i| log.records.get(i).is_some_and(|r| r.seq == seq))
        else {
            return;
        };
        if let Some(record) = log.records.get_mut(at) {
            record.digest = digest;
        }
        if at + 1 == log.records.len() {
            log.last_digest = digest;
        }
    }

    /// Verifies `thread`'s chain from its anchor (or from 32 zero bytes); how many records.
    pub(crate) fn verify_log(&self, thread: ThreadId) -> Result<u64, ChainBreak> {
        let Some(log) = self.logs.get(&thread).map(|l| Arc::clone(&l)) else {
            return Ok(0);
        };
        lock(&log).verify(thread)
    }

    /// The last number handed out.
    pub(crate) fn last_number(&self) -> u64 {
        self.seq.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// In a store numbered one after the other: every number handed out must be a record kept
    /// or one an anchor says was pruned. When not (a message of records deleted from a stream
    /// without a prune that covers them), how many records are accounted for, and how many
    /// numbers were handed out.
    pub(crate) fn unaccounted(&self) -> Option<(u64, u64)> {
        let mut held = 0u64;
        self.each_log(|_, log| held += log.records.len() as u64);
        let pruned: u64 = super::lock_anchors(&self.anchors)
            .iter()
            .map(|a| a.records)
            .sum();
        let handed = self.last_number();
        (held + pruned != handed).then_some((held + pruned, handed))
    }

    /// Per thread of a finished tree (its root and every thread below it done or halted, none
    /// with a message pending or a parcel to another pump open), the records accepted before
    /// `before_us`: the longest such prefix of its chain, so what remains never has holes.
    /// Threads in the order they were first saved.
    pub(crate) fn doomed(&self, before_us: i64) -> Vec<Vec<Record>> {
        let saved = self.saved_in_order();
        let mut busy = HashSet::new();
        self.each_log(|thread, log| {
            if !log.pending.is_empty() {
                busy.insert(thread);
            }
        });
        let rows: Vec<_> = saved
            .iter()
            .map(|t| (t.id, t.parent, t.state.is_closed()))
            .collect();
        // Open parcels are looked for only in the trees that are otherwise finished.
        let closed = finished_trees(&rows, &busy);
        for &thread in &closed {
            if let Some(log) = self.logs.get(&thread).map(|l| Arc::clone(&l))
                && parcels_open(lock(&log).records.iter())
            {
                busy.insert(thread);
            }
        }
        let finished = finished_trees(&rows, &busy);
        saved
            .iter()
            .filter(|t| finished.contains(&t.id))
            .filter_map(|t| {
                let log = self.logs.get(&t.id).map(|l| Arc::clone(&l))?;
                let log = lock(&log);
                let prefix: Vec<Record> = log
                    .records
                    .iter()
                    .take_while(|r| r.time_us < before_us)
                    .cloned()
                    .collect();
                (!prefix.is_empty()).then_some(prefix)
            })
            .collect()
    }

    /// The anchors of removing `doomed` (from [`Self::doomed`]) before `before_us` at
    /// `pruned_us`, chained after this store's last anchor, each thread checked against its
    /// chain first ([`anchor_chain`]).
    pub(crate) fn anchors_for(
        &self,
        doomed: &[Vec<Record>],
        before_us: i64,
        pruned_us: i64,
    ) -> Result<Vec<Anchor>, ChainBreak> {
        let last = super::lock_anchors(&self.anchors).last().cloned();
        let start = |thread| self.logs.get(&thread).and_then(|l| lock(&l).start);
        anchor_chain(doomed, last.as_ref(), start, before_us, pruned_us)
    }

    /// What a prune of `pruned` threads carries for every thread of their trees, parents
    /// before children (the order a restore needs).
    pub(crate) fn carried(&self, pruned: &[ThreadId]) -> Vec<Carried> {
        let saved = self.saved_in_order();
        let parents: HashMap<ThreadId, Option<ThreadId>> =
            saved.iter().map(|t| (t.id, t.parent)).collect();
        let roots: HashSet<ThreadId> = pruned.iter().map(|&t| root_of(&parents, t)).collect();
        saved
            .into_iter()
            .filter(|t| roots.contains(&root_of(&parents, t.id)))
            .map(|info| {
                let counters = self
                    .logs
                    .get(&info.id)
                    .map(|l| lock(&l).counters.clone())
                    .unwrap_or_default();
                let reports = self
                    .reports
                    .get(&info.id)
                    .map(|r| r.clone())
                    .unwrap_or_default();
                Carried {
                    info,
                    reports,
                    counters,
                }
            })
            .collect()
    }

    /// Removes what each of `anchors` says went (the thread's records up to its `last_seq`),
    /// checking the anchor first: it must follow the anchor chain, and, when every record it
    /// names is here, be exactly the anchor those records give. A replay of a stream whose
    /// pruned messages were deleted holds only some of them, or none: those it holds must lie
    /// in the anchor's range, and the thread then goes on from the anchor's digest. Then saves
    /// `carried` again, in its order, with its reports and counters.
    ///
    /// # Errors
    ///
    /// Names the first anchor that does not check (nothing after it is applied).
    pub(crate) fn remove(&self, anchors: &[Anchor], carried: &[Carried]) -> Result<(), String> {
        let mut kept = super::lock_anchors(&self.anchors);
        for anchor in anchors {
            let tip = kept.last().map_or([0; 32], |a| a.digest);
            let n = kept.len() as u64 + 1;
            let log = self.log(anchor.thread);
            let mut log = lock(&log);
            let removed: Vec<Record> = log
                .records
                .iter()
                .take_while(|r| r.seq <= anchor.last_seq)
                .cloned()
                .collect();
            let checks = if removed.len() as u64 == anchor.records {
                Anchor::new(n, &removed, anchor.before_us, anchor.pruned_us, &tip) == *anchor
            } else {
                let in_range = removed
                    .iter()
                    .all(|r| (anchor.first_seq..=anchor.last_seq).contains(&r.seq));
                let last_agrees = removed
                    .last()
                    .filter(|r| r.seq == anchor.last_seq)
                    .is_none_or(|r| r.digest == anchor.last_digest);
                anchor.n == n
                    && anchor.chained_digest(&tip) == anchor.digest
                    && (removed.len() as u64) < anchor.records
                    && in_range
                    && last_agrees
            };
            if !checks {
                return Err(format!(
                    "anchor {} (thread {}) is not what removing its {} records up to seq {} gives: the stream was altered",
                    anchor.n, anchor.thread, anchor.records, anchor.last_seq
                ));
            }
            log.drop_front(removed.len());
            log.start = Some(anchor.last_digest);
            if log.records.len() == 0 {
                // Every record of the thread went: the next one chains from the anchor.
                log.last_digest = anchor.last_digest;
                log.last_seq = log.last_seq.max(anchor.last_seq);
            }
            kept.push(anchor.clone());
        }
        drop(kept);
        for c in carried {
            let id = c.info.id;
            let order = self
                .saved
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.threads.insert(id, (order, c.info.clone()));
            self.reports.insert(id, c.reports.clone());
            if let Some(log) = self.logs.get(&id) {
                lock(&log).counters = c.counters.clone();
            }
        }
        Ok(())
    }
}
