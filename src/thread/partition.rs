//! [`Partition`]: which pump owns a thread when several pumps share one organism's threads.
//!
//! A thread's partition is a function of its id alone (its UUID's first eight bytes modulo the
//! partition count), so any host routes a request for a thread without asking anyone. A pump
//! holding a partition makes every new thread — a root, a fork, a spawned child — with an id in
//! that partition: a thread tree never spans partitions.

use std::fmt;

use crate::ThreadId;

/// One partition of `count`: the threads whose id falls in `index`.
///
/// # Example
///
/// ```
/// use agentpump::thread::Partition;
///
/// let second = Partition::new(1, 3).unwrap();
/// let thread = second.new_thread();
/// assert!(second.holds(thread));
/// assert_eq!(Partition::of(thread, 3), 1);
/// assert!(Partition::new(3, 3).is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Partition {
    index: u32,
    count: u32,
}

impl Partition {
    /// Partition `index` of `count` (`None` unless `index < count`).
    pub fn new(index: u32, count: u32) -> Option<Self> {
        (index < count).then_some(Self { index, count })
    }

    /// The partition of `thread` among `count` (0 when `count` is 0 or 1).
    pub fn of(thread: ThreadId, count: u32) -> u32 {
        if count <= 1 {
            return 0;
        }
        let bytes = thread.as_uuid().as_bytes();
        let mut head = [0; 8];
        head.copy_from_slice(&bytes[..8]);
        // Of a random (v4) id these bytes are random but for the version nibble (byte 6),
        // which is the same in every id and so shifts every id alike.
        (u64::from_be_bytes(head) % u64::from(count)) as u32
    }

    /// This partition's index.
    pub fn index(self) -> u32 {
        self.index
    }

    /// How many partitions there are.
    pub fn count(self) -> u32 {
        self.count
    }

    /// Whether `thread` is in this partition.
    pub fn holds(self, thread: ThreadId) -> bool {
        Self::of(thread, self.count) == self.index
    }

    /// A new random thread id in this partition (about `count` tries).
    pub fn new_thread(self) -> ThreadId {
        loop {
            let id = ThreadId::new();
            if self.holds(id) {
                return id;
            }
        }
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "partition {} of {}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_spread_over_every_partition_and_new_ones_land_in_theirs() {
        let mut seen = [0usize; 3];
        for _ in 0..3000 {
            seen[Partition::of(ThreadId::new(), 3) as usize] += 1;
        }
        assert!(seen.iter().all(|&n| n > 800), "{seen:?}");
        for index in 0..3 {
            let p = Partition::new(index, 3).unwrap();
            assert!((0..50).all(|_| Partition::of(p.new_thread(), 3) == index));
        }
        let one = Partition::new(0, 1).unwrap();
        assert!(one.holds(ThreadId::new()));
    }
}
