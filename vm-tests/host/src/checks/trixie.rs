//! The Debian 13 (trixie) guest: systemd 257, cloud-init 25 (every stage in one process,
//! cloud-init-main.service, since 24.3; bootcmd, disk_setup, fs_setup and mounts in its
//! network stage, cloud-init-network.service, which was cloud-init.service before),
//! containerd 1.7 from the archive, the suite's package.

use super::common::{mounted_eph, order_healthy, started_once};
use super::images::cloud_boot;
use super::scenarios::{marker_and_verify, stale_restarted, stale_started, Ctx};
use super::text::{has, lt, oneline, secs};
use super::Judge;
use crate::facts::Report;

const C: &str = "containerd.service";
const MAIN: &str = "cloud-init-main.service";
const NETWORK: &str = "cloud-init-network.service";
const FINAL: &str = "cloud-final.service";

/// The guest is Debian 13 with the versions the scenarios are about.
fn guest(j: &mut Judge, r: &Report) {
    let (os, v) = (r.get("guest.os"), r.get("guest.versions"));
    j.check(
        format!("the guest is Debian 13 ({os}): {v}"),
        os == "debian 13 trixie"
            && has(&v, r"systemd=257\.")
            && has(&v, r"containerd=1\.7\.")
            && has(&v, r"cloud-init=25\."),
    );
}

/// `cloud-init=disabled` on the kernel command line: cloud-init ran no stage.
fn cloud_init_off(j: &mut Judge, r: &Report) {
    let started = r.us(MAIN, "InactiveExitTimestampMonotonic");
    let when = match started {
        0 => "never started".to_string(),
        us => format!("started at {}s", secs(0, us)),
    };
    j.check(
        format!(
            "cloud-init is installed and disabled for this boot: {MAIN} {}/{}, {when}",
            r.unit(MAIN, "LoadState"),
            r.unit(MAIN, "ActiveState"),
        ),
        r.unit(MAIN, "LoadState") == "loaded" && started == 0,
    );
}

pub fn healthy(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    guest(j, r);
    cloud_init_off(j, r);
    order_healthy(j, r);
    mounted_eph(j, r);
    started_once(j, r);
    marker_and_verify(j, r);
}

pub fn stale(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    guest(j, r);
    cloud_init_off(j, r);
    stale_started(j, r);
    stale_restarted(j, r);
}

/// cloud-init 25's first boot: it formats and mounts the blank disk in its network stage
/// after its full wait; containerd starts once, after the mount, with no failed pre-start,
/// and before cloud-init's last stage finished; no ordering cycle.
pub fn cloud(j: &mut Judge, x: &Ctx) {
    let r = &x.r;
    guest(j, r);
    let units: Vec<String> = ["cloud-init.service", MAIN, NETWORK]
        .iter()
        .map(|u| format!("{u} {}", r.unit(u, "LoadState")))
        .collect();
    j.check(
        format!("cloud-init's units since 24.3: {}", units.join(", ")),
        units.join(",")
            == "cloud-init.service not-found,cloud-init-main.service loaded,cloud-init-network.service loaded",
    );
    cloud_boot(j, r, true, NETWORK);
    let failed = r.get("containerd.prestart_failures");
    j.check(
        format!("containerd's pre-start never failed ({failed} failure(s) in systemd's journal)"),
        failed == "0",
    );
    not_behind_final(j, r);
    no_cycle(j, r);
}

/// containerd's After= cloud-init-main.service waits for that unit's readiness, which
/// comes before cloud-init's first stage: containerd was active before cloud-final.service
/// (which is ordered after multi-user.target, so after containerd) finished.
fn not_behind_final(j: &mut Judge, r: &Report) {
    let main_ready = r.us(MAIN, "ActiveEnterTimestampMonotonic");
    let net_done = r.us(NETWORK, "ActiveEnterTimestampMonotonic");
    let active = r.us(C, "ActiveEnterTimestampMonotonic");
    let fin = r.us(FINAL, "ActiveEnterTimestampMonotonic");
    j.check(
        format!(
            "{MAIN} was ready at {}s, before its network stage finished ({}s)",
            secs(0, main_ready),
            secs(0, net_done)
        ),
        lt(main_ready, net_done),
    );
    j.check(
        format!(
            "containerd was active at {}s, before {FINAL} finished at {}s ({}/{})",
            secs(0, active),
            secs(0, fin),
            r.unit(FINAL, "Result"),
            r.unit(FINAL, "ActiveState")
        ),
        lt(active, fin) && r.unit(FINAL, "Result") == "success",
    );
}

/// No ordering cycle: systemd-analyze verify of containerd's, kubelet's and cloud-init's
/// units passes and names none, and systemd deleted no job to break one at boot.
fn no_cycle(j: &mut Judge, r: &Report) {
    let v = r.block("verify");
    j.check(
        format!(
            "systemd-analyze verify passes on containerd's, kubelet's and cloud-init's units, no ordering cycle (rc={}) {}",
            r.get("verify.rc"),
            oneline(&super::text::head(&v, 3))
        ),
        r.get("verify.rc") == "0" && !has(&v, "cycle"),
    );
    let cy = r.block("cycle");
    j.check(
        format!(
            "no job deleted to break an ordering cycle in the journal ('{}')",
            oneline(&super::text::head(&cy, 2))
        ),
        cy.trim().is_empty() && r.get("cycle.rc") == "0",
    );
}
