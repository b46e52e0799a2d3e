//! A fake host tree for one test: containerd's config, root, state and socket, and the
//! guard's own config, all under one temporary directory that is removed on drop.
//!
//! Layout (`<t>` is the tempdir):
//!   <t>/containerd/config.toml   containerd's config, `root`/`state`/`grpc.address` below
//!   <t>/var/lib/containerd       containerd's root: the volume path under test
//!   <t>/run/containerd           containerd's state; the socket is containerd.sock in it
//!   <t>/guard.toml               the guard's config (`[containerd] config` points above)
//!   <t>/run/containerd-guard     the guard's `state_dir` (status file, volume.ok marker)
//!   <t>/img                      images for loop devices

use super::{CriConfig, GuardConfig};
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct TempRoot {
    dir: tempfile::TempDir,
}

impl Default for TempRoot {
    fn default() -> Self {
        TempRoot::new()
    }
}

impl TempRoot {
    /// A fresh tree with containerd's config already written (no extra CRI settings).
    pub fn new() -> TempRoot {
        let dir = tempfile::Builder::new()
            .prefix("cg-test.")
            .tempdir()
            .expect("tempdir");
        TempRoot::init(dir)
    }

    /// As [`TempRoot::new`], but on the root filesystem's own device (not a tmpfs `/tmp`),
    /// for tests whose premise is "a directory on the root filesystem". Uses `$TMPDIR` when
    /// it is on `/`'s device, else the first of /var/tmp, /root, /var/lib that is.
    pub fn on_root_filesystem() -> TempRoot {
        use std::os::unix::fs::MetadataExt;
        let root_dev = std::fs::metadata("/").expect("stat /").dev();
        let base = [
            std::env::temp_dir(),
            "/var/tmp".into(),
            "/root".into(),
            "/var/lib".into(),
        ]
        .into_iter()
        .find(|d| {
            std::fs::metadata(d)
                .map(|m| m.dev() == root_dev)
                .unwrap_or(false)
        })
        .expect("no writable directory on the root filesystem's device");
        let dir = tempfile::Builder::new()
            .prefix("cg-test.")
            .tempdir_in(base)
            .expect("tempdir");
        TempRoot::init(dir)
    }

    /// As [`TempRoot::new`], but below `base` and traversable by every user (mode 0755):
    /// for tests that run the guard as an unprivileged user against root's files.
    pub fn world_readable_in(base: &Path) -> TempRoot {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::Builder::new()
            .prefix("cg-test.")
            .tempdir_in(base)
            .expect("tempdir");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        TempRoot::init(dir)
    }

