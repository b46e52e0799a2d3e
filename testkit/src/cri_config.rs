//! containerd's CRI settings a test chooses, as data: rendered for the config version the
//! selected containerd reads (2 for 1.x, 3 for 2.x, where the CRI plugin is split into an
//! images and a runtime plugin), so a test names a setting once and never writes the
//! tables of either version itself. Written with [`TempRoot::write_containerd_config_cri`].
//!
//! ```text
//! t.write_containerd_config_cri(&CriConfig::new().sandbox_image(&image).runc_snapshotter("native"));
//! ```
//!
//! [`TempRoot::write_containerd_config_cri`]: super::TempRoot::write_containerd_config_cri

/// The CRI settings of one test containerd; unset ones are containerd's defaults.
#[derive(Debug, Clone, Default)]
pub struct CriConfig {
    sandbox_image: Option<String>,
    discard_unpacked_layers: Option<bool>,
    runc_snapshotter: Option<String>,
    /// CRI's snapshotter a proxy plugin: (name, its socket).
    remote_snapshotter: Option<(String, String)>,
}

/// The tables of a config version: (runtime plugin, images plugin).
fn plugins(version: u32) -> (&'static str, &'static str) {
    match version {
        3 => (
            "io.containerd.cri.v1.runtime",
            "io.containerd.cri.v1.images",
        ),
        _ => ("io.containerd.grpc.v1.cri", "io.containerd.grpc.v1.cri"),
    }
}

/// containerd 2.x pulls through its transfer service, which unpacks only for the
/// snapshotters its `unpack_config` lists (by default CRI's default, overlayfs).
fn transfer_unpacks(snapshotters: &[&str]) -> String {
    let arch = containerd_guard::containerd::oci::oci_arch(std::env::consts::ARCH);
    let entry = |s: &&str| {
        format!(
            "[[plugins.\"io.containerd.transfer.v1.local\".unpack_config]]\n  \
             platform = \"linux/{arch}\"\n  snapshotter = \"{s}\"\n"
        )
    };
    snapshotters.iter().map(entry).collect()
}

impl CriConfig {
    pub fn new() -> CriConfig {
        CriConfig::default()
    }

    /// The sandbox image (`sandbox_image`; `pinned_images.sandbox` on 2.x).
    pub fn sandbox_image(mut self, image: &str) -> CriConfig {
        self.sandbox_image = Some(image.to_string());
        self
    }

    /// `discard_unpacked_layers`: containerd deletes layer blobs once they are unpacked.
    pub fn discard_unpacked_layers(mut self, discard: bool) -> CriConfig {
        self.discard_unpacked_layers = Some(discard);
        self
    }

    /// runc's own snapshotter (`runtimes.runc.snapshotter`, read by containerd 1.7 and
    /// later), beside CRI's default one. runc is then declared whole (`runtime_type`), as
    /// a table in the file replaces containerd's built-in entry. On 2.x the images plugin
    /// is told too (`runtime_platforms.runc.snapshotter`), and the transfer service may
    /// unpack there (`unpack_config`): a CRI pull for runc's pods unpacks there only with
    /// both, as a 2.x node with a runtime's own snapshotter sets them.
    pub fn runc_snapshotter(mut self, snapshotter: &str) -> CriConfig {
        self.runc_snapshotter = Some(snapshotter.to_string());
        self
    }

    /// CRI's snapshotter a remote one: `[proxy_plugins.NAME] type = "snapshot"` at
    /// `address` (a [`SnapshotProxy`](super::snapshot_proxy::SnapshotProxy)), named as
    /// CRI's `snapshotter`. On 2.x the transfer service may unpack there too.
    pub fn remote_snapshotter(mut self, name: &str, address: &std::path::Path) -> CriConfig {
        self.remote_snapshotter = Some((name.to_string(), address.display().to_string()));
        self
    }

