//! The scenarios on images of their own: a separate /var (dracut-var), cloud-init's
//! first boot and the same disks booted again (cloud-init), with the boot-cost figures.

use super::common::*;
use super::scenarios::{initrd_order, Ctx};
use super::text::{awk_num, count, count_i, cut, first, first_i, has, lacks, lt, nonempty, secs};
use super::Judge;
use crate::facts::{Boot, Report};
use crate::scenarios::{CLOUD_TIMEOUT, CLOUD_WAIT};

const C: &str = "containerd.service";
const M: &str = "var-lib-containerd.mount";

/// awk's `printf "%.2f", a / 1e6` of a microsecond stamp.
fn s2(us: f64) -> String {
    format!("{:.2}", us / 1e6)
}

pub fn dracut_var(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    initrd_order(j, r);
    let vm = r.get("var.mount");
    j.check(
        format!("the guest's /var is a filesystem of its own, mounted by the OS: {vm}"),
        has(&vm, "ext4 vmvar$"),
    );
    let initrd = r.block("initrd");
    j.check(
        format!(
            "the initrd's guard ran and left the volume to the OS: '{}'",
            cut(&first_i(&initrd, "left to the OS"), 220)
        ),
        has(&initrd, "left to the OS"),
    );
    let below = r"volume\.mount |mounted [^ ]+ at /sysroot";
    j.check(
        format!(
            "  ... and mounted nothing below /sysroot ({} volume.mount line(s))",
            count_i(&initrd, below)
        ),
        lacks(&initrd, below),
    );
    // volume.ok: written by containerd's pre-start in the OS, never by the initrd
    let since = s2(r.us(C, "InactiveExitTimestampMonotonic") as f64);
    let (w, u) = (r.get("volume.ok.mtime_uptime"), r.get("userspace_mono"));
    let (wf, sf, uf) = (awk_num(&w), awk_num(&since), awk_num(&u));
    j.check(
        format!("volume.ok ('{}') was written after switch-root (OS manager up at {}s), by containerd's pre-start (start began at {since}s): written at {w}s", r.get("volume.ok"), s2(uf)),
        !w.is_empty() && sf > 0.0 && uf > 0.0 && wf + 0.5 >= sf && wf > uf / 1e6,
    );
    j.check(
        "  ... and holds this boot's id",
        r.get("volume.ok") == r.get("boot_id"),
    );
    nothing_beneath(j, r);
    order_healthy(j, r);
    mounted_eph(j, r);
    started_once(j, r);
}

/// The volume is mounted once, on the /var filesystem (findmnt's ID PARENT TARGET SOURCE
/// LABEL lines).
fn volume_mounted_once(j: &mut Judge, r: &Report) {
    let mounts = r.block("mounts");
    let field = |l: &str, i: usize| l.split_whitespace().nth(i).unwrap_or("").to_string();
    let ls = super::text::lines(&mounts);
    let var = super::text::lines(&mounts)
        .find(|l| field(l, 2) == "/var")
        .map(|l| field(l, 0))
        .unwrap_or_default();
    let eph: Vec<&str> = ls.filter(|l| field(l, 4) == "ctrd-eph").collect();
    let eph = eph.join("\n");
    let f: Vec<&str> = eph.split_whitespace().collect();
    let pass = nonempty(&eph) == 1
        && !var.is_empty()
        && f.get(1) == Some(&var.as_str())
        && f.get(2) == Some(&"/var/lib/containerd");
    j.check(
        format!("the volume is mounted once, at /var/lib/containerd on top of the /var filesystem (mount {var}): '{eph}'"),
        pass,
    );
}

/// cloud-init: the first boot formats and mounts the blank disk; the second boots the
/// same disks with the fstab line cloud-init wrote (and gives the boot-cost figures).
pub fn cloud(j: &mut Judge, x: &Ctx) {
    let again = Boot::load(&x.dir.join("again"));
    j.note(format!("  -- first boot: cloud-init ({CLOUD_WAIT} s of bootcmd first) formats and mounts the blank disk"));
    cloud_boot(j, &x.r, true, "cloud-init.service");
    match again {
        Ok(Boot {
            report: Some(r2), ..
        }) => {
            let walls = Boot::load(&x.dir.join("again"))
                .map(|b| b.walls())
                .unwrap_or_default();
            j.note(format!("  -- second boot of the same disks ({walls})"));
            cloud_boot(j, &r2, false, "cloud-init.service");
        }
        _ => {
            let host = crate::facts::small_file(&x.dir.join("again/host.txt"));
            j.check(
                format!("second boot reported ({})", host.replace('\n', " ")),
                false,
            );
        }
    }
}

