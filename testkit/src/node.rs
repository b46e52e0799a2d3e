//! A phase-2 test node on real components, shared by tests/gate_*.rs and
//! tests/faults_*.rs: containerd on a temp tree's paths (restartable through a
//! restart program), a loop-mounted ext4 volume at its root, a pause image built here.

use super::runtime::*;
use super::*;
use std::path::{Path, PathBuf};

pub const TOOLS: &[&str] = &[
    "containerd",
    "ctr",
    "runc",
    "gcc",
    "mkfs.ext4",
    "losetup",
    "mount",
];

/// The other image's repository in [`Node::with_other_image`].
pub const OTHER_IMAGE: &str = "127.0.0.1:1/guard/other";

/// A test node: containerd on `t`'s paths (dropped first), the volume, the tree.
pub struct Node {
    pub ctrd: Restartable,
    pub vol: LoopVolume,
    pub img: PauseImage,
    pub t: TempRoot,
}

impl Node {
    /// The volume's content store and the images containerd's metadata there holds: take one
    /// before the guard acts and compare with [`ContentSnapshot::assert_nothing_lost`].
    pub fn content(&self) -> ContentSnapshot {
        ContentSnapshot::take(&self.t.volume_path())
    }

    /// The volume mounted at containerd's root, containerd started on it. `image` is the
    /// sandbox image name written into containerd's config.
    pub fn healthy(image: &str) -> Node {
        assert!(
            require_root(TOOLS).is_ok(),
            "start the test with `let Some(_root) = root_or_skip(TOOLS) else {{ return; }};`"
        );
        Node::healthy_in(TempRoot::new(), image)
    }

    /// A healthy node whose volume also holds another image (the same pause content under
    /// another name, `127.0.0.1:1/guard/other:<random>`), so "nothing lost" has image data
    /// to check while the sandbox image itself is missing.
    pub fn with_other_image(image: &str) -> Node {
        let n = Node::healthy(image);
        let other = PauseImage::new(&format!("{OTHER_IMAGE}:{}", unique("", 6)));
        n.ctrd
            .ctr_import(&other.write_oci(&n.t.path().join("other.oci.tar"), false));
        n
    }

    /// [`Node::content`], checked to hold the other image of [`Node::with_other_image`]:
    /// a "nothing lost" check with nothing to lose checks nothing.
    #[track_caller]
    pub fn content_with_other_image(&self) -> ContentSnapshot {
        let snapshot = self.content();
        assert!(
            snapshot.has_image_named(OTHER_IMAGE),
            "the snapshot holds no {OTHER_IMAGE}: start the node with Node::with_other_image\n{snapshot:?}"
        );
        snapshot
    }

    /// What containerd's root directory holds beneath the volume mounted over it (a stale
    /// containerd's data, which the guard must not lose either), seen through a bind mount
    /// of its parent directory, which does not carry the volume; the bind undone after.
    pub fn content_beneath_volume(&self) -> ContentSnapshot {
        let root = self.t.volume_path();
        let beneath = self.t.path().join("beneath-the-volume");
        let _bind = Mount::bind(root.parent().expect("a parent"), &beneath);
        ContentSnapshot::take(&beneath.join(root.file_name().expect("a name")))
    }

    /// As [`Node::healthy`], in a given tree (e.g. [`TempRoot::world_readable_in`]).
    pub fn healthy_in(t: TempRoot, image: &str) -> Node {
        Node::healthy_prepared(t, image, |_| {})
    }

    /// As [`Node::healthy_in`], with `before_start` run once the volume is mounted and
    /// before containerd starts (a config split into imports, a symlink inside the root).
    pub fn healthy_prepared(
        t: TempRoot,
        image: &str,
        before_start: impl FnOnce(&TempRoot),
    ) -> Node {
        Node::start(
            t,
            &CriConfig::new().sandbox_image(image),
            image,
            before_start,
        )
    }

