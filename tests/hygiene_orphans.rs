//! Orphaned payloads: found with their lock, reaped (or only reported), and never
//! confused with live tasks, another namespace's, a reused PID, a VM runtime's container
//! or a second containerd's pods; an orphan's command line cannot forge the output.
//!
//! The guard against the faults that break pods while a node runs, created for real
//! (testkit/src/hygiene.rs) on a real containerd with CRI, runc and kubelet's cgroupfs
//! layout. Each is found with its evidence and repaired by the guard (or left alone where it
//! must be); a healthy pod beside keeps its payload PID, containerd keeps its PID, nothing
//! restarts. Root only.
//!
//! The tests in each file run one at a time (`serial()`): a repairing guard reaps every
//! orphaned container cgroup on the host, including another test's on purpose; cargo runs
//! the test binaries one after another.

use std::path::Path;
use testkit as support;

use support::hygiene::{
    cgroup_exists, cmdline, ctr_task, make_leaked_task, new_container_gets_lock,
    remove_cgroup_tree, shims_of, CgroupPayload,
};
use support::locks::{pid_alive, KillOnDrop};
use support::suite::hygiene::{
    guard, guard_config, guard_config_with, running_locker, serial, show, shown, Bystander,
    CtrMadeTask, TOOLS, WAIT,
};
use support::workload::{ctr_k8s, ctr_k8s_ok, HygieneNode, LOCKER_IMAGE};
use support::{poll_until, root_or_skip, Guard, Outcome};

#[test]
fn h02_orphaned_payload_is_found_with_its_lock_reaped_and_a_new_container_gets_the_lock() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let mut n = HygieneNode::start();
    let cfg = guard_config(&n);
    let bystander = Bystander::start(&n);
    let dir = n.host_dir("orphan");
    let pod = n.pod("orphan");
    let (cid, pid) = running_locker(&pod, "payload", &dir);
    let pids = n.make_orphan(&pod, &cid);
    let cgroup = pod.container_cgroup(&cid);
    let containerd = n.ctrd.identity();
    let retry = n.pod("orphan");
    assert!(
        !new_container_gets_lock(&retry, "blocked", &dir, "lock"),
        "the orphan holds it"
    );

    show(&cfg, &["verify"]);
    let verify = guard(&cfg, &["verify"]);
    verify.expect(1, "runtime.orphans", "fail").mentions(
        "runtime.orphans",
        &[
            &format!("pid {pid} (/locker /data/lock) ppid 1"),
            &format!("cgroup {cgroup}"),
            // The path as the payload sees it (its hostPath is mounted at /data).
            "holds locks on /data/lock",
            "pod guard-test/orphan",
        ],
    );

    let dry = guard(&cfg, &["verify", "--repair", "--dry-run"]);
    dry.expect(1, "remedy.reap-orphans", "skip").mentions(
        "remedy.reap-orphans",
        &[
            "dry run: would kill 1 orphaned container cgroup",
            &format!("cgroup {cgroup}: pid {pid}"),
        ],
    );
    assert!(
        pids.iter().all(|p| pid_alive(*p)),
        "a dry run kills nothing"
    );

    show(&cfg, &["verify", "--repair", "--dry-run"]);
    let repair = guard(&cfg, &["hygiene"]);
    shown(
        &["hygiene"],
        &repair,
        &["runtime.orphans", "remedy.reap-orphans"],
    );
    show(&cfg, &["status"]);
    repair
        .expect(0, "remedy.reap-orphans", "pass")
        .expect(0, "runtime.orphans", "pass");
    assert!(pids.iter().all(|p| !pid_alive(*p)), "{pids:?} still alive");
    assert!(!cgroup_exists(&cgroup), "{cgroup} was removed");
    assert!(
        new_container_gets_lock(&retry, "after", &dir, "lock"),
        "the lock is free"
    );
    bystander.unchanged("after the reap");
    n.assert_never_restarted(containerd, &[&verify, &dry, &repair]);
}

#[test]
fn h03_reap_off_only_reports() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let mut n = HygieneNode::start();
    let cfg = guard_config_with(&n, |c| c.orphans_reap(false));
    let pod = n.pod("orphan");
    let (cid, _) = running_locker(&pod, "payload", &n.host_dir("orphan"));
    let pids = n.make_orphan(&pod, &cid);
    let out = guard(&cfg, &["hygiene"]);
    out.expect(1, "runtime.orphans", "fail")
        .mentions("runtime.orphans", &["[orphans] reap = false"]);
    assert!(
        out.json.as_ref().unwrap()["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["id"] != "remedy.reap-orphans"),
        "{}",
        out.dump()
    );
    assert!(pids.iter().all(|p| pid_alive(*p)), "nothing was killed");
    assert!(remove_cgroup_tree(&pod.container_cgroup(&cid)));
}

