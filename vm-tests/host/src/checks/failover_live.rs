//! ops' failover under a running containerd (guest/scenario.sh, step `failover_live`): the
//! volume detached (`umount -l`) while containerd serves the pod from it. `guard verify`,
//! `verify --repair`, `--repair --force` and the hygiene service leave containerd as it is
//! (MainPID and NRestarts) and write nothing under the root filesystem's directory, the
//! refusal named; the volume mounted again, `guard verify --repair --force` (the pod runs
//! on) restarts containerd once onto it, and `guard verify` then passes.

use super::ops::{sel, slash};
use super::text::{cut, first, has};
use super::Judge;
use crate::facts::Report;

fn get(r: &Report, k: &str) -> String {
    r.get(&format!("sc.ops.failover_live.{k}"))
}

fn block(r: &Report, k: &str) -> String {
    r.block(&format!("sc.ops.failover_live.{k}"))
}

pub fn failover_live(j: &mut Judge, r: &Report) {
    j.check(
        format!(
            "failover under a running containerd: the volume detached (umount -l rc={}), nothing at /var/lib/containerd: '{}'",
            get(r, "umount.rc"),
            get(r, "mounted")
        ),
        format!("{}/{}", get(r, "umount.rc"), get(r, "mounted")) == "0/",
    );
    let (verify, rc) = (block(r, "verify"), get(r, "verify.rc"));
    j.check(
        format!(
            "  guard verify exits 1 (rc={rc}); its stale fix says to mount the volume first: {}",
            cut(&first(&verify, r"fix: +mount the volume at"), 150)
        ),
        rc == "1"
            && has(&verify, r"volume\.mounted")
            && has(&verify, r"runtime\.stale")
            && has(&verify, "mount the volume at /var/lib/containerd first")
            && !has(&verify, "the volume now mounted there"),
    );
    for run in ["repair", "force"] {
        let (out, rc) = (block(r, run), get(r, &format!("{run}.rc")));
        let refusal = first(&out, r"remedy\.restart");
        j.check(
            format!(
                "  guard verify --{run} exits 1 (rc={rc}) refusing the restart: {}",
                cut(&refusal, 170)
            ),
            rc == "1"
                && has(&refusal, r"not restarting containerd \(stale\)")
                && has(&out, "the volume is not mounted at /var/lib/containerd"),
        );
    }
    let (before, held) = (sel("c", &get(r, "before")), get(r, "held"));
    j.check(
        format!(
            "  containerd untouched by them and by the hygiene service (rc={}): MainPID/NRestarts {before} -> {held}",
            get(r, "hygiene.rc")
        ),
        slash(&before, 1) == slash(&held, 1) && slash(&before, 2) == slash(&held, 2),
    );
    j.check(
        format!(
            "  nothing written under the root filesystem's /var/lib/containerd ('{}' -> '{}')",
            get(r, "rootfs.before"),
            get(r, "rootfs.after")
        ),
        get(r, "rootfs.after") == get(r, "rootfs.before"),
    );
    let repaired = block(r, "repaired");
    let after = sel("c", &get(r, "after"));
    j.check(
        format!(
            "  the volume mounted again (rc={}): guard verify --repair --force restarts containerd once onto it ({before} -> {after}): {}",
            get(r, "mount.rc"),
            cut(&first(&repaired, r"remedy\.restart"), 150)
        ),
        get(r, "mount.rc") == "0"
            && has(&repaired, r"restarted containerd \(stale\), restart 1 of")
            && slash(&after, 1) != slash(&before, 1),
    );
    j.check(
        format!(
            "  then guard verify passes (usable={}) and both units are active (active={})",
            get(r, "usable"),
            get(r, "active")
        ),
        get(r, "usable") == "0" && get(r, "active") == "0",
    );
    j.check(
        format!("  guard reset (rc={})", get(r, "reset.rc")),
        get(r, "reset.rc") == "0",
    );
    j.note(format!(
        "       the pod's shim across it: {} -> alive: {}",
        sel("shim", &get(r, "before")),
        sel("shim_alive", &get(r, "after"))
    ));
}
