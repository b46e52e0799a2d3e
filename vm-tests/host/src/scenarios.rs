//! The boot scenarios, declared: one struct each (its disks, kernel command line,
//! cloud-init seed, timeouts and the checks on the facts its guest reports). To add a
//! scenario: a `Scenario` here, its checks (crate::checks), and what its guest does under
//! `vmtest.scenario=NAME` (guest/vm-tests-generator, guest/scenario.sh).

use crate::boot::Prepared;
use crate::checks::scenarios::Ctx;
use crate::checks::{
    bootcost, images, node, ops, package, recover, scenarios as sc, trixie, Judge,
};
use std::path::PathBuf;

/// cloud-init, scaled down: its wait (the seed's bootcmd) is twice containerd's start
/// timeout (a guest drop-in in place of the shipped 150 s). The timeout must still exceed
/// containerd's own start (4-6 s under TCG, about 2.5x that on a loaded host).
pub const CLOUD_WAIT: u32 = 30;
pub const CLOUD_TIMEOUT: u32 = 15;

/// Every stage a plain `vm-tests/run` runs, in order (`--list`): two without a boot, then
/// the boot scenarios (the Debian 12 guest's, then the Debian 13 guest's).
pub const ALL: &str = "dracut-build lint healthy hotplug never wrong-disk stale cycle cycle-guard dracut dracut-var restore k3s leaked-task ops readme-recovery package cloud-init trixie-healthy trixie-stale trixie-cloud-init";

/// The ephemeral disk (/dev/vdb), a 256 MiB ext4 (or blank) image.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Disk {
    /// attached when qemu starts
    Boot,
    /// hot-plugged over QMP after the guest asks for it (vm-tests-hotplug.service)
    Hotplug,
    /// never attached
    None,
}

impl Disk {
    pub fn word(self) -> &'static str {
        match self {
            Disk::Boot => "boot",
            Disk::Hotplug => "hotplug",
            Disk::None => "none",
        }
    }
}

/// The root disk the guest boots.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Root {
    /// the suite's image, copy-on-write (qemu snapshot=on)
    Suite,
    /// a qcow2 overlay of the suite's image that a second boot boots again
    SuiteOverlay,
    /// a qcow2 overlay of the suite's image with cloud-init (lib/cloudify.sh)
    CloudOverlay,
    /// the suite's image with /var on a filesystem of its own (lib/varify.sh), both
    /// copy-on-write
    SeparateVar,
    /// the Debian 13 (trixie) guest's image with cloud-init, copy-on-write, booted with
    /// its own kernel
    Trixie,
}

/// The initrd: the suite's minimal one, dracut's with the guard's module, or the trixie
/// guest's minimal one (its own kernel's modules).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Initrd {
    Suite,
    Guard,
    Trixie,
}

impl Initrd {
    pub fn path(self, p: &Prepared) -> PathBuf {
        match self {
            Initrd::Suite => p.suite.join("initrd.img"),
            Initrd::Guard => p.suite.join("initrd-guard.img"),
            Initrd::Trixie => p.trixie.join("initrd.img"),
        }
    }
}

/// A later boot of the same disks, in a subdirectory, with its own command line.
#[derive(Debug, Clone, Copy)]
pub struct LaterBoot {
    pub dir: &'static str,
    pub cmdline: &'static str,
}

/// One boot scenario.
#[derive(Clone, Copy)]
pub struct Scenario {
    pub name: &'static str,
    pub disk: Disk,
    /// the ephemeral disk's filesystem label ("none": blank)
    pub label: &'static str,
    /// vmtest.* words after `vmtest.scenario=NAME` (guest/vm-tests-generator)
    pub cmdline: &'static str,
    pub initrd: Initrd,
    pub root: Root,
    /// a NoCloud seed disk (cidata) whose user-data formats and mounts the ephemeral disk
    pub cloud_seed: bool,
    /// seconds per boot when VM_TIMEOUT is unset (boots that run a pod and an incident
    /// need more room under a loaded TCG host)
    pub timeout: u64,
    /// `guard lint` of this disk before it boots (the checks tie the lint to the boot)
    pub lint_before: bool,
    /// later boots of the same disks, in this order
    pub again: &'static [LaterBoot],
    /// the checks on the guest's facts
    pub checks: fn(&mut Judge, &Ctx),
    /// judged after the evidence: healthy's cost lines
    pub cost: bool,
}

const BASE: Scenario = Scenario {
    name: "",
    disk: Disk::Boot,
    label: "ctrd-eph",
    cmdline: "",
    initrd: Initrd::Suite,
    root: Root::Suite,
    cloud_seed: false,
    timeout: 300,
    lint_before: false,
    again: &[],
    checks: sc::healthy,
    cost: false,
};

/// The Debian 13 (trixie) guest: systemd 257, cloud-init 25, containerd 1.7 from the
/// archive, the same package. Its healthy and stale boots are the Debian 12 guest's
/// (the same generator words, `vmtest.scenario=` given again) with cloud-init disabled
/// for the boot (`cloud-init=disabled`, cloud-init's own kernel switch).
const TRIXIE: Scenario = Scenario {
    root: Root::Trixie,
    initrd: Initrd::Trixie,
    ..BASE
};

