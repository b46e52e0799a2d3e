//! What phase 2 acts on: containerd's socket, root, state directory and sandbox image,
//! from containerd's config and the guard's.

use crate::checks::sandbox_image::facts::Wanted;
use crate::config::Settings;
use crate::containerd::config::ContainerdConfig;
use std::path::PathBuf;

/// What phase 2 needs to know about containerd, from its config and the guard's.
#[derive(Debug, Clone)]
pub struct Target {
    pub socket: PathBuf,
    pub root: PathBuf,
    /// containerd's state directory (its task bundles).
    pub state: PathBuf,
    pub image: Wanted,
    /// A pod's cgroup parent as kubelet's driver names one: a slice under the systemd
    /// driver (`system.slice`: always there, nothing left when the canary goes), none
    /// under cgroupfs (containerd's default).
    pub cgroup_parent: &'static str,
    /// CRI's runtime uses the systemd cgroup driver, and where that is said (kubelet's
    /// driver must agree).
    pub systemd_cgroup: bool,
    pub systemd_cgroup_said: String,
}

impl Target {
    pub fn new(settings: &Settings, cd: &ContainerdConfig) -> Target {
        let (reference, source) = match &settings.sandbox.image {
            Some(i) => (i.clone(), "[sandbox] image".to_string()),
            None => (cd.sandbox_image.clone(), cd.sandbox_image_key.to_string()),
        };
        Target {
            socket: crate::containerd::config::socket(settings, cd),
            root: cd.root.clone(),
            state: cd.state.clone(),
            image: Wanted {
                reference,
                source,
                snapshotter: cd.snapshotter.clone(),
                layers_may_be_absent: layers_may_be_absent(cd),
            },
            cgroup_parent: if cd.systemd_cgroup {
                "system.slice"
            } else {
                ""
            },
            systemd_cgroup: cd.systemd_cgroup,
            systemd_cgroup_said: format!(
                "containerd: SystemdCgroup = {} for runtime {} ({})",
                cd.systemd_cgroup,
                cd.sandbox_runtime,
                cd.file
                    .as_ref()
                    .map_or("containerd's defaults".into(), |f| f.display().to_string())
            ),
        }
    }
}

/// Why containerd's config lets a healthy image lack its layer blobs once unpacked.
fn layers_may_be_absent(cd: &ContainerdConfig) -> Option<String> {
    let (snapshotter, key) = (&cd.snapshotter, &cd.snapshotter_key);
    match (cd.discard_unpacked_layers, cd.remote_snapshotter) {
        (true, _) => Some(format!(
            "containerd discards unpacked layers (discard_unpacked_layers = true in {})",
            cd.file
                .as_ref()
                .map_or("its config".into(), |f| f.display().to_string())
        )),
        (false, true) => Some(format!(
            "{snapshotter} ({key}) is a remote snapshotter, which fetches layers lazily"
        )),
        (false, false) => None,
    }
}
