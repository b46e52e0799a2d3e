//! One look at what runs, shared by the hygiene families (`leaked_tasks`, `orphans`): CRI's
//! containers and sandboxes, the processes in kubelet container cgroups of the containers
//! CRI does not vouch for ([`pod_scan`]), and containerd's task of exactly those
//! containers. Only CRI's namespace (`k8s.io`): tasks elsewhere are not kubelet's.
//!
//! What a look costs does not grow with healthy pods: a container CRI reports `RUNNING`
//! (a sandbox `READY`) is taken as having its live task, on CRI's word, and containerd is
//! not asked about it. containerd is asked (`Tasks.Get`, one shim each) only about the
//! other tasks it keeps in `k8s.io`: their ids are the bundle directories of its runtime
//! (`<state>/io.containerd.runtime.v2.task/k8s.io/<id>`, from a task's create to its
//! delete), one directory read. That covers a container CRI reports `EXITED`, `CREATED`
//! or `UNKNOWN` (a sandbox `NOTREADY`) that still has a task, a task CRI never made
//! (`ctr`, nerdctl) and a container kubelet removed whose task is left; a container with
//! no bundle has no task. Where that directory cannot be read, containerd is asked about
//! every container CRI does not vouch for, every container id in a pod cgroup, and the
//! containers CRI did not make (`Containers.List`, filtered by containerd). Never
//! `Tasks.List`: containerd asks every shim for its state, one after another.
//!
//! CRI's word lags a shim's death by about 1.5 s (it learns from containerd's exit event);
//! a payload orphaned in that window is found by the next look.

use crate::containerd::client::{Conn, RpcError, K8S_NS};
use crate::containerd::cri::{self, CriContainer, CriSandbox, CriState, PodRef};
use crate::containerd::tasks::{self, TaskInfo};
use crate::host::pod_scan::{self, InPod};
use crate::host::Host;
use std::collections::BTreeSet;
use std::path::Path;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workloads {
    /// containerd's tasks of the containers it was asked about (see the module doc): the
    /// tasks of containers CRI vouches for are not here.
    pub tasks: Vec<TaskInfo>,
    pub containers: Vec<CriContainer>,
    pub sandboxes: Vec<CriSandbox>,
    /// The processes in kubelet container cgroups now, but those of the containers CRI
    /// vouches for (their task is alive: see [`Workloads::live_task_ids`]).
    pub in_pods: Vec<InPod>,
    /// How many container cgroups the look saw.
    pub container_cgroups: usize,
    /// Task PIDs that exist in `/proc` now (a reused PID counts as alive: never acted on).
    pub alive: BTreeSet<u32>,
    /// When this look was taken (Unix seconds), for "exited N s ago".
    pub unix: i64,
}

impl Workloads {
    /// The pod a container or sandbox id belongs to, when CRI knows it.
    pub fn pod_of(&self, id: &str) -> Option<&PodRef> {
        if let Some(c) = self.containers.iter().find(|c| c.id == id) {
            let sandbox = self.sandboxes.iter().find(|s| s.id == c.sandbox_id);
            return Some(sandbox.map_or(&c.pod, |s| &s.pod));
        }
        self.sandboxes.iter().find(|s| s.id == id).map(|s| &s.pod)
    }

    /// Container ids whose task is alive: by containerd's account where it was asked, by
    /// CRI's (`RUNNING`, `READY`) where it was not. A process a cleanup must never touch.
    pub fn live_task_ids(&self) -> BTreeSet<&str> {
        let asked = self
            .tasks
            .iter()
            .filter(|t| t.is_live())
            .map(|t| t.id.as_str());
        vouched_for(&self.containers, &self.sandboxes)
            .into_iter()
            .chain(asked)
            .collect()
    }
}

