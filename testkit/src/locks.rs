//! The kernel's view of `flock(2)` locks (for the repair lock), and a process that is not
//! the test's child (e.g. a restart command orphaned by a killed guard) killed on drop.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// PIDs the kernel lists in `/proc/locks` as holding a `FLOCK` on `path` (granted locks
/// only, not waiters). For a flock the PID is the process that took it, even when the lock
/// lives on through a descriptor some other process inherited.
pub fn flock_holders(path: &Path) -> Vec<i32> {
    holders_of(path, &["FLOCK"])
}

/// PIDs `/proc/locks` lists as holding a lock of one of `kinds` (`FLOCK`, `POSIX`,
/// `OFDLCK`) on `path`, in the kernel's order; waiters are not holders.
pub fn holders_of(path: &Path, kinds: &[&str]) -> Vec<i32> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Vec::new();
    };
    let dev = meta.dev();
    // The kernel prints MAJOR:MINOR:INODE, major and minor in hex.
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let want = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    let text = std::fs::read_to_string("/proc/locks").unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            // "1: FLOCK  ADVISORY  WRITE 1234 fd:00:5678 0 EOF"; waiters have "->" after the
            // ordinal and are not holders.
            match f.as_slice() {
                [_, kind, _, _, pid, id, ..] if kinds.contains(kind) && *id == want => {
                    pid.parse().ok()
                }
                _ => None,
            }
        })
        .collect()
}

/// Whether this process can take an exclusive `flock` on `path` right now (non-blocking;
/// released at once). False while any other open file description holds it.
pub fn flock_is_free(path: &Path) -> bool {
    let Ok(file) = std::fs::OpenOptions::new().read(true).open(path) else {
        return true;
    };
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock).is_ok()
}

/// A process known by PID only (not our child), SIGKILLed on drop unless already gone.
/// Used for a restart command that outlives the guard that ran it.
#[derive(Debug)]
pub struct KillOnDrop {
    pub pid: i32,
}

impl KillOnDrop {
    pub fn alive(&self) -> bool {
        pid_alive(self.pid)
    }

    /// SIGKILL and wait (bounded) until it is gone or a zombie (its parent, init or a
    /// subreaper, reaps it).
    pub fn kill(&self) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.pid),
            nix::sys::signal::Signal::SIGKILL,
        );
        super::poll_until(
            &format!("pid {} to die after SIGKILL", self.pid),
            std::time::Duration::from_secs(10),
            || (!pid_alive(self.pid)).then_some(()),
        );
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // Runs while unwinding too: never panic here.
        if pid_alive(self.pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(self.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Alive and not a zombie.
pub fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next())
            .is_some_and(|state| state != "Z"),
        Err(_) => false,
    }
}
