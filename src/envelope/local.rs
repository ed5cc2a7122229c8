//! Names copied per OS thread, so that the reference counts raised on every delivery stay on
//! the cache lines of the worker doing the delivery.
//!
//! A listener's name is one `Arc<str>` that every thread delivering to it would clone and drop
//! per delivery (its envelopes' `from`, `to`, the context's `me`, the records). On a
//! multi-threaded runtime every such clone is an atomic write to one cache line that all
//! workers share, and the line bounces between cores on every delivery. [`local`] hands out
//! this OS thread's own copy instead: the same text, a count only this worker raises (a thread
//! moved to another worker touches its old copies until it makes new envelopes there).

use std::cell::RefCell;
use std::sync::{Arc, Weak};

/// This OS thread's copy of `name` (same text), or a clone of `name` itself when it is long or
/// this OS thread already keeps [`Copies::SIZE`] live names.
pub(crate) fn local(name: &Arc<str>) -> Arc<str> {
    if name.len() > Copies::MAX_BYTES {
        return Arc::clone(name);
    }
    let copied = COPIES.try_with(|cell| {
        let Ok(mut copies) = cell.try_borrow_mut() else {
            return Arc::clone(name);
        };
        copies.get(name)
    });
    // Only while this OS thread is being torn down is there no cache.
    copied.unwrap_or_else(|_| Arc::clone(name))
}

/// The copies of one OS thread, each beside a weak reference to the name it was copied from:
/// found by address (no reference count written), valid while that name lives — a name freed
/// (its pump gone) leaves an entry the next new name takes.
#[derive(Default)]
struct Copies {
    names: Vec<(Weak<str>, Arc<str>)>,
}

impl Copies {
    /// At most this many live names copied per OS thread; past it, names are shared as they
    /// are (as before copies: correct, only slower on many cores).
    const SIZE: usize = 64;
    /// Longer names are shared, not copied: at most `SIZE` × this many bytes per OS thread.
    const MAX_BYTES: usize = 256;

    fn get(&mut self, name: &Arc<str>) -> Arc<str> {
        let found = self
            .names
            .iter()
            .find(|(from, _)| std::ptr::addr_eq(from.as_ptr(), Arc::as_ptr(name)));
        if let Some((from, copy)) = found
            && from.strong_count() > 0
        {
            return Arc::clone(copy);
        }
        self.names.retain(|(from, _)| from.strong_count() > 0);
        if self.names.len() >= Self::SIZE {
            return Arc::clone(name);
        }
        let copy: Arc<str> = Arc::from(&**name);
        self.names.push((Arc::downgrade(name), Arc::clone(&copy)));
        copy
    }
}

thread_local! {
    static COPIES: RefCell<Copies> = RefCell::new(Copies::default());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_copied_once_per_os_thread_and_never_mixed_up() {
        let name: Arc<str> = Arc::from("counter");
        let a = local(&name);
        let b = local(&name);
        assert_eq!(&*a, "counter");
        assert!(!Arc::ptr_eq(&a, &name), "a copy of its own");
        assert!(Arc::ptr_eq(&a, &b), "the same copy on the same OS thread");
        let there = {
            let name = Arc::clone(&name);
            std::thread::spawn(move || local(&name)).join().unwrap()
        };
        assert_eq!(&*there, "counter");
        assert!(!Arc::ptr_eq(&there, &a), "another OS thread has its own");
        // A name freed and another made (perhaps at its address): the new text, never the old.
        drop(name);
        for i in 0..100 {
            let other: Arc<str> = Arc::from(format!("new-{i}"));
            assert_eq!(&*local(&other), format!("new-{i}"));
        }
        // More live names than the cache keeps: each comes back right, shared past the limit
        // (no copy made per call), and the cache stays bounded.
        let many: Vec<Arc<str>> = (0..Copies::SIZE * 2)
            .map(|i| Arc::from(format!("n{i}")))
            .collect();
        for n in &many {
            assert_eq!(local(n), *n);
        }
        let last = many.last().unwrap();
        assert!(Arc::ptr_eq(&local(last), last), "past the limit: shared");
        COPIES.with(|c| assert_eq!(c.borrow().names.len(), Copies::SIZE));
        // A long name is shared as it is, never kept.
        let long: Arc<str> = Arc::from("u".repeat(Copies::MAX_BYTES + 1));
        assert!(Arc::ptr_eq(&local(&long), &long));
    }
}
