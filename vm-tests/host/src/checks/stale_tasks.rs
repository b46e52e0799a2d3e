//! leaked-task's last step: a stale containerd that still runs a task (guest/scenario.sh
//! stale_tasks). A new pod sandbox runs; the volume is detached lazily under the running
//! containerd and mounted again, so containerd's database is on a mount that is gone.
//! kubelet's restart runs its pre-start (`guard runtime`), which must refuse to restart
//! containerd over the running task and say so, containerd and the task's shim left
//! running; the documented force path (`guard verify --repair --force`) then restarts it
//! exactly once.

use super::common::finding;
use super::text::{cut, first, has, oneline};
use super::Judge;
use crate::facts::Report;

fn get(r: &Report, k: &str) -> String {
    r.get(&format!("sc.stale.{k}"))
}

pub fn stale_tasks(j: &mut Judge, r: &Report) {
    let sb = get(r, "sandbox");
    let pod = r.block("sc.stale.pod");
    j.check(
        format!(
            "stale with a task: a new pod sandbox runs ({}, shim pid {}); the volume detached lazily (rc={}) and mounted again (rc={}, {})",
            oneline(&super::text::grep(&pod, "^(state|result)=").join("\n")),
            get(r, "shim"),
            get(r, "umount.rc"),
            get(r, "mount.rc"),
            get(r, "mounted")
        ),
        has(&pod, "^result=ok$")
            && has(&sb, "^[0-9a-f]{64}$")
            && has(&get(r, "shim"), "^[0-9]+$")
            && format!("{}/{}", get(r, "umount.rc"), get(r, "mount.rc")) == "0/0"
            && has(&get(r, "mounted"), "ctrd-eph"),
    );
    refused(j, r, &sb);
    forced(j, r);
}

/// kubelet's pre-start refused the restart, named the task and --force; nothing moved.
fn refused(j: &mut Judge, r: &Report, sb: &str) {
    let lines = r.block("sc.stale.refusal");
    let stale = first(&lines, r"FAIL +runtime\.stale");
    j.check(
        format!(
            "  systemctl restart kubelet (rc={}, kubelet {}): its pre-start found containerd stale: {}",
            get(r, "kubelet.rc"),
            get(r, "kubelet.result"),
            cut(&stale, 150)
        ),
        get(r, "kubelet.rc") != "0" && get(r, "kubelet.result") == "exit-code/failed" && !stale.is_empty(),
    );
    let refusal = first(&lines, "refused to restart the stale containerd");
    j.check(
        format!(
            "  and refused to restart it over the running task, naming the pod and --force: {}",
            cut(&refusal, 150)
        ),
        has(
            &refusal,
            r"remedy\.restart +refused to restart the stale containerd: it still runs 1 task\(s\)",
        ) && !sb.is_empty()
            && lines.contains(sb)
            && lines.contains("--force"),
    );
    let (b, a) = (get(r, "containerd.before"), get(r, "containerd.refused"));
    j.check(
        format!(
            "  containerd untouched by the refusal (MainPID {b} -> {a}, starts {} -> {}), the task's shim still runs (alive: {})",
            get(r, "starts.before"),
            get(r, "starts.refused"),
            get(r, "shim.alive")
        ),
        has(&b, "^[1-9][0-9]*$")
            && a == b
            && get(r, "starts.refused") == get(r, "starts.before")
            && get(r, "shim.alive") == "yes",
    );
}

/// `guard verify --repair --force` restarted it exactly once; then it is current.
fn forced(j: &mut Judge, r: &Report) {
    let restart = finding(r, "sc.stale.force", "remedy.restart");
    let stale = finding(r, "sc.stale.force", "runtime.stale");
    let (b, n) = (get(r, "starts.refused"), get(r, "starts.forced"));
    let once = match (b.parse::<u32>(), n.parse::<u32>()) {
        (Ok(b), Ok(n)) => n == b + 1,
        _ => false,
    };
    j.check(
        format!(
            "  guard verify --repair --force (rc={}) restarted it exactly once (containerd starts {b} -> {n}, MainPID {} -> {}): remedy.restart = '{}'",
            get(r, "force.rc"),
            get(r, "containerd.refused"),
            get(r, "containerd.forced"),
            cut(&restart, 150)
        ),
        get(r, "force.rc") == "0"
            && has(&restart, r"^pass \| restarted containerd \(stale\), restart 1 of [0-9]+ this boot")
            && once
            && has(&get(r, "containerd.forced"), "^[1-9][0-9]*$")
            && get(r, "containerd.forced") != get(r, "containerd.refused"),
    );
    j.check(
        format!(
            "  then containerd is current (runtime.stale = '{}') and kubelet starts again (rc={})",
            cut(&stale, 120),
            get(r, "kubelet2.rc")
        ),
        has(&stale, "^pass ") && get(r, "kubelet2.rc") == "0",
    );
    j.note(format!(
        "       the task's shim across the forced restart: alive: {}",
        get(r, "shim.forced")
    ));
}
