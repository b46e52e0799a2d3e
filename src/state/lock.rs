//! The repair lock: `flock(2)` on `state_dir/repair.lock`. A repairing run holds it for
//! one probe -> decide -> act cycle, so concurrent guards (kubelet's `ExecStartPre=`, the
//! boot's unit, an operator's `--repair`) act one at a time on what they saw under it, and
//! the restart budget holds. The kernel drops the lock when the holder's file is closed,
//! also when it is killed: a crashed guard never leaves a stuck lock. The file is opened
//! close-on-exec, so a restart command the guard runs does not inherit it, and beneath
//! `state_dir`'s descriptor without following a link ([`super::file`]): a symlink, FIFO or
//! hard link in its place is refused, naming it.

use super::file::Dir;
use super::{Op, StateError};
use crate::backoff::Backoff;
use crate::progress::Progress;
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
#[derive(Debug, Clone, thiserror::Error)]
pub enum LockError {
    /// Another guard holds it; its pid when it wrote one.
    #[error("another guard{} is repairing", .0.as_ref().map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Busy(Option<String>),
    /// The lock file cannot be opened or locked (state_dir missing and not creatable,
    /// read-only, a link in its place).
    #[error("cannot take the repair lock: {0}")]
    Unavailable(#[from] StateError),
}

/// One non-blocking attempt in `state_dir` (opened and judged by the caller); the caller
/// retries within its own bound.
pub fn try_lock(dir: &Dir) -> Result<RepairLock, LockError> {
    let path = dir.path().join(LOCK_FILE);
    let file = dir
        .open_or_create(LOCK_FILE)
        .map_err(super::io(Op::Open, path.clone()))?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(mut lock) => {
            // Evidence for the waiters; the lock itself is the flock, not this text.
            let _ = lock.set_len(0);
            let _ = write!(lock, "{}", std::process::id());
            Ok(RepairLock { _lock: lock })
        }
        Err((file, nix::errno::Errno::EWOULDBLOCK)) => Err(LockError::Busy(holder(file))),
        Err((_, e)) => Err(super::io(Op::Lock, path)(e.into()).into()),
    }
}

/// What a guard waiting for the lock says (the progress line, also the phase-2 machine's).
pub const WAITING: &str = "waiting for the repair lock another guard holds";

/// Waits up to `bound` for the lock (for `guard reset`, which runs outside the phase-2
/// machine), saying so as every wait does ([`Progress`]). Sleeps with backoff; never
/// longer than the bound.
pub fn wait_for(dir: &super::StateDir, bound: Duration) -> Result<RepairLock, LockError> {
    let give_up = Instant::now() + bound;
    let mut pause = Backoff::new(Duration::from_millis(10), Duration::from_millis(100));
    let mut progress = Progress::default();
    loop {
        match dir.try_lock() {
            Err(LockError::Busy(_)) if Instant::now() < give_up => {
                let left = give_up.saturating_duration_since(Instant::now());
                progress.waiting(WAITING, left);
                progress.tick();
                std::thread::sleep(progress.quiet_for(pause.next()).min(left));
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
        match try_lock(&dir) {
            Err(LockError::Busy(pid)) => assert_eq!(pid, Some(me)),
            other => panic!("{:?}", other.err()),
        }
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
                let e = e.to_string();
                assert!(e.contains("repair.lock is a symbolic link"), "{e}")
            }
            other => panic!("{:?}", other.err()),
        }
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }
}
