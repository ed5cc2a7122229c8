//! Retention on a stream: a prune is a message of its own (a *prune mark*: the anchors of what
//! went, per thread of the pruned trees what must outlive older messages, and the stream
//! messages it leaves unneeded), and those messages are deleted once the mark is acknowledged.
//!
//! A message is no longer needed once, for every thread it names (by a record, a delivery mark,
//! a snapshot or a halting report), a mark after it carries that thread and the thread's
//! records it names are all pruned. Replaying the stream without it then rebuilds the same
//! index: its records are gone anyway, and the mark sets the thread's snapshot, reports and
//! counters to what they were when it was pruned. Prune marks are never deleted: their anchors
//! are what `verify` proves the remaining records from, and the sequences they list are the
//! only gaps a replay accepts.

use std::collections::{BTreeMap, HashMap, HashSet};

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
    /// The stream sequences (every part) of the messages this mark leaves unneeded, deleted
    /// once it is acknowledged: the gaps a replay accepts.
    #[serde(default)]
    pub deleted: Vec<u64>,
}

/// Per thread a message names, the highest seq of that thread's records it names (0: only a
/// snapshot or a report).
pub(super) type Names = [(ThreadId, u64)];

/// What one append (one [`Wire`]) names (its delivered mark by the seq of the record it names,
/// as the index found it: 0 when not known yet).
pub(super) fn names(wire: &Wire) -> Vec<(ThreadId, u64)> {
    let records = wire
        .records
        .iter()
        .zip(&wire.sealed)
        .map(|(r, (seq, _))| (r.thread, *seq));
    let mark = wire
        .delivered
        .as_ref()
        .map(|d| (d.thread, wire.marked.unwrap_or(0)));
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
    /// and what it names, the highest seq per thread (by thread). Prune marks are not here:
    /// they stay.
    messages: BTreeMap<u64, (Vec<u64>, Box<Names>)>,
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
        // One entry per thread, its highest seq (sorted by thread, then seq: the last wins).
        let mut highest: Vec<(ThreadId, u64)> = names.into_iter().collect();
        highest.sort_unstable();
        highest.reverse();
        highest.dedup_by_key(|(thread, _)| *thread);
        self.messages
            .insert(last, (parts, highest.into_boxed_slice()));
    }

    /// The sequences (every part, in order) of the messages `mark` leaves unneeded, were it
    /// appended next, after every message noted so far.
    pub fn unneeded(&self, mark: &PruneMark) -> Vec<u64> {
        let pruned: HashMap<ThreadId, u64> = mark
            .anchors
            .iter()
            .map(|a| (a.thread, a.last_seq))
            .collect();
        let carried: HashSet<ThreadId> = mark.carried.iter().map(|c| c.info.id).collect();
        let gone = |seq: u64, thread: &ThreadId, highest: u64| {
            let carried_after =
                carried.contains(thread) || self.carried.get(thread).is_some_and(|&c| c > seq);
            let pruned_to = pruned.get(thread).or_else(|| self.pruned.get(thread));
            carried_after && (highest == 0 || pruned_to.is_some_and(|&p| p >= highest))
        };
        self.messages
            .iter()
            .filter(|&(&seq, (_, names))| names.iter().all(|&(t, h)| gone(seq, &t, h)))
            .flat_map(|(_, (parts, _))| parts.iter().copied())
            .collect()
    }

    /// Notes `mark`, placed at stream sequence `at`: what it pruned and carried; the messages
    /// it lists as unneeded are taken off the list.
    pub fn placed(&mut self, at: u64, mark: &PruneMark) {
        for anchor in &mark.anchors {
            self.pruned.insert(anchor.thread, anchor.last_seq);
        }
        for c in &mark.carried {
            self.carried.insert(c.info.id, at);
        }
        let gone: HashSet<u64> = mark.deleted.iter().copied().collect();
        self.messages
            .retain(|_, (parts, _)| !parts.iter().any(|p| gone.contains(p)));
    }
}

/// How many deletions are asked of the stream at once.
const AT_ONCE: usize = 16;

/// Tries per deletion before it is left for the next open.
const TRIES: u32 = 3;

/// Deletes the stream messages sent to it (by sequence), a few at a time, off the writer's
/// path, each tried again a little later when it fails. A deletion that still fails is logged
/// and left: the message stays (its mark lists it), and the next open deletes it. A message in
/// parts may be left in part; a replay drops such a fragment, since its mark lists every part.
pub(super) fn start_deleting(stream: stream::Stream) -> mpsc::UnboundedSender<Vec<u64>> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u64>>();
    tokio::spawn(async move {
        while let Some(seqs) = rx.recv().await {
            let asked = seqs.len();
            let deleted = futures_util::stream::iter(seqs)
                .map(|seq| delete(&stream, seq))
                .buffer_unordered(AT_ONCE)
                .filter(|done| std::future::ready(*done))
                .count()
                .await;
            tracing::info!(
                deleted,
                asked,
                "deleted pruned messages of the history stream"
            );
        }
    });
    tx
}

/// Deletes message `seq`; whether it is gone (deleted now, or already).
async fn delete(stream: &stream::Stream, seq: u64) -> bool {
    let mut pause = std::time::Duration::from_millis(100);
    for attempt in 1..=TRIES {
        match stream.delete_message(seq).await {
            Ok(_) => return true,
            // JetStream's 10037, no message found: it is gone already.
            Err(e) if matches!(e.kind(), stream::DeleteMessageErrorKind::JetStream(j) if j.error_code().0 == 10037) =>
            {
                return true;
            }
            Err(e) if attempt == TRIES => {
                tracing::warn!(seq, error = %e, "a pruned message of the history stream was not deleted; the next open tries again");
            }
            Err(_) => {
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
        }
    }
    false
}