/// The ids CRI reports running (containers) or ready (sandboxes).
fn vouched_for<'a>(
    containers: &'a [CriContainer],
    sandboxes: &'a [CriSandbox],
) -> BTreeSet<&'a str> {
    let running = containers
        .iter()
        .filter(|c| c.state == CriState::Running)
        .map(|c| c.id.as_str());
    let ready = sandboxes.iter().filter(|s| s.ready).map(|s| s.id.as_str());
    running.chain(ready).collect()
}

/// The containers whose task containerd is asked about: with the runtime's task bundles
/// known, each one CRI does not vouch for; else every one CRI does not vouch for that
/// could matter (see the module doc).
pub fn to_ask(
    containers: &[CriContainer],
    sandboxes: &[CriSandbox],
    bundles: Option<&BTreeSet<String>>,
    made_by_others: &[String],
    in_pods: &[InPod],
) -> Vec<String> {
    let vouched = vouched_for(containers, sandboxes);
    if let Some(bundles) = bundles {
        let with_task = bundles.iter().filter(|id| !vouched.contains(id.as_str()));
        return with_task.cloned().collect();
    }
    let known = containers.iter().map(|c| c.id.as_str());
    let known = known.chain(sandboxes.iter().map(|s| s.id.as_str()));
    let in_cgroups = in_pods.iter().map(|p| p.cgroup.container_id.as_str());
    let others = made_by_others.iter().map(String::as_str);
    let ids: BTreeSet<&str> = known
        .chain(in_cgroups)
        .filter(|id| !vouched.contains(id))
        .chain(others)
        .collect();
    ids.into_iter().map(String::from).collect()
}

/// At most this many task bundles are read; more (no real node has them) and containerd
/// is asked instead.
const BUNDLES_CAP: usize = 1 << 16;

/// The ids of the tasks containerd's runtime keeps in `k8s.io` (its bundle directories
/// under `state`, containerd's state directory); `None` when they cannot be read.
pub fn task_bundles(host: &Host, state: &Path) -> Option<BTreeSet<String>> {
    let dir = host
        .path(state)
        .join("io.containerd.runtime.v2.task")
        .join(K8S_NS);
    let mut ids = BTreeSet::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let name = entry.ok()?.file_name().into_string().ok()?;
        if ids.len() == BUNDLES_CAP {
            return None;
        }
        ids.insert(name);
    }
    Some(ids)
}

