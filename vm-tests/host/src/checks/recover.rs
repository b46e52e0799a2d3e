//! The scenarios where the node meets a change while it runs and comes back: the sandbox
//! image removed (restore), a held boot recovered by the README's block
//! (readme-recovery).

use super::common::*;
use super::node::scenario_ran;
use super::scenarios::{restored, Ctx, SANDBOX_IMAGE};
use super::text::{count, cut, first, first_i, has, nonempty, only};
use super::Judge;
use crate::facts::Report;

/// restore, after the boot: the sandbox image removed while the node runs, brought back
/// by the hygiene timer on its own, without a restart; a real RunPodSandbox works again.
pub fn restore_while_running(j: &mut Judge, r: &Report) {
    scenario_ran(j, r);
    let gone = r.block("sc.restore.verify_gone");
    let rm = r.get("sc.restore.rm.rc");
    j.check(
        format!("the image was removed while the node ran (ctr images rm rc={rm}) and verify failed for it: {}", first(&gone, "sandbox-image")),
        has(&format!("{rm}/{}", first(&gone, "runtime.sandbox-image")), "^0/FAIL +runtime.sandbox-image"),
    );
    let (back, by) = (r.get("sc.restore.back.rc"), r.get("sc.restore.by_hygiene"));
    j.check(
        format!("the hygiene timer restored it on its own (back.rc={back}, removed at {}s, back at {}s): '{}'", r.get("sc.restore.removed_at"), r.get("sc.restore.back_at"), cut(&by, 120)),
        back == "0" && has(&by, &format!("^{}", restored(SANDBOX_IMAGE))),
    );
    let labels = r.block("sc.restore.labels");
    let pinned = only(
        &super::text::tail(&labels, 1),
        "io.cri-containerd.pinned=[a-z]*",
    )
    .join("\n");
    j.check(
        format!("  ... pinned, as containerd pins its own: {pinned}"),
        has(&labels, r"io\.cri-containerd\.pinned=pinned"),
    );
    let pod = r.get("sc.restore.pod.rc");
    j.check(
        format!("a real RunPodSandbox works again (rc={pod})"),
        pod == "0",
    );
    let n = r.get("containerd.starts");
    j.check(
        format!("containerd started once ({n}): restored without a restart"),
        n == "1",
    );
}

/// The README's recovery block, as the host reads it.
pub fn readme_block(readme: &str) -> String {
    let (mut m, mut b, mut out) = (false, false, Vec::new());
    for l in readme.lines() {
        if l == "<!-- vm-tests: readme-recovery -->" {
            m = true;
        } else if m && l == "```sh" {
            b = true;
        } else if b && l == "```" {
            break;
        } else if b {
            out.push(l);
        }
    }
    out.join("\n")
}

/// The most lines of the recovery block judged one by one: the README's block is a few
/// lines, a report claiming thousands is garbage.
const MAX_RECOVER_LINES: u64 = 200;

/// readme-recovery: a boot held for its unmounted volume, then the README's recovery block
/// run word for word brings containerd and kubelet back without a reboot.
pub fn readme_recovery(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    held(j, r, "sc.held.unit");
    j.check(
        format!(
            "held at {}s of uptime (held.rc={})",
            r.get("sc.held.at"),
            r.get("sc.held.rc")
        ),
        r.get("sc.held.rc") == "0",
    );
    let st = r.get("sc.held.unit.containerd.service.StatusText");
    j.check(
        format!("  the reason says it is not mounted ('{st}')"),
        has(&st, r"volume\.mounted: .*not a mount point"),
    );
    let (ran, want) = (r.block("sc.recover.block"), readme_block(x.readme));
    j.check(
        format!(
            "the guest ran the README's recovery block word for word ({} lines; the README has {})",
            nonempty(&ran),
            nonempty(&want)
        ),
        ran == want,
    );
    let n = r.get("sc.recover.lines");
    let shown = if n.is_empty() {
        "0".to_string()
    } else {
        n.clone()
    };
    j.check(
        format!("  every line of it ran ({n})"),
        shown == nonempty(&want).to_string(),
    );
    for i in 1..=n.parse::<u64>().unwrap_or(0).min(MAX_RECOVER_LINES) {
        let rc = r.get(&format!("sc.recover.{i}.rc"));
        j.check(
            format!(
                "  rc={rc} {}",
                cut(&r.get(&format!("sc.recover.{i}.line")), 70)
            ),
            rc == "0",
        );
    }
    recover_after(j, r);
}

fn recover_after(j: &mut Judge, r: &Report) {
    let c = "containerd.service";
    let starts = count(&r.block("journal"), r#"msg="starting containerd""#);
    let (act, sub) = (r.unit(c, "ActiveState"), r.unit(c, "SubState"));
    j.check(
        format!("containerd active ({act}/{sub}); its main started {starts} time(s), each after the mount"),
        format!("{act}/{}", if starts >= 1 { "started" } else { "" }) == "active/started",
    );
    volume_first(j, r);
    let k = "kubelet.service";
    let pod = r.get("sc.kubelet.pod.rc");
    j.check(
        format!(
            "kubelet active with its pod (kubelet.pod.rc={pod}; {}/{}; stand-in: {} {})",
            r.unit(k, "ActiveState"),
            r.unit(k, "SubState"),
            r.get("standin.result"),
            r.get("standin.error")
        ),
        format!(
            "{pod}/{}/{}",
            r.unit(k, "ActiveState"),
            r.get("standin.result")
        ) == "0/active/ok",
    );
    let v = r.get("sc.recover.verify.rc");
    j.check(
        format!(
            "guard verify exit 0 (rc={v}): {}",
            cut(
                &first_i(&r.block("sc.recover.verify"), "usable|verdict"),
                120
            )
        ),
        v == "0",
    );
    let (b, a, id) = (
        r.get("sc.boot_id.before"),
        r.get("sc.boot_id.after"),
        r.get("boot_id"),
    );
    j.check(
        format!(
            "no reboot: the same boot ({}… before the block, {}… after, {}… at the report)",
            cut(&b, 8),
            cut(&a, 8),
            cut(&id, 8)
        ),
        format!("{b}/{a}/{}", if_set(&id, "set")) == format!("{id}/{id}/set"),
    );
    mounted_eph(j, r);
}
