//! package: the package on a running node (upgrade, remove, purge: nothing restarted),
//! then a second boot of the same disk without it (first install warned, then ok).

use super::node::scenario_ran;
use super::scenarios::Ctx;
use super::text::{awk_num, count, cut, grep, has, head, lacks, oneline, stamp};
use super::Judge;
use crate::facts::{small_file, Boot, Report};

/// `cut -d/ -fLIST` (1-based fields; a value without a slash is printed whole).
pub(super) fn fields(s: &str, list: &[usize]) -> String {
    if !s.contains('/') {
        return s.to_string();
    }
    let f: Vec<&str> = s.split('/').collect();
    let kept: Vec<&str> = list.iter().filter_map(|i| f.get(i - 1).copied()).collect();
    kept.join("/")
}

pub(super) fn pkg_unit(r: &Report, snap: &str, unit: &str) -> String {
    r.get(&format!("sc.{snap}.unit.{unit}"))
}

/// The same pid, restarts and invocation in every snapshot, active.
pub(super) fn untouched(j: &mut Judge, r: &Report, unit: &str, snaps: &[&str]) {
    let first = pkg_unit(r, snaps[0], unit);
    let all: String = snaps
        .iter()
        .map(|s| format!("{} ", pkg_unit(r, s, unit)))
        .collect();
    let shown: String = snaps
        .iter()
        .map(|s| format!("{s} {} ", fields(&pkg_unit(r, s, unit), &[1, 2, 4])))
        .collect();
    let want: String = snaps.iter().map(|_| format!("{first} ")).collect();
    j.check(
        format!("{unit} untouched (MainPID/NRestarts/InvocationID/ActiveState): {shown}"),
        all == want,
    );
    j.check(
        format!(
            "  ... and it was active with an invocation ({}…)",
            cut(&first, 20)
        ),
        has(&first, "^[0-9]+/0/[0-9a-f]{32}/active$"),
    );
}

/// The pod's shim, sandbox and container processes the same in every snapshot.
pub(super) fn pod_untouched(j: &mut Judge, r: &Report, snaps: &[&str]) {
    for p in ["shim.pid", "pod.pids", "container.pids"] {
        let first = r.get(&format!("sc.{}.{p}", snaps[0]));
        let all: String = snaps
            .iter()
            .map(|s| format!("{}/", r.get(&format!("sc.{s}.{p}"))))
            .collect();
        let want: String = snaps.iter().map(|_| format!("{first}/")).collect();
        let set = if first.is_empty() { "" } else { "set" };
        j.check(
            format!("the pod's {p} unchanged: {all}"),
            format!("{all}/{set}") == format!("{want}/set"),
        );
    }
}

/// The first line of block B stamped at or after T that matches PAT.
pub(super) fn line_after(r: &Report, block: &str, t: &str, pat: &str) -> String {
    let t = awk_num(t);
    let hits = grep(&r.block(block), pat);
    hits.into_iter()
        .find(|l| {
            let s = stamp(l);
            !s.is_empty() && l.starts_with('[') && awk_num(&s) >= t
        })
        .unwrap_or_default()
}

pub(super) fn eq2(j: &mut Judge, what: String, got: String, want: &str) {
    j.check(what, got == want);
}

pub fn package(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    let (res, cs) = (r.get("standin.result"), r.get("standin.container_state"));
    eq2(
        j,
        format!(
            "the stand-in's pod runs its container (stand-in: {res} {cs} {})",
            r.get("standin.error")
        ),
        format!("{res}/{cs}"),
        "ok/CONTAINER_RUNNING",
    );
    scenario_ran(j, r);
    let pc = r.block("prestart.containerd.service");
    let (starts, cres) = (
        r.get("containerd.starts"),
        r.unit("containerd.service", "Result"),
    );
    eq2(
        j,
        format!("containerd started once at boot, through its pre-start, and once more by the restart after the purge ({starts} start(s), {cres}): {}", cut(&head(&pc, 1), 140)),
        format!("{starts}/{cres}/{}", count(&pc, "phase 1 in full")),
        "2/success/1",
    );
    upgrade(j, r);
    removal(j, r);
    for u in ["containerd.service", "kubelet.service"] {
        untouched(j, r, u, &["before", "upgraded", "removed", "purged"]);
    }
    pod_untouched(j, r, &["before", "upgraded", "removed", "purged"]);
    no_guard_restart(j, r);
    untouched(j, r, "kubelet.service", &["purged", "norestarted"]);
    pod_untouched(j, r, &["purged", "norestarted"]);
    match Boot::load(&x.dir.join("after")) {
        Ok(
            b @ Boot {
                report: Some(_), ..
            },
        ) => {
            j.note(format!(
                "  -- second boot of the same disk, after the purge ({})",
                b.walls()
            ));
            super::package_after::second_boot(j, &b.r());
        }
        _ => {
            let host = small_file(&x.dir.join("after/host.txt"));
            j.check(
                format!("second boot reported ({})", host.replace('\n', " ")),
                false,
            );
        }
    }
}

