//! The repair lock: `flock(2)` on `state_dir/repair.lock`. A repairing run holds it for
//! one probe -> decide -> act cycle, so concurrent guards (kubelet's `ExecStartPre=`, the
//! boot's unit, an operator's `--repair`) act one at a time on what they saw under it, and
//! the restart budget holds. The kernel drops the lock when the holder's file is closed,
//! also when it is killed: a crashed guard never leaves a stuck lock. The file is opened
//! close-on-exec, so a restart command the guard runs does not inherit it.

use crate::backoff::Backoff;
use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

pub const LOCK_FILE: &str = "repair.lock";

/// Held while it lives.
pub struct RepairLock {
    _lock: Flock<File>,
}

/// Why the lock was not taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockError {
    /// Another guard holds it; its pid when it wrote one.
    Busy(Option<String>),
    /// The lock file cannot be opened (state_dir missing and not creatable, read-only).
    Unavailable(String),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Busy(Some(pid)) => write!(f, "another guard (pid {pid}) is repairing"),
            LockError::Busy(None) => write!(f, "another guard is repairing"),
            LockError::Unavailable(e) => write!(f, "cannot open the repair lock: {e}"),
        }
    }
}

/// One non-blocking attempt; the caller retries within its own bound.
pub fn try_lock(dir: &Path) -> Result<RepairLock, LockError> {
    let path = dir.join(LOCK_FILE);
    let unavailable = |e: std::io::Error| {
        let fix = super::fix_for(&e);
        LockError::Unavailable(format!("{}: {e}; {fix}", path.display()))
    };
    std::fs::create_dir_all(dir).map_err(unavailable)?;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(unavailable)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            // Evidence for the waiters; the lock itself is the flock, not this text.
            let _ = lock.set_len(0);
            let _ = write!(lock, "{}", std::process::id());
            Ok(RepairLock { _lock: lock })
        }
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Err(LockError::Busy(holder(&path))),
        Err((_, e)) => Err(LockError::Unavailable(format!("{}: {e}", path.display()))),
    }
}

/// Waits up to `bound` for the lock (for `guard reset`, which runs outside the phase-2
/// machine). Sleeps with backoff; never longer than the bound.
pub fn wait_for(dir: &super::StateDir, bound: Duration) -> Result<RepairLock, LockError> {
    let give_up = Instant::now() + bound;
    let mut pause = Backoff::new(Duration::from_millis(10), Duration::from_millis(100));
    loop {
        match dir.try_lock() {
            Err(LockError::Busy(_)) if Instant::now() < give_up => {
                std::thread::sleep(pause.next().min(give_up - Instant::now()));
            }
            other => return other,
        }
    }
}

fn holder(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let pid = text.trim();
    (!pid.is_empty()).then(|| pid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = try_lock(dir.path()).unwrap();
        let me = std::process::id().to_string();
        assert_eq!(try_lock(dir.path()).err(), Some(LockError::Busy(Some(me))));
        drop(first);
        assert!(try_lock(dir.path()).is_ok());
    }

    #[test]
    fn an_unwritable_place_is_reported_not_panicked() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-dir");
        std::fs::write(&file, b"").unwrap();
        match try_lock(&file) {
            Err(LockError::Unavailable(e)) => assert!(e.contains("not-a-dir"), "{e}"),
            other => panic!("{:?}", other.err()),
        }
    }
}
