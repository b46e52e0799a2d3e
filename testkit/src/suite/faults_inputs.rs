//! Helpers shared by tests/faults_trust.rs and tests/faults_state.rs.

use crate as support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use support::node::Node;
use support::process::Identity;
use support::runtime::dead_port;
use support::ContentSnapshot;

pub fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

pub fn image(tag: &str) -> String {
    format!("127.0.0.1:{}/guard/pause:{tag}", dead_port())
}

/// What these tests add to the shared test node ([`Node`]). A TKGS node
/// (`Node::tkgs`) is one a guard that trusts its inputs restarts (see
/// `trusted_root_owned_inputs_are_read_and_the_guard_acts`); every refusal must not.
pub trait InputsNode {
    /// A good OCI archive of the sandbox image, root's, 0644.
    fn archive(&self) -> PathBuf;
    /// Nothing was done: no restart, the same containerd, no state written, no content
    /// lost.
    fn assert_untouched(&self, containerd: Identity, before: &ContentSnapshot);
}

impl InputsNode for Node {
    fn archive(&self) -> PathBuf {
        let p = self.oci_archive(false);
        chmod(&p, 0o644);
        p
    }

    #[track_caller]
    fn assert_untouched(&self, containerd: Identity, before: &ContentSnapshot) {
        assert_eq!(self.ctrd.restarts(), 0, "nothing may be restarted");
        containerd.assert_still_runs("the same containerd runs");
        let state = self.state_file();
        assert!(!state.exists(), "nothing recorded: {}", state.display());
        before.assert_nothing_lost(&self.content());
    }
}

pub fn shown(p: &Path) -> String {
    p.display().to_string()
}
