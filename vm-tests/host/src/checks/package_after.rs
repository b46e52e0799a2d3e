//! package, the second boot: the same disk after the purge, containerd and a pod without
//! the guard; the package's first install on it, warned then ok; then containerd
//! restarted through the guard's quick check.

use super::package::{eq2, fields, line_after, pkg_unit, pod_untouched, untouched};
use super::text::{count, cut, grep, has, head, nonempty, oneline};
use super::Judge;
use crate::facts::Report;

pub(super) fn second_boot(j: &mut Judge, r: &Report) {
    let g = |k: &str| r.get(&format!("sc.{k}"));
    let cat = r.block("sc.fresh.unitcat");
    eq2(
        j,
        format!("containerd started without the guard: no guard drop-in ('{}'), nothing of it in systemctl cat ({} lines), no enablement link ('{}'), package '{}'", g("fresh.dropins"), nonempty(&cat), g("fresh.links"), g("fresh.package")),
        format!("{}/{}", count(&format!("{}{cat}", g("fresh.dropins")), "containerd-guard"), g("fresh.links")),
        "0/",
    );
    let (res, cs) = (r.get("standin.result"), r.get("standin.container_state"));
    eq2(
        j,
        format!("  the stand-in's pod runs its container, tried as kubelet would until CRI is up ({res} {cs} {}, try {})", r.get("standin.error"), r.get("standin.tries")),
        format!("{res}/{cs}"),
        "ok/CONTAINER_RUNNING",
    );
    let (sres, done) = (
        r.unit("vm-tests-scenario.service", "Result"),
        g("scenario.done"),
    );
    let d = if done.is_empty() { "" } else { "done" };
    eq2(
        j,
        format!("  the scenario unit ran to its end ({sres}, done at {done}s)"),
        format!("{sres}/{d}"),
        "success/done",
    );
    first_install(j, r);
    untouched(
        j,
        r,
        "containerd.service",
        &["fresh", "installed", "reinstalled"],
    );
    pod_untouched(j, r, &["fresh", "installed", "reinstalled"]);
    restarted(j, r);
}

fn restarted(j: &mut Judge, r: &Report) {
    let g = |k: &str| r.get(&format!("sc.{k}"));
    let state = fields(&pkg_unit(r, "restarted", "containerd.service"), &[4]);
    eq2(
        j,
        format!("systemctl restart containerd (rc={}), it answers (rc={}): MainPID {} -> {}, {} starts this boot", g("restart.rc"), g("answers.rc"), g("reinstalled.containerd.pid"), g("restarted.containerd.pid"), r.get("containerd.starts")),
        format!("{}/{}/{}/{state}", g("restart.rc"), g("answers.rc"), r.get("containerd.starts")),
        "0/0/2/active",
    );
    j.check(
        "  containerd has a new MainPID",
        g("restarted.containerd.pid") != g("reinstalled.containerd.pid"),
    );
    let quick = line_after(r, "sc.restarted.journal", &g("t.restart"), "quick check");
    j.check(
        format!(
            "  its pre-start ran the quick check: '{}'",
            cut(&quick, 200)
        ),
        has(&quick, "quick check"),
    );
    eq2(
        j,
        format!("  ... and recorded the volume for the later starts of this boot: volume.ok '{}' (this boot: {})", r.get("volume.ok"), r.get("boot_id")),
        r.get("volume.ok"),
        &r.get("boot_id"),
    );
    untouched(
        j,
        r,
        "kubelet.service",
        &["fresh", "installed", "reinstalled", "restarted"],
    );
    pod_untouched(j, r, &["fresh", "installed", "reinstalled", "restarted"]);
    let st = r.block("sc.restarted.status");
    j.check(
        format!(
            "  CRI still says the payload runs: {}",
            oneline(&grep(&st, "^(container_state|result|error)=").join("\n"))
        ),
        has(&st, "container_state=CONTAINER_RUNNING"),
    );
}

/// The package's first install on the node (a fragment naming a missing device: warned),
/// then again with the fragment fixed (ok).
fn first_install(j: &mut Judge, r: &Report) {
    let g = |k: &str| r.get(&format!("sc.{k}"));
    j.check(
        format!(
            "first install with a fragment naming a missing device: dpkg -i rc={}, '{}'",
            g("install.rc"),
            g("installed.package")
        ),
        has(
            &format!("{}/{}", g("install.rc"), g("installed.package")),
            "^0/.* install ok installed$",
        ),
    );
    let inst = r.block("sc.install");
    let shown = oneline(&head(
        &grep(&inst, "^(FAIL|verdict|WARNING: containerd-guard:)").join("\n"),
        3,
    ));
    let counts = [
        r"^FAIL +volume\.[a-z-]+ .*vmtest-no-such-disk",
        "^verdict: node is NOT usable",
        "^WARNING: containerd-guard: ",
        r"^WARNING: fix first: (.* )?volume\.device( |$)",
    ]
    .map(|p| count(&inst, p).to_string());
    eq2(
        j,
        format!("  its postinst warned, naming the finding (dpkg's stdout: {shown})"),
        counts.join("/"),
        "1/1/1/1",
    );
    j.check(
        format!("  the drop-ins are loaded now: '{}'", g("installed.dropins")),
        has(&g("installed.dropins"), r"containerd\.service\.d/10-containerd-guard\.conf.*kubelet\.service\.d/10-containerd-guard\.conf"),
    );
    eq2(
        j,
        format!(
            "the fragment fixed, dpkg -i again: rc={}",
            g("reinstall.rc")
        ),
        g("reinstall.rc"),
        "0",
    );
    let re = r.block("sc.reinstall");
    eq2(
        j,
        format!(
            "  its postinst says the node is usable, no warning (dpkg's stdout: {})",
            oneline(&head(&grep(&re, "^(FAIL|verdict|WARNING)").join("\n"), 2))
        ),
        format!(
            "{}/{}",
            count(&re, "^verdict: node is usable"),
            count(&re, "WARNING|^FAIL|vmtest-no-such-disk")
        ),
        "1/0",
    );
}
