//! `runtime.orphans`: processes in a kubelet container cgroup whose container has no live
//! task and that have no live shim ancestor. They were reparented to PID 1 when their shim
//! was killed (`pkill containerd-shim`), containerd and CRI no longer know them, and they
//! go on holding what they held (a volume's lock, a port), so every new incarnation of the
//! pod fails, for weeks. The fix kills exactly their cgroup; never a containerd restart,
//! which does not help.
//!
//! A container whose runtime containerd still records and that is not runc-type (a VM
//! runtime such as Kata runs its processes outside a shim's process tree by design) is
//! reported and left alone. Where containerd no longer knows the container (kubelet
//! removed it), the rules above decide.

use super::facts::{OrphanFacts, OrphanLook, PodProcess, ProcNow, ShimRuntime};
use crate::report::{Finding, Id, Status};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const ID: Id = Id::RuntimeOrphans;

/// The processes one look shows as orphaned.
pub fn candidates(look: &OrphanLook) -> Vec<&PodProcess> {
    let live = look.workloads.live_task_ids();
    look.processes
        .iter()
        .filter(|p| p.shim.is_none() && !live.contains(p.cgroup.container_id.as_str()))
        .collect()
}

/// Orphans seen in both looks: the same process (pid and start time) in the same cgroup.
pub fn confirmed(f: &OrphanFacts) -> Vec<&PodProcess> {
    let Some(second) = &f.second else {
        return Vec::new();
    };
    let again = candidates(second);
    candidates(&f.first)
        .into_iter()
        .filter(|p| {
            again.iter().any(|a| {
                a.info.pid == p.info.pid
                    && a.info.start_ticks == p.info.start_ticks
                    && a.cgroup == p.cgroup
            })
        })
        .collect()
}

/// A cgroup to kill and the processes judged orphaned in it: `(pid, start ticks)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condemned {
    pub cgroup: String,
    pub processes: Vec<(i32, u64)>,
}

/// The runtimes whose containers are runc processes under a shim: the rules above know
/// what an orphan of theirs looks like.
const RUNC_TYPE: [&str; 3] = [
    "io.containerd.runc.v2",
    "io.containerd.runc.v1",
    "io.containerd.runtime.v1.linux",
];

/// Why a confirmed orphan is left alone, when it is: it runs on another containerd's
/// snapshot, its container's runtime is known and not runc-type, or containerd could not
/// say.
fn left_alone_because(f: &OrphanFacts, p: &PodProcess) -> Option<String> {
    if let Some(theirs) = another_containerds_snapshot(f, p) {
        return Some(format!(
            "its root filesystem is {}, not under this containerd's root {}: another \
             runtime's container (a second containerd, e.g. k3s or rke2), left alone",
            theirs.display(),
            f.containerd_root.display()
        ));
    }
    match f.runtimes.get(&p.cgroup.container_id)? {
        ShimRuntime::Gone => None,
        ShimRuntime::Named(n) if RUNC_TYPE.contains(&n.as_str()) => None,
        ShimRuntime::Named(n) => Some(format!(
            "runtime {n} is not runc-type (a VM runtime runs its processes outside a shim's \
             process tree by design): left alone"
        )),
        ShimRuntime::Unreadable(e) => Some(format!(
            "containerd could not say which runtime runs it ({e}): left alone"
        )),
    }
}

/// The containerd snapshot directory a payload's root is made of, when none of them is
/// under this containerd's root. `None`: this containerd's, or unknown.
fn another_containerds_snapshot<'a>(f: &OrphanFacts, p: &'a PodProcess) -> Option<&'a Path> {
    let snapshots: Vec<&Path> = p
        .root_dirs
        .iter()
        .map(PathBuf::as_path)
        .filter(|d| d.to_string_lossy().contains("/io.containerd.snapshotter."))
        .collect();
    let ours = snapshots.iter().any(|d| d.starts_with(&f.containerd_root));
    (!ours).then(|| snapshots.first().copied()).flatten()
}

