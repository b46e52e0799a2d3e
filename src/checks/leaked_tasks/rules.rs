//! `runtime.leaked-tasks`: a task in CRI's namespace whose process is gone (`STOPPED`, or
//! its PID no longer exists) while CRI reports its container `EXITED` (or does not know
//! it). Nothing reaps such a task: CRI waits only on tasks it started. It makes containerd
//! refuse to delete the container, so kubelet can never remove the pod
//! (`RemovePodSandbox`: "cannot delete running task: failed precondition"). The fix is
//! `Tasks.Delete` of exactly that task; never a containerd restart.

use super::facts::LeakedTaskFacts;
use crate::checks::workloads::Workloads;
use crate::containerd::cri::CriState;
use crate::containerd::tasks::{TaskInfo, TaskStatus};
use crate::report::{Finding, Id, Status};

const ID: Id = Id::RuntimeLeakedTasks;

/// One leaked task, with what it blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leak {
    pub id: String,
    pub pid: u32,
    pub status: TaskStatus,
    pub evidence: String,
}

/// The tasks one look shows as leaked.
pub fn candidates(w: &Workloads) -> Vec<Leak> {
    w.tasks
        .iter()
        .filter(|t| process_gone(w, t) && kubelet_is_done_with(w, &t.id))
        .map(|t| Leak {
            id: t.id.clone(),
            pid: t.pid,
            status: t.status,
            evidence: describe(w, t),
        })
        .collect()
}

fn process_gone(w: &Workloads, t: &TaskInfo) -> bool {
    match t.status {
        TaskStatus::Stopped => true,
        TaskStatus::Unknown => false,
        _ => t.pid > 0 && !w.alive.contains(&t.pid),
    }
}

/// CRI says the container exited (a sandbox: not ready), or does not know the id at all.
fn kubelet_is_done_with(w: &Workloads, id: &str) -> bool {
    if let Some(c) = w.containers.iter().find(|c| c.id == id) {
        return matches!(c.state, CriState::Exited | CriState::Unknown);
    }
    if let Some(s) = w.sandboxes.iter().find(|s| s.id == id) {
        return !s.ready;
    }
    true
}

fn describe(w: &Workloads, t: &TaskInfo) -> String {
    let ago = t
        .exited_unix
        .map(|e| format!(", exited {}s ago", (w.unix - e).max(0)))
        .unwrap_or_default();
    let cri = match w.containers.iter().find(|c| c.id == t.id) {
        Some(c) => format!("CRI container {:?} {:?}", c.name, c.state),
        None if w.sandboxes.iter().any(|s| s.id == t.id) => "CRI sandbox not ready".into(),
        None => "unknown to CRI".into(),
    };
    let blocks = match w.pod_of(&t.id) {
        Some(pod) => format!("blocks RemovePodSandbox of pod {pod}"),
        None => "containerd refuses to delete its container".into(),
    };
    format!(
        "task {} {} (pid {} gone{ago}), {cri}; {blocks}",
        t.id,
        t.status.text(),
        t.pid
    )
}

/// Leaks seen in both looks (same task, same PID): a task CRI is still reaping (it says
/// RUNNING for a moment after a shim dies) is not one.
pub fn confirmed(f: &LeakedTaskFacts) -> Vec<Leak> {
    let Some(second) = &f.second else {
        return Vec::new();
    };
    let again = candidates(second);
    candidates(&f.first)
        .into_iter()
        .filter(|l| again.iter().any(|a| a.id == l.id && a.pid == l.pid))
        .collect()
}

