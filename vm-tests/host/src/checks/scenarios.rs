//! The boot scenarios' checks: which facts each scenario's report must show. One function
//! per scenario; `assert` picks it by the scenario's checks (crate::scenarios).

use super::common::*;
use super::lint::Lint;
use super::text::{awk_num, count, cut, first, first_i, has, lt, only, secs, stamp};
use super::Judge;
use crate::facts::{small_file, Report};
use std::path::Path;

const C: &str = "containerd.service";
const K: &str = "kubelet.service";
const M: &str = "var-lib-containerd.mount";

/// The sandbox image every scenario's node is configured with, and the archive of it
/// baked into the image (guest/scenario.sh, lib/assemble.sh).
pub const SANDBOX_IMAGE: &str = "localhost:5000/vmware.io/pause:3.4.1";
const ARCHIVE: &str = "/usr/lib/containerd-guard/images/pause.tar";

/// The summary of the guard's `remedy.restore-image` finding when it restored `image` from
/// an archive (src/phases/gate/machine/image.rs), as a pattern for a whole line's end.
pub fn restored(image: &str) -> String {
    format!(
        r"remedy\.restore-image:? +restored {} from an archive$",
        regex::escape(image)
    )
}

/// What a scenario's checks read: the report, and the boot's own directory (host.txt,
/// the disk's lint before the boot, the second boot's report).
pub struct Ctx<'a> {
    pub r: Report,
    pub dir: &'a Path,
    pub readme: &'a str,
}

impl Ctx<'_> {
    pub fn lint(&self) -> Lint {
        Lint::load(&self.dir.join("lint"))
    }
}

pub fn healthy(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    order_healthy(j, r);
    mounted_eph(j, r);
    started_once(j, r);
    let l = x.lint();
    let linted = if x
        .dir
        .join("lint/lint.json")
        .metadata()
        .is_ok_and(|m| m.len() > 0)
    {
        "linted"
    } else {
        ""
    };
    j.check(
        format!("before the boot, guard lint of this disk found nothing above ok (exit {}, {} ms, above ok: '{}'{}); the boot then ran healthy (the checks above; the pod: {})", l.rc, l.ms, l.above_ok(), l.error, r.get("standin.result")),
        format!("{}/{}/{linted}/{}", l.rc, l.above_ok(), r.get("standin.result")) == "0//linted/ok",
    );
    marker_and_verify(j, r);
}

/// The marker phase 1 wrote holds this boot's id; systemd-analyze verify passes on the
/// units and drop-ins.
pub fn marker_and_verify(j: &mut Judge, r: &Report) {
    j.check(
        "marker holds this boot's id",
        r.get("volume.ok") == r.get("boot_id"),
    );
    let v = super::text::head(&r.block("verify"), 3);
    j.check(
        format!(
            "systemd-analyze verify passes on the units and drop-ins (rc={}) {}",
            r.get("verify.rc"),
            super::text::oneline(&v)
        ),
        r.get("verify.rc") == "0",
    );
}

pub fn hotplug(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    let h = "vm-tests-hotplug.service";
    let host = small_file(&x.dir.join("host.txt"));
    let hp: Vec<&str> = host.lines().filter(|l| l.contains("hotplugged")).collect();
    j.check(
        format!("disk hot-plugged over QMP {}", hp.join("\n")),
        !hp.is_empty(),
    );
    let (ask, mnt) = (
        r.us(h, "ExecMainStartTimestampMonotonic"),
        r.us(M, "ActiveEnterTimestampMonotonic"),
    );
    j.check(
        "guest asked for the disk before it was mounted",
        lt(ask, mnt),
    );
    j.check(
        format!("mount came {}s after the ask", secs(ask, mnt)),
        mnt > ask + 3_000_000,
    );
    j.check(
        "containerd held until the volume was mounted and verified",
        lt(mnt, r.us(C, "ExecMainStartTimestampMonotonic")),
    );
    order_healthy(j, r);
    mounted_eph(j, r);
    started_once(j, r);
    nothing_left(j, r);
}

pub fn nothing_left(j: &mut Judge, r: &Report) {
    let (c, u) = (r.get("rootfs_checked"), r.get("rootfs_under_mount"));
    j.check(
        format!("nothing left on the root filesystem under the mount point (looked: {c}; '{u}')"),
        format!("{c}/{u}") == "yes/",
    );
}

