//! Retention: what [`HistoryStore::prune`](super::HistoryStore::prune) removes and the
//! [`Anchor`] it leaves per thread, so that `verify` still proves what remains.
//!
//! A prune removes, per finished thread (its whole tree done or halted, nothing pending), the
//! records older than a cut: always a prefix of the thread's chain. It leaves an [`Anchor`]:
//! the digest of the last removed record, from which the remaining records still chain, and a
//! summary of what went (count, seq range, time range, the cut). Anchors form a chain of their
//! own, `digest = sha256(previous anchor's digest ‖ canonical bytes)`, so a forged or edited
//! anchor breaks it just as an edited record breaks its thread's chain.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::Hash;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::chain::verify_chain_from;
use super::{ChainBreak, Record};
use crate::ThreadId;
#[cfg(feature = "nats")]
use {
    super::RecordKind,
    crate::governor::{Decision, HaltingReport},
    crate::{Counters, ThreadInfo},
};

/// What one prune removed from one thread, and where the thread's chain now starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    /// The anchor's place in the anchor chain, from 1.
    pub n: u64,
    /// The pruned thread.
    pub thread: ThreadId,
    /// How many records were removed.
    pub records: u64,
    /// The seq of the first record removed.
    pub first_seq: u64,
    /// The seq of the last record removed.
    pub last_seq: u64,
    /// When the first removed record was accepted, microseconds since the Unix epoch.
    pub first_time_us: i64,
    /// When the last removed record was accepted.
    pub last_time_us: i64,
    /// The cut: records accepted before this time were eligible.
    pub before_us: i64,
    /// When the prune ran.
    pub pruned_us: i64,
    /// The digest of the last removed record: the thread's remaining records chain from it.
    #[serde(with = "hex::serde")]
    pub last_digest: [u8; 32],
    /// `sha256(previous anchor's digest ‖ canonical bytes of this anchor)`.
    #[serde(with = "hex::serde")]
    pub digest: [u8; 32],
}

impl Anchor {
    /// The summary of removing `removed` (a non-empty prefix of one thread's chain, in seq
    /// order) before `before_us` at `pruned_us`, as anchor `n` chained from `previous`.
    pub(crate) fn new(
        n: u64,
        removed: &[Record],
        before_us: i64,
        pruned_us: i64,
        previous: &[u8; 32],
    ) -> Self {
        let (first, last) = (&removed[0], &removed[removed.len() - 1]);
        let mut anchor = Self {
            n,
            thread: first.thread,
            records: removed.len() as u64,
            first_seq: first.seq,
            last_seq: last.seq,
            first_time_us: first.time_us,
            last_time_us: last.time_us,
            before_us,
            pruned_us,
            last_digest: last.digest,
            digest: [0; 32],
        };
        anchor.digest = anchor.chained_digest(previous);
        anchor
    }

    /// The digest this anchor must have when the previous anchor's digest is `previous`.
    ///
    /// The canonical bytes are the fields in declaration order (`n` … `last_digest` in lower
    /// case hex), each written as its byte length, `:`, the bytes, and `\n`, as for records.
    pub fn chained_digest(&self, previous: &[u8; 32]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(previous);
        let fields = [
            self.n.to_string(),
            self.thread.to_string(),
            self.records.to_string(),
            self.first_seq.to_string(),
            self.last_seq.to_string(),
            self.first_time_us.to_string(),
            self.last_time_us.to_string(),
            self.before_us.to_string(),
            self.pruned_us.to_string(),
            hex::encode(self.last_digest),
        ];
        for f in fields {
            h.update(format!("{}:{f}\n", f.len()));
        }
        h.finalize().into()
    }
}

/// An anchor whose digest does not match the anchor chain: an anchor was edited, forged,
/// removed from the middle or reordered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "anchor chain breaks at anchor {n} (thread {thread}): expected digest {expected}, found {found}"
)]
pub struct AnchorBreak {
    /// The first anchor that does not verify.
    pub n: u64,
    /// Its thread.
    pub thread: ThreadId,
    /// The digest recomputed from the anchor and its predecessor (hex).
    pub expected: String,
    /// The digest stored in the anchor (hex).
    pub found: String,
}

