//! Orphaned container payloads: processes in a kubelet container cgroup. Gathered from
//! `/proc` (every process's cgroup, its parent chain) and the workloads look; the locks and
//! listening ports of a candidate are read only for candidates.

use crate::checks::workloads::Workloads;
use crate::host::cgroup::{container_cgroup_of, ContainerCgroup};
use crate::host::proc::{self, ProcInfo};
use crate::host::Host;
use std::collections::BTreeMap;

/// A process in a container cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodProcess {
    pub info: ProcInfo,
    pub cgroup: ContainerCgroup,
    /// The nearest ancestor that is a containerd shim, if any: a payload with a live shim
    /// is managed.
    pub shim: Option<i32>,
    /// Seconds since it started.
    pub age_secs: u64,
    /// Files it holds locked (paths), for candidates only.
    pub locks: Vec<String>,
    /// TCP addresses it listens on, for candidates only.
    pub listens: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrphanLook {
    /// The processes in pod cgroups whose container has no live task (the others are
    /// managed and not looked at further).
    pub processes: Vec<PodProcess>,
    /// How many processes are in pod cgroups at all.
    pub in_pod_cgroups: usize,
    pub workloads: Workloads,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanFacts {
    pub first: OrphanLook,
    /// `None` when the first look found no candidate.
    pub second: Option<OrphanLook>,
    /// `[orphans] reap`.
    pub reap: bool,
}

/// The processes in kubelet container cgroups whose container has no live task, with
/// their shim ancestry. One read of `/proc/PID/cgroup` per process; the rest only for
/// processes that could be orphans (a healthy node with 100 pods reads ~300 files, not
/// ~1800).
pub fn look(host: &Host, workloads: Workloads) -> OrphanLook {
    let uptime_ticks = uptime_ticks(host);
    let tps = proc::ticks_per_second();
    let live: std::collections::BTreeSet<String> = workloads
        .live_task_ids()
        .into_iter()
        .map(String::from)
        .collect();
    let mut cache: BTreeMap<i32, Option<ProcInfo>> = BTreeMap::new();
    let mut processes = Vec::new();
    let mut in_pod_cgroups = 0;
    for pid in proc::pids(host) {
        let Ok(text) = std::fs::read_to_string(host.proc(format!("{pid}/cgroup"))) else {
            continue;
        };
        let Some(cgroup) = container_cgroup_of(&text) else {
            continue;
        };
        in_pod_cgroups += 1;
        if live.contains(&cgroup.container_id) {
            continue; // managed: its container's task is alive
        }
        let Some(info) = proc::read_proc(host, pid) else {
            continue;
        };
        let shim = shim_ancestor(host, &info, &mut cache);
        processes.push(PodProcess {
            age_secs: uptime_ticks.saturating_sub(info.start_ticks) / tps,
            info,
            cgroup,
            shim,
            locks: Vec::new(),
            listens: Vec::new(),
        });
    }
    OrphanLook {
        processes,
        in_pod_cgroups,
        workloads,
    }
}

fn uptime_ticks(host: &Host) -> u64 {
    let text = std::fs::read_to_string(host.proc("uptime")).unwrap_or_default();
    let secs: f64 = text
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.0);
    (secs * proc::ticks_per_second() as f64) as u64
}

/// Walks the parent chain (bounded) looking for a `containerd-shim*`.
fn shim_ancestor(
    host: &Host,
    p: &ProcInfo,
    cache: &mut BTreeMap<i32, Option<ProcInfo>>,
) -> Option<i32> {
    let mut pid = p.ppid;
    for _ in 0..64 {
        if pid <= 1 {
            return None;
        }
        let parent = cache
            .entry(pid)
            .or_insert_with(|| proc::read_proc(host, pid))
            .clone()?;
        if parent.comm.starts_with("containerd-shim") {
            return Some(pid);
        }
        pid = parent.ppid;
    }
    None
}

/// Adds the locked files and listening ports of the processes at `which` (candidates).
pub fn describe(host: &Host, look: &mut OrphanLook, which: &[i32]) {
    let locks = proc::read_locks(host);
    for p in look
        .processes
        .iter_mut()
        .filter(|p| which.contains(&p.info.pid))
    {
        let (files, sockets) = proc::open_files(host, p.info.pid);
        p.locks = files
            .iter()
            .filter(|(_, dev, ino)| {
                let d = crate::host::mountinfo::DevNum::from_raw(*dev);
                locks
                    .iter()
                    .any(|l| l.major == d.major && l.minor == d.minor && l.inode == *ino)
            })
            .map(|(path, _, _)| path.clone())
            .collect();
        p.listens = listeners(host, p.info.pid, &sockets);
    }
}

fn listeners(host: &Host, pid: i32, sockets: &[u64]) -> Vec<String> {
    let mut out = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(host.proc(format!("{pid}/net/{table}")));
        for l in proc::parse_tcp_listeners(&text.unwrap_or_default()) {
            if sockets.contains(&l.inode) {
                out.push(format!("{table} {}", l.address));
            }
        }
    }
    out
}