/// The boot scenarios; `bare-dir` and `cycle-budget` are opt-in (not in ALL).
pub const SCENARIOS: &[Scenario] = &[
    // three boots of one disk: the first imports the sandbox image; then the same disk,
    // warm, once with both drop-ins masked (the README's opt-out) and once with the guard,
    // for the boot cost as a ratio (checks::bootcost)
    Scenario {
        name: "healthy",
        lint_before: true,
        cost: true,
        again: &[
            LaterBoot { dir: "masked", cmdline: "vmtest.scenario=healthy-masked" },
            LaterBoot { dir: "again", cmdline: "vmtest.scenario=healthy-again" },
        ],
        checks: bootcost::healthy,
        ..BASE
    },
    Scenario { name: "hotplug", disk: Disk::Hotplug, checks: sc::hotplug, ..BASE },
    Scenario {
        name: "never",
        disk: Disk::None,
        cmdline: "vmtest.devtimeout=10 vmtest.guardwait=5 vmtest.hold=10 vmtest.kubelettimeout=5",
        lint_before: true,
        checks: sc::never,
        ..BASE
    },
    Scenario {
        name: "wrong-disk",
        label: "not-eph",
        cmdline: "vmtest.what=/dev/vdb vmtest.guardwait=5 vmtest.hold=10 vmtest.budget=0",
        checks: sc::wrong_disk,
        ..BASE
    },
    Scenario {
        name: "bare-dir",
        disk: Disk::None,
        cmdline: "vmtest.mount=no vmtest.guardwait=5 vmtest.hold=10 vmtest.budget=0",
        checks: sc::bare_dir,
        ..BASE
    },
    Scenario {
        name: "stale",
        cmdline: "vmtest.mountafter=containerd.service",
        lint_before: true,
        checks: sc::stale,
        ..BASE
    },
    Scenario {
        name: "cycle",
        cmdline: "vmtest.mountafter=containerd.service vmtest.guardwait=10 vmtest.hold=10 vmtest.budget=0",
        lint_before: true,
        checks: sc::cycle,
        ..BASE
    },
    Scenario { name: "cycle-guard", cmdline: "vmtest.hold=10", checks: sc::cycle_guard, ..BASE },
    Scenario {
        name: "cycle-budget",
        cmdline: "vmtest.scenario=cycle vmtest.mountafter=containerd.service vmtest.guardwait=15 vmtest.hold=60",
        checks: sc::cycle_budget,
        ..BASE
    },
    Scenario { name: "dracut", initrd: Initrd::Guard, cmdline: "vmtest.mount=no", checks: sc::dracut, ..BASE },
    Scenario {
        name: "dracut-var",
        initrd: Initrd::Guard,
        root: Root::SeparateVar,
        checks: images::dracut_var,
        ..BASE
    },
    Scenario { name: "restore", checks: sc::restore, ..BASE },
    Scenario { name: "k3s", timeout: 600, lint_before: true, checks: node::k3s, ..BASE },
    Scenario { name: "leaked-task", timeout: 600, checks: node::leaked, ..BASE },
    Scenario { name: "ops", timeout: 900, checks: ops::ops, ..BASE },
    Scenario {
        name: "readme-recovery",
        cmdline: "vmtest.mount=noauto vmtest.guardwait=10",
        timeout: 900,
        checks: recover::readme_recovery,
        ..BASE
    },
    // two boots of one disk: the first upgrades, removes and purges the package on the
    // running node; the second boots the same disk after the purge
    Scenario {
        name: "package",
        root: Root::SuiteOverlay,
        timeout: 600,
        again: &[LaterBoot { dir: "after", cmdline: "vmtest.scenario=package-after" }],
        checks: package::package,
        ..BASE
    },
    // two boots of one disk: cloud-init formats and mounts the blank disk, then the
    // fstab line it wrote mounts it
    Scenario {
        name: "cloud-init",
        label: "none",
        cmdline: "vmtest.mount=no vmtest.starttimeout=15",
        root: Root::CloudOverlay,
        cloud_seed: true,
        timeout: 600,
        again: &[LaterBoot { dir: "again", cmdline: "vmtest.scenario=cloud-init-again vmtest.mount=no" }],
        checks: images::cloud,
        ..BASE
    },
    Scenario {
        name: "trixie-healthy",
        cmdline: "vmtest.scenario=healthy cloud-init=disabled",
        checks: trixie::healthy,
        ..TRIXIE
    },
    Scenario {
        name: "trixie-stale",
        cmdline: "vmtest.scenario=stale vmtest.mountafter=containerd.service cloud-init=disabled",
        checks: trixie::stale,
        ..TRIXIE
    },
    // one boot: cloud-init 25 formats and mounts the blank disk in its network stage
    Scenario {
        name: "trixie-cloud-init",
        label: "none",
        cmdline: "vmtest.mount=no vmtest.starttimeout=15",
        cloud_seed: true,
        timeout: 600,
        checks: trixie::cloud,
        ..TRIXIE
    },
];

impl Scenario {
    pub fn find(name: &str) -> Option<&'static Scenario> {
        SCENARIOS.iter().find(|s| s.name == name)
    }

    /// The kernel command line's vmtest.* words.
    pub fn append(&self) -> String {
        let mut a = format!("vmtest.scenario={}", self.name);
        if !self.cmdline.is_empty() {
            a = format!("{a} {}", self.cmdline);
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_of_all_is_declared() {
        for n in ALL.split(' ') {
            assert!(
                matches!(n, "dracut-build" | "lint") || Scenario::find(n).is_some(),
                "{n}"
            );
        }
        // cloud-init's start timeout is the constant its checks compare with
        for name in ["cloud-init", "trixie-cloud-init"] {
            let c = Scenario::find(name).unwrap();
            assert!(c
                .cmdline
                .contains(&format!("vmtest.starttimeout={CLOUD_TIMEOUT}")));
        }
        assert_eq!(
            Scenario::find("never").unwrap().append(),
            "vmtest.scenario=never vmtest.devtimeout=10 vmtest.guardwait=5 vmtest.hold=10 vmtest.kubelettimeout=5"
        );
    }
}