    fn init(dir: tempfile::TempDir) -> TempRoot {
        let t = TempRoot { dir };
        for d in ["containerd", "var/lib", "run/containerd", "img", "opt"] {
            std::fs::create_dir_all(t.path().join(d)).expect("mkdir");
        }
        t.write_containerd_config("");
        t
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// containerd's `root`: the path the ephemeral volume must be mounted at. Not created:
    /// tests decide whether it is a directory, a mount point, or missing.
    pub fn volume_path(&self) -> PathBuf {
        self.path().join("var/lib/containerd")
    }

    /// A loop-mounted ext4 volume at [`TempRoot::volume_path`]: the guard restarts
    /// containerd, and writes into it, only onto the verified volume. Keep it until
    /// containerd is gone (declared after it, it is dropped before the tree).
    pub fn mount_volume(&self) -> super::LoopVolume {
        let label = super::unique("cg", 8);
        super::LoopVolume::new(
            &self.images(),
            super::FsKind::Ext4,
            &label,
            &self.volume_path(),
        )
    }

    pub fn state_path(&self) -> PathBuf {
        self.path().join("run/containerd")
    }

    pub fn socket(&self) -> PathBuf {
        self.state_path().join("containerd.sock")
    }

    pub fn images(&self) -> PathBuf {
        self.path().join("img")
    }

    pub fn containerd_config(&self) -> PathBuf {
        self.path().join("containerd/config.toml")
    }

    pub fn guard_config_path(&self) -> PathBuf {
        self.path().join("guard.toml")
    }

    /// Writes containerd's config.toml for the selected containerd
    /// ([`containerd_tool`](super::containerd_tool)): root, state, grpc.address and the CRI
    /// settings this sandbox needs, with `sandbox_image` pinned when given
    /// ([`TempRoot::write_containerd_config_cri`] with only that set).
    pub fn write_containerd_config_with(&self, sandbox_image: Option<&str>) -> PathBuf {
        let cri = CriConfig::new();
        self.write_containerd_config_cri(&match sandbox_image {
            Some(image) => cri.sandbox_image(image),
            None => cri,
        })
    }

    /// Writes containerd's config.toml for the selected containerd with the CRI settings
    /// `cri` chooses, rendered for its config version: 2 for containerd 1.x, 3 for 2.x
    /// ([`containerd_config_version`]).
    pub fn write_containerd_config_cri(&self, cri: &CriConfig) -> PathBuf {
        let version = containerd_config_version();
        self.write_containerd_config_text(version, &cri.render(version))
    }

    /// Writes containerd's config.toml as version 2 with `extra` appended verbatim to the
    /// `plugins."io.containerd.grpc.v1.cri"` table: for containerd 1.x only. On 2.x (config
    /// version 3, other tables) a non-empty `extra` panics: use
    /// [`TempRoot::write_containerd_config_with`].
    pub fn write_containerd_config(&self, extra: &str) -> PathBuf {
        if containerd_config_version() == 3 {
            assert!(
                extra.trim().is_empty(),
                "write_containerd_config({extra:?}): raw version-2 CRI settings cannot go into \
                 containerd {}'s version-3 config; use write_containerd_config_with(..)",
                super::containerd_version()
            );
            return self.write_containerd_config_with(None);
        }
        self.write_containerd_config_v2(extra)
    }

    fn write_containerd_config_v2(&self, extra: &str) -> PathBuf {
        let cri = format!(
            "[plugins.\"io.containerd.grpc.v1.cri\"]\n  restrict_oom_score_adj = true\n{extra}"
        );
        self.write_containerd_config_text(2, &cri)
    }

    /// The common part (version, root, state, sockets, log level, opt path) then `cri`.
    pub fn write_containerd_config_text(&self, version: u32, cri: &str) -> PathBuf {
        let text = format!(
            r#"version = {version}
root = "{root}"
state = "{state}"

[grpc]
  address = "{sock}"

[ttrpc]
  address = "{sock}.ttrpc"

[debug]
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"
{nri}
{cri}
"#,
            root = self.volume_path().display(),
            state = self.state_path().display(),
            sock = self.socket().display(),
            opt = self.path().join("opt").display(),
            nri = self.nri_settings(version),
        );
        let p = self.containerd_config();
        std::fs::write(&p, text).expect("write containerd config");
        p
    }

    /// containerd 2.x enables NRI, whose socket is one host-wide path by default
    /// (`/var/run/nri/nri.sock`): two test containerds starting at once race to bind it
    /// and one dies ("address already in use"). Each tree gets its own; 1.x has NRI off.
    fn nri_settings(&self, version: u32) -> String {
        match version {
            3 => format!(
                "\n[plugins.\"io.containerd.nri.v1.nri\"]\n  socket_path = \"{}\"\n",
                self.path().join("nri.sock").display()
            ),
            _ => String::new(),
        }
    }

    /// The guard's `state_dir` (status file, `volume.ok` marker): never the real `/run`.
    pub fn guard_state_dir(&self) -> PathBuf {
        self.path().join("run/containerd-guard")
    }

    /// Where harness-written guard configs put the metrics textfile: in this tree, so a test
    /// never rewrites the host's node_exporter file (the default path).
    pub fn metrics_textfile(&self) -> PathBuf {
        self.path().join("metrics/containerd-guard.prom")
    }

    /// `extra` followed by a `[metrics]` table naming [`Self::metrics_textfile`] (its
    /// directory created), unless `extra` has a `[metrics]` table of its own: a TOML table
    /// may appear only once, and such a test chose its metrics on purpose.
    pub fn with_metrics_in_tree(&self, extra: &str) -> String {
        if extra.lines().any(|l| l.trim() == "[metrics]") {
            return extra.to_string();
        }
        let textfile = self.metrics_textfile();
        std::fs::create_dir_all(textfile.parent().unwrap()).expect("create metrics dir");
        format!(
            "{extra}\n\n[metrics]\ntextfile = \"{}\"\n",
            textfile.display()
        )
    }

    /// The restart program of [`GuardConfig::in_tree`]: it appends its arguments to
    /// `unasked-restarts.log` in this tree and fails. Written on first use.
    pub fn unasked_restart_program(&self) -> PathBuf {
        let program = self.path().join("restart-unasked");
        if !program.exists() {
            let log = self.path().join("unasked-restarts.log");
            let body = format!(
                "#!/bin/sh\necho \"restart $*\" >> '{}'\n\
                 echo 'restart: this test asked for none' >&2\nexit 1\n",
                log.display()
            );
            super::write_executable(&program, &body);
        }
        program
    }

    /// How many times the guard ran [`Self::unasked_restart_program`]: a test that did
    /// not mean a restart asserts 0.
    pub fn unasked_restarts(&self) -> usize {
        std::fs::read_to_string(self.path().join("unasked-restarts.log"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    /// Writes [`GuardConfig::in_tree`] as the guard's config: `state_dir`, `[containerd]
    /// config` and the metrics textfile in this tree, every other key at its default.
    pub fn write_guard_config(&self) -> PathBuf {
        GuardConfig::in_tree(self).write(self)
    }

    /// [`TempRoot::write_guard_config`] with the keys `adjust` sets:
    /// `t.write_guard_config_with(|c| c.volume_device("LABEL=x").volume_wait("1s"))`.
    pub fn write_guard_config_with(
        &self,
        adjust: impl FnOnce(GuardConfig) -> GuardConfig,
    ) -> PathBuf {
        adjust(GuardConfig::in_tree(self)).write(self)
    }

    /// Writes `text` as the guard's config file, as given, plus the metrics table of
    /// [`Self::with_metrics_in_tree`] when the text says nothing about metrics: a test never
    /// rewrites the host's node_exporter file (appended last, so a broken text still breaks
    /// on its own line). Only for a config that must be text: a bad or hostile one (a
    /// syntax error, an unknown key, a wrong type, a value out of bounds) or a fixture
    /// file. A valid config is built with [`TempRoot::write_guard_config_with`],
    /// [`Node::config_with`](super::node::Node::config_with) or [`GuardConfig`].
    pub fn write_guard_config_raw(&self, text: &str) -> PathBuf {
        let text = match text.contains("metrics") {
            true => text.to_string(),
            false => self.with_metrics_in_tree(text),
        };
        self.write_guard_config_file(&text)
    }

    /// Writes the guard's config file: `text`, mode 0644.
    pub(crate) fn write_guard_config_file(&self, text: &str) -> PathBuf {
        let p = self.guard_config_path();
        std::fs::write(&p, text).expect("write guard config");
        // The guard refuses a config another user could write: 0644 whatever the umask.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        p
    }
}

/// The config version the selected containerd wants: 3 from containerd 2.0 on, else 2.
/// Version 2 when no containerd can be found (a tree for a test that never starts one).
pub fn containerd_config_version() -> u32 {
    let findable =
        super::containerd::containerd_dir().is_some() || super::which("containerd").is_some();
    if findable && super::containerd_major_minor().0 >= 2 {
        3
    } else {
        2
    }
}
