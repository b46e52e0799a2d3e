//! Phase 1 rules: is the filesystem at containerd's root the intended ephemeral volume?
//! Pure: settings + facts in, findings out. Ids are part of the public contract.

use crate::checks::volume::facts::{ContainerdSeen, Listener, VolumeFacts};
use crate::config::units::human_size;
use crate::config::VolumeSettings;
use crate::host::blockdev::Lookup;
use crate::host::mountinfo::{DevNum, MountEntry, MountTable};
use crate::report::{Finding, Id};

mod identity;
pub use identity::unset_device;
mod margin;
mod ready;
use identity::*;
pub use ready::{unverified, Unverified};

/// Where the checks run: before containerd (a live containerd is a fault) or by hand on a
/// running node (a live containerd is normal; phase 2's stale check covers it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// The first start of containerd in a boot: every check, every threshold.
    BeforeContainerd,
    /// A later start in the same boot (a restart, a crash, containerd's package upgrade):
    /// the volume is judged the same, but a volume that filled while the node ran only
    /// warns. Holding containerd for it would turn a full disk into an outage.
    LaterStart,
    Verify,
}

/// Filesystems that keep data in RAM or in another filesystem: never the ephemeral disk.
const NOT_A_DISK: &[&str] = &["overlay", "tmpfs", "ramfs"];

/// Every phase-1 check, in the order of the table in README.md.
pub fn evaluate(settings: &VolumeSettings, facts: &VolumeFacts, phase: Phase) -> Vec<Finding> {
    let path = facts.path.display().to_string();
    let table = match &facts.mounts {
        Ok(t) => t,
        Err(e) => {
            return vec![
                Finding::fail(Id::VolumeMounted, "cannot read the mount table")
                    .evidence(e.clone())
                    .remedy("run the guard as root on the host (not inside a container)"),
            ]
        }
    };
    let mut out = vec![mounted(facts, table, &path), device_finding(facts, &path)];
    let Some(m) = facts.mount() else {
        out.push(containerd_finding(facts, phase));
        return out;
    };
    out.push(fstype(settings, m, &path));
    out.push(not_root(table.root(), m, &path));
    out.push(backing(settings, m, &path));
    out.push(writable(facts, m, &path));
    let space = space(settings, facts, m).into_iter();
    match phase {
        Phase::LaterStart => out.extend(space.map(|f| f.only_warns(LATER_START))),
        Phase::Verify => out.extend(space.map(|f| near_eviction(settings, facts, m, f))),
        Phase::BeforeContainerd => out.extend(space),
    }
    out.extend(hidden(facts, &path));
    out.push(containerd_finding(facts, phase));
    out
}

/// 1. A mount point at all.
fn mounted(facts: &VolumeFacts, table: &MountTable, path: &str) -> Finding {
    match facts.mount() {
        Some(m) => Finding::pass(
            Id::VolumeMounted,
            format!("{path} is a mount point ({} on {})", m.source, m.dev),
        ),
        None => {
            let under = table.containing(&facts.path);
            Finding::fail(Id::VolumeMounted, format!("{path} is not a mount point"))
                .evidence(match under {
                    _ if facts.missing => format!("{path} does not exist"),
                    Some(u) => format!(
                        "{path} is a plain directory on {} ({} {}, mounted at {})",
                        u.source,
                        u.fstype,
                        u.dev,
                        u.mount_point.display()
                    ),
                    None => format!("no mount holds {path}"),
                })
                .remedy(format!(
                    "mount the ephemeral volume at {path} (see `systemctl status {}` and \
                         `journalctl -b -u {}`); containerd must not start until it is",
                    mount_unit_name(&facts.path),
                    mount_unit_name(&facts.path)
                ))
        }
    }
}

/// 3. Filesystem type.
fn fstype(settings: &VolumeSettings, m: &MountEntry, path: &str) -> Finding {
    let allowed = settings
        .fstypes
        .iter()
        .chain(&settings.allow)
        .any(|t| *t == m.fstype);
    if allowed {
        Finding::pass(
            Id::VolumeFstype,
            format!("filesystem type {} is allowed", m.fstype),
        )
    } else {
        Finding::fail(
            Id::VolumeFstype,
            format!("filesystem type {} is not allowed", m.fstype),
        )
        .evidence(format!(
            "{path} is {} from {}; allowed: {}",
            m.fstype,
            m.source,
            settings.fstypes.join(", ")
        ))
        .remedy(
            "mount the ephemeral disk there, or add the type to [volume] fstypes if it is intended",
        )
    }
}

