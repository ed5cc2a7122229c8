//! [`Group`]: the process group one run of the command tool starts in. Whatever the program
//! starts (a shell's background jobs, a test runner's workers) is in it too, and the whole group
//! is killed when the run ends — at its time limit, when the program exits, when the call is
//! dropped (a cancelled delivery, a pump shutting down) and on [`kill_all`] — so nothing a call
//! started outlives it. A process that leaves the group itself (`setsid`) is out of reach.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

/// How long [`Group::kill_and_wait`] waits for the killed processes to be gone.
const GONE_WAIT: Duration = Duration::from_secs(5);
/// How often it looks.
const GONE_POLL: Duration = Duration::from_millis(10);

/// The process groups of every run under way in this process, by id.
static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

/// The process group of one run: its leader's pid. Killed (SIGKILL) when dropped.
#[derive(Debug)]
pub(super) struct Group {
    id: Option<i32>,
}

impl Group {
    /// The group led by `child`, started with `process_group(0)`; none when it already exited.
    pub(super) fn of(child: &tokio::process::Child) -> Self {
        let id = child.id().and_then(|pid| i32::try_from(pid).ok());
        if let Some(id) = id {
            live().insert(id);
        }
        Self { id }
    }

    /// Sends SIGKILL to every process of the group (none left is fine).
    pub(super) fn kill(&self) {
        if let Some(id) = self.id {
            kill(id);
        }
    }

    /// Kills the group and waits until none of its processes runs any more (dead, or a zombie
    /// its new parent has not reaped yet), for at most [`GONE_WAIT`]; returns whether they are
    /// gone. Reap the leader first: an unreaped leader is a zombie, which counts as gone here.
    pub(super) async fn kill_and_wait(&self) -> bool {
        let Some(id) = self.id else {
            return true;
        };
        kill(id);
        let deadline = tokio::time::Instant::now() + GONE_WAIT;
        while running(id) {
            if tokio::time::Instant::now() >= deadline {
                tracing::warn!(
                    group = id,
                    "processes of a killed command run are still running"
                );
                return false;
            }
            tokio::time::sleep(GONE_POLL).await;
        }
        true
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            kill(id);
            live().remove(&id);
        }
    }
}

/// Kills the process group of every command run under way in this process: a host shutting
/// down on a signal calls it, since its runs are not in the terminal's process group and would
/// not get the signal themselves. The runs end with their ordinary answers (a killed program).
pub fn kill_all() {
    let ids: Vec<i32> = live().iter().copied().collect();
    for id in ids {
        kill(id);
    }
}

fn live() -> std::sync::MutexGuard<'static, BTreeSet<i32>> {
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(unix)]
fn kill(id: i32) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    match killpg(Pid::from_raw(id), Signal::SIGKILL) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
        Err(e) => tracing::warn!(group = id, error = %e, "cannot kill a command's process group"),
    }
}

#[cfg(not(unix))]
fn kill(_id: i32) {}

/// Whether a process of group `id` still runs (a zombie does not: it runs no code).
#[cfg(target_os = "linux")]
fn running(id: i32) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return signalable(id);
    };
    entries
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| member_running(&stat, id))
}

/// Whether a `/proc/PID/stat` line is of a process in group `id` that is not a zombie: after
/// the command name in parentheses come the state, the parent and the group.
#[cfg(target_os = "linux")]
fn member_running(stat: &str, id: i32) -> bool {
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return false;
    };
    let mut fields = rest.split_whitespace();
    let state = fields.next().unwrap_or("Z");
    let group = fields.nth(1).and_then(|g| g.parse::<i32>().ok());
    group == Some(id) && !matches!(state, "Z" | "X" | "x")
}

#[cfg(not(target_os = "linux"))]
fn running(id: i32) -> bool {
    signalable(id)
}

/// Whether signal 0 reaches a process of group `id` (zombies included).
#[cfg(unix)]
fn signalable(id: i32) -> bool {
    nix::sys::signal::killpg(nix::unistd::Pid::from_raw(id), None).is_ok()
}

#[cfg(not(unix))]
fn signalable(_id: i32) -> bool {
    false
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn a_stat_line_is_read_after_the_name() {
        let line = "42 (a (weird) name) S 1 77 77 0 -1";
        assert!(super::member_running(line, 77));
        assert!(!super::member_running(line, 42));
        assert!(!super::member_running("43 (sh) Z 1 77 77 0", 77));
    }
}
