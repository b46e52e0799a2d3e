//! What the guard takes from containerd's config for its own keys while no fragment sets
//! them (`containerd.socket`, `sandbox.image`), and where containerd's config took each
//! from, as `guard config` says it.

use super::ContainerdConfig;
use crate::config::FromContainerd;
use std::path::Path;

impl ContainerdConfig {
    /// The socket and sandbox image, each with its file and key, or containerd's default.
    /// `named` is the config file `[containerd] config` names (for one that is missing).
    pub fn for_the_guard(&self, named: &Path) -> FromContainerd {
        // `sandbox_image_key` is "(containerd default)" where no key named the image.
        let image_key = !self.sandbox_image_key.starts_with('(');
        FromContainerd {
            socket: (
                self.address.display().to_string(),
                self.source(named, self.address_key.as_deref()),
            ),
            sandbox_image: (
                self.sandbox_image.clone(),
                self.source(named, image_key.then_some(self.sandbox_image_key)),
            ),
        }
    }

    /// The file (the main one or an import) whose `key` is the value read.
    fn source(&self, named: &Path, key: Option<&str>) -> String {
        match (&self.file, key) {
            (Some(file), Some(key)) => {
                let set = self
                    .set_in
                    .iter()
                    .find(|(path, _)| super::keys::dotted(path) == key);
                let file = set.map_or(file.as_path(), |(_, f)| f.as_path());
                format!("containerd's config {}: {key}", file.display())
            }
            (Some(file), None) => format!("containerd's default (not set in {})", file.display()),
            (None, _) => format!("containerd's default ({} does not exist)", named.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_names_its_key_or_containerds_default() {
        let named = Path::new("/etc/containerd/config.toml");
        let mut cd = super::super::parse(
            "version = 2\n[grpc]\naddress = \"/run/k3s/c.sock\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"pause:9\"\n",
        )
        .unwrap();
        cd.file = Some(named.to_path_buf());
        let from = cd.for_the_guard(named);
        let config = "containerd's config /etc/containerd/config.toml";
        assert_eq!(
            from.socket,
            ("/run/k3s/c.sock".into(), format!("{config}: grpc.address"))
        );
        let key = "plugins.\"io.containerd.grpc.v1.cri\".sandbox_image";
        assert_eq!(
            from.sandbox_image,
            ("pause:9".into(), format!("{config}: {key}"))
        );
        let mut unset = super::super::parse("version = 3\n").unwrap();
        unset.file = Some(named.to_path_buf());
        let from = unset.for_the_guard(named);
        assert_eq!(from.sandbox_image.0, "registry.k8s.io/pause:3.10");
        assert!(
            from.socket.1.contains("default (not set in /etc/"),
            "{from:?}"
        );
        let missing = ContainerdConfig::defaults().for_the_guard(named);
        assert!(missing
            .socket
            .1
            .ends_with("(/etc/containerd/config.toml does not exist)"));
    }
}