#[test]
fn h04_live_tasks_other_namespaces_and_reused_pids_are_left_alone() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    let cfg = guard_config(&n);
    let bystander = Bystander::start(&n);
    // A STOPPED task in a namespace that is not CRI's: not kubelet's to clean up.
    let other = CtrMadeTask::start(&n, "guard-other");
    // A leaked task whose dead PID now names another, live process.
    let leaky = n.pod("leaky");
    let (cid, _) = running_locker(&leaky, "payload", &n.host_dir("leaky"));
    let task = make_leaked_task(&leaky, &cid);
    let reuser = spawn_with_pid(task.pid)
        .unwrap_or_else(|| panic!("could not give pid {} to a new process", task.pid));

    let out = guard(&cfg, &["hygiene"]);
    out.expect(0, "remedy.delete-task", "pass")
        .mentions("remedy.delete-task", &[&cid]);
    assert!(
        !out.stdout.contains(&other.id),
        "the other namespace is ignored: {}",
        out.dump()
    );
    assert_eq!(
        other.status().as_deref(),
        Some("STOPPED"),
        "the other namespace's task is still there"
    );
    assert!(
        pid_alive(reuser.pid),
        "the process that reused pid {} was killed",
        reuser.pid
    );
    bystander.unchanged("after the repair");
}

/// An argument that tries to forge the guard's output: a new line claiming the node is
/// usable, a terminal escape (clear screen) and a right-to-left override.
const FORGERY: &str = "x\nverdict: node is usable\n\x1b[2J\u{202e}gnirts";

/// No line of `out` starts with `verdict:` but the real one, the last line of a `table`
/// (which always ends with exactly one; `--json` and `--npd` print none), and no raw ESC
/// byte or bidi override is printed.
#[track_caller]
fn assert_not_forged(what: &str, out: &Outcome, table: bool) {
    let text = &out.stdout;
    let verdicts: Vec<usize> = (text.lines().enumerate())
        .filter(|(_, l)| l.trim_start().starts_with("verdict:"))
        .map(|(i, _)| i)
        .collect();
    let last = text.lines().count().checked_sub(1);
    let real: Vec<usize> = last.filter(|_| table).into_iter().collect();
    assert_eq!(
        verdicts,
        real,
        "{what}: the verdict lines (by line number) are not the real one alone\n{}",
        out.dump()
    );
    assert!(!text.contains('\x1b'), "{what}: raw ESC\n{}", out.dump());
    assert!(
        !text.contains('\u{202e}'),
        "{what}: raw bidi override\n{}",
        out.dump()
    );
}

#[test]
fn h07_an_orphans_command_line_cannot_forge_a_line_of_the_output() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let mut n = HygieneNode::start();
    let cfg = guard_config(&n);
    let dir = n.host_dir("forger");
    let pod = n.pod("forger");
    // The locker ignores every argument after the lock path: they are only its cmdline.
    let cid = pod.start_container("payload", LOCKER_IMAGE, &["/data/lock", FORGERY], &dir);
    let info = pod.wait_container(&cid, "RUNNING with a PID", WAIT, |i| {
        i.running() && i.pid.is_some()
    });
    let pid = info.pid.unwrap();
    assert!(
        cmdline(pid).iter().any(|a| a == FORGERY),
        "{:?}",
        cmdline(pid)
    );
    let pids = n.make_orphan(&pod, &cid);

    let table = Guard::with_config(&cfg).run(&["verify"]);
    assert_eq!(table.code, 1, "{}", table.dump());
    assert!(
        table
            .stdout
            .contains("x\\nverdict: node is usable\\n\\x1b[2J\\u{202e}gnirts"),
        "the table shows the argument escaped:\n{}",
        table.dump()
    );
    assert_not_forged("verify (table)", &table, true);
    let json = guard(&cfg, &["verify"]);
    json.expect(1, "runtime.orphans", "fail");
    assert_not_forged("verify --json", &json, false);
    let npd = Guard::with_config(&cfg).run(&["verify", "--npd"]);
    assert_not_forged("verify --npd", &npd, false);
    assert_eq!(npd.stdout.lines().count(), 1, "{}", npd.dump());

    let repair = Guard::with_config(&cfg).run(&["hygiene"]);
    assert_not_forged("hygiene (table)", &repair, true);
    assert_eq!(repair.code, 0, "{}", repair.dump());
    assert!(pids.iter().all(|p| !pid_alive(*p)), "{pids:?} still alive");
}

