//! The re-checks right before the hygiene remedies' destructive calls, exercised on a real
//! containerd with CRI and runc: the leak or the condemned cgroup comes from a look, the
//! world changes between the look and the action, and the real remedy
//! (`remedies::hygiene::delete_task`, `reap`) refuses with nothing deleted or killed. The
//! fake world replaces these remedies, so only these tests reach their re-checks. And a
//! destructive call that fails (`Tasks.Delete` answered with an error by testkit's gRPC
//! proxy) changes nothing, is reported, and is not retried within the run. Root only.

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
use support::grpc_proxy::{Code, GrpcProxy, Mode};
use support::hygiene::{cgroup_exists, ctr_task, leak_again, make_leaked_task, CgroupPayload};
use support::locks::pid_alive;
use support::root_or_skip;
use support::runtime::block_on;
use support::suite::hygiene::{guard, guard_config_with, running_locker, serial, TOOLS};
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

/// containerd's `Tasks.Delete` fails (a gRPC error injected by the proxy in front of the
/// real socket; every other call reaches containerd) under `guard hygiene`: the finding
/// names the task and the error, the task is left as it was, containerd keeps running,
/// the exit code and the metrics say the remedy failed, and each run asks exactly once
/// (no retry loop inside a run); the next run asks again.
#[test]
fn r04_a_failing_task_delete_is_reported_left_as_it_is_and_tried_once_a_run() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    const DELETE: &str = "/containerd.services.tasks.v1.Tasks/Delete";
    let _serial = serial();
    let n = HygieneNode::start();
    let leaky = n.pod("undeletable");
    let (cid, _) = running_locker(&leaky, "payload", &n.host_dir("undeletable"));
    let task = make_leaked_task(&leaky, &cid);
    let failing = Mode::Fail(Code::Unavailable);
    let proxy = GrpcProxy::start_with(&n.socket(), &n.t.path().join("fail.sock"), DELETE, failing);
    let cfg = guard_config_with(&n, |c| c.containerd_socket(&proxy.socket));
    let containerd = n.ctrd.identity();
    let mut runs = Vec::new();
    for run in 1..=2 {
        let out = guard(&cfg, &["hygiene"]);
        out.expect(1, "remedy.delete-task", "warn")
            .mentions(
                "remedy.delete-task",
                &[
                    "0 of 1",
                    &cid,
                    "failed",
                    "Tasks.Delete",
                    "refused by the test proxy",
                ],
            )
            .expect(1, "runtime.leaked-tasks", "fail");
        let counts = proxy.counts();
        assert_eq!(
            proxy.calls(DELETE),
            run,
            "one Tasks.Delete a run: {counts:?}"
        );
        let left = ctr_task(&n.socket(), &cid).expect("the task is left");
        assert_eq!((left.pid, left.status.as_str()), (task.pid, "STOPPED"));
        let failed = format!(
            "containerd_guard_remedies_total{{kind=\"delete-task\",outcome=\"failed\"}} {run}"
        );
        let metrics = std::fs::read_to_string(n.t.metrics_textfile()).unwrap_or_default();
        assert!(
            metrics.lines().any(|l| l == failed),
            "no {failed:?} in\n{metrics}"
        );
        runs.push(out);
    }
    n.assert_never_restarted(containerd, &runs.iter().collect::<Vec<_>>());
}
