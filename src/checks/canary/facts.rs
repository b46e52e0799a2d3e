//! `runtime.can-create`'s facts: a real pod sandbox made and removed through CRI, as
//! kubelet makes one (host network, so no CNI is needed), in the canary's own pod
//! namespace ([`NAMESPACE`]). Listing proves that containerd answers; only creating
//! proves that it can create (a full or read-only volume, an immutable snapshot
//! directory, a broken runtime binary all answer lists).
//!
//! The canary touches only what this guard made. Before RunPodSandbox is sent, a record
//! (`state::canary`: a random pod uid, this guard's pid and start time) is written to
//! `state_dir`; the canary is stopped and removed within `[canary] timeout`, and when
//! that fails a cleanup of 5 s more removes the sandbox with that uid. A guard killed in
//! the middle leaves its record: a later repairing run (`guard runtime`, `guard verify
//! --repair --deep`) removes that sandbox once it has proven the guard gone (its pid no
//! longer runs with the recorded start time, or the record is of another boot). Nothing
//! else in that namespace is ever stopped or removed, whatever its labels: it is reported
//! (`runtime.canary-namespace`). A read-only run sweeps nothing; a dry run creates and
//! removes nothing.

use super::rules::{classify, stale_records, Kind, Known, Owner};
pub use crate::containerd::canary::NAMESPACE;
use crate::containerd::canary::{self, Listed};
use crate::containerd::client::{Conn, RpcErrorKind};
use crate::host::proc::{parse_stat, read_proc_file, STAT_CAP};
use crate::host::Host;
use crate::state::canary::{random_uid, CanaryRecord};
use crate::state::{StateDir, StateError};
use std::time::{Duration, Instant};

/// The cleanup's own bound, after the canary's.
pub const CLEANUP: Duration = Duration::from_secs(5);
/// Leftover canaries removed per run at most (each costs a stop and a remove).
const SWEEP_MAX: usize = 8;