/// `state`: containerd's state directory (its task bundles, see the module doc).
pub async fn gather(host: &Host, conn: &Conn, state: &Path) -> Result<Workloads, RpcError> {
    // The cgroup look runs on a thread of its own while containerd answers the lists.
    let cgroups = crate::checks::off_the_loop("pod cgroups", host, pod_scan::look);
    // (polled after CRI's listings are sent: the bundles are read while containerd works)
    let bundles_then_others = async {
        let bundles = task_bundles(host, state);
        let others = match bundles {
            Some(_) => Ok(Vec::new()),
            None => tasks::made_by_others(conn, K8S_NS).await,
        };
        (bundles, others)
    };
    let (cgroups, containers, sandboxes, (bundles, others)) = tokio::join!(
        cgroups,
        cri::containers(conn),
        cri::sandboxes(conn),
        bundles_then_others
    );
    let (containers, sandboxes, others) = (containers?, sandboxes?, others?);
    let in_pods = cgroups.processes(&vouched_for(&containers, &sandboxes));
    let ask = to_ask(&containers, &sandboxes, bundles.as_ref(), &others, &in_pods);
    let tasks = tasks::get_each(conn, K8S_NS, &ask).await?;
    let alive = tasks
        .iter()
        .map(|t| t.pid)
        .filter(|pid| *pid > 0 && host.proc(pid.to_string()).exists())
        .collect();
    Ok(Workloads {
        tasks,
        containers,
        sandboxes,
        in_pods,
        container_cgroups: cgroups.count(),
        alive,
        unix: crate::state::unix_now() as i64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::cgroup::ContainerCgroup;

    fn container(id: &str, state: CriState) -> CriContainer {
        CriContainer {
            id: id.into(),
            name: id.into(),
            sandbox_id: "sb".into(),
            state,
            pod: PodRef::default(),
        }
    }

    fn sandbox(id: &str, ready: bool) -> CriSandbox {
        CriSandbox {
            id: id.into(),
            ready,
            pod: PodRef::default(),
        }
    }

    fn in_pod(pid: i32, id: &str) -> InPod {
        InPod {
            pid,
            cgroup: ContainerCgroup {
                path: format!("/kubepods/podu/{id}"),
                container_id: id.into(),
                pod_uid: "u".into(),
            },
        }
    }

    #[test]
    fn a_healthy_node_asks_containerd_about_no_task_whatever_its_size() {
        for pods in [0, 1, 250] {
            let ids: Vec<String> = (0..pods).map(|i| format!("c{i}")).collect();
            let containers: Vec<_> = ids
                .iter()
                .map(|i| container(i, CriState::Running))
                .collect();
            let sandboxes: Vec<_> = ids
                .iter()
                .map(|i| sandbox(&format!("s{i}"), true))
                .collect();
            let procs: Vec<_> = ids
                .iter()
                .enumerate()
                .map(|(n, i)| in_pod(n as i32, i))
                .collect();
            let bundles: BTreeSet<String> = ids.iter().cloned().collect();
            let none = Vec::<String>::new();
            assert_eq!(to_ask(&containers, &sandboxes, None, &[], &procs), none);
            assert_eq!(
                to_ask(&containers, &sandboxes, Some(&bundles), &[], &procs),
                none
            );
        }
    }

    #[test]
    fn containerd_is_asked_about_what_cri_does_not_vouch_for() {
        let containers = [
            container("run", CriState::Running),
            container("exited", CriState::Exited),
            container("created", CriState::Created),
            container("unknown", CriState::Unknown),
        ];
        let sandboxes = [sandbox("ready", true), sandbox("notready", false)];
        let procs = [in_pod(1, "run"), in_pod(2, "removed"), in_pod(3, "exited")];
        let others = ["ctr-made".to_string()];
        assert_eq!(
            to_ask(&containers, &sandboxes, None, &others, &procs),
            ["created", "ctr-made", "exited", "notready", "removed", "unknown"]
        );
    }

    #[test]
    fn with_the_task_bundles_known_containerd_is_asked_only_about_tasks_it_has() {
        let containers = [
            container("run", CriState::Running),
            container("exited-with-task", CriState::Exited),
            container("exited-gone", CriState::Exited),
        ];
        let sandboxes = [sandbox("ready", true), sandbox("notready", false)];
        let procs = [in_pod(1, "run"), in_pod(2, "removed-no-task")];
        let bundles: BTreeSet<String> =
            ["run", "ready", "exited-with-task", "notready", "ctr-made"]
                .map(String::from)
                .into();
        assert_eq!(
            to_ask(&containers, &sandboxes, Some(&bundles), &[], &procs),
            ["ctr-made", "exited-with-task", "notready"]
        );
    }

    #[test]
    fn live_means_cri_vouches_or_containerd_says_so() {
        use crate::containerd::tasks::TaskStatus;
        let task = |id: &str, status| TaskInfo {
            id: id.into(),
            pid: 7,
            status,
            exited_unix: None,
        };
        let w = Workloads {
            containers: vec![
                container("run", CriState::Running),
                container("ex", CriState::Exited),
            ],
            sandboxes: vec![sandbox("ready", true), sandbox("nr", false)],
            tasks: vec![
                task("ex", TaskStatus::Stopped),
                task("nr", TaskStatus::Running),
            ],
            ..Workloads::default()
        };
        assert_eq!(
            w.live_task_ids().into_iter().collect::<Vec<_>>(),
            ["nr", "ready", "run"]
        );
    }
}