pub fn never(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    held(j, r, "unit");
    // kubelet's pre-start says why it holds kubelet; its STATUS= reaches systemd only
    // through the drop-in's NotifyAccess=exec (else StatusText stays empty). A kubelet
    // start caught before its first look has not met the failing check yet.
    let kst = r.unit(K, "StatusText");
    j.check(
        format!("kubelet's status line names the check that holds it: StatusText '{kst}'"),
        has(
            &kst,
            r"runtime\.answers|^(checking containerd|waiting for containerd to answer)",
        ),
    );
    let up = r.get("uptime");
    let whole = up.split('.').next().unwrap_or("");
    let settled = whole.parse::<i64>().is_ok_and(|n| n < 200);
    j.check(
        format!("the boot settled in bounded time (report at {up}s uptime)"),
        settled,
    );
    let l = x.lint();
    let state = r.get("system.state");
    let out = match state.as_str() {
        "maintenance" | "emergency" | "" => format!("in '{state}'"),
        _ => "out".into(),
    };
    let main = r.get("unit.containerd.service.ExecMainStartTimestampMonotonic");
    j.check(
        format!("before the boot, guard lint passed nofail with the guard's drop-in ({}); the boot without its disk stayed out of emergency mode (system state {state}, the report unit ran) and containerd was held (its main never ran: ExecMainStart={main})", l.line("lint.volume-nofail")),
        format!("{}/{out}/{main}", l.status("lint.volume-nofail")) == "pass/out/0",
    );
    super::hold::hold_end(j, r);
}

pub fn wrong_disk(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    held(j, r, "unit");
    j.check(
        format!("a disk is mounted, but the wrong one ({})", r.get("mount")),
        has(&r.get("mount"), "not-eph"),
    );
    let st = r.unit(C, "StatusText");
    j.check(
        format!("the reason names the label ('{st}'; guard status)"),
        has(&format!("{st} {}", r.block("guard.status")), "ctrd-eph"),
    );
}

pub fn bare_dir(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    held(j, r, "unit");
    j.check(
        format!(
            "nothing mounted at /var/lib/containerd ('{}')",
            r.get("mount")
        ),
        r.get("mount").is_empty(),
    );
    let st = r.unit(C, "StatusText");
    j.check(
        format!("the reason says it is not mounted ('{st}'; guard status)"),
        has(
            &format!("{st} {}", r.block("guard.status")),
            "not a mount point",
        ),
    );
}

/// The journal up to the mount's line: whether containerd started before it.
fn started_before_mount(r: &Report) -> bool {
    let j = r.block("journal");
    let mut upto = Vec::new();
    for l in j.split('\n') {
        upto.push(l);
        if l.contains("Mounted var-lib-containerd.mount") {
            break;
        }
    }
    upto.iter().any(|l| l.contains("Started containerd"))
}

pub fn stale(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    let (pre, before) = stale_started(j, r);
    let l = x.lint();
    j.check(
        format!("before the boot, guard lint named the masked drop-in ({}) and nofail without it (lint.volume-nofail {}); the boot shows what they let happen: containerd's start ran no guard and containerd started before the volume was mounted", l.line("lint.guard-dropin"), l.status("lint.volume-nofail")),
        format!("{}/{}/{}/{}", l.status("lint.guard-dropin"), l.status("lint.volume-nofail"), count(&pre, "guard"), if before { "before" } else { "" }) == "fail/fail/0/before",
    );
    stale_restarted(j, r);
}

/// containerd's start ran no guard (its drop-in masked) and containerd started before
/// the volume was mounted: its ExecStartPre and whether it started first.
pub fn stale_started(j: &mut Judge, r: &Report) -> (String, bool) {
    let pre = r.get("containerd.execstartpre");
    let argvs = super::text::oneline(&only(&pre, r"argv\[\]=[^;]*").join("\n"));
    j.check(
        format!("containerd's guard drop-in masked for this scenario: no guard in its ExecStartPre ('{argvs}')"),
        format!("{}/{}", count(&pre, "guard"), count(&pre, "argv")) == "0/1",
    );
    let before = started_before_mount(r);
    j.check(
        "containerd started before the volume was mounted (journal: first start before mount)",
        before,
    );
    (pre, before)
}