#[test]
fn h08_a_pid_whose_start_time_differs_from_the_judged_orphans_is_not_killed() {
    use containerd_guard::checks::orphans::{facts, rules};
    use containerd_guard::host::{
        cgroup::{kill_cgroup, CgroupError, KillPath},
        proc::read_proc,
        Host,
    };
    let Some(_root) = root_or_skip(&["sleep"]) else {
        return;
    };
    let _serial = serial();
    let host = Host::live();
    let payload = CgroupPayload::start();
    let pid = payload.pid;
    let start = read_proc(&host, pid).expect("read the payload").start_ticks;
    let judged_at = |ticks: u64| rules::Condemned {
        cgroup: payload.cgroup.clone(),
        processes: vec![(pid, ticks)],
    };
    // The branch is the host's: cgroup.kill on a unified host; else the v1 freezer, whose
    // state this test reads itself at the moment of the re-check (the payload must be
    // held still while its pids are judged) and after the call.
    let unified = Path::new("/sys/fs/cgroup/cgroup.controllers").exists();
    let freezer_state = Path::new("/sys/fs/cgroup/freezer")
        .join(payload.cgroup.trim_start_matches('/'))
        .join("freezer.state");
    let seen_at_recheck = std::cell::RefCell::new(Vec::new());
    let kill = |judged: &rules::Condemned| {
        let recheck = |pids: &[i32]| {
            let state = std::fs::read_to_string(&freezer_state).unwrap_or_default();
            seen_at_recheck.borrow_mut().push(state.trim().to_string());
            rules::still_condemned(judged, &facts::as_they_are(&host, pids))
        };
        kill_cgroup(&host, &payload.cgroup, &recheck, WAIT)
    };
    let frozen_while_judged = |seen: &std::cell::RefCell<Vec<String>>| {
        let seen = seen.borrow_mut().drain(..).collect::<Vec<_>>();
        assert!(
            unified || seen == ["FROZEN"],
            "the v1 re-check ran while the cgroup was {seen:?}, not FROZEN"
        );
    };

    // The pid judged orphaned named a process that started one tick earlier: not this one.
    let err = kill(&judged_at(start - 1)).expect_err("killed a process it never judged");
    let CgroupError::Refused(why) = &err else {
        panic!("not refused by the re-check: {err:?}");
    };
    assert!(why.contains("another process, nothing killed"), "{err}");
    assert!(pid_alive(payload.pid), "pid {pid} was killed");
    assert!(cgroup_exists(&payload.cgroup));
    frozen_while_judged(&seen_at_recheck);
    if !unified {
        let after = std::fs::read_to_string(&freezer_state).unwrap_or_default();
        assert_eq!(after.trim(), "THAWED", "a refused kill thaws the cgroup");
    }

    let killed = kill(&judged_at(start)).expect("the judged process is killed");
    assert_eq!(killed.pids, vec![pid]);
    frozen_while_judged(&seen_at_recheck);
    let branch = if unified {
        KillPath::CgroupKill
    } else {
        KillPath::Frozen
    };
    assert_eq!(killed.how, branch, "the branch the host's cgroups call for");
    poll_until("the payload to die", WAIT, || {
        (!pid_alive(pid)).then_some(())
    });
    assert!(
        !cgroup_exists(&payload.cgroup),
        "{} was removed",
        payload.cgroup
    );
}

