//! containerd in the image: its config (imports merged) and the version its package
//! records, read through [`Tree`].

use super::Source;
use crate::containerd::config::{self as cd_config, ContainerdConfig};
use crate::host::kubelet::version::{dpkg_package_version, Version};
use crate::host::tree::Tree;
use std::path::Path;

/// dpkg's record of the installed packages.
const DPKG_STATUS: &str = "/var/lib/dpkg/status";
/// A full image's status file is a few MiB; a bigger one is not read.
const DPKG_STATUS_CAP: u64 = 64 << 20;

pub fn config(tree: &Tree, path: &Path) -> Source<ContainerdConfig> {
    Source {
        file: path.display().to_string(),
        read: cd_config::load_image(tree, path).map_err(|e| e.text().to_string()),
    }
}

/// The version of the installed `containerd` (Debian) or `containerd.io` (Docker's
/// repository) package; `None` without a dpkg record of either (an rpm image, a
/// containerd installed from a tarball), or when the record cannot be read.
pub fn version(tree: &Tree) -> Option<Version> {
    let (bytes, _) = tree.read(Path::new(DPKG_STATUS), DPKG_STATUS_CAP).ok()??;
    dpkg_package_version(
        &String::from_utf8_lossy(&bytes),
        &["containerd", "containerd.io"],
    )
}
