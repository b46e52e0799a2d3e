//! dpkg's record of the image's installed packages, read once for every rule that needs a
//! package's version: containerd's (its deprecated settings) and kubelet's (its contract).

use super::Source;
use crate::host::kubelet::version::{dpkg_package_version, Version, DPKG_STATUS, DPKG_STATUS_CAP};
use crate::host::tree::Tree;
use std::path::Path;

/// dpkg's status file.
pub const STATUS: &str = DPKG_STATUS;

/// The image's status file: `None` when it has none (an rpm image, a minimal tree).
pub fn status(tree: &Tree) -> Source<Option<String>> {
    let read = tree.read(Path::new(STATUS), DPKG_STATUS_CAP);
    Source {
        file: STATUS.to_string(),
        read: read.map(|r| r.map(|(bytes, _)| String::from_utf8_lossy(&bytes).into_owned())),
    }
}

/// The version of the installed `containerd` (Debian) or `containerd.io` (Docker's
/// repository) package; `None` without a dpkg record of either (an rpm image, a
/// containerd installed from a tarball), or when the record cannot be read.
pub fn containerd_version(status: &Source<Option<String>>) -> Option<Version> {
    let text = status.read.as_ref().ok()?.as_deref()?;
    dpkg_package_version(text, &["containerd", "containerd.io"])
}
