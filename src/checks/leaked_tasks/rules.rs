//! `runtime.leaked-tasks`: a task in CRI's namespace whose process is gone (`STOPPED`, or
//! its PID no longer exists) while CRI reports its container `EXITED` (its sandbox: not
//! ready). Nothing reaps such a task: CRI waits only on tasks it started. It makes
//! containerd refuse to delete the container, so kubelet can never remove the pod
//! (`RemovePodSandbox`: "cannot delete running task: failed precondition"). The fix is
//! `Tasks.Delete` of exactly that task; never a containerd restart.
//!
//! A task CRI never knew (made in `k8s.io` by `ctr` or nerdctl) is not kubelet's: it is
//! reported as left alone, never deleted.

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

/// What CRI says about the container or sandbox a task belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CriView {
    /// A container CRI knows as `EXITED`, a sandbox it knows as not ready.
    DoneWith,
    /// CRI knows it and does not call it finished (running, created, unknown state).
    InUse,
    /// CRI has never heard of it: another client of containerd made it.
    Stranger,
}

fn cri_view(w: &Workloads, id: &str) -> CriView {
    if let Some(c) = w.containers.iter().find(|c| c.id == id) {
        return match c.state {
            CriState::Exited => CriView::DoneWith,
            _ => CriView::InUse,
        };
    }
    match w.sandboxes.iter().find(|s| s.id == id) {
        Some(s) if !s.ready => CriView::DoneWith,
        Some(_) => CriView::InUse,
        None => CriView::Stranger,
    }
}

/// The tasks one look shows as leaked.
pub fn candidates(w: &Workloads) -> Vec<Leak> {
    gone_and(w, CriView::DoneWith)
}

/// Tasks whose process is gone but CRI never knew them: reported, never deleted.
pub fn strangers(w: &Workloads) -> Vec<Leak> {
    gone_and(w, CriView::Stranger)
}

