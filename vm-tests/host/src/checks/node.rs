//! The running-node scenarios (guest/scenario.sh): a node that booted healthy, ran a pod,
//! then met an incident (k3s's shim kill, a leaked task, a removed sandbox image, a held
//! boot recovered by the README's block).

use super::common::*;
use super::scenarios::Ctx;
use super::text::{count, cut, first, grep, has, head, lines, oneline};
use super::Judge;
use crate::facts::Report;

/// awk's `$1 == P { print F(fields) }` over a block: the printed lines.
fn awk_rows(text: &str, key: &str, f: impl Fn(&[&str]) -> String) -> String {
    let rows: Vec<String> = lines(text)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|w| w.first().copied().unwrap_or("") == key)
        .map(|w| f(&w))
        .collect();
    rows.join("\n")
}

fn at<'a>(w: &[&'a str], i: usize) -> &'a str {
    w.get(i).copied().unwrap_or("")
}

pub fn scenario_ran(j: &mut Judge, r: &Report) {
    let done = r.get("sc.scenario.done");
    let res = r.unit("vm-tests-scenario.service", "Result");
    j.check(
        format!("the scenario unit ran to its end ({res}, done at {done}s)"),
        format!("{res}/{}", if_set(&done, "done")) == "success/done",
    );
}

/// The stand-in's pod ran before the incident, on a node whose boot passed the guards.
pub fn standin_ran(j: &mut Judge, r: &Report) {
    kubelet_prestart(
        j,
        r,
        "kubelet's pre-start (guard runtime) passed before the stand-in started",
    );
    let (res, cs) = (r.get("standin.result"), r.get("standin.container_state"));
    j.check(
        format!(
            "the stand-in's pod runs its container (stand-in: {res} {cs} output '{}' {})",
            r.get("standin.output"),
            r.get("standin.error")
        ),
        format!("{res}/{cs}") == "ok/CONTAINER_RUNNING",
    );
    scenario_ran(j, r);
    let t = r.get("sc.timer.before");
    j.check(
        format!("the hygiene timer is installed and was running ({t}); the test starts its service itself"),
        t == "enabled/active",
    );
}

/// What the hygiene service did, from its own unit and journal.
fn hygiene_ran(j: &mut Judge, r: &Report, pat: &str) {
    let (rc, res) = (r.get("sc.hygiene.rc"), r.get("sc.hygiene.result"));
    j.check(
        format!("systemctl start containerd-guard-hygiene.service succeeded (rc={rc}, Result={res}, {}s)", r.get("sc.hygiene.secs")),
        format!("{rc}/{res}") == "0/success",
    );
    let jl = r.block("sc.hygiene.journal");
    j.check(
        format!("its journal: {}", cut(&first(&jl, pat), 200)),
        count(&jl, pat) > 0,
    );
}

fn eq_check(j: &mut Judge, r: &Report, what: &str, keys: &[&str], want: &str) {
    let got: Vec<String> = keys.iter().map(|k| r.get(k)).collect();
    j.check(what, got.join("/") == want);
}