    /// The CRI tables for config `version` (2 or 3).
    pub fn render(&self, version: u32) -> String {
        let (runtime, images) = plugins(version);
        let mut text = format!("[plugins.\"{runtime}\"]\n  restrict_oom_score_adj = true\n");
        let image = self.sandbox_image.as_deref();
        if let (Some(image), 2) = (image, version) {
            text += &format!("  sandbox_image = \"{image}\"\n");
        }
        // version 2 keeps the images' settings in the runtimes' `containerd` table
        let images_table = match version {
            3 => format!("[plugins.\"{images}\"]\n"),
            _ => format!("[plugins.\"{images}\".containerd]\n"),
        };
        let mut images_keys = String::new();
        if let Some(discard) = self.discard_unpacked_layers {
            images_keys += &format!("  discard_unpacked_layers = {discard}\n");
        }
        if let Some((name, _)) = &self.remote_snapshotter {
            images_keys += &format!("  snapshotter = \"{name}\"\n");
        }
        if !images_keys.is_empty() {
            text += &format!("{images_table}{images_keys}");
        }
        if let (Some(image), 3) = (image, version) {
            text += &format!("[plugins.\"{images}\".pinned_images]\n  sandbox = \"{image}\"\n");
        }
        if let Some(snapshotter) = &self.runc_snapshotter {
            text += &format!(
                "[plugins.\"{runtime}\".containerd.runtimes.runc]\n  \
                 runtime_type = \"io.containerd.runc.v2\"\n  snapshotter = \"{snapshotter}\"\n"
            );
            if version == 3 {
                text += &format!(
                    "[plugins.\"{images}\".runtime_platforms.runc]\n  snapshotter = \"{snapshotter}\"\n"
                );
                text += &transfer_unpacks(&["overlayfs", snapshotter]);
            }
        }
        if let Some((name, address)) = &self.remote_snapshotter {
            if version == 3 {
                text += &transfer_unpacks(&[name]);
            }
            text += &format!(
                "[proxy_plugins.\"{name}\"]\n  type = \"snapshot\"\n  address = \"{address}\"\n"
            );
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each setting lands in the table its version reads, and the text is valid TOML.
    #[test]
    fn each_setting_lands_where_its_version_reads_it() {
        let cri = CriConfig::new()
            .sandbox_image("x/pause:1")
            .discard_unpacked_layers(true)
            .runc_snapshotter("native");
        let v2: toml::Table = cri.render(2).parse().expect("version 2 is TOML");
        let cri2 = &v2["plugins"]["io.containerd.grpc.v1.cri"];
        assert_eq!(cri2["sandbox_image"].as_str(), Some("x/pause:1"));
        assert_eq!(
            cri2["containerd"]["discard_unpacked_layers"].as_bool(),
            Some(true)
        );
        let runc2 = &cri2["containerd"]["runtimes"]["runc"];
        assert_eq!(runc2["snapshotter"].as_str(), Some("native"));
        let v3: toml::Table = cri.render(3).parse().expect("version 3 is TOML");
        let images = &v3["plugins"]["io.containerd.cri.v1.images"];
        assert_eq!(
            images["pinned_images"]["sandbox"].as_str(),
            Some("x/pause:1")
        );
        assert_eq!(images["discard_unpacked_layers"].as_bool(), Some(true));
        let runtime = &v3["plugins"]["io.containerd.cri.v1.runtime"];
        let runc3 = &runtime["containerd"]["runtimes"]["runc"];
        assert_eq!(
            runc3["runtime_type"].as_str(),
            Some("io.containerd.runc.v2")
        );
        assert_eq!(runc3["snapshotter"].as_str(), Some("native"));
        let platform = &images["runtime_platforms"]["runc"];
        assert_eq!(platform["snapshotter"].as_str(), Some("native"));
        let unpacks = v3["plugins"]["io.containerd.transfer.v1.local"]["unpack_config"]
            .as_array()
            .expect("unpack_config is an array of tables");
        let names: Vec<_> = unpacks.iter().map(|u| u["snapshotter"].as_str()).collect();
        assert_eq!(names, [Some("overlayfs"), Some("native")]);
        let plain: toml::Table = CriConfig::new().render(3).parse().unwrap();
        assert!(plain["plugins"]
            .get("io.containerd.cri.v1.images")
            .is_none());
    }

    /// A remote snapshotter is CRI's snapshotter and a proxy plugin at its socket, beside
    /// another image setting in the same table (one table, valid TOML).
    #[test]
    fn a_remote_snapshotter_is_cris_and_a_proxy_plugin() {
        let socket = std::path::Path::new("/run/lazy.sock");
        let cri = CriConfig::new()
            .discard_unpacked_layers(true)
            .remote_snapshotter("lazy", socket);
        for version in [2, 3] {
            let text: toml::Table = cri.render(version).parse().expect("valid TOML");
            let images = match version {
                3 => &text["plugins"]["io.containerd.cri.v1.images"],
                _ => &text["plugins"]["io.containerd.grpc.v1.cri"]["containerd"],
            };
            assert_eq!(images["snapshotter"].as_str(), Some("lazy"), "{version}");
            assert_eq!(images["discard_unpacked_layers"].as_bool(), Some(true));
            let proxy = &text["proxy_plugins"]["lazy"];
            assert_eq!(proxy["type"].as_str(), Some("snapshot"));
            assert_eq!(proxy["address"].as_str(), Some("/run/lazy.sock"));
        }
    }
}
