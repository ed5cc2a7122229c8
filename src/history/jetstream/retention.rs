//! Retention on a stream: a prune is a message of its own (a *prune mark*: the anchors of what
//! went and, per thread of the pruned trees, what must outlive older messages), and a stream
//! message is deleted once nothing in it is still needed.
//!
//! A message is no longer needed once, for every thread it names (by a record, a delivery mark,
//! a snapshot or a halting report), a later prune mark carries that thread and the thread's
//! records it names are all pruned. Replaying the stream without it then rebuilds the same
//! index: its records are gone anyway, and the mark sets the thread's snapshot, reports and
//! counters to what they were when it was pruned. Prune marks are never deleted: their anchors
//! are what `verify` proves the remaining records from.

use std::collections::{BTreeMap, HashMap};

use async_nats::jetstream::stream;
use futures_util::StreamExt as _;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use super::Wire;
use crate::ThreadId;
use crate::history::Anchor;
use crate::history::prune::Carried;

/// A prune as the stream holds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct PruneMark {
    /// One anchor per thread that lost records, in chain order.
    pub anchors: Vec<Anchor>,
    /// Every thread of the pruned trees, parents first.
    pub carried: Vec<Carried>,
    /// The last record number handed out when the prune ran: a replay numbers on from there
    /// even when every record before it was deleted.
    pub numbered: u64,
}

/// Per thread a message names, the highest seq of that thread's records it names (0: only a
/// snapshot or a report).
pub(super) type Names = Vec<(ThreadId, u64)>;

/// What one append (one [`Wire`]) names; `marked` is the seq of the record its delivered mark
/// names, as the index found it.
pub(super) fn names(wire: &Wire, marked: Option<u64>) -> Names {
    let records = wire
        .records
        .iter()
        .zip(&wire.sealed)
        .map(|(r, (seq, _))| (r.thread, *seq));
    let mark = wire
        .delivered
        .as_ref()
        .map(|d| (d.thread, marked.unwrap_or(0)));
    let snapshots = wire.threads.iter().map(|t| (t.id, 0));
    let reports = wire.reports.iter().map(|r| (r.thread, 0));
    records
        .chain(mark)
        .chain(snapshots)
        .chain(reports)
        .collect()
}

/// What the stream's messages hold, for deciding which can go.
#[derive(Debug, Default)]
pub(super) struct Kept {
    /// Per stream message not yet deleted (by its last part's sequence): its parts' sequences
    /// and what it names, the highest seq per thread. Prune marks are not here: they stay.
    messages: BTreeMap<u64, (Vec<u64>, HashMap<ThreadId, u64>)>,
    /// Per pruned thread, the seq of its last pruned record.
    pruned: HashMap<ThreadId, u64>,
    /// Per carried thread, the stream sequence of the last prune mark that carried it.
    carried: HashMap<ThreadId, u64>,
}

impl Kept {
    /// Notes a stream message of appends (its parts' sequences, the last one last).
    pub fn message(&mut self, parts: Vec<u64>, names: impl IntoIterator<Item = (ThreadId, u64)>) {
        let Some(&last) = parts.last() else {
            return;
        };
        let mut highest: HashMap<ThreadId, u64> = HashMap::new();
        for (thread, seq) in names {
            let h = highest.entry(thread).or_default();
            *h = (*h).max(seq);
        }
        self.messages.insert(last, (parts, highest));
    }

    /// Notes a prune mark at stream sequence `at`; the sequences of every message before it
    /// that is no longer needed, taken off the list (to delete).
    pub fn marked(&mut self, at: u64, mark: &PruneMark) -> Vec<u64> {
        for anchor in &mark.anchors {
            self.pruned.insert(anchor.thread, anchor.last_seq);
        }
        for c in &mark.carried {
            self.carried.insert(c.info.id, at);
        }
        let gone: Vec<u64> = self
            .messages
            .range(..at)
            .filter(|&(&seq, (_, names))| {
                names.iter().all(|(thread, &highest)| {
                    self.carried.get(thread).is_some_and(|&c| c > seq)
                        && (highest == 0 || self.pruned.get(thread).is_some_and(|&p| p >= highest))
                })
            })
            .map(|(&seq, _)| seq)
            .collect();
        gone.into_iter()
            .filter_map(|seq| self.messages.remove(&seq))
            .flat_map(|(parts, _)| parts)
            .collect()
    }
}

/// How many deletions are asked of the stream at once.
const AT_ONCE: usize = 16;

/// Deletes the stream messages sent to it, a few at a time, off the writer's path. A deletion
/// that fails is logged and left: the message stays in the stream, and the next open finds it
/// unneeded again and deletes it then.
pub(super) fn start_deleting(stream: stream::Stream) -> mpsc::UnboundedSender<Vec<u64>> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u64>>();
    tokio::spawn(async move {
        while let Some(seqs) = rx.recv().await {
            let count = seqs.len();
            futures_util::stream::iter(seqs)
                .for_each_concurrent(AT_ONCE, |seq| {
                    let stream = stream.clone();
                    async move {
                        if let Err(e) = stream.delete_message(seq).await {
                            tracing::warn!(seq, error = %e, "a pruned message of the history stream was not deleted; the next open tries again");
                        }
                    }
                })
                .await;
            tracing::info!(
                messages = count,
                "deleted pruned messages of the history stream"
            );
        }
    });
    tx
}
