//! `runtime.orphans`: processes in a kubelet container cgroup whose container has no live
//! task and that have no live shim ancestor. They were reparented to PID 1 when their shim
//! was killed (`pkill containerd-shim`), containerd and CRI no longer know them, and they
//! go on holding what they held (a volume's lock, a port), so every new incarnation of the
//! pod fails, for weeks. The fix kills exactly their cgroup; never a containerd restart,
//! which does not help.

use super::facts::{OrphanFacts, OrphanLook, PodProcess};
use crate::report::{Finding, Id, Status};
use std::collections::BTreeMap;

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

/// The finding and the cgroups to kill (empty when `[orphans] reap = false`).
/// `blocking` as for leaked tasks: fail in `verify`/`hygiene`, warn in `runtime`.
pub fn evaluate(f: Option<&OrphanFacts>, blocking: bool) -> (Finding, Vec<String>) {
    let Some(f) = f else {
        return (Finding::skip(ID, "containerd does not answer"), Vec::new());
    };
    let orphans = confirmed(f);
    if orphans.is_empty() {
        let n = f.first.in_pod_cgroups;
        let summary = format!("no orphaned payload among {n} process(es) in pod cgroups");
        return (Finding::pass(ID, summary), Vec::new());
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
    let fix = if f.reap {
        "`guard hygiene` (or `guard verify --repair`) kills exactly these cgroups; never \
         restart containerd for them (it does not help)"
    } else {
        "[orphans] reap = false: kill the container cgroup by hand (freeze, SIGKILL its \
         cgroup.procs, thaw; v2: echo 1 > cgroup.kill), then remove it"
    };
    // A cgroup with a process whose open files could not be read is not killed: the
    // guard cannot say what it holds, and the safe answer is to leave it.
    let readable = |procs: &Vec<&PodProcess>| procs.iter().all(|p| p.unread.is_none());
    let mut fix = fix.to_string();
    if !by_cgroup.values().all(readable) {
        fix.push_str(
            ". A process whose open files could not be read is never killed: find the \
             filesystem that does not answer (`grep -E 'nfs|fuse' /proc/mounts`), bring its \
             server back or abort it, then run `guard hygiene` again",
        );
    }
    let mut finding = Finding::with_status(ID, status, summary).remedy(fix);
    for p in &orphans {
        finding = finding.evidence(describe(f, p));
    }
    let reap = match f.reap {
        true => by_cgroup
            .iter()
            .filter(|(_, procs)| readable(procs))
            .map(|(k, _)| k.to_string())
            .collect(),
        false => Vec::new(),
    };
    (finding, reap)
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
mod tests {
    use super::*;
    use crate::checks::workloads::Workloads;
    use crate::containerd::tasks::{TaskInfo, TaskStatus};
    use crate::host::cgroup::ContainerCgroup;
    use crate::host::proc::ProcInfo;

    fn proc_in(cid: &str, pid: i32, shim: Option<i32>) -> PodProcess {
        PodProcess {
            info: ProcInfo {
                pid,
                ppid: shim.unwrap_or(1),
                comm: "locker".into(),
                cmdline: "/locker /data/lock".into(),
                start_ticks: 1000 + pid as u64,
                cgroup: String::new(),
            },
            cgroup: ContainerCgroup {
                path: format!("/kubepods/besteffort/podu1/{cid}"),
                container_id: cid.into(),
                pod_uid: "u1".into(),
            },
            shim,
            age_secs: 42,
            locks: vec!["/data/lock".into()],
            listens: Vec::new(),
            unread: None,
        }
    }

    fn look(procs: Vec<PodProcess>, live: &[&str]) -> OrphanLook {
        let tasks = live
            .iter()
            .map(|id| TaskInfo {
                id: id.to_string(),
                pid: 1,
                status: TaskStatus::Running,
                exited_unix: None,
            })
            .collect();
        OrphanLook {
            in_pod_cgroups: procs.len(),
            processes: procs,
            workloads: Workloads {
                tasks,
                ..Default::default()
            },
        }
    }

    #[test]
    fn table() {
        let cases = [
            (
                "the incident: no task, no shim",
                look(vec![proc_in("a", 10, None)], &[]),
                1,
            ),
            (
                "managed: a live shim parent",
                look(vec![proc_in("a", 10, Some(9))], &[]),
                0,
            ),
            (
                "the container has a live task",
                look(vec![proc_in("a", 10, None)], &["a"]),
                0,
            ),
            (
                "only the orphaned container of two",
                look(vec![proc_in("a", 10, None), proc_in("b", 11, None)], &["b"]),
                1,
            ),
        ];
        for (name, l, n) in cases {
            assert_eq!(candidates(&l).len(), n, "{name}");
        }
    }

    #[test]
    fn confirmed_by_the_same_process_twice_and_reaped_only_when_allowed() {
        let first = look(vec![proc_in("a", 10, None)], &[]);
        let mut reused = proc_in("a", 10, None);
        reused.info.start_ticks += 1; // the pid now names another process
        let cases = [
            (None, 0),
            (Some(look(vec![], &[])), 0),
            (Some(look(vec![reused], &[])), 0),
            (Some(first.clone()), 1),
        ];
        for (second, want) in cases {
            let f = OrphanFacts {
                first: first.clone(),
                second,
                reap: true,
            };
            assert_eq!(confirmed(&f).len(), want);
        }
        let f = OrphanFacts {
            first: first.clone(),
            second: Some(first.clone()),
            reap: true,
        };
        let (finding, reap) = evaluate(Some(&f), true);
        assert_eq!(finding.status, Status::Fail);
        assert_eq!(reap, vec!["/kubepods/besteffort/podu1/a".to_string()]);
        assert!(
            finding.evidence[0].contains("holds locks on /data/lock"),
            "{finding:?}"
        );
        let report_only = OrphanFacts { reap: false, ..f };
        let (finding, reap) = evaluate(Some(&report_only), false);
        assert_eq!(finding.status, Status::Warn);
        assert!(reap.is_empty(), "[orphans] reap = false only reports");
    }

    #[test]
    fn an_orphan_whose_open_files_could_not_be_read_is_reported_and_not_reaped() {
        let mut hung = proc_in("a", 10, None);
        hung.unread = Some("stat of its fd 3 -> /mnt/nfs/x did not return within 5s".into());
        let first = look(vec![hung, proc_in("b", 11, None)], &[]);
        let f = OrphanFacts {
            first: first.clone(),
            second: Some(first),
            reap: true,
        };
        let (finding, reap) = evaluate(Some(&f), true);
        assert_eq!(finding.status, Status::Fail);
        assert_eq!(reap, vec!["/kubepods/besteffort/podu1/b".to_string()]);
        assert!(
            finding.evidence[0].contains("not killed: stat of its fd 3 -> /mnt/nfs/x"),
            "{finding:?}"
        );
        assert!(finding.remedy.contains("never killed"), "{finding:?}");
    }
}