fn gone_and(w: &Workloads, view: CriView) -> Vec<Leak> {
    w.tasks
        .iter()
        .filter(|t| process_gone(w, t) && cri_view(w, &t.id) == view)
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

fn describe(w: &Workloads, t: &TaskInfo) -> String {
    let ago = t
        .exited_unix
        .map(|e| format!(", exited {}s ago", (w.unix - e).max(0)))
        .unwrap_or_default();
    let task = format!(
        "task {} {} (pid {} gone{ago})",
        t.id,
        t.status.text(),
        t.pid
    );
    if cri_view(w, &t.id) == CriView::Stranger {
        return format!(
            "{task}, unknown to CRI (made by ctr, nerdctl or another client): left alone, \
             not kubelet's to delete"
        );
    }
    let cri = match w.containers.iter().find(|c| c.id == t.id) {
        Some(c) => format!("CRI container {:?} {:?}", c.name, c.state),
        None => "CRI sandbox not ready".into(),
    };
    let blocks = match w.pod_of(&t.id) {
        Some(pod) => format!("blocks RemovePodSandbox of pod {pod}"),
        None => "containerd refuses to delete its container".into(),
    };
    format!("{task}, {cri}; {blocks}")
}

/// Right before `Tasks.Delete`: the task judged leaked is still a leak now, with the same
/// pid and status. Anything else (it was restarted, reaped, CRI changed its mind) leaves
/// it alone, saying what changed.
pub fn still_leaked(judged: &Leak, now: &Workloads) -> Result<(), String> {
    let id = &judged.id;
    let Some(t) = now.tasks.iter().find(|t| t.id == judged.id) else {
        return Err(format!("task {id} is gone already: nothing deleted"));
    };
    let same = t.pid == judged.pid && t.status == judged.status;
    if !same || !candidates(now).iter().any(|l| l.id == judged.id) {
        return Err(format!(
            "task {id} changed since it was judged leaked ({} pid {}, now {} pid {}, {:?} \
             by CRI): left alone",
            judged.status.text(),
            judged.pid,
            t.status.text(),
            t.pid,
            cri_view(now, &t.id)
        ));
    }
    Ok(())
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

/// The finding and the leaks to delete. `blocking`: a leak fails the check (`guard
/// verify`, `guard hygiene`); in `guard runtime` it warns, so kubelet is never held for it.
/// `None`: containerd did not answer.
pub fn evaluate(f: Option<&LeakedTaskFacts>, blocking: bool) -> (Finding, Vec<Leak>) {
    let Some(f) = f else {
        return (Finding::skip(ID, "containerd does not answer"), Vec::new());
    };
    let leaks = confirmed(f);
    let strangers = strangers(&f.first);
    let finding = match (leaks.is_empty(), strangers.is_empty()) {
        (true, true) => {
            let n = f.first.containers.len() + f.first.sandboxes.len();
            return (
                Finding::pass(
                    ID,
                    format!("no leaked task among {n} CRI container(s) and sandbox(es) in k8s.io"),
                ),
                Vec::new(),
            );
        }
        (true, false) => Finding::warn(
            ID,
            format!(
                "{} stopped task(s) in k8s.io unknown to CRI: left alone",
                strangers.len()
            ),
        )
        .remedy(STRANGER_FIX),
        (false, _) => {
            let status = if blocking { Status::Fail } else { Status::Warn };
            let summary = format!("{} leaked task(s) in k8s.io", leaks.len());
            let fix = "`guard hygiene` (or `guard verify --repair`) deletes exactly these \
                       tasks (containerd Tasks.Delete); never restart containerd for them";
            let fix = match strangers.is_empty() {
                true => fix.to_string(),
                false => format!("{fix}; {STRANGER_FIX}"),
            };
            Finding::with_status(ID, status, summary).remedy(fix)
        }
    };
    let evidence = leaks.iter().chain(&strangers).map(|l| l.evidence.clone());
    (evidence.fold(finding, Finding::evidence), leaks)
}

const STRANGER_FIX: &str = "a task CRI never knew is not kubelet's: the guard never deletes \
     it; whoever made it removes it (`ctr -n k8s.io tasks delete ID`)";

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
                "STOPPED and unknown to CRI (ctr, nerdctl): not kubelet's",
                look(Stopped, false, None),
                false,
            ),
            (
                "STOPPED while CRI calls the container UNKNOWN",
                look(Stopped, false, Some(CriState::Unknown)),
                false,
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
            first: w.clone().into(),
            second: None,
        };
        assert_eq!(evaluate(Some(&once), true).0.status, Status::Pass);
        let gone = LeakedTaskFacts {
            first: w.clone().into(),
            second: Some(Workloads::default().into()),
        };
        assert_eq!(
            evaluate(Some(&gone), true).0.status,
            Status::Pass,
            "reaped meanwhile"
        );
        let twice = LeakedTaskFacts {
            first: w.clone().into(),
            second: Some(w.into()),
        };
        let (f, delete) = evaluate(Some(&twice), true);
        assert_eq!(f.status, Status::Fail);
        assert_eq!(delete.iter().map(|l| &l.id).collect::<Vec<_>>(), [CID]);
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

    #[test]
    fn a_task_cri_never_knew_is_reported_as_left_alone_and_never_deleted() {
        let stranger = look(TaskStatus::Stopped, false, None);
        let f = LeakedTaskFacts {
            first: stranger.clone().into(),
            second: Some(stranger.into()),
        };
        let (finding, delete) = evaluate(Some(&f), true);
        assert!(delete.is_empty(), "{delete:?}");
        assert_eq!(finding.status, Status::Warn, "{finding:?}");
        let e = &finding.evidence[0];
        assert!(
            e.contains("task c1 STOPPED") && e.contains("unknown to CRI"),
            "{e}"
        );
        assert!(e.contains("left alone"), "{e}");
        assert!(finding.remedy.contains("never deletes"), "{finding:?}");
    }

    #[test]
    fn a_leak_is_deleted_only_if_the_fresh_look_still_shows_it_unchanged() {
        let then = look(TaskStatus::Stopped, false, Some(CriState::Exited));
        let judged = candidates(&then).remove(0);
        assert_eq!(still_leaked(&judged, &then), Ok(()));
        let mut restarted = look(TaskStatus::Running, true, Some(CriState::Exited));
        restarted.tasks[0].pid = 5151;
        restarted.alive.insert(5151);
        let mut other_pid = then.clone();
        other_pid.tasks[0].pid = 4343;
        let cases = [
            ("reaped meanwhile", Workloads::default(), "is gone already"),
            ("runs again", restarted, "now RUNNING pid 5151"),
            ("another pid", other_pid, "now STOPPED pid 4343"),
            (
                "CRI says RUNNING now",
                look(TaskStatus::Stopped, false, Some(CriState::Running)),
                "InUse by CRI",
            ),
        ];
        for (name, now, says) in cases {
            let err = still_leaked(&judged, &now).expect_err(name);
            assert!(err.contains(says), "{name}: {err}");
        }
    }
}
