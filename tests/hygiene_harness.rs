//! Self-tests of the hygiene harness (tests/support/workload.rs, tests/support/hygiene.rs):
//! each fault the guard is to repair is reproduced for real on Debian's containerd with
//! CRI, runc and the cgroupfs driver, and shown to have the effect a cluster sees. Root only.
//!
//! (a) a leaked task blocks RemovePodSandbox with FailedPrecondition until `Tasks.Delete`;
//! (b) an orphaned payload outlives its container and keeps its `flock`, so a new container
//!     of the workload cannot start, until its cgroup is cleaned;
//! (c) a healthy pod beside both faults keeps its payload PID throughout.

mod support;

use std::path::Path;
use std::time::{Duration, Instant};
use support::hygiene::*;
use support::locks::pid_alive;
use support::workload::*;
use support::*;

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
    if !require_root(TOOLS) {
        return;
    }
    let n = HygieneNode::start();
    let dir = n.host_dir("leaky");
    let pod = n.pod("leaky");
    let (cid, pid) = running_locker(&pod, "payload", &dir);

    let t0 = Instant::now();
    let task = make_leaked_task(&pod, &cid);
    let made = t0.elapsed();
    assert_eq!(task.status, "STOPPED", "{task:?}");
    assert!(task.pid > 0 && !pid_alive(task.pid), "task PID alive: {task:?}");
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
    if !require_root(TOOLS) {
        return;
    }
    let mut n = HygieneNode::start();
    let dir = n.host_dir("orphan");
    let lock = dir.join("lock");
    let pod = n.pod("orphan");
    let (cid, pid) = running_locker(&pod, "payload", &dir);
    let cg = pod.container_cgroup(&cid);

    let t0 = Instant::now();
    let pids = make_orphan(&mut n.ctrd, &n.t, &pod, &cid);
    let made = t0.elapsed();
    assert!(pids.contains(&pid) && pids.len() == 2, "{pids:?} (locker {pid} + child)");
    for p in &pids {
        assert!(pid_alive(*p), "payload {p} died");
        assert_eq!(ppid(*p), Some(1), "payload {p} not reparented to PID 1");
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

    // The workload comes back (kubelet: a new sandbox when the old one is not ready).
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
