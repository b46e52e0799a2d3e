//! Where a command's time goes (docs/performance.md, "Profiling a look").
//!
//! - Spans: each costly step runs in a `tracing` span (`debug_span!`); with `-v` the log
//!   prints every span as it closes with its time (`time.busy`, `time.idle`). Without
//!   `-v` the spans are disabled and cost a branch.
//! - [`cri_answered`]: when containerd's CRI first answered `Status` in this process
//!   (CLOCK_MONOTONIC, the clock systemd stamps units with). `guard runtime` logs it, so
//!   that an operator reading a slow boot's journal tells the wait for containerd from
//!   the gate's own work (docs/fleet.md, "The journal"). It is set once, deep inside the
//!   CRI facts, and read once, at the end of `guard runtime`: a write-once cell, not a
//!   field threaded through every family's facts for one log line.

use std::sync::OnceLock;
use std::time::Duration;

static CRI_ANSWERED: OnceLock<Duration> = OnceLock::new();

/// CLOCK_MONOTONIC now.
pub fn monotonic() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
        .unwrap_or_default()
}

/// Records the first CRI `Status` answer of this process (later ones are ignored).
pub fn mark_cri_answered() {
    let _ = CRI_ANSWERED.set(monotonic());
}

/// The first CRI `Status` answer of this process, CLOCK_MONOTONIC.
pub fn cri_answered() -> Option<Duration> {
    CRI_ANSWERED.get().copied()
}