/// The finding and the task ids to delete. `blocking`: a leak fails the check (`guard
/// verify`, `guard hygiene`); in `guard runtime` it warns, so kubelet is never held for it.
/// `None`: containerd did not answer.
pub fn evaluate(f: Option<&LeakedTaskFacts>, blocking: bool) -> (Finding, Vec<String>) {
    let Some(f) = f else {
        return (Finding::skip(ID, "containerd does not answer"), Vec::new());
    };
    let leaks = confirmed(f);
    if leaks.is_empty() {
        let n = f.first.tasks.len();
        return (
            Finding::pass(ID, format!("no leaked task among {n} task(s) in k8s.io")),
            Vec::new(),
        );
    }
    let status = if blocking { Status::Fail } else { Status::Warn };
    let mut finding = Finding::with_status(
        ID,
        status,
        format!("{} leaked task(s) in k8s.io", leaks.len()),
    )
    .remedy(
        "`guard hygiene` (or `guard verify --repair`) deletes exactly these tasks \
             (containerd Tasks.Delete); never restart containerd for them",
    );
    for l in &leaks {
        finding = finding.evidence(l.evidence.clone());
    }
    (finding, leaks.into_iter().map(|l| l.id).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containerd::cri::{CriContainer, CriSandbox, PodRef};

    const CID: &str = "c1";

    fn pod() -> PodRef {
        PodRef {
            name: "kube-controller-manager-node1".into(),
            namespace: "kube-system".into(),
            uid: "u1".into(),
        }
    }

    fn look(task: TaskStatus, pid_alive: bool, cri: Option<CriState>) -> Workloads {
        let mut w = Workloads {
            tasks: vec![TaskInfo {
                id: CID.into(),
                pid: 4242,
                status: task,
                exited_unix: Some(1000),
            }],
            sandboxes: vec![CriSandbox {
                id: "s1".into(),
                ready: true,
                pod: pod(),
            }],
            unix: 1060,
            ..Default::default()
        };
        if pid_alive {
            w.alive.insert(4242);
        }
        if let Some(state) = cri {
            w.containers.push(CriContainer {
                id: CID.into(),
                name: "kcm".into(),
                sandbox_id: "s1".into(),
                state,
                pod: pod(),
            });
        }
        w
    }

    #[test]
    fn table() {
        use CriState::{Created as CriCreated, Exited, Running as CriRunning};
        use TaskStatus::{Created, Running, Stopped};
        let cases = [
            (
                "the incident: STOPPED, CRI EXITED",
                look(Stopped, false, Some(Exited)),
                true,
            ),
            (
                "STOPPED and unknown to CRI",
                look(Stopped, false, None),
                true,
            ),
            (
                "RUNNING by containerd but its pid is gone",
                look(Running, false, Some(Exited)),
                true,
            ),
            (
                "running for real",
                look(Running, true, Some(CriRunning)),
                false,
            ),
            (
                "CRI still says RUNNING (a shim just died)",
                look(Stopped, false, Some(CriRunning)),
                false,
            ),
            (
                "alive pid while CRI says exited: never",
                look(Running, true, Some(Exited)),
                false,
            ),
            (
                "created, CRI created",
                look(Created, true, Some(CriCreated)),
                false,
            ),
        ];
        for (name, w, leaked) in cases {
            assert_eq!(!candidates(&w).is_empty(), leaked, "{name}");
        }
    }

    #[test]
    fn a_leak_is_confirmed_only_by_a_second_look() {
        let w = look(TaskStatus::Stopped, false, Some(CriState::Exited));
        let once = LeakedTaskFacts {
            first: w.clone(),
            second: None,
        };
        assert_eq!(evaluate(Some(&once), true).0.status, Status::Pass);
        let gone = LeakedTaskFacts {
            first: w.clone(),
            second: Some(Workloads::default()),
        };
        assert_eq!(
            evaluate(Some(&gone), true).0.status,
            Status::Pass,
            "reaped meanwhile"
        );
        let twice = LeakedTaskFacts {
            first: w.clone(),
            second: Some(w),
        };
        let (f, delete) = evaluate(Some(&twice), true);
        assert_eq!(f.status, Status::Fail);
        assert_eq!(delete, vec![CID.to_string()]);
        let e = &f.evidence[0];
        assert!(e.contains("STOPPED (pid 4242 gone, exited 60s ago)"), "{e}");
        assert!(
            e.contains("blocks RemovePodSandbox of pod kube-system/kube-controller-manager-node1"),
            "{e}"
        );
        assert_eq!(
            evaluate(Some(&twice), false).0.status,
            Status::Warn,
            "runtime never holds for it"
        );
        assert_eq!(evaluate(None, true).0.status, Status::Skip);
    }
}