/// Verifies the anchor chain (anchors in `n` order). Returns how many were checked.
///
/// # Errors
///
/// The [`AnchorBreak`] of the first anchor that does not verify.
pub fn verify_anchors<'a>(
    anchors: impl IntoIterator<Item = &'a Anchor>,
) -> Result<u64, AnchorBreak> {
    let mut previous = [0u8; 32];
    let mut checked = 0;
    for (i, a) in anchors.into_iter().enumerate() {
        let expected = a.chained_digest(&previous);
        if expected != a.digest || a.n != i as u64 + 1 {
            return Err(AnchorBreak {
                n: a.n,
                thread: a.thread,
                expected: hex::encode(expected),
                found: hex::encode(a.digest),
            });
        }
        previous = a.digest;
        checked += 1;
    }
    Ok(checked)
}

/// Where the records a prune removes go first: written one by one inside the prune's
/// transaction, and finished before it commits. A failed write or finish rolls the prune back,
/// so nothing is removed that the archive does not hold.
pub trait Archive: Send + fmt::Debug {
    /// Keeps one record that is about to be removed.
    ///
    /// # Errors
    ///
    /// The archive cannot be written; the prune is rolled back.
    fn write(&mut self, record: &Record) -> std::io::Result<()>;

    /// Makes everything written durable (flush, compression trailer, fsync).
    ///
    /// # Errors
    ///
    /// The archive cannot be completed; the prune is rolled back.
    fn finish(self: Box<Self>) -> std::io::Result<()>;
}

/// What a prune did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pruned {
    /// The cut, microseconds since the Unix epoch.
    pub before_us: i64,
    /// How many records were removed, over all threads.
    pub records: u64,
    /// One anchor per thread that lost records (none when there was nothing to remove).
    pub anchors: Vec<Anchor>,
    /// Through a front of a partitioned organism: how many partitions were pruned, each with
    /// its own record numbering and anchor chain (their anchors are listed one partition after
    /// another). 0 (and left out) for one store.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub partitions: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The anchors of removing `doomed` (per thread, a non-empty prefix of its chain, in seq
/// order) before `before_us` at `pruned_us`, chained after `after` (the store's last anchor);
/// each thread's records are first checked against its chain, from `start` (its last anchor's
/// digest) when it was pruned before, so a prune never hides a break.
///
/// # Errors
///
/// The [`ChainBreak`] of the first record that does not verify.
pub(crate) fn anchor_chain(
    doomed: &[Vec<Record>],
    after: Option<&Anchor>,
    start: impl Fn(ThreadId) -> Option<[u8; 32]>,
    before_us: i64,
    pruned_us: i64,
) -> Result<Vec<Anchor>, ChainBreak> {
    let mut tip = after.map_or([0; 32], |a| a.digest);
    let mut n = after.map_or(0, |a| a.n);
    let mut out = Vec::with_capacity(doomed.len());
    for removed in doomed {
        let thread = removed[0].thread;
        verify_chain_from(
            removed,
            start(thread).map(|d| (thread, d)).into_iter().collect(),
        )?;
        n += 1;
        let anchor = Anchor::new(n, removed, before_us, pruned_us, &tip);
        tip = anchor.digest;
        out.push(anchor);
    }
    Ok(out)
}

/// Writes every record of `doomed` to `archive` and finishes it: what a prune removes, kept
/// before it goes.
///
/// # Errors
///
/// The archive cannot be written or finished: the prune removes nothing.
pub(crate) fn archive_all(
    mut archive: Box<dyn Archive>,
    doomed: &[Vec<Record>],
) -> std::io::Result<()> {
    for record in doomed.iter().flatten() {
        archive.write(record)?;
    }
    archive.finish()
}

/// Of `threads` (each with its parent and whether it is done or halted), those whose whole
/// tree — the root and every thread below it — is closed with none of its threads in `busy`:
/// the only threads a prune touches.
pub(crate) fn finished_trees<K: Copy + Eq + Hash>(
    threads: &[(K, Option<K>, bool)],
    busy: &HashSet<K>,
) -> HashSet<K> {
    let parents: HashMap<K, Option<K>> = threads.iter().map(|&(id, p, _)| (id, p)).collect();
    let open: HashSet<K> = threads
        .iter()
        .filter(|&&(id, _, closed)| !closed || busy.contains(&id))
        .map(|&(id, _, _)| root_of(&parents, id))
        .collect();
    threads
        .iter()
        .map(|&(id, _, _)| id)
        .filter(|&id| !open.contains(&root_of(&parents, id)))
        .collect()
}

/// The root of `id`'s tree, following parent links.
pub(crate) fn root_of<K: Copy + Eq + Hash>(parents: &HashMap<K, Option<K>>, mut id: K) -> K {
    // Bounded by the number of threads, so a (corrupt) cycle cannot loop forever.
    for _ in 0..=parents.len() {
        match parents.get(&id).copied().flatten() {
            Some(parent) if parents.contains_key(&parent) => id = parent,
            _ => break,
        }
    }
    id
}

