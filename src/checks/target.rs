//! What phase 2 acts on: containerd's socket, root, state directory and sandbox image,
//! from containerd's config and the guard's.

use crate::checks::sandbox_image::facts::{Snapshotter, Wanted};
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
    /// Every key containerd's config sets, and that file (the deprecations family).
    pub containerd_keys: Vec<crate::containerd::config::keys::SetKey>,
    pub containerd_file: String,
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
                snapshotter: snapshotter(cd, &cd.snapshotter, &cd.snapshotter_key),
                cri_snapshotter: snapshotter(cd, &cd.cri_snapshotter, &cd.cri_snapshotter_key),
                runtime: cd.sandbox_runtime.clone(),
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
            containerd_keys: cd.keys.clone(),
            containerd_file: cd.file.as_ref().map_or_else(
                || {
                    format!(
                        "containerd's defaults (no {})",
                        settings.containerd.config.display()
                    )
                },
                |f| f.display().to_string(),
            ),
        }
    }
}

/// The snapshotter `name`, named by `key` in containerd's config `cd`.
fn snapshotter(cd: &ContainerdConfig, name: &str, key: &str) -> Snapshotter {
    let remote = match name == cd.snapshotter {
        true => cd.remote_snapshotter,
        false => cd.cri_remote_snapshotter,
    };
    Snapshotter {
        name: name.to_string(),
        key: key.to_string(),
        remote,
        address: cd.remote_addresses.get(name).cloned(),
        layers_may_be_absent: layers_may_be_absent(cd, name, key, remote),
    }
}

/// Why containerd's config lets a healthy image lack its layer blobs once unpacked in
/// `snapshotter` (named by `key`).
fn layers_may_be_absent(
    cd: &ContainerdConfig,
    snapshotter: &str,
    key: &str,
    remote: bool,
) -> Option<String> {
    match (cd.discard_unpacked_layers, remote) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containerd::config::parse;

    fn wanted(containerd_config: &str) -> Wanted {
        let cd = parse(containerd_config).expect("a valid containerd config");
        Target::new(&Settings::default(), &cd).image
    }

    #[test]
    fn the_judged_snapshotter_is_the_runtimes_own_where_containerd_reads_it() {
        let w = wanted(
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n\
             snapshotter = \"native\"\n",
        );
        for (version, judged, said) in [
            (
                Some("1.7.24~ds1"),
                "native",
                "runtime runc runs the pod sandboxes",
            ),
            (
                Some("v2.1.9"),
                "native",
                "runtime runc runs the pod sandboxes",
            ),
            (None, "native", "runtime runc runs the pod sandboxes"),
            (
                Some("1.6.20~ds1"),
                "overlayfs",
                "containerd 1.6.20~ds1 ignores",
            ),
        ] {
            let (snapshotter, why) = w.judged(version);
            assert_eq!(snapshotter.name, judged, "{version:?}");
            assert!(why.contains(said), "{version:?}: {why}");
        }
        let plain = wanted("version = 2\n");
        let (snapshotter, why) = plain.judged(Some("1.6.20"));
        assert_eq!(
            (snapshotter.name.as_str(), why.as_str()),
            ("overlayfs", "snapshotter overlayfs: (containerd default)")
        );
    }

    /// A proxy plugin is named remote and judged by its snapshot alone (its layers may be
    /// absent); CRI's own snapshotter beside it is not.
    #[test]
    fn a_remote_snapshotter_is_named_and_its_layers_may_be_absent() {
        let w = wanted(
            "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n\
             snapshotter = \"stargz\"\n\
             [proxy_plugins.stargz]\ntype = \"snapshot\"\naddress = \"/run/stargz.sock\"\n",
        );
        let (remote, _) = w.judged(Some("1.7.24"));
        assert!(remote.remote, "{remote:?}");
        assert_eq!(remote.address.as_deref(), Some("/run/stargz.sock"));
        let why = remote.layers_may_be_absent.as_deref().unwrap_or_default();
        assert!(
            why.contains("stargz") && why.contains("remote snapshotter"),
            "{why}"
        );
        let (cri, _) = w.judged(Some("1.6.20"));
        assert_eq!((cri.name.as_str(), cri.remote), ("overlayfs", false));
        assert_eq!(cri.layers_may_be_absent, None);
    }
}
