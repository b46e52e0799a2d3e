//! One look at what runs, shared by the hygiene families (`leaked_tasks`, `orphans`):
//! containerd's tasks in CRI's namespace, CRI's containers and sandboxes, and which task
//! PIDs still exist. Only CRI's namespace (`k8s.io`): tasks elsewhere are not kubelet's.

use crate::containerd::client::{Conn, K8S_NS};
use crate::containerd::cri::{self, CriContainer, CriSandbox, PodRef};
use crate::containerd::tasks::{self, TaskInfo};
use crate::host::Host;
use std::collections::BTreeSet;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workloads {
    pub tasks: Vec<TaskInfo>,
    pub containers: Vec<CriContainer>,
    pub sandboxes: Vec<CriSandbox>,
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

    /// Container ids whose task is alive by containerd's account: a process a cleanup
    /// must never touch.
    pub fn live_task_ids(&self) -> BTreeSet<&str> {
        use crate::containerd::tasks::TaskStatus::*;
        self.tasks
            .iter()
            .filter(|t| matches!(t.status, Created | Running | Paused | Pausing))
            .map(|t| t.id.as_str())
            .collect()
    }
}

pub async fn gather(host: &Host, conn: &Conn) -> Result<Workloads, String> {
    let tasks = tasks::list(conn, K8S_NS).await?;
    let containers = cri::containers(conn).await?;
    let sandboxes = cri::sandboxes(conn).await?;
    let alive = tasks
        .iter()
        .map(|t| t.pid)
        .filter(|pid| *pid > 0 && host.proc(pid.to_string()).exists())
        .collect();
    Ok(Workloads {
        tasks,
        containers,
        sandboxes,
        alive,
        unix: crate::state::unix_now() as i64,
    })
}
