//! The processes in kubelet container cgroups: one pass over `/proc` (one read of
//! `/proc/PID/cgroup` per process, [`ProcFiles`]), shared by every family that asks.

use super::cgroup::{container_cgroup_of, ContainerCgroup};
use super::proc::{pids, CGROUP_CAP};
use super::proc_files::ProcFiles;
use super::Host;

/// A process in a container cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InPod {
    pub pid: i32,
    pub cgroup: ContainerCgroup,
}

/// Every process in a kubelet container cgroup, by pid.
pub fn scan(host: &Host) -> Vec<InPod> {
    let mut files = ProcFiles::new(host, "cgroup", CGROUP_CAP);
    pids(host)
        .into_iter()
        .filter_map(|pid| {
            let cgroup = container_cgroup_of(&files.read(host, pid)?)?;
            Some(InPod { pid, cgroup })
        })
        .collect()
}