/// The finding and the cgroups to kill (empty when `[orphans] reap = false`).
/// `blocking` as for leaked tasks: fail in `verify`/`hygiene`, warn in `runtime`.
pub fn evaluate(f: Option<&OrphanFacts>, blocking: bool) -> (Finding, Vec<Condemned>) {
    let Some(f) = f else {
        return (Finding::skip(ID, "containerd does not answer"), Vec::new());
    };
    let (spared, orphans): (Vec<&PodProcess>, Vec<&PodProcess>) = confirmed(f)
        .into_iter()
        .partition(|p| left_alone_because(f, p).is_some());
    let spared_lines = spared.iter().map(|p| {
        let why = left_alone_because(f, p).unwrap_or_default();
        format!("{}; {why}", describe(f, p))
    });
    if orphans.is_empty() {
        let n = f.first.container_cgroups;
        if spared.is_empty() {
            let summary = format!("no orphaned payload in {n} container cgroup(s)");
            return (Finding::pass(ID, summary), Vec::new());
        }
        let summary = format!(
            "{} process(es) without task or shim left alone: not this containerd's runc containers",
            spared.len()
        );
        let finding = Finding::warn(ID, summary).remedy(SPARED_FIX);
        return (spared_lines.fold(finding, Finding::evidence), Vec::new());
    }
    let mut by_cgroup: BTreeMap<&str, Vec<&PodProcess>> = BTreeMap::new();
    for p in &orphans {
        by_cgroup.entry(p.cgroup.path.as_str()).or_default().push(p);
    }
    let status = if blocking { Status::Fail } else { Status::Warn };
    let summary = format!(
        "{} orphaned process(es) in {} container cgroup(s): no task, no shim",
        orphans.len(),
        by_cgroup.len()
    );
    // A cgroup with a process whose open files could not be read is not killed: the
    // guard cannot say what it holds, and the safe answer is to leave it.
    let readable = |procs: &Vec<&PodProcess>| procs.iter().all(|p| p.unread.is_none());
    let fix = orphans_fix(f.reap, !spared.is_empty(), by_cgroup.values().all(readable));
    let finding = Finding::with_status(ID, status, summary).remedy(fix);
    let lines = orphans.iter().map(|p| describe(f, p)).chain(spared_lines);
    let finding = lines.fold(finding, Finding::evidence);
    let reap = match f.reap {
        true => by_cgroup
            .into_iter()
            .filter(|(_, procs)| readable(procs))
            .map(|(cgroup, procs)| condemned(cgroup, &procs))
            .collect(),
        false => Vec::new(),
    };
    (finding, reap)
}

fn orphans_fix(reap: bool, some_spared: bool, all_readable: bool) -> String {
    let mut fix = if reap {
        "`guard hygiene` (or `guard verify --repair`) kills exactly these cgroups; never \
         restart containerd for them (it does not help)"
    } else {
        "[orphans] reap = false: kill the container cgroup by hand (freeze, SIGKILL its \
         cgroup.procs, thaw; v2: echo 1 > cgroup.kill), then remove it"
    }
    .to_string();
    if some_spared {
        fix = format!("{fix}; {SPARED_FIX}");
    }
    if !all_readable {
        fix = format!("{fix}. {UNREAD_FIX}");
    }
    fix
}

/// A cgroup to kill, with each process as judged (pid and start time, checked again
/// before the kill).
fn condemned(cgroup: &str, procs: &[&PodProcess]) -> Condemned {
    Condemned {
        cgroup: cgroup.to_string(),
        processes: procs
            .iter()
            .map(|p| (p.info.pid, p.info.start_ticks))
            .collect(),
    }
}

const SPARED_FIX: &str = "the processes left alone are another runtime's to manage (a second \
     containerd, or a VM runtime such as Kata): check their pods with that runtime's own \
     tools; the guard kills only cgroups of this containerd's runc-type containers";

const UNREAD_FIX: &str = "A process whose open files could not be read is never killed: find \
     the filesystem that does not answer (`grep -E 'nfs|fuse' /proc/mounts`), bring its \
     server back or abort it, then run `guard hygiene` again";

/// Every process about to be killed is one judged orphaned: same pid, same start time
/// (a reused pid names another process), still in the condemned cgroup. Else nothing is
/// killed and the reason is named.
pub fn still_condemned(judged: &Condemned, now: &[ProcNow]) -> Result<(), String> {
    let cgroup = &judged.cgroup;
    for p in now {
        let pid = p.pid;
        let Some(start) = p.start_ticks else {
            return Err(format!(
                "pid {pid} in {cgroup} could not be read again: nothing killed"
            ));
        };
        if p.cgroup.as_deref() != Some(cgroup) {
            return Err(format!(
                "pid {pid} is no longer in {cgroup}: nothing killed"
            ));
        }
        match judged.processes.iter().find(|(j, _)| *j == pid) {
            None => {
                return Err(format!(
                    "pid {pid} in {cgroup} was not among the judged orphans (started since): \
                     nothing killed"
                ))
            }
            Some((_, was)) if *was != start => {
                return Err(format!(
                    "pid {pid} in {cgroup} started at tick {start}, the orphan judged at tick \
                     {was}: another process, nothing killed"
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

fn describe(f: &OrphanFacts, p: &PodProcess) -> String {
    let pod = match f.first.workloads.pod_of(&p.cgroup.container_id) {
        Some(pod) => format!("pod {pod}"),
        None => format!("pod uid {}", p.cgroup.pod_uid),
    };
    let mut text = format!(
        "pid {} ({}) ppid {} age {}s, {pod}, cgroup {}",
        p.info.pid, p.info.cmdline, p.info.ppid, p.age_secs, p.cgroup.path
    );
    if !p.locks.is_empty() {
        text.push_str(&format!("; holds locks on {}", p.locks.join(", ")));
    }
    if !p.listens.is_empty() {
        text.push_str(&format!("; listens on {}", p.listens.join(", ")));
    }
    if let Some(why) = &p.unread {
        text.push_str(&format!("; not killed: {why}"));
    }
    text
}

#[cfg(test)]
mod tests;