fn removal(j: &mut Judge, r: &Report) {
    let g = |k: &str| r.get(&format!("sc.{k}"));
    j.check(
        format!(
            "dpkg -r containerd-guard (rc={}): '{}'",
            g("remove.rc"),
            g("removed.package")
        ),
        has(
            &format!("{}/{}", g("remove.rc"), g("removed.package")),
            "^0/.*(not-installed|config-files|no packages found)",
        ),
    );
    j.check(
        format!(
            "  the removal stopped the hygiene timer and its service (timer {}, service {})",
            g("removed.timer"),
            g("removed.hygiene")
        ),
        has(
            &format!("{}/{}", g("removed.timer"), g("removed.hygiene")),
            "^[a-z-]+/inactive/[^/]*/inactive$",
        ),
    );
    eq2(
        j,
        format!(
            "  ... removed the metrics textfile and /run/containerd-guard (textfile {}, state {})",
            g("removed.textfile"),
            g("removed.statedir")
        ),
        format!("{}/{}", g("removed.textfile"), g("removed.statedir")),
        "absent/absent",
    );
    left_nothing(j, r);
}

/// After the purge, a restart of containerd runs no guard.
fn no_guard_restart(j: &mut Judge, r: &Report) {
    let g = |k: &str| r.get(&format!("sc.{k}"));
    let state = fields(&pkg_unit(r, "norestarted", "containerd.service"), &[4]);
    let new = if g("norestarted.containerd.pid") != g("purged.containerd.pid") {
        "new"
    } else {
        ""
    };
    eq2(
        j,
        format!("after the purge, systemctl restart containerd (rc={}, answers rc={}): MainPID {} -> {}, {state}", g("norestart.rc"), g("noanswers.rc"), g("purged.containerd.pid"), g("norestarted.containerd.pid")),
        format!("{}/{}/{state}/{new}", g("norestart.rc"), g("noanswers.rc")),
        "0/0/active/new",
    );
    let t = g("t.norestart");
    let guard = line_after(r, "sc.norestart.journal", &t, r" guard\[");
    j.check(
        format!("  no guard ran in that start ({})", cut(&guard, 120)),
        guard.is_empty(),
    );
    let started = line_after(r, "sc.norestart.journal", &t, "Started containerd");
    j.check(
        format!(
            "  ... which the journal shows (systemd's Started line after the restart: {})",
            cut(&started, 100)
        ),
        has(&started, "Started containerd"),
    );
}

/// The upgrade on the running node: the timer stays, the postinst says the verdict.
fn upgrade(j: &mut Judge, r: &Report) {
    let g = |k: &str| r.get(&format!("sc.{k}"));
    eq2(
        j,
        format!(
            "the hygiene timer is installed, enabled and running: {}",
            g("before.timer")
        ),
        g("before.timer"),
        "loaded/active/enabled",
    );
    eq2(
        j,
        format!("the guard wrote its metrics textfile and its state under /run at boot (textfile {}, /run/containerd-guard {})", g("before.textfile"), g("before.statedir")),
        format!("{}/{}", g("before.textfile"), g("before.statedir")),
        "present/present",
    );
    j.check(
        format!(
            "dpkg -i of the newer package (rc={}): '{}' -> '{}'",
            g("upgrade.rc"),
            g("before.package"),
            g("upgraded.package")
        ),
        has(
            &format!("{}/{}", g("upgrade.rc"), g("upgraded.package")),
            r"^0/[^ ]*\+vmtests1 install ok installed$",
        ),
    );
    let up = r.block("sc.upgrade");
    eq2(
        j,
        format!("  its postinst printed the verdict on this running node, no warning (dpkg's stdout: {})", oneline(&head(&grep(&up, "^verdict|WARNING").join("\n"), 2))),
        format!("{}/{}", count(&up, "^verdict: node is usable"), count(&up, "WARNING")),
        "1/0",
    );
    eq2(
        j,
        format!(
            "  the hygiene timer stays enabled and running: {}",
            g("upgraded.timer")
        ),
        g("upgraded.timer"),
        "loaded/active/enabled",
    );
}

/// What the removal and the purge left: no binary, unit or record of the package.
fn left_nothing(j: &mut Judge, r: &Report) {
    let g = |k: &str| r.get(&format!("sc.{k}"));
    let left = g("removed.left");
    let kept: String = grep(
        &left.replace(' ', "\n"),
        r"^/(usr|etc/systemd|run)/|\.prom$",
    )
    .iter()
    .map(|w| format!("{w} "))
    .collect();
    eq2(
        j,
        format!(
            "  ... and left no binary, unit, drop-in or enablement link (guard: {}; left: '{}')",
            g("removed.guard"),
            cut(&left, 200)
        ),
        format!("{}/{kept}", g("removed.guard")),
        "none/",
    );
    j.check(
        format!(
            "  the loaded units have no guard drop-in: '{}'",
            g("removed.dropins")
        ),
        lacks(&g("removed.dropins"), "containerd-guard"),
    );
    j.check(
        format!(
            "dpkg --purge containerd-guard (rc={}): '{}'",
            g("purge.rc"),
            g("purged.package")
        ),
        has(
            &format!("{}/{}", g("purge.rc"), g("purged.package")),
            "^0/.*(not-installed|no packages found)",
        ),
    );
    let listed = if g("package.files").parse::<i64>().is_ok_and(|n| n > 10) {
        "listed"
    } else {
        ""
    };
    eq2(
        j,
        format!("  nothing of the package left ({} files listed by dpkg -L, the textfile, /run/containerd-guard, /etc/containerd-guard, dpkg's and deb-systemd-helper's records, enablement links): '{}'", g("package.files"), g("purged.left")),
        format!("{}/{listed}", g("purged.left")),
        "/listed",
    );
}