/// One boot of the cloud-init guest; `ci` is the unit of cloud-init's stage that runs
/// bootcmd, disk_setup, fs_setup and mounts (cloud-init.service before 24.3,
/// cloud-init-network.service from 24.3 on).
pub(super) fn cloud_boot(j: &mut Judge, r: &Report, first_boot: bool, ci: &str) {
    j.check(
        format!(
            "{ci} ran ({}/{}); its result.json: {}",
            r.unit(ci, "Result"),
            r.unit(ci, "ActiveState"),
            cut(&r.get("cloudinit.result"), 120)
        ),
        format!("{}/{}", r.unit(ci, "Result"), r.unit(ci, "ActiveState")) == "success/active",
    );
    let fstab = r.get("fstab");
    j.check(
        format!("fstab has cloud-init's line: '{fstab}'"),
        has(&fstab, "ctrd-eph.*/var/lib/containerd"),
    );
    j.check(
        "cloud-init finished before containerd's start began",
        lt(
            r.us(ci, "ActiveEnterTimestampMonotonic"),
            r.us(C, "InactiveExitTimestampMonotonic"),
        ),
    );
    j.check(
        "the volume was mounted before containerd started",
        lt(
            r.us(M, "ActiveEnterTimestampMonotonic"),
            r.us(C, "ExecMainStartTimestampMonotonic"),
        ),
    );
    if first_boot {
        cloud_waited(j, r, ci);
    } else {
        let line = bootcost(j, r);
        j.after.push(format!("  {line}"));
    }
    order_healthy(j, r);
    mounted_eph(j, r);
    started_once(j, r);
}

/// cloud-init's full wait, longer than containerd's start timeout (both scaled down).
fn cloud_waited(j: &mut Judge, r: &Report, ci: &str) {
    let took = secs(
        r.us(ci, "InactiveExitTimestampMonotonic"),
        r.us(ci, "ActiveEnterTimestampMonotonic"),
    );
    let waited = secs(
        r.us(ci, "InactiveExitTimestampMonotonic"),
        r.us(C, "InactiveExitTimestampMonotonic"),
    );
    let done = cut(&first(&r.block("cloudinit"), "cloud-init slow done"), 80);
    j.check(
        format!("cloud-init took its full wait: {took}s in {ci} ({done})"),
        awk_num(&took) >= CLOUD_WAIT as f64,
    );
    let t = r.get("containerd.timeout");
    j.check(
        format!("containerd's start timeout is the scaled-down one: TimeoutStartUSec={t}"),
        t == format!("{CLOUD_TIMEOUT}s"),
    );
    let longer = if awk_num(&waited) > CLOUD_TIMEOUT as f64 {
        "longer"
    } else {
        "shorter"
    };
    let timeouts = count(
        &r.block("journal"),
        r"containerd\.service.*(start operation timed out|start timed out)",
    );
    let start = secs(
        r.us(C, "InactiveExitTimestampMonotonic"),
        r.us(C, "ActiveEnterTimestampMonotonic"),
    );
    let (res, nr) = (r.unit(C, "Result"), r.unit(C, "NRestarts"));
    j.check(
        format!("containerd's start job waited {waited}s behind cloud-init, longer than its start timeout, and was not failed (its start took {start}s): Result {res}, NRestarts {nr}, no timeout in its journal"),
        format!("{longer}/{res}/{nr}/{timeouts}") == "longer/success/0/0",
    );
}

/// "START EXIT" (monotonic us) of PATH in UNIT's ExecStartPre, from busctl's JSON.
fn cmd_us(r: &Report, unit: &str, path: &str) -> Option<(u64, u64)> {
    let v: serde_json::Value =
        serde_json::from_str(&r.get(&format!("bootcost.{unit}.execstartpre"))).ok()?;
    let e = v["data"]
        .as_array()?
        .iter()
        .find(|e| e[0].as_str() == Some(path))?;
    let (a, b) = (e[4].as_u64()?, e[6].as_u64()?);
    (a > 0 && b > 0).then_some((a, b))
}