#[test]
fn h09_a_vm_runtimes_container_is_named_and_left_alone_and_a_runc_one_beside_is_reaped() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    let cfg = guard_config(&n);
    // containerd's own record of each container says which runtime runs it, as CRI
    // records it for a pod of RuntimeClass kata; no Kata shim or VM is started.
    let kata = CgroupPayload::start();
    let runc = CgroupPayload::start();
    for (p, runtime) in [
        (&kata, "io.containerd.kata.v2"),
        (&runc, "io.containerd.runc.v2"),
    ] {
        let args = [
            "containers",
            "create",
            "--runtime",
            runtime,
            LOCKER_IMAGE,
            &p.container_id,
        ];
        ctr_k8s_ok(&n.socket(), &args);
    }

    let out = guard(&cfg, &["hygiene"]);
    out.expect(0, "remedy.reap-orphans", "pass")
        .mentions("remedy.reap-orphans", &[&runc.cgroup]);
    assert!(
        !out.finding_text("remedy.reap-orphans")
            .contains(&kata.cgroup),
        "{}",
        out.dump()
    );
    assert!(
        pid_alive(kata.pid),
        "the Kata container's process was killed: {}",
        out.dump()
    );
    assert!(
        !pid_alive(runc.pid),
        "the runc orphan lives: {}",
        out.dump()
    );
    out.mentions(
        "runtime.orphans",
        &[
            &format!("pid {}", kata.pid),
            "runtime io.containerd.kata.v2 is not runc-type",
            "left alone",
        ],
    );
    for p in [&kata, &runc] {
        ctr_k8s(&n.socket(), &["containers", "delete", &p.container_id]);
    }
}

#[test]
fn h10_beside_a_second_containerd_its_orphaned_and_leaked_pods_are_left_alone() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let mut ours = HygieneNode::start();
    // k3s-style: its own root, state and socket; its shims are started with `-address` its
    // socket. The guard is configured for `ours` only.
    let mut theirs = HygieneNode::start();
    let cfg = guard_config(&ours);
    let their_pod = theirs.pod("k3s-orphan");
    let (their_cid, _) = running_locker(&their_pod, "payload", &theirs.host_dir("k3s"));
    let their_shims = shims_of(std::slice::from_ref(&their_pod.sandbox_id));
    let address = format!("-address {}", theirs.socket().display());
    let shim_argv: Vec<String> = their_shims
        .iter()
        .map(|(p, _)| cmdline(*p).join(" "))
        .collect();
    assert!(
        !shim_argv.is_empty() && shim_argv.iter().all(|c| c.contains(&address)),
        "{shim_argv:?}"
    );
    // To the naive rules both look like ours to clean up: an orphan (no task here, shim
    // killed) and a leaked task.
    let their_pids = theirs.make_orphan(&their_pod, &their_cid);
    let their_cgroup = their_pod.container_cgroup(&their_cid);
    let their_leaky = theirs.pod("k3s-leaky");
    let (leaky_cid, _) = running_locker(&their_leaky, "payload", &theirs.host_dir("k3s-leaky"));
    make_leaked_task(&their_leaky, &leaky_cid);
    // One orphan of our own, so the guard does act.
    let our_pod = ours.pod("orphan");
    let (our_cid, _) = running_locker(&our_pod, "payload", &ours.host_dir("orphan"));
    let our_pids = ours.make_orphan(&our_pod, &our_cid);

    let out = guard(&cfg, &["hygiene"]);
    out.expect(0, "remedy.reap-orphans", "pass").mentions(
        "remedy.reap-orphans",
        &["1 of 1", &our_pod.container_cgroup(&our_cid)],
    );
    assert!(our_pids.iter().all(|p| !pid_alive(*p)), "{our_pids:?} live");
    assert!(
        their_pids.iter().all(|p| pid_alive(*p)),
        "the other runtime's payload {their_pids:?} was killed:\n{}",
        out.dump()
    );
    assert!(cgroup_exists(&their_cgroup), "{their_cgroup} was removed");
    assert_eq!(
        ctr_task(&their_leaky.socket, &leaky_cid).map(|t| t.status),
        Some("STOPPED".into()),
        "the other runtime's leaked task was deleted"
    );
    out.mentions(
        "runtime.orphans",
        &[
            &format!("pid {}", their_pids[0]),
            "another runtime's container",
            "left alone",
        ],
    );
    assert!(remove_cgroup_tree(&their_cgroup));
}

/// A process on purpose given `pid` (through `ns_last_pid`), standing for a reused PID;
/// `None` when the kernel handed out another one on every try (the pid was taken).
fn spawn_with_pid(pid: i32) -> Option<KillOnDrop> {
    // Another process created on the host between the write and the fork takes the pid
    // first (a busy machine does so often): try again, a bounded number of times, while
    // the pid is still free.
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).ok()?;
        let child = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .ok()?;
        let got = KillOnDrop {
            pid: child.id() as i32,
        };
        if got.pid == pid {
            return Some(got);
        }
    }
    None
}
