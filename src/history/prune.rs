//! Retention: what [`HistoryStore::prune`](super::HistoryStore::prune) removes and the
//! [`Anchor`] it leaves per thread, so that `verify` still proves what remains.
//!
//! A prune removes, per finished thread (its whole tree done or halted, nothing pending), the
//! records older than a cut: always a prefix of the thread's chain. It leaves an [`Anchor`]:
//! the digest of the last removed record, from which the remaining records still chain, and a
//! summary of what went (count, seq range, time range, the cut). Anchors form a chain of their
//! own, `digest = sha256(previous anchor's digest ‖ canonical bytes)`, so a forged or edited
//! anchor breaks it just as an edited record breaks its thread's chain.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::Record;
use crate::ThreadId;

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
}
