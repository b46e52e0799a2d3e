//! `kubelet.version.json`: the answer of `kubelet --version`, kept for this boot and this
//! binary (its dev, inode and mtime) so `guard verify`, which NPD may run every few
//! seconds, runs kubelet's binary once per boot and upgrade.

use super::{encode, StateDir, StateError};
use crate::host::kubelet::version::Cached;

const KUBELET_VERSION: &str = "kubelet.version.json";

impl StateDir {
    /// The cached version, if a readable record is there (the caller checks it answers).
    pub fn read_kubelet_version(&self) -> Option<Cached> {
        let text = self.read(KUBELET_VERSION).ok()??;
        serde_json::from_slice(&text).ok()
    }

    /// Replaces the record (atomically, as every file of `state_dir`).
    pub fn save_kubelet_version(&self, cached: &Cached) -> Result<(), StateError> {
        self.write(KUBELET_VERSION, &encode(KUBELET_VERSION, cached)?)
    }
}
