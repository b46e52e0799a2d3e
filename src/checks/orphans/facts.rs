//! Orphaned container payloads: processes in a kubelet container cgroup whose container
//! has no live task. Gathered from the workloads look (the processes in the cgroups of
//! containers CRI does not vouch for) and, for those only, `/proc` (the parent chain);
//! the locks and listening ports of a candidate are read only for candidates.

use crate::checks::workloads::Workloads;
use crate::host::cgroup::{container_cgroup_of, ContainerCgroup};
use crate::host::mountinfo::MountTable;
use crate::host::proc::{self, ProcInfo};
use crate::host::{read_head_lines, Host};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Why its open files could not be read (a filesystem that does not answer), for
    /// candidates only: such a process is never killed.
    pub unread: Option<String>,
    /// The directories its root filesystem is made of (a bind mount's source directory,
    /// overlay's upper, lower and work directories), read from its `mountinfo` when it has
    /// no shim: which containerd's snapshots it runs on. Empty when unknown.
    pub root_dirs: Vec<PathBuf>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrphanLook {
    /// The processes in pod cgroups whose container has no live task (the others are
    /// managed and not looked at further).
    pub processes: Vec<PodProcess>,
    /// How many container cgroups the look saw.
    pub container_cgroups: usize,
    pub workloads: Arc<Workloads>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanFacts {
    pub first: OrphanLook,
    /// `None` when the first look found no candidate.
    pub second: Option<OrphanLook>,
    /// `[orphans] reap`.
    pub reap: bool,
    /// The runtime of each confirmed candidate's container, by container id (asked only
    /// for those).
    pub runtimes: BTreeMap<String, ShimRuntime>,
    /// This containerd's root, resolved (`mountinfo` shows resolved paths): a payload whose
    /// root filesystem is another containerd's snapshot is another runtime's.
    pub containerd_root: PathBuf,
}

/// The shim runtime containerd records for a candidate's container (its
/// `Container.Runtime.name`: `io.containerd.runc.v2` runs it under containerd-shim-runc-v2),
/// which says whether its processes are meant to live under a shim at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShimRuntime {
    /// The runtime it records (`io.containerd.runc.v2`, `io.containerd.kata.v2`).
    Named(String),
    /// containerd no longer has the container (kubelet removed it).
    Gone,
    /// containerd did not say (the error).
    Unreadable(String),
}

/// The processes in kubelet container cgroups whose container has no live task, with
/// their shim ancestry. The workloads' pass over `/proc` found the processes in pod
/// cgroups; only those that could be orphans are read further (on a healthy node: none).
pub fn look(host: &Host, workloads: Arc<Workloads>) -> OrphanLook {
    look_with_roots(host, workloads, |info| root_dirs(host, info.pid))
}

/// The confirming look: as [`look`], each process's root filesystem taken from `first`
/// (the same pid and start time), not read again. The rules judge the processes as the
/// first look saw them, and a payload's `mountinfo` is read once a run.
pub fn look_again(host: &Host, workloads: Arc<Workloads>, first: &OrphanLook) -> OrphanLook {
    look_with_roots(host, workloads, |info| {
        first
            .processes
            .iter()
            .find(|p| p.info.pid == info.pid && p.info.start_ticks == info.start_ticks)
            .map(|p| p.root_dirs.clone())
            .unwrap_or_default()
    })
}

/// The look, with `roots` saying what a process without a shim runs on.
fn look_with_roots(
    host: &Host,
    workloads: Arc<Workloads>,
    roots: impl Fn(&ProcInfo) -> Vec<PathBuf>,
) -> OrphanLook {
    let uptime_ticks = uptime_ticks(host);
    let tps = proc::ticks_per_second();
    let live: std::collections::BTreeSet<String> = workloads
        .live_task_ids()
        .into_iter()
        .map(String::from)
        .collect();
    let mut cache: BTreeMap<i32, Option<ProcInfo>> = BTreeMap::new();
    let mut processes = Vec::new();
    let container_cgroups = workloads.container_cgroups;
    for p in &workloads.in_pods {
        let (pid, cgroup) = (p.pid, p.cgroup.clone());
        if live.contains(&cgroup.container_id) {
            continue; // managed: its container's task is alive
        }
        let Some(info) = proc::read_proc(host, pid) else {
            continue;
        };
        let shim = shim_ancestor(host, &info, &mut cache);
        let root_dirs = match shim {
            Some(_) => Vec::new(),
            None => roots(&info),
        };
        processes.push(PodProcess {
            age_secs: uptime_ticks.saturating_sub(info.start_ticks) / tps,
            info,
            cgroup,
            shim,
            locks: Vec::new(),
            listens: Vec::new(),
            unread: None,
            root_dirs,
        });
    }
    OrphanLook {
        processes,
        container_cgroups,
        workloads,
    }
}

/// At most this much of a payload's `mountinfo` is read (its root is the first line).
pub const MOUNTINFO_CAP: u64 = 256 << 10;

/// The directories the root filesystem of `pid` is made of, from its `mountinfo` (read
/// bounded; a payload controls how many mounts it has). Empty when unknown.
fn root_dirs(host: &Host, pid: i32) -> Vec<PathBuf> {
    let head = read_head_lines(&host.proc(format!("{pid}/mountinfo")), MOUNTINFO_CAP);
    let Some(whole_lines) = head.ok().and_then(|b| String::from_utf8(b).ok()) else {
        return Vec::new();
    };
    let Some(root) = MountTable::parse(&whole_lines)
        .ok()
        .and_then(|t| t.root().cloned())
    else {
        return Vec::new();
    };
    let overlay = root
        .super_options
        .iter()
        .filter_map(|o| o.split_once('='))
        .filter(|(k, _)| matches!(*k, "lowerdir" | "upperdir" | "workdir"))
        .flat_map(|(_, dirs)| dirs.split(':'))
        .map(PathBuf::from);
    let bind = Some(root.fs_root).filter(|d| d != Path::new("/"));
    bind.into_iter().chain(overlay).collect()
}