fn ms(a: u64, b: u64) -> String {
    format!("{:.1}", (b as f64 - a as f64) / 1000.0)
}

fn ratio(g: &str, t: &str) -> String {
    let (g, t) = (awk_num(g), awk_num(t));
    let r = if t > 0.0 { g / t } else { 0.0 };
    let met = if t > 0.0 && r <= 2.0 {
        "met"
    } else {
        "NOT met"
    };
    format!("ratio {r:.1}, target <= 2x: {met}")
}

/// The boot-cost figures of the second boot: each gate's command against a /bin/true
/// right after it in the same start, by systemd's own per-command stamps. A speed target
/// is no assertion: only figures that cannot be read fail.
fn bootcost(j: &mut Judge, r: &Report) -> String {
    let (gv, tv) = (
        cmd_us(r, "containerd", "/usr/bin/guard"),
        cmd_us(r, "containerd", "/bin/true"),
    );
    let (gr, tr) = (
        cmd_us(r, "kubelet", "/usr/bin/guard"),
        cmd_us(r, "kubelet", "/bin/true"),
    );
    let re =
        regex::Regex::new(r"CRI first answered at CLOCK_MONOTONIC ([0-9]+) us").expect("pattern");
    let cri = prestart(r, "kubelet.service")
        .split('\n')
        .filter_map(|l| re.captures(l).map(|c| c[1].to_string()))
        .next_back()
        .unwrap_or_default();
    let cri_n: Option<u64> = cri.parse().ok();
    if let (Some(gv), Some(tv), Some(gr), Some(tr), Some(c)) = (gv, tv, gr, tr, cri_n) {
        if c <= gr.1 && c >= gr.0 {
            let (v_g, v_t) = (ms(gv.0, gv.1), ms(tv.0, tv.1));
            let (r_g, r_t, r_all) = (ms(c, gr.1), ms(tr.0, tr.1), ms(gr.0, gr.1));
            j.check("the boot-cost figures were read (systemd's per-command stamps, the guard's CRI line)", true);
            return format!("boot cost (second boot): guard volume {v_g} ms, /bin/true {v_t} ms ({}); guard runtime from CRI's first answer {r_g} ms, /bin/true {r_t} ms ({}); guard runtime in all {r_all} ms", ratio(&v_g, &v_t), ratio(&r_g, &r_t));
        }
    }
    let show = |p: Option<(u64, u64)>| p.map(|(a, b)| format!("{a} {b}")).unwrap_or_default();
    let line = format!(
        "boot cost (second boot): NOT READ (containerd: guard '{}' true '{}'; kubelet: guard '{}' true '{}'; CRI first answered '{cri}')",
        show(gv), show(tv), show(gr), show(tr)
    );
    j.check(
        format!(
            "the boot-cost figures were read: {line}; {}",
            cut(&r.get("bootcost.containerd.execstartpre"), 200)
        ),
        false,
    );
    line
}

/// The volume mounted once, on the /var filesystem, and nothing beneath it on either
/// filesystem.
fn nothing_beneath(j: &mut Judge, r: &Report) {
    volume_mounted_once(j, r);
    j.check(
        "  mounted before containerd started",
        lt(
            r.us(M, "ActiveEnterTimestampMonotonic"),
            r.us(C, "ExecMainStartTimestampMonotonic"),
        ),
    );
    let (vc, vd, vu) = (
        r.get("varfs_checked"),
        r.get("varfs_has_dir"),
        r.get("varfs_under_mount"),
    );
    j.check(
        format!("nothing under the /var filesystem's own lib/containerd (looked: {vc}, directory there: {vd}; '{vu}')"),
        format!("{vc}/{vd}/{vu}") == "yes/yes/",
    );
    let (rc, rd, ru) = (
        r.get("rootfs_checked"),
        r.get("rootfs_has_dir"),
        r.get("rootfs_under_mount"),
    );
    j.check(
        format!("nothing under the root filesystem's /var/lib/containerd (looked: {rc}, directory there: {rd}; '{ru}'; root's /var: '{}')", r.get("rootfs_var")),
        format!("{rc}/{rd}/{ru}") == "yes/yes/",
    );
}
