//! Which disk and which containerd: the configured device against the disk mounted at
//! containerd's root (btrfs's several disks included), and whether containerd started
//! before the guard judged the volume.

use super::*;

/// No `[volume] device`: one judgement for `guard verify` (`volume.device`) and `guard
/// lint` (`lint.config`), so that the two never disagree on the key.
pub fn unset_device(id: Id) -> Finding {
    Finding::warn(id, "no [volume] device configured; the disk's identity is not checked")
        .remedy("set [volume] device = \"LABEL=...\" (or UUID=, PARTUUID=, PARTLABEL=, /dev/...) in /etc/containerd-guard/config.d/")
}

pub(super) fn device_finding(facts: &VolumeFacts, path: &str) -> Finding {
    let Some((spec, lookup)) = &facts.device else {
        return unset_device(Id::VolumeDevice);
    };
    match (lookup, facts.mount()) {
        (Lookup::Found { dev, how, .. }, Some(m)) if *dev == m.dev => {
            Finding::pass(Id::VolumeDevice, format!("{path} is {spec} ({dev})")).evidence(how.clone())
        }
        (Lookup::Found { dev, how, .. }, Some(_)) if btrfs_on(facts, *dev) => {
            Finding::pass(Id::VolumeDevice, format!("{path} is {spec} ({dev})"))
                .evidence(how.clone())
                .evidence(btrfs_evidence(facts))
        }
        (Lookup::Found { dev, how, .. }, Some(m)) => {
            let mut f = Finding::fail(Id::VolumeDevice, format!("{path} is not {spec}"))
                .evidence(format!("mounted: {} {} ({})", m.source, m.dev, m.fstype));
            if facts.btrfs.is_some() {
                f = f.evidence(btrfs_evidence(facts));
            }
            f.evidence(format!("expected: {spec} = {dev}: {how}"))
                .remedy(format!("unmount {path} and mount {spec} there (check fstab / the .mount unit)"))
        }
        (Lookup::Found { dev, how, .. }, None) => {
            Finding::pass(Id::VolumeDevice, format!("{spec} is present ({dev}) but not mounted yet")).evidence(how.clone())
        }
        (Lookup::Absent { looked }, _) => Finding::fail(Id::VolumeDevice, format!("{spec} was not found"))
            .evidence(looked.clone())
            .remedy(format!(
                "attach the ephemeral disk carrying {spec} (after an HA failover: check the VM's disks), \
                 or correct [volume] device"
            )),
        (Lookup::Invalid { problem }, _) => Finding::fail(Id::VolumeDevice, format!("{spec} cannot be used"))
            .evidence(problem.clone())
            .remedy("give [volume] device a name that matches exactly one disk (UUID= is unique per filesystem)"),
    }
}

/// Whether the btrfs filesystem mounted there lives on `dev`: its mountinfo device is
/// anonymous, so the devices the kernel lists for it decide.
pub(super) fn btrfs_on(facts: &VolumeFacts, dev: DevNum) -> bool {
    matches!(&facts.btrfs, Some(Ok(b)) if b.devices.iter().any(|(_, d)| *d == dev))
}

pub(super) fn btrfs_evidence(facts: &VolumeFacts) -> String {
    match &facts.btrfs {
        Some(Ok(b)) => {
            let devices: Vec<String> = b
                .devices
                .iter()
                .map(|(n, d)| format!("{n} ({d})"))
                .collect();
            format!(
                "btrfs {} (mountinfo shows btrfs' anonymous device numbers) is on {}",
                b.fsid,
                devices.join(", ")
            )
        }
        Some(Err(e)) => format!("the disks behind this btrfs mount are unknown: {e}"),
        None => String::new(),
    }
}

pub(super) fn containerd_finding(facts: &VolumeFacts, phase: Phase) -> Finding {
    let c = &facts.containerd;
    let running = c.listener != Listener::Absent || !c.processes.is_empty();
    match phase {
        Phase::Verify => Finding::skip(
            Id::VolumeContainerdNotStarted,
            "containerd may run during verify; the runtime checks judge it",
        ),
        Phase::BeforeContainerd | Phase::LaterStart if !running => not_counted(
            Finding::pass(
                Id::VolumeContainerdNotStarted,
                "containerd has not started yet",
            ),
            c,
        ),
        Phase::BeforeContainerd | Phase::LaterStart => {
            let mut f = Finding::fail(
                Id::VolumeContainerdNotStarted,
                "containerd is already running: it started before the volume was verified",
            );
            let socket = c.socket.display();
            match c.listener {
                Listener::Absent => {}
                Listener::Accepts => f = f.evidence(format!("{socket} accepts connections")),
                Listener::DoesNotAccept => {
                    f = f.evidence(format!(
                        "{socket} has a listener that does not accept connections (its \
                         backlog is full: a hung containerd)"
                    ))
                }
            }
            for (pid, cmd) in &c.processes {
                f = f.evidence(format!("pid {pid}: {cmd}"));
            }
            not_counted(f, c).remedy(
                "a containerd started without its pre-start (`guard volume --pre-start`, from \
                 containerd.service.d/10-containerd-guard.conf): stop it, check that drop-in is \
                 loaded (`systemctl cat containerd`), then run `guard verify` (a containerd on \
                 the wrong filesystem deletes image data)",
            )
        }
    }
}

/// Processes that merely name themselves containerd are said, not silently skipped.
pub(super) fn not_counted(f: Finding, c: &ContainerdSeen) -> Finding {
    c.not_counted.iter().fold(f, |f, why| {
        f.evidence(format!("not the host's containerd for this root: {why}"))
    })
}
