//! Self-tests of the hygiene harness (testkit/src/workload.rs, testkit/src/hygiene.rs):
//! each fault the guard is to repair is reproduced for real on Debian's containerd with
//! CRI, runc and the cgroupfs driver, and shown to have the effect a cluster sees. Root only.
//!
//! (a) a leaked task blocks RemovePodSandbox with FailedPrecondition until `Tasks.Delete`;
//! (b) an orphaned payload outlives its container and keeps its `flock`, so a new container
//!     of the workload cannot start, until its cgroup is cleaned;
//! (c) a healthy pod beside both faults keeps its payload PID throughout.

use testkit as support;

use std::path::Path;
use std::time::{Duration, Instant};
use support::hygiene::{
    cgroup_procs, ctr_task, kill_cgroup_tree, lock_holders, make_leaked_task, make_orphan, ppid,
    probe_lock, remove_cgroup_tree, task_delete, task_get,
};
use support::locks::pid_alive;
use support::workload::{ctr_k8s_ok, HygieneNode, Pod};
use support::{poll_until, root_or_skip};

const TOOLS: &[&str] = &["containerd", "ctr", "runc", "gcc"];
const WAIT: Duration = Duration::from_secs(30);

/// Starts a locker on `<dir>/lock` in `pod` and waits until it runs and holds the lock;
/// returns (container id, payload PID as CRI reports it).
fn running_locker(pod: &Pod, name: &str, dir: &Path) -> (String, i32) {
    let cid = pod.start_locker(name, dir, "lock");
    let info = pod.wait_container(&cid, "RUNNING with a PID", WAIT, |i| {
        i.running() && i.pid.is_some()
    });
    let pid = info.pid.unwrap();
    poll_until("the locker to hold its lock", WAIT, || {
        lock_holders(&dir.join("lock")).contains(&pid).then_some(())
    });
    (cid, pid)
}

#[test]
fn a_leaked_task_blocks_remove_pod_sandbox_until_tasks_delete() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = HygieneNode::start();
    let dir = n.host_dir("leaky");
    let pod = n.pod("leaky");
    let (cid, pid) = running_locker(&pod, "payload", &dir);

    let t0 = Instant::now();
    let task = make_leaked_task(&pod, &cid);
    let made = t0.elapsed();
    assert_eq!(task.status, "STOPPED", "{task:?}");
    assert!(
        task.pid > 0 && !pid_alive(task.pid),
        "task PID alive: {task:?}"
    );
    assert_ne!(task.pid, pid, "the leaked task is a new task, not CRI's");
    let info = pod.container_state(&cid).unwrap();
    assert!(info.exited(), "CRI: {info:?}");
    // Nothing reaps it: still there after CRI and containerd had time to notice.
    assert_eq!(
        task_get(&pod.socket, &cid).map(|(p, _)| p as i32),
        Ok(task.pid)
    );

    let (code, msg) = pod
        .remove_pod()
        .expect_err("RemovePodSandbox must fail while the task leaks");
    assert_eq!(code, tonic::Code::FailedPrecondition, "{msg}");
    assert!(
        msg.contains("cannot delete running task") && msg.contains(&cid),
        "{msg}"
    );

    let t1 = Instant::now();
    ctr_k8s_ok(&pod.socket, &["tasks", "delete", &cid]);
    assert_eq!(ctr_task(&pod.socket, &cid), None);
    pod.remove_pod()
        .unwrap_or_else(|e| panic!("RemovePodSandbox after Tasks.Delete: {e:?}"));
    eprintln!(
        "leaked task {cid}: made in {made:?} (dead pid {}), cleared and pod removed in {:?}",
        task.pid,
        t1.elapsed()
    );
}

