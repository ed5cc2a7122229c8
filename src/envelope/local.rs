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
use std::sync::Arc;

/// This OS thread's copy of `name` (same text; a clone of a shared copy when the cache is in
/// use or `name` is long).
pub(crate) fn local(name: &Arc<str>) -> Arc<str> {
    if name.len() > Copies::MAX_BYTES {
        return Arc::clone(name);
    }
    let source = Arc::as_ptr(name).cast::<u8>() as usize;
    let copied = COPIES.try_with(|cell| {
        let Ok(mut copies) = cell.try_borrow_mut() else {
            return Arc::clone(name);
        };
        copies.get(source, name)
    });
    // Only while this OS thread is being torn down is there no cache.
    copied.unwrap_or_else(|_| Arc::clone(name))
}

/// The copies of one OS thread: each with the address of the name it was copied from (a quick
/// test; the text is compared too, since an address is reused once its name is freed).
#[derive(Default)]
struct Copies {
    names: Vec<(usize, Arc<str>)>,
    /// Where the next copy goes once `names` is full.
    next: usize,
}

impl Copies {
    /// At most this many copies per OS thread (round robin past it).
    const SIZE: usize = 32;
    /// Longer names are shared, not copied: at most `SIZE` × this many bytes per OS thread.
    const MAX_BYTES: usize = 256;

    fn get(&mut self, source: usize, name: &Arc<str>) -> Arc<str> {
        let found = self
            .names
            .iter()
            .find(|(from, copy)| *from == source && **copy == **name);
        if let Some((_, copy)) = found {
            return Arc::clone(copy);
        }
        let copy: Arc<str> = Arc::from(&**name);
        let entry = (source, Arc::clone(&copy));
        if self.names.len() < Self::SIZE {
            self.names.push(entry);
        } else {
            self.names[self.next] = entry;
            self.next = (self.next + 1) % Self::SIZE;
        }
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
        // More names than the cache holds: each comes back right, the cache stays bounded.
        let many: Vec<Arc<str>> = (0..Copies::SIZE * 3)
            .map(|i| Arc::from(format!("n{i}")))
            .collect();
        for n in &many {
            assert_eq!(local(n), *n);
        }
        COPIES.with(|c| assert_eq!(c.borrow().names.len(), Copies::SIZE));
        // A freed name's address reused by another text is not taken for the old one.
        let other: Arc<str> = Arc::from("new");
        let reused = Arc::as_ptr(&other).cast::<u8>() as usize;
        COPIES.with(|c| c.borrow_mut().names[0] = (reused, Arc::from("old")));
        assert_eq!(&*local(&other), "new");
        // A long name is shared as it is, never kept.
        let long: Arc<str> = Arc::from("u".repeat(Copies::MAX_BYTES + 1));
        assert!(Arc::ptr_eq(&local(&long), &long));
    }
}
