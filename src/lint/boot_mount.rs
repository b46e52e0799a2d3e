//! Whether the volume's mount happens at boot: `noauto` and `x-systemd.automount` on the
//! lines that mount it. Pure, over the image's facts; part of `lint.volume-mount`.

use super::facts::Image;
use super::order::MountDecl;
use crate::report::{Finding, Id};

/// `noauto`: nothing mounts the volume at boot, so the gate holds containerd every boot,
/// unless the guard mounts it itself (`[volume] mount = true`). `x-systemd.automount`:
/// the mount waits for a first access, so containerd's `After=` on the `.mount` orders it
/// after nothing, the guard's look meets autofs, and `x-systemd.idle-timeout=` would
/// unmount containerd's root under it: failed whatever `[volume] mount` says.
pub(super) fn not_mounted_at_boot(image: &Image, decls: &[MountDecl]) -> Option<Finding> {
    let id = Id::LintVolumeMount;
    let volume = image.volume.display();
    if let Some(d) = decls.iter().find(|d| d.has_option("x-systemd.automount")) {
        return Some(
            Finding::fail(
                id,
                format!("{volume} is an automount: mounted on first access, not at boot"),
            )
            .evidence(format!("x-systemd.automount at {}", d.place))
            .remedy(
                "drop x-systemd.automount (and x-systemd.idle-timeout): mount the disk at boot; \
                 nofail with the guard's drop-in keeps a boot without it out of emergency mode",
            ),
        );
    }
    if image.guard.settings.volume.mount {
        return None;
    }
    let d = decls.iter().find(|d| d.has_option("noauto"))?;
    Some(
        Finding::fail(
            id,
            format!("{volume} is never mounted at boot (noauto): containerd is held every boot"),
        )
        .evidence(format!("noauto at {}", d.place))
        .remedy(
            "drop noauto, or let the guard mount it: [volume] mount = true in a fragment \
             (/etc/containerd-guard/config.d/)",
        ),
    )
}