#[test]
fn b_orphaned_payload_keeps_its_lock_until_its_cgroup_is_cleaned() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let mut n = HygieneNode::start();
    let dir = n.host_dir("orphan");
    let lock = dir.join("lock");
    let pod = n.pod("orphan");
    let (cid, pid) = running_locker(&pod, "payload", &dir);
    let cg = pod.container_cgroup(&cid);

    let t0 = Instant::now();
    let pids = make_orphan(&mut n.ctrd, &n.t, &pod, &cid);
    let made = t0.elapsed();
    assert!(
        pids.contains(&pid) && pids.len() == 2,
        "{pids:?} (locker {pid} + child)"
    );
    for p in &pids {
        assert!(pid_alive(*p), "payload {p} died");
        // The locker lost its shim and is init's now; its child is still the locker's.
        let want = if *p == pid { 1 } else { pid };
        assert_eq!(ppid(*p), Some(want), "parent of payload {p}");
    }
    assert_eq!(cgroup_procs(&cg), pids);
    assert_eq!(task_get(&pod.socket, &cid), Err(tonic::Code::NotFound));
    assert_eq!(ctr_task(&pod.socket, &cid), None);
    let info = pod.container_state(&cid).unwrap();
    assert!(info.exited(), "CRI: {info:?}");
    assert_eq!(lock_holders(&lock), vec![pid]);
    eprintln!(
        "orphan: CRI says {} ({}), sandbox {:?}",
        info.state,
        info.exit_code,
        pod.sandbox_state()
    );

    // The workload comes back. The old sandbox lost its pause process with the shim
    // (SANDBOX_NOTREADY; CreateContainer in it fails NotFound "no running task found"), so
    // kubelet makes a new sandbox for the pod: here a new pod on the same hostPath.
    let pod2 = n.pod("orphan");
    let blocked = probe_lock(&pod2, "payload-retry", &dir, "lock");
    assert!(!blocked.got_lock, "{blocked:?}");
    assert_eq!(blocked.info.exit_code, 1, "{blocked:?}");
    assert!(
        blocked
            .log
            .contains("cannot acquire lock /data/lock: Resource temporarily unavailable"),
        "{blocked:?}"
    );

    let t1 = Instant::now();
    assert!(kill_cgroup_tree(&cg), "{cg} not emptied");
    assert!(remove_cgroup_tree(&cg), "{cg} left behind");
    poll_until("the lock to be free", WAIT, || {
        lock_holders(&lock).is_empty().then_some(())
    });
    let cleaned = t1.elapsed();
    let freed = probe_lock(&pod2, "payload-after", &dir, "lock");
    assert!(freed.got_lock, "{freed:?}");
    eprintln!(
        "orphan {pids:?}: made in {made:?}; new container refused in {:?}; cgroup cleaned in \
         {cleaned:?}; new container locked in {:?}",
        blocked.elapsed, freed.elapsed
    );
}

#[test]
fn c_a_healthy_pod_keeps_its_payload_through_both_faults() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let mut n = HygieneNode::start();
    let hdir = n.host_dir("healthy");
    let healthy = n.pod("healthy");
    let (hcid, hpid) = running_locker(&healthy, "payload", &hdir);
    let hcg = healthy.container_cgroup(&hcid);
    let hprocs = cgroup_procs(&hcg);
    assert_eq!(hprocs.len(), 2, "{hprocs:?}");
    let check = |when: &str| {
        let i = healthy.container_state(&hcid).unwrap();
        assert!(i.running() && i.pid == Some(hpid), "{when}: CRI {i:?}");
        assert_eq!(
            task_get(&healthy.socket, &hcid).map(|(p, _)| p as i32),
            Ok(hpid),
            "{when}"
        );
        assert_eq!(cgroup_procs(&hcg), hprocs, "{when}");
        assert_eq!(lock_holders(&hdir.join("lock")), vec![hpid], "{when}");
        assert_eq!(healthy.sandbox_state().unwrap(), "SANDBOX_READY", "{when}");
    };

    // The orphan first: its containerd restart would clear a leaked task (test d).
    let t0 = Instant::now();
    let odir = n.host_dir("orphan");
    let orphan = n.pod("orphan");
    let (ocid, _) = running_locker(&orphan, "payload", &odir);
    let pids = n.make_orphan(&orphan, &ocid);
    check("after the orphan (containerd restarted)");

    let ldir = n.host_dir("leaky");
    let leaky = n.pod("leaky");
    let (lcid, _) = running_locker(&leaky, "payload", &ldir);
    make_leaked_task(&leaky, &lcid);
    check("after the leaked task");

    task_delete(&leaky.socket, &lcid).expect("Tasks.Delete of the leaked task");
    leaky
        .remove_pod()
        .expect("RemovePodSandbox after Tasks.Delete");
    assert!(remove_cgroup_tree(&orphan.container_cgroup(&ocid)));
    assert!(pids.iter().all(|p| !pid_alive(*p)), "{pids:?}");
    check("after both faults were cleared");
    eprintln!(
        "healthy pod {hcid} pid {hpid} unchanged through both faults ({:?})",
        t0.elapsed()
    );
}

#[test]
fn d_a_containerd_restart_clears_a_leaked_task() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let mut n = HygieneNode::start();
    let dir = n.host_dir("leaky");
    let pod = n.pod("leaky");
    let (cid, _) = running_locker(&pod, "payload", &dir);
    make_leaked_task(&pod, &cid);
    let t0 = Instant::now();
    n.restart_containerd();
    // CRI's recovery deletes a STOPPED task of an EXITED container on start.
    poll_until("the leaked task to be gone after the restart", WAIT, || {
        (task_get(&pod.socket, &cid) == Err(tonic::Code::NotFound)).then_some(())
    });
    assert_eq!(ctr_task(&pod.socket, &cid), None);
    pod.remove_pod()
        .unwrap_or_else(|e| panic!("RemovePodSandbox after the restart: {e:?}"));
    eprintln!(
        "leaked task cleared by a containerd restart in {:?}",
        t0.elapsed()
    );
}
