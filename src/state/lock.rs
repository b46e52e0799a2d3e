//! The repair lock: `flock(2)` on `state_dir/repair.lock`. A repairing run holds it for
//! one probe -> decide -> act cycle, so concurrent guards (kubelet's `ExecStartPre=`, the
//! boot's unit, an operator's `--repair`) act one at a time on what they saw under it, and
//! the restart budget holds. The kernel drops the lock when the holder's file is closed,
//! also when it is killed: a crashed guard never leaves a stuck lock. The file is opened
//! close-on-exec, so a restart command the guard runs does not inherit it, and beneath
//! `state_dir`'s descriptor without following a link ([`super::file`]): a symlink, FIFO or
//! hard link in its place is refused, naming it.

use super::file::Dir;
use crate::backoff::Backoff;
use nix::fcntl::{Flock, FlockArg};
use std::fs::File;
use std::io::{Read, Seek, Write};
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

/// One non-blocking attempt in `state_dir` (opened and judged by the caller); the caller
/// retries within its own bound.
pub fn try_lock(dir: &Dir) -> Result<RepairLock, LockError> {
    let path = dir.path().join(LOCK_FILE);
    let file = dir.open_or_create(LOCK_FILE).map_err(|e| {
        let fix = super::fix_for(&e);
        LockError::Unavailable(format!("{}: {e}; {fix}", path.display()))
    })?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            // Evidence for the waiters; the lock itself is the flock, not this text.
            let _ = lock.set_len(0);
            let _ = write!(lock, "{}", std::process::id());
            Ok(RepairLock { _lock: lock })
        }
        Err((file, nix::errno::Errno::EWOULDBLOCK)) => Err(LockError::Busy(holder(file))),
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

/// The pid the holder wrote, read from the descriptor already judged (a pid is a few
/// digits: at most 32 bytes are read).
fn holder(mut file: File) -> Option<String> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.take(32).read_to_string(&mut text).ok()?;
    let pid = text.trim();
    (!pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())).then(|| pid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_refused_until_the_first_is_dropped() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = Dir::open(tmp.path()).unwrap();
        let first = try_lock(&dir).unwrap();
        let me = std::process::id().to_string();
        assert_eq!(try_lock(&dir).err(), Some(LockError::Busy(Some(me))));
        drop(first);
        assert!(try_lock(&dir).is_ok());
    }

    #[test]
    fn a_link_in_the_lock_s_place_is_refused_naming_it_and_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        std::os::unix::fs::symlink(&victim, tmp.path().join(LOCK_FILE)).unwrap();
        match try_lock(&Dir::open(tmp.path()).unwrap()) {
            Err(LockError::Unavailable(e)) => {
                assert!(e.contains("repair.lock is a symbolic link"), "{e}")
            }
            other => panic!("{:?}", other.err()),
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }
}