/// Phase 2 found the stale containerd and restarted it exactly once; the pod runs.
pub fn stale_restarted(j: &mut Judge, r: &Report) {
    let journal = r.block("journal");
    j.check(
        format!(
            "phase 2 detected the stale containerd: {}",
            cut(&first(&journal, "restart containerd: stale"), 150)
        ),
        has(&journal, "restart containerd: stale"),
    );
    let starts = r.get("containerd.starts");
    j.check(
        format!("runtime guard restarted containerd exactly once (containerd starts: {starts})"),
        starts == "2",
    );
    j.check(
        "the journal has the restart as a structured entry (journalctl GUARD_FINDING=remedy.restart)",
        has(&r.block("jfind"), r#""GUARD_FINDING":"remedy.restart""#),
    );
    let kstarted = if_pos(r.us(K, "ExecMainStartTimestampMonotonic"), "yes");
    j.check(
        format!(
            "kubelet's pre-start (phase 2) passed: kubelet {}/{}, main started: {kstarted}",
            r.unit(K, "Result"),
            r.unit(K, "ActiveState")
        ),
        format!("{}/{kstarted}", r.unit(K, "Result")) == "success/yes",
    );
    j.check(
        format!(
            "pod sandbox runs (stand-in: {} {})",
            r.get("standin.result"),
            r.get("standin.error")
        ),
        r.get("standin.result") == "ok",
    );
}

fn cycle_broken(j: &mut Judge, r: &Report) -> bool {
    let cy = r.block("cycle");
    let deleted = has(&cy, "deleted to break ordering cycle");
    j.check(
        format!(
            "systemd broke an ordering cycle: {}",
            first_i(&cy, "deleted")
        ),
        deleted,
    );
    deleted
}

pub fn cycle(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    let deleted = cycle_broken(j, r);
    let l = x.lint();
    j.check(
        format!("before the boot, guard lint named the mount ordered after containerd ({}); the boot shows the cycle that makes with the guard's After=: systemd deleted a job to break it", l.line("lint.volume-mount")),
        format!("{}/{}", l.status("lint.volume-mount"), if deleted { "deleted" } else { "" }) == "fail/deleted",
    );
    guarded_starts(j, r);
    // when systemd deleted the mount's job, nothing mounts the volume this boot: then
    // containerd must be held as in never (fail-closed, the reason named)
    if r.block("cycle")
        .contains("var-lib-containerd.mount/start deleted")
    {
        held(j, r, "unit");
    }
}

pub fn cycle_budget(j: &mut Judge, x: &Ctx) {
    cycle_broken(j, &x.r);
    guarded_starts(j, &x.r);
}

pub fn cycle_guard(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    // no guard job is left for systemd to delete (the check is containerd's own
    // pre-start): what remains is a start that ignores containerd's dependencies
    let m = r.us(M, "ActiveEnterTimestampMonotonic");
    let s = jt(r, "Starting containerd.service");
    j.check(
        format!("containerd was started before the volume was mounted, ignoring its dependencies (first 'Starting containerd' at {s}s, mounted at {}s)", secs(0, m)),
        !s.is_empty() && m > 0 && awk_num(&s) * 1e6 < m as f64,
    );
    let pc = prestart(r, C);
    j.check(
        format!(
            "that start ran containerd's pre-start all the same: {}",
            cut(super::text::lines(&pc).next().unwrap_or(""), 160)
        ),
        !pc.is_empty(),
    );
    let main = jt(r, r#"msg="starting containerd""#);
    j.check(
        format!("containerd started in this boot (containerd's main: '{main}')"),
        !main.is_empty(),
    );
    guarded_starts(j, r);
    nothing_left(j, r);
}

pub fn dracut(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    let journal = r.block("journal");
    j.check(
        format!(
            "initrd guard unit ran: {}",
            cut(
                &first_i(&journal, "containerd-guard.*(mounted|verified)"),
                150
            )
        ),
        has(
            &journal,
            "mounted .*sysroot/var/lib/containerd|volume verified",
        ),
    );
    initrd_order(j, r);
    order_healthy(j, r);
    mounted_eph(j, r);
    started_once(j, r);
}

/// The initrd's guard unit started after initrd-fs.target (/sysroot/usr and
/// x-initrd.mount filesystems are mounted by then).
pub fn initrd_order(j: &mut Judge, r: &Report) {
    let o = r.block("initrd.order");
    let fs = stamp(&first(&o, "Reached target initrd-fs"));
    let g = stamp(&first(&o, "Starting containerd-guard-initrd"));
    let or_never = |s: &str| {
        if s.is_empty() {
            "never".to_string()
        } else {
            s.to_string()
        }
    };
    j.check(
        format!("the initrd's guard unit started after initrd-fs.target (reached at {}s, guard unit started at {}s)", or_never(&fs), or_never(&g)),
        !fs.is_empty() && !g.is_empty() && awk_num(&g) >= awk_num(&fs),
    );
}

pub fn restore(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    let gs = r.block("guard.status");
    let imported = format!(
        r"  import +{ARCHIVE}: imported {} from {ARCHIVE} ",
        regex::escape(SANDBOX_IMAGE)
    );
    j.check(
        format!(
            "guard status records the import of {SANDBOX_IMAGE} from the baked archive: {}",
            cut(&first_i(&gs, "import"), 150)
        ),
        has(&gs, &imported),
    );
    j.check(
        format!(
            "the guest had no way to a registry (no network device): {}",
            r.get("netdevs")
        ),
        r.get("netdevs") == "lo",
    );
    let images = r.block("ctr.images");
    j.check(
        format!(
            "sandbox image present after boot: {}",
            super::text::oneline(&images)
        ),
        has(&images, &regex::escape(SANDBOX_IMAGE)),
    );
    // the guard's own journal line for the remedy (`ID: summary`), the boot's: before the
    // scenario removed the image again
    let line = first(&r.block("journal"), r"\]: remedy\.restore-image: ");
    let (at, removed) = (stamp(&line), r.get("sc.restore.removed_at"));
    j.check(
        format!(
            "the boot restored it from an archive ({at}s, removed again at {removed}s): {}",
            cut(&line, 160)
        ),
        has(&line, &restored(SANDBOX_IMAGE)) && !at.is_empty() && awk_num(&at) < awk_num(&removed),
    );
    order_healthy(j, r);
    super::recover::restore_while_running(j, r);
}