/// 4. Not the root filesystem's device (a bind mount of a root directory looks mounted).
fn not_root(root: Option<&MountEntry>, m: &MountEntry, path: &str) -> Finding {
    match root {
        Some(r) if r.dev == m.dev => Finding::fail(
            Id::VolumeNotRoot,
            "the volume is on the root filesystem's device",
        )
        .evidence(format!(
            "{path} is {} {} (directory {} of that filesystem); / is {} {}",
            m.source,
            m.dev,
            m.fs_root.display(),
            r.source,
            r.dev
        ))
        .remedy(format!(
            "unmount the bind mount at {path} and mount the ephemeral disk there"
        )),
        Some(r) => Finding::pass(
            Id::VolumeNotRoot,
            format!(
                "device {} differs from the root filesystem's {}",
                m.dev, r.dev
            ),
        ),
        None => Finding::warn(
            Id::VolumeNotRoot,
            "the root mount is not visible; cannot compare",
        )
        .evidence("no entry for / in mountinfo"),
    }
}

/// 5. Disk-backed, unless explicitly allowed.
fn backing(settings: &VolumeSettings, m: &MountEntry, path: &str) -> Finding {
    let ram = NOT_A_DISK.contains(&m.fstype.as_str());
    if ram && !settings.allow.contains(&m.fstype) {
        Finding::fail(
            Id::VolumeBacking,
            format!("{path} is {}, not a disk", m.fstype),
        )
        .evidence(format!(
            "{} {} mounted from {:?}",
            m.fstype, m.dev, m.source
        ))
        .remedy(format!(
            "mount the ephemeral disk at {path}; to accept {} on purpose add it to [volume] allow",
            m.fstype
        ))
    } else if ram {
        Finding::warn(
            Id::VolumeBacking,
            format!("{path} is {} (allowed by [volume] allow)", m.fstype),
        )
    } else {
        Finding::pass(Id::VolumeBacking, "the volume is disk-backed")
    }
}

/// 6. Writable.
fn writable(facts: &VolumeFacts, m: &MountEntry, path: &str) -> Finding {
    if m.is_read_only() {
        Finding::fail(Id::VolumeWritable, format!("{path} is read-only"))
            .evidence(format!("mount options {}; filesystem options {}", m.mount_options.join(","), m.super_options.join(",")))
            .remedy(format!(
                "check `dmesg` for filesystem errors on {} (errors=remount-ro trips), run fsck, remount read-write",
                m.source
            ))
    } else {
        match &facts.write_probe {
            Some(Err(e)) => {
                Finding::fail(Id::VolumeWritable, format!("{path} does not accept writes"))
                    .evidence(e.clone())
                    .remedy(format!("check `dmesg` and the health of {}", m.source))
            }
            _ => Finding::pass(Id::VolumeWritable, "the volume accepts writes"),
        }
    }
}

/// 7. Space and inodes.
fn space(settings: &VolumeSettings, facts: &VolumeFacts, m: &MountEntry) -> Vec<Finding> {
    match &facts.stats {
        Some(Ok(s)) => vec![
            threshold(
                Id::VolumeFreeSpace,
                "free space",
                s.free_bytes,
                settings.min_free.bytes,
                human_size,
                &format!(
                    "free space on {} or raise its size; [volume] min_free",
                    m.source
                ),
            ),
            threshold(
                Id::VolumeFreeInodes,
                "free inodes",
                s.free_inodes,
                settings.min_free_inodes,
                |n| n.to_string(),
                &format!(
                    "remove files on {} or recreate it with more inodes; [volume] min_free_inodes",
                    m.source
                ),
            ),
        ],
        Some(Err(e)) => {
            vec![Finding::fail(Id::VolumeFreeSpace, "cannot read free space").evidence(e.clone())]
        }
        None => Vec::new(),
    }
}