/// Whether a thread's records leave a parcel to another pump open (`docs/history.md`,
/// "Children on other pumps"): a child sent and not returned, or a result recorded and not
/// delivered. Such a thread's tree is not finished: its pump sends those parcels again at a
/// restart, from these very records.
#[cfg(feature = "nats")]
pub(crate) fn parcels_open<'a>(records: impl IntoIterator<Item = &'a Record>) -> bool {
    /// The part of a parcel's JSON that says what it is.
    #[derive(Deserialize)]
    struct Kind {
        kind: String,
        child: ThreadId,
    }
    let (mut children, mut result) = (HashSet::new(), false);
    for record in records {
        if record.kind != RecordKind::Decision {
            continue;
        }
        match Decision::parse(&record.payload) {
            Some(Decision::Parcel { sent: true, json }) => {
                match serde_json::from_str::<Kind>(&json) {
                    Ok(k) if k.kind == "adopt" => {
                        children.insert(k.child);
                    }
                    Ok(k) if k.kind == "result" => result = true,
                    _ => {}
                }
            }
            Some(Decision::Returned { thread, .. }) => {
                children.remove(&thread);
            }
            Some(Decision::Delivered { .. }) => result = false,
            _ => {}
        }
    }
    result || !children.is_empty()
}

/// What a history that drops whole stored messages carries past a prune for each thread of a
/// pruned tree: the thread's latest snapshot, its halting reports and what it has used, so
/// that older messages naming it can go (see `docs/history.md`, "Retention on a stream").
#[cfg(feature = "nats")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Carried {
    /// The thread's latest snapshot.
    pub info: ThreadInfo,
    /// Every halting report of the thread, in order.
    pub reports: Vec<HaltingReport>,
    /// What the thread's deliveries used, summed (a prune keeps it: what was used was used).
    pub counters: Counters,
}

#[cfg(all(test, feature = "nats"))]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::governor::Budget;
    use crate::history::NewRecord;
    use crate::{Envelope, Limits, Payload};

    fn decided(thread: ThreadId, decision: &Decision) -> Record {
        let payload = Payload::parse(&decision.to_xml(), &Limits::default()).unwrap();
        let new = NewRecord {
            envelope: Envelope::new(Arc::from("governor"), thread, payload),
            kind: RecordKind::Decision,
            pending: false,
        };
        Record::from_new(&new, 1, 0)
    }

    fn parcel(kind: &str, child: ThreadId) -> Decision {
        Decision::Parcel {
            sent: true,
            json: format!(r#"{{"kind":"{kind}","child":"{child}"}}"#),
        }
    }

    #[test]
    fn a_parcel_is_open_until_its_answer_is_recorded() {
        let (me, child) = (ThreadId::new(), ThreadId::new());
        let sent = decided(me, &parcel("adopt", child));
        let back = decided(
            me,
            &Decision::Returned {
                thread: child,
                spent: Budget::default(),
            },
        );
        assert!(parcels_open([&sent]));
        assert!(!parcels_open([&sent, &back]));
        let result = decided(me, &parcel("result", me));
        let delivered = decided(me, &Decision::Delivered { thread: me });
        assert!(parcels_open([&result]));
        assert!(!parcels_open([&result, &delivered]));
        // A stop asks nothing back; a received parcel is the other side's.
        assert!(!parcels_open([&decided(me, &parcel("stop", child))]));
        let received = Decision::Parcel {
            sent: false,
            json: format!(r#"{{"kind":"adopt","child":"{me}"}}"#),
        };
        assert!(!parcels_open([&decided(me, &received)]));
    }

    #[test]
    fn a_tree_is_finished_only_when_every_thread_in_it_is_closed_and_idle() {
        // 1 ← 2 ← 3 (3 still running); 4 ← 5 (5 closed but busy); 6 ← 7 closed and quiet.
        let rows = [
            (1, None, true),
            (2, Some(1), true),
            (3, Some(2), false),
            (4, None, true),
            (5, Some(4), true),
            (6, None, true),
            (7, Some(6), true),
            // A parent the store does not know: its own root.
            (8, Some(99), true),
        ];
        let busy = HashSet::from([5]);
        let mut finished: Vec<i32> = finished_trees(&rows, &busy).into_iter().collect();
        finished.sort_unstable();
        assert_eq!(finished, [6, 7, 8]);
    }
}
