//! Sequence numbers handed to each OS thread in blocks: a record takes the next number of its
//! OS thread's block, and only a new block writes the store's shared counter. A thread whose
//! last record already has a higher number (it ran on another OS thread since) takes a new
//! block, so numbers still rise within every thread. A block left behind while other OS
//! threads moved the counter on by more than a block is given up (the counter is read, not
//! written, to see it), so a record's number is never more than two blocks below the highest
//! number handed out when it was accepted: across threads, numbers follow acceptance within
//! [`BLOCK`] × 2.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many numbers an OS thread takes from a store at once.
pub(super) const BLOCK: u64 = 64;

/// The next number above `after` for store `store`, whose counter (the last number handed out
/// in any block) is `counter`.
pub(super) fn next(store: u64, after: u64, counter: &AtomicU64) -> u64 {
    let taken = BLOCKS.try_with(|cell| {
        let Ok(mut blocks) = cell.try_borrow_mut() else {
            return None;
        };
        Some(blocks.next(store, after, counter))
    });
    // Only while this OS thread is being torn down (or re-entered) is there no block: one
    // number straight from the counter, above every number handed out.
    taken
        .ok()
        .flatten()
        .unwrap_or_else(|| counter.fetch_add(1, Ordering::Relaxed) + 1)
}

/// One OS thread's blocks: the store, the next number and the end of its block (exclusive).
#[derive(Default)]
struct Blocks {
    held: Vec<(u64, u64, u64)>,
    /// Which block to give up next once `held` is full.
    next: usize,
}

impl Blocks {
    /// Blocks of at most this many stores per OS thread (round robin past it: a block given
    /// up only leaves a gap in the numbers).
    const STORES: usize = 8;

    fn next(&mut self, store: u64, after: u64, counter: &AtomicU64) -> u64 {
        let at = match self.held.iter().position(|&(s, _, _)| s == store) {
            Some(at) => at,
            None if self.held.len() < Self::STORES => {
                self.held.push((store, 0, 0));
                self.held.len() - 1
            }
            None => {
                let at = self.next;
                self.next = (at + 1) % Self::STORES;
                self.held[at] = (store, 0, 0);
                at
            }
        };
        let (_, next, end) = &mut self.held[at];
        let stale = || counter.load(Ordering::Relaxed) > *end + BLOCK;
        if *next >= *end || *next <= after || stale() {
            // The counter is above every number handed out, so above `after` too.
            *next = counter.fetch_add(BLOCK, Ordering::Relaxed) + 1;
            *end = *next + BLOCK;
        }
        let seq = *next;
        *next += 1;
        seq
    }
}

thread_local! {
    static BLOCKS: RefCell<Blocks> = RefCell::new(Blocks::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_unique_and_rise_within_a_thread_across_os_threads() {
        let counter = AtomicU64::new(0);
        // On one OS thread: 1, 2, 3 … exactly, as a current-thread runtime numbers them.
        let here: Vec<u64> = (0..100).map(|i| next(9_000, i, &counter)).collect();
        assert_eq!(here, (1..=100).collect::<Vec<_>>());
        // Another OS thread takes a block of its own, above everything handed out.
        let there = std::thread::scope(|s| s.spawn(|| next(9_000, 0, &counter)).join().unwrap());
        assert_eq!(there, 129, "the block after this OS thread's two");
        // A thread whose last record came from that block moves back here: it does not get a
        // lower number from the old block, but a new block above it.
        let back = next(9_000, there, &counter);
        assert!(back > there, "{back} after {there}");
        // A block left behind while others moved the counter far on is given up: an old
        // block's numbers never land far below the newest ones.
        let kept = next(9_000, back, &counter);
        assert_eq!(kept, back + 1, "a fresh block is used on");
        counter.fetch_add(10 * BLOCK, Ordering::Relaxed); // other OS threads' blocks
        let later = next(9_000, 0, &counter);
        assert!(
            later + 2 * BLOCK > counter.load(Ordering::Relaxed),
            "{later} is within two blocks of the newest"
        );
        // Another store's numbers are its own.
        let other = AtomicU64::new(0);
        assert_eq!(next(9_001, 0, &other), 1);
    }
}
