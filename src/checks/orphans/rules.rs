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

use super::facts::{OrphanFacts, OrphanLook, PodProcess, ProcNow, Runtime};
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
        Runtime::Gone => None,
        Runtime::Named(n) if RUNC_TYPE.contains(&n.as_str()) => None,
        Runtime::Named(n) => Some(format!(
            "runtime {n} is not runc-type (a VM runtime runs its processes outside a shim's \
             process tree by design): left alone"
        )),
        Runtime::Unreadable(e) => Some(format!(
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
    let fix = if f.reap {
        "`guard hygiene` (or `guard verify --repair`) kills exactly these cgroups; never \
         restart containerd for them (it does not help)"
    } else {
        "[orphans] reap = false: kill the container cgroup by hand (freeze, SIGKILL its \
         cgroup.procs, thaw; v2: echo 1 > cgroup.kill), then remove it"
    };
    let mut fix = fix.to_string();
    if !spared.is_empty() {
        fix = format!("{fix}; {SPARED_FIX}");
    }
    // A cgroup with a process whose open files could not be read is not killed: the
    // guard cannot say what it holds, and the safe answer is to leave it.
    let readable = |procs: &Vec<&PodProcess>| procs.iter().all(|p| p.unread.is_none());
    if !by_cgroup.values().all(readable) {
        fix = format!("{fix}. {UNREAD_FIX}");
    }
    let finding = Finding::with_status(ID, status, summary).remedy(fix);
    let lines = orphans.iter().map(|p| describe(f, p)).chain(spared_lines);
    let finding = lines.fold(finding, Finding::evidence);
    let reap = match f.reap {
        true => by_cgroup
            .into_iter()
            .filter(|(_, procs)| readable(procs))
            .map(|(cgroup, ps)| Condemned {
                cgroup: cgroup.to_string(),
                processes: ps
                    .iter()
                    .map(|p| (p.info.pid, p.info.start_ticks))
                    .collect(),
            })
            .collect(),
        false => Vec::new(),
    };
    (finding, reap)
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
mod tests {
    use super::*;
    use crate::checks::orphans::facts::Runtime;
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
            root_dirs: Vec::new(),
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
            container_cgroups: procs.len(),
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
                runtimes: Default::default(),
                containerd_root: "/var/lib/containerd".into(),
            };
            assert_eq!(confirmed(&f).len(), want);
        }
        let f = OrphanFacts {
            first: first.clone(),
            second: Some(first.clone()),
            reap: true,
            runtimes: Default::default(),
            containerd_root: "/var/lib/containerd".into(),
        };
        let (finding, reap) = evaluate(Some(&f), true);
        assert_eq!(finding.status, Status::Fail);
        let want = Condemned {
            cgroup: "/kubepods/besteffort/podu1/a".into(),
            processes: vec![(10, 1010)],
        };
        assert_eq!(reap, vec![want]);
        assert!(
            finding.evidence[0].contains("holds locks on /data/lock"),
            "{finding:?}"
        );
        let report_only = OrphanFacts { reap: false, ..f };
        let (finding, reap) = evaluate(Some(&report_only), false);
        assert_eq!(finding.status, Status::Warn);
        assert!(reap.is_empty(), "[orphans] reap = false only reports");
    }

    fn twice(l: OrphanLook, runtime: Option<Runtime>) -> OrphanFacts {
        let runtimes = runtime.map(|r| ("a".to_string(), r)).into_iter().collect();
        OrphanFacts {
            first: l.clone(),
            second: Some(l),
            reap: true,
            runtimes,
            containerd_root: "/var/lib/containerd".into(),
        }
    }

    #[test]
    fn a_known_runtime_that_is_not_runc_is_named_and_left_alone() {
        let l = look(vec![proc_in("a", 10, None)], &[]);
        let named = |n: &str| Some(Runtime::Named(n.into()));
        let cases = [
            ("runtime no longer known: today's rules", None, 1),
            ("container removed by kubelet", Some(Runtime::Gone), 1),
            ("runc", named("io.containerd.runc.v2"), 1),
            ("runc v1 shim", named("io.containerd.runc.v1"), 1),
            ("kata", named("io.containerd.kata.v2"), 0),
            ("gVisor", named("io.containerd.runsc.v1"), 0),
            (
                "containerd did not say",
                Some(Runtime::Unreadable(
                    "Containers.Get: no answer within 5s".into(),
                )),
                0,
            ),
        ];
        for (name, runtime, want) in cases {
            let (finding, reap) = evaluate(Some(&twice(l.clone(), runtime)), true);
            assert_eq!(reap.len(), want, "{name}: {finding:?}");
            if want == 0 {
                assert_eq!(finding.status, Status::Warn, "{name}");
                assert!(
                    finding.evidence[0].contains("left alone"),
                    "{name}: {finding:?}"
                );
            }
        }
        let (kata, _) = evaluate(Some(&twice(l, named("io.containerd.kata.v2"))), true);
        let e = &kata.evidence[0];
        assert!(
            e.contains("runtime io.containerd.kata.v2 is not runc-type"),
            "{e}"
        );
        assert!(e.starts_with("pid 10 (/locker /data/lock)"), "{e}");
    }

    #[test]
    fn only_the_judged_processes_unchanged_in_their_cgroup_are_killed() {
        let cgroup = "/kubepods/besteffort/podu1/a";
        let judged = Condemned {
            cgroup: cgroup.into(),
            processes: vec![(10, 1010), (11, 1011)],
        };
        let p = |pid, start: Option<u64>, cg: Option<&str>| ProcNow {
            pid,
            start_ticks: start,
            cgroup: cg.map(String::from),
        };
        assert_eq!(
            still_condemned(&judged, &[p(10, Some(1010), Some(cgroup))]),
            Ok(())
        );
        let cases = [
            (p(10, Some(2020), Some(cgroup)), "another process"),
            (p(12, Some(1012), Some(cgroup)), "not among the judged"),
            (p(11, Some(1011), Some("/kubepods/podu2/b")), "no longer in"),
            (p(11, Some(1011), None), "no longer in"),
            (p(10, None, None), "could not be read again"),
        ];
        for (now, says) in cases {
            let err =
                still_condemned(&judged, &[p(11, Some(1011), Some(cgroup)), now]).expect_err(says);
            assert!(
                err.contains(says) && err.contains("nothing killed"),
                "{err}"
            );
        }
    }

    #[test]
    fn a_payload_on_another_containerds_snapshot_is_left_alone() {
        let on = |dirs: &[&str]| {
            let mut p = proc_in("a", 10, None);
            p.root_dirs = dirs.iter().map(PathBuf::from).collect();
            twice(look(vec![p], &[]), None)
        };
        let k3s = "/var/lib/rancher/k3s/agent/containerd/io.containerd.snapshotter.v1.overlayfs";
        let ours = "/var/lib/containerd/io.containerd.snapshotter.v1.overlayfs";
        let cases = [
            ("unknown root: today's rules", on(&[]), 1),
            (
                "overlay on this containerd's snapshots",
                on(&[&format!("{ours}/snapshots/3/fs")]),
                1,
            ),
            (
                "native snapshot of this containerd",
                on(&["/var/lib/containerd/io.containerd.snapshotter.v1.native/snapshots/4"]),
                1,
            ),
            ("not a containerd snapshot at all", on(&["/srv/rootfs"]), 1),
            (
                "k3s's overlay",
                on(&[
                    &format!("{k3s}/snapshots/7/fs"),
                    &format!("{k3s}/snapshots/6/fs"),
                ]),
                0,
            ),
        ];
        for (name, f, want) in cases {
            let (finding, reap) = evaluate(Some(&f), true);
            assert_eq!(reap.len(), want, "{name}: {finding:?}");
        }
        let (finding, _) = evaluate(Some(&on(&[&format!("{k3s}/snapshots/7/fs")])), true);
        assert_eq!(finding.status, Status::Warn);
        let e = &finding.evidence[0];
        assert!(
            e.contains(&format!("its root filesystem is {k3s}/snapshots/7/fs")),
            "{e}"
        );
        assert!(e.contains("another runtime's container"), "{e}");
    }

    #[test]
    fn an_orphan_whose_open_files_could_not_be_read_is_reported_and_not_reaped() {
        let mut hung = proc_in("a", 10, None);
        hung.unread = Some("stat of its fd 3 -> /mnt/nfs/x did not return within 5s".into());
        let first = look(vec![hung, proc_in("b", 11, None)], &[]);
        let (finding, reap) = evaluate(Some(&twice(first, None)), true);
        assert_eq!(finding.status, Status::Fail);
        let cgroups: Vec<&str> = reap.iter().map(|c| c.cgroup.as_str()).collect();
        assert_eq!(cgroups, vec!["/kubepods/besteffort/podu1/b"]);
        assert!(
            finding.evidence[0].contains("not killed: stat of its fd 3 -> /mnt/nfs/x"),
            "{finding:?}"
        );
        assert!(finding.remedy.contains("never killed"), "{finding:?}");
    }
}