/// What a run may do in the canary's namespace, from its command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CanaryRun {
    /// `--dry-run`: look, say what would be done; create and remove nothing.
    DryRun,
    /// `guard verify --deep`: make and remove its own canary only.
    ReadOnly,
    /// `guard runtime`, `guard verify --repair --deep`: also remove proven leftovers.
    Repair,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanaryFacts {
    pub outcome: CanaryOutcome,
    /// `[canary] timeout`.
    pub timeout: Duration,
    /// From RunPodSandbox to the end of RemovePodSandbox (or the failure).
    pub took: Duration,
    /// What the cleanups did: leftovers of guards that died, then this run's own canary
    /// when it was not removed in time.
    pub cleanup: Vec<String>,
    /// Sandboxes of the namespace this run left alone and reports.
    pub others: Vec<Neighbour>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanaryOutcome {
    /// Made, stopped and removed within the bound.
    Created { id: String },
    /// Made, but not stopped and removed within the bound.
    NotRemoved { id: String, error: String },
    /// RunPodSandbox failed (CRI's own error) or did not answer in time.
    NotCreated { error: String, timed_out: bool },
    /// Not made: its record could not be written first.
    NoRecord { error: String },
    /// A dry run: nothing made.
    DryRun,
}

/// A sandbox of the canary's namespace that this run did not remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Neighbour {
    /// Nothing proves a guard made it.
    Foreign { sandbox: Listed, why: String },
    /// A canary of a guard that died.
    Leftover {
        sandbox: Listed,
        why: String,
        fate: Fate,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fate {
    WouldRemove,
    /// A read-only run removes nothing but its own canary.
    LeftToRepair,
    NotRemoved(String),
}

/// `cgroup_parent`: as kubelet's cgroup driver names one (a slice under systemd's).
pub async fn gather(
    conn: &Conn,
    host: &Host,
    state: Result<&StateDir, &StateError>,
    timeout: Duration,
    cgroup_parent: &str,
    run: CanaryRun,
) -> CanaryFacts {
    let (cleanup, others) = look_around(conn, host, state, run).await;
    let mut facts = CanaryFacts {
        outcome: CanaryOutcome::DryRun,
        timeout,
        took: Duration::ZERO,
        cleanup,
        others,
    };
    if run == CanaryRun::DryRun {
        return facts;
    }
    let state = match state {
        Ok(dir) => dir,
        Err(e) => {
            facts.outcome = CanaryOutcome::NoRecord {
                error: e.to_string(),
            };
            return facts;
        }
    };
    let own = make(conn, host, state, timeout, cgroup_parent).await;
    facts.outcome = own.outcome;
    facts.took = own.took;
    facts.cleanup.extend(own.cleanup);
    facts
}

/// This run's own canary: recorded, made, stopped and removed, cleaned up.
struct Own {
    outcome: CanaryOutcome,
    took: Duration,
    cleanup: Vec<String>,
}

async fn make(
    conn: &Conn,
    host: &Host,
    state: &StateDir,
    timeout: Duration,
    cgroup_parent: &str,
) -> Own {
    let not_recorded = |error: String| Own {
        outcome: CanaryOutcome::NoRecord { error },
        took: Duration::ZERO,
        cleanup: Vec::new(),
    };
    let (uid, file) = match record(host, state) {
        Ok(made) => made,
        Err(e) => return not_recorded(e),
    };
    let started = Instant::now();
    let left = || timeout.saturating_sub(started.elapsed());
    let outcome = match canary::run(conn, timeout, &uid, cgroup_parent).await {
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
    let mut cleanup = Vec::new();
    let gone = match &outcome {
        CanaryOutcome::Created { .. } => true,
        _ => clean_up_own(conn, &uid, &outcome, &mut cleanup).await,
    };
    if gone {
        if let Err(e) = state.remove_canary(&file) {
            cleanup.push(format!("could not remove the canary's record: {e}"));
        }
    }
    Own {
        outcome,
        took,
        cleanup,
    }
}

/// A new random pod uid, recorded with this guard's identity: (uid, record file).
fn record(host: &Host, state: &StateDir) -> Result<(String, String), String> {
    let pid = std::process::id();
    let uid = random_uid().map_err(|e| format!("no random pod uid: {e}"))?;
    let ticks = read_proc_file(host, pid as i32, "stat", STAT_CAP)
        .ok()
        .and_then(|stat| parse_stat(&stat))
        .map(|(_, ticks)| ticks)
        .ok_or_else(|| format!("cannot read this guard's start time (/proc/{pid}/stat)"))?;
    let record = CanaryRecord::new(&uid, pid, ticks, state.boot_id());
    let file = state.write_canary(&record).map_err(|e| e.to_string())?;
    Ok((uid, file))
}

/// A sandbox half made, made after the deadline, or not removed: the one with this run's
/// uid goes. Whether it is surely gone (then its record goes too): removed now, or
/// CRI refused to make it and lists none.
async fn clean_up_own(
    conn: &Conn,
    uid: &str,
    outcome: &CanaryOutcome,
    lines: &mut Vec<String>,
) -> bool {
    let deadline = Instant::now() + CLEANUP;
    let left = || deadline.saturating_duration_since(Instant::now());
    let listed = match canary::list(conn, left()).await {
        Ok(all) => all,
        Err(e) => {
            lines.push(format!("cannot list canaries: {e}"));
            return false;
        }
    };
    let mine: Vec<&Listed> = listed
        .iter()
        .filter(|s| classify(s, &[], Some(uid)) == Kind::Mine)
        .collect();
    let refused = matches!(
        outcome,
        CanaryOutcome::NotCreated {
            timed_out: false,
            ..
        }
    );
    let mut gone = refused || !mine.is_empty();
    for s in mine {
        let removed = canary::remove(conn, left(), &s.id).await;
        gone &= removed.is_ok();
        lines.push(match removed {
            Ok(()) => format!("removed canary {} (this run's canary)", s.id),
            Err(e) => format!("could not remove canary {} (this run's canary): {e}", s.id),
        });
    }
    gone
}

/// Lists the namespace and this guard's records; a repairing run removes the proven
/// leftovers (and the records of sandboxes already gone). Returns what was removed, and
/// every sandbox left alone that is not another guard's canary in flight.
async fn look_around(
    conn: &Conn,
    host: &Host,
    state: Result<&StateDir, &StateError>,
    run: CanaryRun,
) -> (Vec<String>, Vec<Neighbour>) {
    let deadline = Instant::now() + CLEANUP;
    let left = || deadline.saturating_duration_since(Instant::now());
    // Listed first, records read after: a record is written before its sandbox is
    // asked for, so a sandbox listed here whose guard runs has its record by now.
    let listed = match canary::list(conn, left()).await {
        Ok(all) => all,
        Err(e) => return (vec![format!("cannot list canaries: {e}")], Vec::new()),
    };
    let (records, unreadable) = match state {
        Ok(dir) => known(host, dir),
        Err(_) => (Vec::new(), Vec::new()),
    };
    let mut removed = Vec::new();
    let mut others = Vec::new();
    let mut swept = 0;
    for s in listed.iter() {
        let (record, why) = match classify(s, &records, None) {
            Kind::Mine | Kind::InFlight => continue,
            Kind::Foreign(why) => {
                let sandbox = s.clone();
                others.push(Neighbour::Foreign { sandbox, why });
                continue;
            }
            Kind::Leftover { record, why } => (record, why),
        };
        let fate = match run {
            CanaryRun::DryRun => Fate::WouldRemove,
            CanaryRun::Repair if swept < SWEEP_MAX => {
                swept += 1;
                let removal = canary::remove(conn, left(), &s.id).await;
                match removed_leftover(removal, state, &s.id, &record, &why, &mut removed) {
                    Some(fate) => fate,
                    None => continue,
                }
            }
            CanaryRun::ReadOnly | CanaryRun::Repair => Fate::LeftToRepair,
        };
        let sandbox = s.clone();
        others.push(Neighbour::Leftover { sandbox, why, fate });
    }
    if run == CanaryRun::Repair {
        let stale = stale_records(&listed, &records);
        for file in stale
            .into_iter()
            .chain(unreadable.iter().map(String::as_str))
        {
            forget(state, file, &mut removed);
        }
    }
    (removed, others)
}

/// A leftover's removal: said in `lines` and its record forgotten (`None`), or why it
/// stays.
fn removed_leftover(
    removal: Result<(), crate::containerd::client::RpcError>,
    state: Result<&StateDir, &StateError>,
    id: &str,
    record: &str,
    why: &str,
    lines: &mut Vec<String>,
) -> Option<Fate> {
    match removal {
        Ok(()) => {
            lines.push(format!(
                "removed canary {id} (left by a guard that died: {why})"
            ));
            forget(state, record, lines);
            None
        }
        Err(e) => Some(Fate::NotRemoved(e.to_string())),
    }
}

/// Removes a record whose sandbox is gone (a failure is one more evidence line).
fn forget(state: Result<&StateDir, &StateError>, file: &str, lines: &mut Vec<String>) {
    if let Ok(dir) = state {
        if let Err(e) = dir.remove_canary(file) {
            lines.push(format!("could not remove the canary record {file}: {e}"));
        }
    }
}

/// The readable records with their owners judged, and the names of those that are not
/// (never proof of anything; a repairing run removes them).
fn known(host: &Host, state: &StateDir) -> (Vec<Known>, Vec<String>) {
    let Ok(read) = state.canary_records() else {
        return (Vec::new(), Vec::new());
    };
    let mut known = Vec::new();
    let mut unreadable = Vec::new();
    for (file, record) in read {
        match record {
            Ok(r) => known.push(Known {
                owner: owner(host, state.boot_id(), &r),
                file,
                uid: r.uid,
                pid: r.pid,
            }),
            Err(_) => unreadable.push(file),
        }
    }
    (known, unreadable)
}

/// Whether the guard that wrote `r` still runs: the same pid with the same start time in
/// the same boot. Only a positive proof of its end counts (a `/proc` that cannot be read
/// says nothing).
fn owner(host: &Host, boot_id: &str, r: &CanaryRecord) -> Owner {
    if r.boot_id != boot_id {
        return Owner::Gone(format!("recorded in another boot ({})", r.boot_id));
    }
    match read_proc_file(host, r.pid as i32, "stat", STAT_CAP) {
        Err(e) if e.is_not_found() => Owner::Gone(format!("pid {} no longer runs", r.pid)),
        Err(_) => Owner::Runs,
        Ok(stat) => match parse_stat(&stat) {
            Some((_, ticks)) if ticks != r.start_ticks => Owner::Gone(format!(
                "pid {} is another process now (started at tick {ticks}, not {})",
                r.pid, r.start_ticks
            )),
            _ => Owner::Runs,
        },
    }
}

#[cfg(test)]
mod tests;