/// A passing space finding, as a warning when the volume is within `[volume] warn_margin`
/// of kubelet's image-filesystem eviction threshold (`guard verify`).
fn near_eviction(
    settings: &VolumeSettings,
    facts: &VolumeFacts,
    m: &MountEntry,
    f: Finding,
) -> Finding {
    let (Some(Ok(s)), Some(Ok(Some(e)))) = (&facts.stats, &facts.kubelet) else {
        return f;
    };
    let near = margin::near_eviction(s, e, settings.warn_margin);
    match near.into_iter().find(|(id, _)| *id == f.id) {
        Some((id, line)) if f.status == crate::report::Status::Pass => Finding::warn(
            id,
            "the volume is close to kubelet's eviction threshold for images",
        )
        .evidence(line)
        .evidence(f.summary)
        .remedy(format!(
            "free space on {} (unused images), or grow it: at the threshold kubelet reports \
             DiskPressure and evicts pods",
            m.source
        )),
        _ => f,
    }
}

/// Why a space finding on a later start only warns.
const LATER_START: &str = "a later start of containerd in this boot only warns: the volume \
    filled while the node ran (the first start of a boot holds containerd for it)";

/// 8. Traces of an earlier bad boot under the mount point.
fn hidden(facts: &VolumeFacts, path: &str) -> Option<Finding> {
    match &facts.hidden {
        Some(Ok(h)) if h.entries > 0 => Some(
            Finding::warn(
                Id::VolumeHiddenData,
                format!(
                    "{}{} entries ({}) hidden under the mount point on the root filesystem",
                    if h.truncated { "at least " } else { "" },
                    h.entries,
                    human_size(h.bytes)
                ),
            )
            .evidence("containerd once ran on the root filesystem's copy of this directory (an earlier bad boot)")
            .remedy(format!(
                "after the node is healthy, inspect and remove the hidden copy: \
                 mkdir /tmp/rootfs && mount --bind / /tmp/rootfs && du -sh /tmp/rootfs{path}"
            )),
        ),
        Some(Ok(_)) => Some(Finding::pass(Id::VolumeHiddenData, "nothing hidden under the mount point")),
        Some(Err(e)) => Some(Finding::skip(Id::VolumeHiddenData, "could not look under the mount point").evidence(e.clone())),
        None => None,
    }
}

/// True when what failed may still appear: the device or the mount is missing, and
/// nothing that waiting cannot fix has failed.
pub fn worth_waiting(facts: &VolumeFacts) -> bool {
    let device_absent = matches!(facts.device, Some((_, Lookup::Absent { .. })));
    let device_hopeless = matches!(facts.device, Some((_, Lookup::Invalid { .. })));
    let unmounted = facts.mounts.is_ok() && facts.mount().is_none();
    (device_absent || unmounted) && !device_hopeless
}

fn threshold(
    id: Id,
    what: &str,
    have: u64,
    need: u64,
    show: impl Fn(u64) -> String,
    remedy: &str,
) -> Finding {
    if have >= need {
        Finding::pass(
            id,
            format!("{} {what} (minimum {})", show(have), show(need)),
        )
    } else {
        Finding::fail(
            id,
            format!("only {} {what}, minimum {}", show(have), show(need)),
        )
        .remedy(remedy.to_string())
    }
}

/// systemd's unit name for a mount point, for remedies (`/var/lib/containerd` ->
/// `var-lib-containerd.mount`). Exotic characters are escaped as systemd-escape does.
pub fn mount_unit_name(path: &std::path::Path) -> String {
    let text = path.to_string_lossy();
    let trimmed = text.trim_matches('/');
    if trimmed.is_empty() {
        return "-.mount".into();
    }
    let mut out = String::new();
    for (i, c) in trimmed.chars().enumerate() {
        match c {
            '/' => out.push('-'),
            '.' if i == 0 => out.push_str("\\x2e"),
            c if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == ':' => out.push(c),
            c => {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            }
        }
    }
    out + ".mount"
}

#[cfg(test)]
#[cfg(test)]
mod tests;