    /// As [`Node::healthy_in`], containerd's CRI settings those of `cri` with `image` as
    /// the sandbox image (`discard_unpacked_layers`, runc's own snapshotter).
    pub fn healthy_cri(t: TempRoot, image: &str, cri: CriConfig) -> Node {
        Node::start(t, &cri.sandbox_image(image), image, |_| {})
    }

    fn start(
        t: TempRoot,
        cri: &CriConfig,
        image: &str,
        before_start: impl FnOnce(&TempRoot),
    ) -> Node {
        t.write_containerd_config_cri(cri);
        let vol = LoopVolume::new(
            &t.images(),
            FsKind::Ext4,
            &unique("cg", 8),
            &t.volume_path(),
        );
        before_start(&t);
        let ctrd = Restartable::start(&t);
        Node {
            ctrd,
            vol,
            img: PauseImage::new(image),
            t,
        }
    }

    pub fn oci_archive(&self, corrupt: bool) -> PathBuf {
        let name = if corrupt {
            "pause-corrupt.oci.tar"
        } else {
            "pause.oci.tar"
        };
        self.img.write_oci(&self.t.path().join(name), corrupt)
    }

    pub fn import_image(&self) {
        self.ctrd.ctr_import(&self.oci_archive(false));
    }

    /// The TKGS order: the volume holds the data (the image), containerd starts on the root
    /// filesystem's copy of the directory, the volume is mounted over it afterwards.
    pub fn tkgs(image: &str) -> Node {
        let mut n = Node::healthy(image);
        n.import_image();
        n.ctrd.stop();
        drop(n.vol.mount.take());
        assert!(!is_mount_point(&n.t.volume_path()));
        n.ctrd.restart_by_hand();
        n.vol.mount = Some(n.vol.device.mount(&n.t.volume_path(), ""));
        n
    }

    /// The guard's config for this node as data: this tree's `state_dir`, containerd
    /// config and metrics textfile ([`GuardConfig::in_tree`]), `[containerd] wait = "20s"`
    /// and `restart = [restart]`. Add keys and [`GuardConfig::write`] it.
    pub fn guard_config(&self, restart: &Path) -> GuardConfig {
        GuardConfig::in_tree(&self.t)
            .containerd_wait("20s")
            .containerd_restart(&[&restart.display().to_string()])
    }

    /// [`Node::guard_config`], written as the guard's config file.
    pub fn config(&self, restart: &Path) -> PathBuf {
        self.guard_config(restart).write(&self.t)
    }

    /// [`Node::guard_config`] with the keys `adjust` sets, written as the guard's config
    /// file: `n.config_with(&restart, |c| c.sandbox_pull(false).hold_timeout("3s"))`.
    pub fn config_with(
        &self,
        restart: &Path,
        adjust: impl FnOnce(GuardConfig) -> GuardConfig,
    ) -> PathBuf {
        adjust(self.guard_config(restart)).write(&self.t)
    }

    pub fn state_file(&self) -> PathBuf {
        self.t.guard_state_dir().join("runtime.json")
    }

    #[track_caller]
    pub fn kubelet_can_start_a_pod(&self) {
        if let Err(e) = run_pod_sandbox(&self.t.socket()) {
            panic!(
                "RunPodSandbox failed: {e}\ncontainerd log:\n{}",
                self.ctrd.log_tail()
            );
        }
    }
}

pub fn runtime(cfg: &Path) -> Outcome {
    Guard::with_config(cfg).run(&["--json", "runtime"])
}

pub fn has_finding(out: &Outcome, id: &str) -> bool {
    out.json
        .as_ref()
        .and_then(|j| j["findings"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .any(|f| f["id"] == id)
}

/// Lines in a log file a restart script appends to (0 when it never ran).
pub fn lines_in(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// The `restarts` array of the state file, read as the guard wrote it.
pub fn recorded_restarts(n: &Node) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(n.state_file())
        .unwrap_or_else(|e| panic!("{}: {e}", n.state_file().display()));
    let j: serde_json::Value = serde_json::from_str(&text).expect("state file is JSON");
    j["restarts"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no restarts array in {text}"))
}
