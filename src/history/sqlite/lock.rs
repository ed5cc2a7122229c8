//! One writing store per history file: an exclusive advisory lock (`flock`) on the file, held
//! from the open until the store closes. A second store on the same file — in another
//! process, or a second `SqliteHistory::open` in this one — is refused at its open instead of
//! forking the hash chains (two writers each continue a thread from the digest they read).
//! Read-only opens take no lock: inspection reads a file a running pump writes. The kernel
//! drops the lock when the process dies, so a crash leaves nothing to clean up.

use std::fs::File;
use std::path::Path;

use super::HistoryError;

/// The held lock; dropping it lets the next store open the file.
#[derive(Debug)]
pub(crate) struct WriterLock {
    #[cfg(unix)]
    _held: nix::fcntl::Flock<File>,
}

impl WriterLock {
    /// Locks `path` (which exists) for this store alone.
    ///
    /// # Errors
    ///
    /// [`HistoryError::Unavailable`] naming the file when another store holds it, or it cannot
    /// be opened to lock.
    pub(crate) fn acquire(path: &Path) -> Result<Self, HistoryError> {
        let file = File::open(path)
            .map_err(|e| HistoryError::unavailable(format!("{}: {e}", path.display())))?;
        Self::lock(path, file)
    }

    #[cfg(unix)]
    fn lock(path: &Path, file: File) -> Result<Self, HistoryError> {
        use nix::fcntl::{Flock, FlockArg};
        match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(held) => Ok(Self { _held: held }),
            Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(HistoryError::unavailable(format!(
                "{}: already open for writing by another history store (another agentpump \
                 process, or a second store in this one); one store writes a file, and the \
                 inspection commands read it meanwhile",
                path.display()
            ))),
            Err((_, e)) => Err(HistoryError::unavailable(format!(
                "{}: cannot lock for writing: {e}",
                path.display()
            ))),
        }
    }

    #[cfg(not(unix))]
    fn lock(_: &Path, _: File) -> Result<Self, HistoryError> {
        Ok(Self {})
    }
}
