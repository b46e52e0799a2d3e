//! `runtime.can-create`'s facts: a real pod sandbox made and removed through CRI, as
//! kubelet makes one (host network, so no CNI is needed), in the canary's own pod
//! namespace ([`NAMESPACE`]) and labelled with the guard's pid. Listing proves that
//! containerd answers; only creating proves that it can create (a full or read-only
//! volume, an immutable snapshot directory, a broken runtime binary all answer lists).
//!
//! Nothing is left behind: the canary is stopped and removed within `[canary] timeout`;
//! when that fails, a cleanup of 5 s more removes what this guard made; and a canary of
//! a guard that no longer runs (killed mid-canary) is removed by the next one. A canary
//! of another guard that still runs is left alone.

pub use crate::containerd::canary::NAMESPACE;
use crate::containerd::canary::{self, Canary};
use crate::containerd::client::{Conn, RpcErrorKind};
use crate::host::proc::{read_bounded, Links, COMM_CAP};
use crate::host::Host;
use std::time::{Duration, Instant};

/// The cleanup's own bound, after the canary's.
pub const CLEANUP: Duration = Duration::from_secs(5);
/// Leftover canaries removed per run at most (each costs a stop and a remove).
const SWEEP_MAX: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanaryFacts {
    pub outcome: CanaryOutcome,
    /// `[canary] timeout`.
    pub timeout: Duration,
    /// From RunPodSandbox to the end of RemovePodSandbox (or the failure).
    pub took: Duration,
    /// What the cleanups did: leftovers of guards no longer running, then this run's
    /// own canary when it was not removed in time.
    pub cleanup: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanaryOutcome {
    /// Made, stopped and removed within the bound.
    Created { id: String },
    /// Made, but not stopped and removed within the bound.
    NotRemoved { id: String, error: String },
    /// RunPodSandbox failed (CRI's own error) or did not answer in time.
    NotCreated { error: String, timed_out: bool },
}

/// `cgroup_parent`: as kubelet's cgroup driver names one (a slice under systemd's).
pub async fn gather(
    conn: &Conn,
    host: &Host,
    timeout: Duration,
    cgroup_parent: &str,
) -> CanaryFacts {
    let mut cleanup = sweep(conn, host).await;
    let started = Instant::now();
    let left = || timeout.saturating_sub(started.elapsed());
    let outcome = match canary::run(conn, timeout, &uid(), cgroup_parent).await {
        Ok(id) => match canary::remove(conn, left(), &id).await {
            Ok(()) => CanaryOutcome::Created { id },
            Err(e) => CanaryOutcome::NotRemoved {
                id,
                error: e.to_string(),
            },
        },
        // (past the bound containerd may answer first: `Cancelled`, `DeadlineExceeded`)
        Err(e) => CanaryOutcome::NotCreated {
            error: e.to_string(),
            timed_out: matches!(e.kind, RpcErrorKind::Timeout(_)) || started.elapsed() >= timeout,
        },
    };
    let took = started.elapsed();
    if !matches!(outcome, CanaryOutcome::Created { .. }) {
        // a sandbox half made, made after the deadline, or not removed: this guard's own
        let own = |c: &Canary| c.pid == Some(std::process::id());
        cleanup.extend(remove_where(conn, own, "this run's canary").await);
    }
    CanaryFacts {
        outcome,
        timeout,
        took,
        cleanup,
    }
}

/// A pod uid no other pod has: the guard's pid and the time.
fn uid() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{NAMESPACE}-{}-{nanos}", std::process::id())
}

/// Removes the canaries of guards that no longer run. This guard has made none yet, so a
/// canary with its pid is an earlier process's (pids are reused).
async fn sweep(conn: &Conn, host: &Host) -> Vec<String> {
    let mine = std::process::id();
    let orphaned = |c: &Canary| {
        c.pid
            .is_none_or(|pid| pid == mine || !guard_runs(host, pid))
    };
    remove_where(conn, orphaned, "left by a guard that no longer runs").await
}

/// Stops and removes each canary `which` picks, all within [`CLEANUP`]; one line each.
async fn remove_where(conn: &Conn, which: impl Fn(&Canary) -> bool, why: &str) -> Vec<String> {
    let deadline = Instant::now() + CLEANUP;
    let left = || deadline.saturating_duration_since(Instant::now());
    let found = match canary::list(conn, left()).await {
        Ok(all) => all,
        Err(e) => return vec![format!("cannot list canaries: {e}")],
    };
    let mut lines = Vec::new();
    for c in found.iter().filter(|c| which(c)).take(SWEEP_MAX) {
        lines.push(match canary::remove(conn, left(), &c.id).await {
            Ok(()) => format!("removed canary {} ({why})", c.id),
            Err(e) => format!("could not remove canary {} ({why}): {e}", c.id),
        });
    }
    lines
}

/// Whether `pid` is a running guard (its `comm`): another guard's canary in flight.
fn guard_runs(host: &Host, pid: u32) -> bool {
    let comm = read_bounded(&host.proc(format!("{pid}/comm")), COMM_CAP, Links::Refuse);
    comm.is_ok_and(|c| c.trim_ascii() == b"guard")
}
