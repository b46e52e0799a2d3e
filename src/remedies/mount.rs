//! Mounts the configured device at the volume path (initrd use, `[volume] mount = true`).
//! Only a device that already carries an allowed filesystem is mounted: the guard never
//! creates a filesystem, so a blank or foreign disk stays untouched.

use crate::config::VolumeSettings;
use crate::host::superblock::read_identity;
use crate::report::{Finding, Id};
use nix::mount::{mount, MsFlags};
use std::path::Path;

/// `node` is the device as readable here; `target` the mount point as readable here.
pub fn mount_volume(settings: &VolumeSettings, node: &Path, target: &Path) -> Finding {
    let shown = format!("{} at {}", node.display(), target.display());
    let identity = match read_identity(node) {
        Ok(Some(id)) => id,
        Ok(None) => {
            return Finding::fail(
                Id::VolumeMount,
                format!("refused to mount {shown}: no known filesystem on it"),
            )
            .evidence("no ext4, xfs or btrfs superblock; the guard never formats a disk")
            .remedy(format!(
            "create the filesystem when provisioning the disk, or check that {} is the right disk",
            node.display()
        ))
        }
        Err(e) => {
            return Finding::fail(Id::VolumeMount, format!("cannot read {}", node.display()))
                .evidence(e.to_string())
        }
    };
    if !settings.fstypes.iter().any(|t| t == identity.fstype) {
        return Finding::fail(
            Id::VolumeMount,
            format!("refused to mount {shown}: it is {}", identity.fstype),
        )
        .evidence(format!(
            "allowed by [volume] fstypes: {}",
            settings.fstypes.join(", ")
        ))
        .remedy("add the type to [volume] fstypes if this disk is intended");
    }
    if let Err(e) = std::fs::create_dir_all(target) {
        return Finding::fail(
            Id::VolumeMount,
            format!("cannot create the mount point {}", target.display()),
        )
        .evidence(e.to_string())
        .remedy("create the directory in the OS image (the root may be mounted read-only here)");
    }
    match mount(
        Some(node),
        target,
        Some(identity.fstype),
        MsFlags::empty(),
        None::<&str>,
    ) {
        Ok(()) => Finding::pass(
            Id::VolumeMount,
            format!(
                "mounted {shown} ({} label {:?} uuid {})",
                identity.fstype, identity.label, identity.uuid
            ),
        ),
        Err(e) => Finding::fail(Id::VolumeMount, format!("mount {shown} failed: {e}"))
            .remedy(format!("check `dmesg` and `fsck {}`", node.display())),
    }
}
