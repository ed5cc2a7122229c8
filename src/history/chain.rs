//! Verification of the per-thread hash chains.

use std::collections::HashMap;

use super::Record;
use crate::ThreadId;

/// The first record whose digest does not match its chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "hash chain of thread {thread} breaks at seq {seq}: expected digest {expected}, found {found}"
)]
pub struct ChainBreak {
    /// The thread.
    pub thread: ThreadId,
    /// The first record that does not verify.
    pub seq: u64,
    /// The digest recomputed from the record and its predecessor (hex).
    pub expected: String,
    /// The digest stored in the record (hex).
    pub found: String,
}

/// Verifies the chains of `records` (any number of threads, each thread's records in seq order).
/// Returns how many records were checked.
///
/// # Errors
///
/// The [`ChainBreak`] of the first record, in iteration order, that does not verify.
pub fn verify_chain<'a>(records: impl IntoIterator<Item = &'a Record>) -> Result<u64, ChainBreak> {
    verify_chain_from(records, HashMap::new())
}

/// As [`verify_chain`], each thread of `start` chaining from the digest given there (its prune
/// anchor) instead of 32 zero bytes.
pub(crate) fn verify_chain_from<'a>(
    records: impl IntoIterator<Item = &'a Record>,
    start: HashMap<ThreadId, [u8; 32]>,
) -> Result<u64, ChainBreak> {
    let mut last = start;
    let mut checked = 0;
    for record in records {
        let previous = last.entry(record.thread).or_insert([0; 32]);
        let expected = record.chained_digest(previous);
        if expected != record.digest {
            return Err(ChainBreak {
                thread: record.thread,
                seq: record.seq,
                expected: hex::encode(expected),
                found: hex::encode(record.digest),
            });
        }
        *previous = record.digest;
        checked += 1;
    }
    Ok(checked)
}
