//! The re-checks right before the hygiene remedies' destructive calls, exercised on a real
//! containerd with CRI and runc: the leak or the condemned cgroup comes from a look, the
//! world changes between the look and the action, and the real remedy
//! (`remedies::hygiene::delete_task`, `reap`) refuses with nothing deleted or killed. The
//! fake world replaces these remedies, so only these tests reach their re-checks. Root only.

use testkit as support;

use containerd_guard::checks::leaked_tasks::rules::candidates;
use containerd_guard::checks::orphans::rules::Condemned;
use containerd_guard::checks::workloads;
use containerd_guard::containerd::client::connect;
use containerd_guard::host::cgroup::CgroupError;
use containerd_guard::host::proc::read_proc;
use containerd_guard::host::Host;
use containerd_guard::remedies::hygiene::{delete_task, reap};
use containerd_guard::remedies::RemedyError;
use std::time::Duration;
use support::hygiene::{cgroup_exists, ctr_task, leak_again, make_leaked_task, CgroupPayload};
use support::locks::pid_alive;
use support::root_or_skip;
use support::runtime::block_on;
use support::suite::hygiene::{running_locker, serial, TOOLS};
use support::workload::{ctr_k8s_ok, HygieneNode};

/// The start time of `pid` (`/proc/PID/stat`), as a look records it.
fn start_ticks(pid: i32) -> u64 {
    read_proc(&Host::live(), pid)
        .expect("a live process")
        .start_ticks
}

#[test]
fn r01_a_leak_replaced_by_a_new_task_after_the_look_is_not_deleted() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    let pod = n.pod("replaced");
    let (cid, _) = running_locker(&pod, "payload", &n.host_dir("replaced"));
    make_leaked_task(&pod, &cid);
    let (host, state) = (Host::live(), n.t.state_path());
    let refused = block_on("delete a leak judged before", async {
        let conn = connect(&n.socket(), Duration::from_secs(5)).await.unwrap();
        let look = workloads::gather(&host, &conn, &state).await.unwrap();
        let leak = candidates(&look).into_iter().find(|l| l.id == cid);
        let leak = leak.unwrap_or_else(|| panic!("{cid} judged leaked: {look:?}"));
        // between the look and the deletion, the leak is deleted and another task of the
        // same container takes its place (another pid)
        ctr_k8s_ok(&n.socket(), &["tasks", "delete", &cid]);
        let again = leak_again(&pod, &cid);
        assert_ne!(again.pid as u32, leak.pid, "a new task, a new pid");
        (delete_task(&host, &conn, &state, &leak).await, again)
    });
    let (result, again) = refused;
    let Err(RemedyError::Refused(why)) = &result else {
        panic!("not refused by the re-check: {result:?}");
    };
    assert!(why.contains(&cid), "{why}");
    let still = ctr_task(&n.socket(), &cid).expect("the new task is not deleted");
    assert_eq!((still.pid, still.status.as_str()), (again.pid, "STOPPED"));
}

#[test]
fn r02_a_condemned_cgroup_that_a_process_joined_after_the_look_is_not_killed() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    let payload = CgroupPayload::start();
    let condemned = Condemned {
        cgroup: payload.cgroup.clone(),
        processes: vec![(payload.pid, start_ticks(payload.pid))],
    };
    let mut joined = payload.join_another();
    let result = block_on("reap a cgroup judged before", async {
        let conn = connect(&n.socket(), Duration::from_secs(5)).await.unwrap();
        reap(&Host::live(), &conn, &n.t.state_path(), &condemned).await
    });
    let newcomer = joined.id() as i32;
    let alive = (pid_alive(payload.pid), pid_alive(newcomer));
    let _ = joined.kill();
    let _ = joined.wait();
    let Err(RemedyError::Cgroup(CgroupError::Refused(why))) = &result else {
        panic!("not refused by the re-check: {result:?}");
    };
    assert!(why.contains("nothing killed"), "{why}");
    assert_eq!(alive, (true, true), "nothing killed: {why}");
    assert!(cgroup_exists(&payload.cgroup), "the cgroup is left");
}

#[test]
fn r03_a_condemned_cgroup_whose_container_has_a_live_task_now_is_not_killed() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    let pod = n.pod("alive-again");
    let (cid, pid) = running_locker(&pod, "payload", &n.host_dir("alive-again"));
    // judged an orphan when its task was dead; containerd runs its task now
    let condemned = Condemned {
        cgroup: pod.container_cgroup(&cid),
        processes: vec![(pid, start_ticks(pid))],
    };
    let result = block_on("reap a container running again", async {
        let conn = connect(&n.socket(), Duration::from_secs(5)).await.unwrap();
        reap(&Host::live(), &conn, &n.t.state_path(), &condemned).await
    });
    let Err(RemedyError::Refused(why)) = &result else {
        panic!("not refused by the re-check: {result:?}");
    };
    assert!(why.contains("has a live task now"), "{why}");
    assert!(pid_alive(pid), "the payload was killed: {why}");
    let task = ctr_task(&n.socket(), &cid).expect("its task");
    assert_eq!(task.status, "RUNNING");
}