pub fn k3s(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    let (cid, sid, pids) = (
        r.get("sc.container"),
        r.get("sc.sandbox"),
        r.get("sc.locker.pids"),
    );
    let first_pid = pids.split(' ').next().unwrap_or("").to_string();
    standin_ran(j, r);
    let out = r.get("standin.output");
    j.check(
        format!("the locker holds the lock: '{out}'"),
        has(&out, "^locked "),
    );
    let cg = r.get("sc.locker.cgroup");
    j.check(
        format!("the locker runs in kubelet's systemd cgroup layout, a scope of the systemd cgroup driver ({cg})"),
        has(&cg, &format!(r"^/kubepods\.slice/kubepods-besteffort\.slice/kubepods-besteffort-pod[0-9a-f_]+\.slice/cri-containerd-{cid}\.scope$")),
    );
    j.check(
        format!("the locker and its child share the lock (pids: {pids})"),
        pids.split_whitespace().count() == 2,
    );
    let dropin = r.get("sc.dropin");
    let k3s_words: Vec<&str> = dropin.split(' ').filter(|w| w.contains("k3s")).collect();
    j.check(
        format!(
            "containerd's unit carries the k3s-style drop-in ({})",
            k3s_words.join("\n")
        ),
        has(&dropin, r"50-k3s-style\.conf"),
    );
    j.check(
        "the journal has the orphans as a structured entry (journalctl GUARD_FINDING=runtime.orphans, GUARD_STATUS=fail)",
        has(&r.block("jfind"), r#""GUARD_FINDING":"runtime.orphans".*"GUARD_STATUS":"fail"|"GUARD_STATUS":"fail".*"GUARD_FINDING":"runtime.orphans""#),
    );
    k3s_incident(j, r, &cid, &sid, &pids, &first_pid);
    k3s_guard(j, x, &cid, &pids, &first_pid);
}

fn k3s_incident(j: &mut Judge, r: &Report, _cid: &str, sid: &str, pids: &str, first_pid: &str) {
    eq_check(
        j,
        r,
        &format!("systemctl stop containerd (rc={})", r.get("sc.stop.rc")),
        &["sc.stop.rc"],
        "0",
    );
    let cmd = r.get("sc.shim.cmdline");
    j.check(
        format!(
            "the pod's shim SIGKILLed: pid {}, '{}'",
            r.get("sc.shim.pid"),
            cut(&cmd, 120)
        ),
        has(
            &format!("{cmd}/{}", r.get("sc.shim.gone")),
            &format!("containerd-shim-runc-v2 .*-id {sid}( .*)?/0$"),
        ),
    );
    let removed = r.get("sc.bundle.removed");
    j.check(
        format!("the container's runtime state removed (bundle.removed={removed})"),
        removed == "yes",
    );
    eq_check(
        j,
        r,
        &format!(
            "systemctl start containerd (rc={}), it answers (rc={})",
            r.get("sc.start.rc"),
            r.get("sc.answers.rc")
        ),
        &["sc.start.rc", "sc.answers.rc"],
        "0/0",
    );
    let ps = r.block("sc.ps.orphans");
    let shown = awk_rows(&ps, first_pid, |w| {
        format!("pid {} ppid {} {}", at(w, 0), at(w, 1), at(w, 2))
    });
    let ppid = awk_rows(&ps, first_pid, |w| at(w, 1).to_string());
    let alive = r.get("sc.orphans.alive");
    j.check(
        format!("the payload outlived its shim, orphaned: alive '{alive}', {shown}"),
        format!("{alive}/{ppid}") == format!("{pids}/1"),
    );
    let (sock, def) = (r.get("sc.socket"), r.get("sc.default_socket"));
    j.check(
        format!("containerd serves k3s's socket ({sock}); nothing at the default path ({def})"),
        format!("{sock}/{}", count(&def, "No such file"))
            == "/run/k3s/containerd/containerd.sock/1",
    );
}

fn k3s_guard(j: &mut Judge, x: &Ctx, cid: &str, pids: &str, first_pid: &str) {
    let r = &x.r;
    eq_check(
        j,
        r,
        &format!("guard --json verify exits 1 (rc={})", r.get("sc.verify.rc")),
        &["sc.verify.rc"],
        "1",
    );
    let orphans = format!(
        r"^fail \| .*pid {first_pid} \([^)]*locker[^)]*\) ppid 1 .*cgroup [^ ;]*{cid}.*holds locks on [^;]*/lock"
    );
    finding_is(
        j,
        r,
        "verify names the orphaned locker and its lock",
        "sc.verify",
        "runtime.orphans",
        &orphans,
        Some(&format!("pid {first_pid} ")),
    );
    let kill = r"^warn \| .*ExecStartPre=/usr/bin/pkill -9 containerd-shim \(in [^)]*/containerd\.service\.d/50-k3s-style\.conf:[0-9]+\)";
    finding_is(
        j,
        r,
        "verify names the shim kill and the drop-in",
        "sc.verify",
        "runtime.kill-mode",
        kill,
        None,
    );
    let l = x.lint();
    let ll = l.line("lint.kill-mode");
    let ppid = awk_rows(&r.block("sc.ps.orphans"), first_pid, |w| {
        at(w, 1).to_string()
    });
    let tied = format!(
        "{}/{}/{}/{}/{ppid}",
        l.status("lint.kill-mode"),
        count(
            &ll,
            r"pkill -9 containerd-shim .*containerd\.service\.d/50-k3s-style\.conf:[0-9]+"
        ),
        count(&r.get("sc.dropin"), r"50-k3s-style\.conf"),
        count(
            &finding(r, "sc.verify", "runtime.kill-mode"),
            r"50-k3s-style\.conf"
        ),
    );
    j.check(
        format!("before the boot, guard lint named the shim kill ({ll}); the boot ran containerd with it (its unit carries the drop-in; verify on the node names the same line) and a shim SIGKILLed across a containerd restart left its payload orphaned (ppid 1)"),
        tied == "fail/1/1/1/1",
    );
    k3s_dry(j, r, cid, pids, first_pid);
}

fn k3s_after(j: &mut Judge, r: &Report) {
    let sk = r.block("sc.skipped");
    j.check(
        format!("with no socket at the configured path, guard hygiene exits 0 and says it skipped (rc={}: {})", r.get("sc.skipped.rc"), oneline(&head(&sk, 2))),
        format!("{}/{sk}", r.get("sc.skipped.rc")) == "0/skipped: no containerd socket at /run/vm-tests/no.sock",
    );
    let (rc, alive, cg) = (
        r.get("sc.reaped.rc"),
        r.get("sc.after_reap.alive"),
        r.get("sc.cgroup_after"),
    );
    j.check(
        format!("the orphans are gone (reaped.rc={rc}, alive '{alive}', cgroup '{cg}')"),
        format!("{rc}/{alive}/{cg}") == "0//",
    );
    // the guard's own line says the kill succeeded and which branch took it: a unified
    // (cgroup v2) guest kills through cgroup.kill; systemd then removes the emptied scope
    let hj = r.block("sc.hygiene.journal");
    j.check(
        format!(
            "the hygiene unit's reap killed the orphan through cgroup.kill (cgroup v2) and says so: {}",
            cut(&first(&hj, "reap-orphans"), 200)
        ),
        has(&hj, r"reap-orphans /kubepods.*: killed pids \[[0-9]+(, [0-9]+)*\] by cgroup\.kill \(cgroup v2\) and removed the cgroup")
            && has(&hj, r"remedy\.reap-orphans: 1 of 1 orphaned cgroup\(s\) killed"),
    );
    let relock = r.block("sc.relock");
    let result = grep(&relock, "^result=").join("\n");
    j.check(
        format!(
            "a new locker (new pod) gets the lock: {}",
            oneline(&grep(&relock, "^(output|result|error)=").join("\n"))
        ),
        format!("{result}/{}", count(&relock, "^output=locked ")) == "result=ok/1",
    );
    let status = r.block("sc.status");
    j.check(
        format!(
            "guard status records the reap: {}",
            cut(&first(&status, "reap-orphans"), 160)
        ),
        has(&status, "reap-orphans"),
    );
}

pub fn leaked(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    let cid = r.get("sc.container");
    standin_ran(j, r);
    let stopc = r.block("sc.stopc");
    j.check(
        format!(
            "CRI StopContainer: {}",
            oneline(&grep(&stopc, "^(container_state|result|error)=").join("\n"))
        ),
        has(&stopc, "container_state=CONTAINER_EXITED"),
    );
    let (ts, tk) = (r.get("sc.taskstart.rc"), r.get("sc.taskkill.rc"));
    j.check(
        format!(
            "ctr tasks start -d --null-io, then kill -s SIGKILL (rc {ts}/{tk}) {}",
            oneline(&head(&r.block("sc.taskstart"), 2))
        ),
        format!("{ts}/{tk}") == "0/0",
    );
    let status = r.get("sc.task.status");
    j.check(
        format!(
            "the task is STOPPED and stays (stopped.rc={}, status {status})",
            r.get("sc.stopped.rc")
        ),
        status == "STOPPED",
    );
    let err = grep(&r.block("sc.remove1"), "^error=").join("\n");
    j.check(
        format!(
            "RemovePodSandbox fails: {}",
            cut(&first(&r.block("sc.remove1"), "^error="), 400)
        ),
        has(
            &err,
            "RemovePodSandbox: FailedPrecondition.*cannot delete running task",
        ),
    );
    leaked_cleaned(j, r, &cid);
    super::stale_tasks::stale_tasks(j, r);
}

/// hygiene --dry-run names the orphans and kills nothing; the service reaps them.
fn k3s_dry(j: &mut Judge, r: &Report, cid: &str, pids: &str, first_pid: &str) {
    let dry = format!(
        r"^skip \| dry run: would kill [0-9]+ orphaned container cgroup.*cgroup [^ ]*cri-containerd-{cid}\.scope: pid {first_pid}"
    );
    finding_is(
        j,
        r,
        "hygiene --dry-run lists the cgroup it would kill",
        "sc.dryrun",
        "remedy.reap-orphans",
        &dry,
        None,
    );
    let ad = r.get("sc.after_dryrun.alive");
    j.check(
        format!("hygiene --dry-run killed nothing: alive after it '{ad}'"),
        ad == pids,
    );
    let blocked = grep(&r.block("sc.blocked"), "^output=").join("\n");
    j.check(
        format!(
            "meanwhile a new incarnation cannot take the lock: {}",
            first(&r.block("sc.blocked"), "^output=")
        ),
        has(&blocked, "cannot acquire lock [^ ]*/lock"),
    );
    hygiene_ran(
        j,
        r,
        &format!(r"reap-orphans .*cri-containerd-{cid}\.scope"),
    );
    k3s_after(j, r);
}

/// verify names the leaked task, hygiene deletes exactly it, the pod can go.
fn leaked_cleaned(j: &mut Judge, r: &Report, cid: &str) {
    eq_check(
        j,
        r,
        &format!("guard --json verify exits 1 (rc={})", r.get("sc.verify.rc")),
        &["sc.verify.rc"],
        "1",
    );
    let pat = format!(r"^fail \| .*task {cid} STOPPED .*blocks RemovePodSandbox");
    finding_is(
        j,
        r,
        "verify names the leaked task and what it blocks",
        "sc.verify",
        "runtime.leaked-tasks",
        &pat,
        None,
    );
    hygiene_ran(j, r, &format!("delete-task {cid}"));
    let st = r.block("sc.status");
    j.check(
        format!(
            "guard status records the delete: {}",
            cut(&first(&st, "delete-task"), 160)
        ),
        has(&st, "delete-task"),
    );
    let after = r.get("sc.task.after");
    j.check(format!("the task is gone ('{after}')"), after.is_empty());
    let rm2 = r.block("sc.remove2");
    j.check(
        format!(
            "RemovePodSandbox now succeeds: {}",
            oneline(&grep(&rm2, "^(result|error)=").join("\n"))
        ),
        has(&rm2, "^result=ok"),
    );
    // the boot's starts up to the leak's end: the stale step after it restarts containerd
    let (b, a, n) = (
        r.get("sc.containerd.pid.before"),
        r.get("sc.containerd.pid.after"),
        r.get("sc.stale.starts.before"),
    );
    j.check(
        format!("nothing restarted containerd: pid {b} before, {a} after, {n} start(s) this boot by then"),
        format!("{b}/{n}") == format!("{a}/1"),
    );
}
