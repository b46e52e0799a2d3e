use super::*;
use crate::checks::orphans::facts::ShimRuntime;
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
        }
        .into(),
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

fn twice(l: OrphanLook, runtime: Option<ShimRuntime>) -> OrphanFacts {
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
    let named = |n: &str| Some(ShimRuntime::Named(n.into()));
    let cases = [
        ("runtime no longer known: today's rules", None, 1),
        ("container removed by kubelet", Some(ShimRuntime::Gone), 1),
        ("runc", named("io.containerd.runc.v2"), 1),
        ("runc v1 shim", named("io.containerd.runc.v1"), 1),
        ("kata", named("io.containerd.kata.v2"), 0),
        ("gVisor", named("io.containerd.runsc.v1"), 0),
        (
            "containerd did not say",
            Some(ShimRuntime::Unreadable(
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