fn uptime_ticks(host: &Host) -> u64 {
    let secs = proc::uptime(host).map_or(0.0, |u| u.as_secs_f64());
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

/// How long reading the candidates' open files may take: milliseconds on a healthy
/// node; `stat` of a file on a dead NFS or FUSE server never returns.
const OPEN_FILES_BOUND: Duration = Duration::from_secs(5);
/// How often the wait looks at the helper thread's progress.
const OPEN_FILES_PACE: Duration = Duration::from_millis(10);

/// Adds the locked files and listening ports of the processes at `which` (candidates);
/// a candidate whose open files could not be read within the bound gets `unread`.
pub async fn describe(host: &Host, look: &mut OrphanLook, which: &[i32]) {
    let locks = proc::read_locks(host);
    let pass = open_files_within(host, which).await;
    for p in look
        .processes
        .iter_mut()
        .filter(|p| which.contains(&p.info.pid))
    {
        let Some(open) = pass.read.get(&p.info.pid) else {
            p.unread = Some(unread_reason(p.info.pid, pass.stuck.as_ref()));
            continue;
        };
        p.locks = open
            .files
            .iter()
            .filter(|(_, dev, ino)| {
                let d = crate::host::mountinfo::DevNum::from_raw(*dev);
                locks
                    .iter()
                    .any(|l| l.major == d.major && l.minor == d.minor && l.inode == *ino)
            })
            .map(|(path, _, _)| path.clone())
            .collect();
        p.listens = listeners(host, p.info.pid, &open.sockets);
    }
}

/// The pass runs on its own thread and is waited for here without blocking the runtime's
/// one thread, so its other deadlines (`--npd --timeout`, the hold) still fire.
async fn open_files_within(host: &Host, pids: &[i32]) -> proc::OpenFilesPass {
    let progress = proc::open_files_in_background(host, pids);
    let mut pass = proc::OpenFilesPass::default();
    let deadline = Instant::now() + OPEN_FILES_BOUND;
    while !pass.take(&progress) && Instant::now() < deadline {
        tokio::time::sleep(OPEN_FILES_PACE).await;
    }
    pass
}

fn unread_reason(pid: i32, stuck: Option<&proc::StuckAt>) -> String {
    let bound = crate::config::units::format_duration(OPEN_FILES_BOUND);
    match stuck {
        Some(s) if s.pid == pid => format!(
            "stat of its fd {} -> {} did not return within {bound}: that filesystem does \
             not answer (a dead NFS or FUSE server?)",
            s.fd, s.target
        ),
        Some(s) => format!(
            "its open files were not read: the pass stopped at pid {} fd {} -> {}, whose \
             filesystem did not answer within {bound}",
            s.pid, s.fd, s.target
        ),
        None => format!("its open files were not read within {bound}"),
    }
}

/// The most of a pod's TCP table read: the kernel lists listening sockets before the
/// connections, and a pod with a million connections must not cost megabytes here.
const TCP_TABLE_CAP: u64 = 1 << 20;

fn listeners(host: &Host, pid: i32, sockets: &[u64]) -> Vec<String> {
    let mut out = Vec::new();
    for table in ["tcp", "tcp6"] {
        let head = read_head_lines(&host.proc(format!("{pid}/net/{table}")), TCP_TABLE_CAP);
        for l in proc::parse_tcp_listeners(&String::from_utf8_lossy(&head.unwrap_or_default())) {
            if sockets.contains(&l.inode) {
                out.push(format!("{table} {}", l.address));
            }
        }
    }
    out
}

/// A process in a condemned cgroup as it is right before the kill (read again from
/// `/proc`): `None` fields when it could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcNow {
    pub pid: i32,
    pub start_ticks: Option<u64>,
    /// Its container cgroup's path.
    pub cgroup: Option<String>,
}

/// The processes about to be killed as `/proc` shows them now, for the re-check right
/// before the signal.
pub fn as_they_are(host: &Host, pids: &[i32]) -> Vec<ProcNow> {
    pids.iter()
        .map(|&pid| {
            let info = proc::read_proc(host, pid);
            ProcNow {
                pid,
                start_ticks: info.as_ref().map(|i| i.start_ticks),
                cgroup: info
                    .and_then(|i| container_cgroup_of(&i.cgroup))
                    .map(|c| c.path),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_huge_tcp_table_is_read_to_its_cap_in_whole_lines() {
        let dir = tempfile::tempdir().unwrap();
        let table = dir.path().join("tcp");
        let line = "   0: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 100 0 0 10 0\n";
        let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
        let copies = 2 * TCP_TABLE_CAP as usize / line.len();
        std::fs::write(&table, format!("{header}{}", line.repeat(copies))).unwrap();
        let head = String::from_utf8(read_head_lines(&table, TCP_TABLE_CAP).unwrap()).unwrap();
        assert!(head.len() as u64 <= TCP_TABLE_CAP);
        assert!(head.len() as u64 > TCP_TABLE_CAP - line.len() as u64);
        assert!(head.ends_with('\n'));
        let listeners = proc::parse_tcp_listeners(&head);
        assert_eq!(listeners.len(), head.lines().count() - 1);
        assert!(read_head_lines(&dir.path().join("gone"), TCP_TABLE_CAP).is_err());
    }
}
