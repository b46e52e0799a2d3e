//! One process for good: its pid and its start time (`/proc/PID/stat` field 22), read from
//! /proc. "The same containerd still runs" compares these, never a pid the harness keeps
//! (a killed child keeps its pid as a zombie until reaped; a restart program rewrites its
//! pid file only when it runs; a new process may get the old pid).

use containerd_guard::host::proc::parse_stat;

/// A process as it ran when it was looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub pid: i32,
    pub start_ticks: u64,
}

/// `(state, start_ticks)` of `pid` now; `None` when there is no such process.
fn state_and_start(pid: i32) -> Option<(char, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let state = stat[stat.rfind(')')? + 1..].trim_start().chars().next()?;
    let (_, start) = parse_stat(&stat)?;
    Some((state, start))
}

impl Identity {
    /// The process that runs as `pid` now. Panics when none does: the test's setup is wrong.
    pub fn of(pid: i32) -> Identity {
        match state_and_start(pid) {
            Some((state, start_ticks)) if !matches!(state, 'Z' | 'X') => {
                Identity { pid, start_ticks }
            }
            other => panic!("no running process {pid} to identify (state, start: {other:?})"),
        }
    }

    /// Whether this very process still runs: the pid is there with the same start time and
    /// is not a zombie.
    pub fn still_runs(&self) -> bool {
        self.runs_in(state_and_start(self.pid))
    }

    /// Panics unless this very process still runs, naming it `what`.
    pub fn assert_still_runs(&self, what: &str) {
        let now = state_and_start(self.pid);
        assert!(
            self.runs_in(now),
            "{what}: process {} (start {}) no longer runs; /proc says {now:?}",
            self.pid,
            self.start_ticks
        );
    }

    /// Whether `now` (this pid's state and start time) is this process, running.
    fn runs_in(&self, now: Option<(char, u64)>) -> bool {
        matches!(now, Some((state, start)) if start == self.start_ticks && !matches!(state, 'Z' | 'X'))
    }
}
