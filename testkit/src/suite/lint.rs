//! The image trees of `guard lint`'s tests (tests/lint_*.rs): a clean image built as
//! docs/image-builder.md says, and what the tests plant in it.

use crate as support;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use support::runtime::PauseImage;
use support::{Guard, GuardConfig, Outcome};

pub const SANDBOX: &str = "registry.k8s.io/pause:3.9";

/// Debian 12's containerd.service (containerd 1.6.20~ds1-1), as installed.
pub const CONTAINERD_UNIT: &str = "\
[Unit]
Description=containerd container runtime
Documentation=https://containerd.io
After=network.target local-fs.target

[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/bin/containerd

Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNPROC=infinity
LimitCORE=infinity
LimitNOFILE=infinity
TasksMax=infinity
OOMScoreAdjust=-999

[Install]
WantedBy=multi-user.target
";

/// kubelet's unit and kubeadm's drop-in, as the Kubernetes packages install them.
pub const KUBELET_UNIT: &str = "\
[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
";

pub const KUBEADM_DROPIN: &str = "\
[Service]
Environment=\"KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf\"
Environment=\"KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml\"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
";

/// The fragment docs/image-builder.md shows, but for its device and its archive.
pub fn fragment_base() -> GuardConfig {
    GuardConfig::new()
        .volume_fstypes(&["ext4"])
        .volume_min_free("2GiB")
        .volume_wait("90s")
        .sandbox_pull(false)
}

/// The fragment docs/image-builder.md shows.
pub fn fragment() -> GuardConfig {
    fragment_base()
        .volume_device("LABEL=containerd")
        .sandbox_archives(&["/usr/lib/containerd-guard/images/pause.tar"])
}

pub const LIB: &str = "/usr/lib/systemd/system";

pub const ETC: &str = "/etc/systemd/system";

/// A node image under construction.
pub struct Image {
    pub dir: tempfile::TempDir,
}

impl Image {
    /// The clean image: the package's units and drop-ins from this repository, and what
    /// the image-builder role adds.
    pub fn clean() -> Image {
        let img = Image {
            dir: tempfile::tempdir().unwrap(),
        };
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd");
        let copy =
            |from: &str, to: &str| img.put(to, &std::fs::read_to_string(repo.join(from)).unwrap());
        copy(
            "containerd-guard-hygiene.service",
            &format!("{LIB}/containerd-guard-hygiene.service"),
        );
        copy(
            "containerd-guard-hygiene.timer",
            &format!("{LIB}/containerd-guard-hygiene.timer"),
        );
        let cd = "containerd.service.d/10-containerd-guard.conf";
        let kl = "kubelet.service.d/10-containerd-guard.conf";
        copy(cd, &format!("{LIB}/{cd}"));
        copy(kl, &format!("{LIB}/{kl}"));
        img.put(&format!("{LIB}/containerd.service"), CONTAINERD_UNIT)
            .put(&format!("{LIB}/kubelet.service"), KUBELET_UNIT)
            .put(&format!("{LIB}/kubelet.service.d/10-kubeadm.conf"), KUBEADM_DROPIN)
            .put(
                "/etc/fstab",
                "# /etc/fstab\nLABEL=root / ext4 defaults 0 1\n\
                 LABEL=containerd /var/lib/containerd ext4 defaults,nofail,x-systemd.device-timeout=90s 0 2\n",
            )
            .put(
                "/etc/containerd/config.toml",
                &format!("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"{SANDBOX}\"\n"),
            )
            .put("/usr/lib/containerd-guard/config.d/50-image.toml", &fragment().render());
        img.link(
            &format!("{ETC}/timers.target.wants/containerd-guard-hygiene.timer"),
            &format!("{LIB}/containerd-guard-hygiene.timer"),
        );
        PauseImage::new(SANDBOX)
            .write_oci(&img.at("/usr/lib/containerd-guard/images/pause.tar"), false);
        img
    }

    pub fn at(&self, os: &str) -> PathBuf {
        let at = self.dir.path().join(os.trim_start_matches('/'));
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        at
    }
    pub fn put(&self, os: &str, text: &str) -> &Image {
        std::fs::write(self.at(os), text).unwrap();
        self
    }
    pub fn link(&self, os: &str, target: &str) -> &Image {
        let at = self.at(os);
        let _ = std::fs::remove_file(&at);
        symlink(target, at).unwrap();
        self
    }
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `guard lint --root DIR --json [extra]`, and the table.
    #[track_caller]
    pub fn lint(&self, extra: &[&str]) -> Outcome {
        let root = self.root().display().to_string();
        let mut args = vec!["lint", "--root", root.as_str()];
        args.extend_from_slice(extra);
        let table = Guard::bare().run(&args);
        args.insert(0, "--json");
        let json = Guard::bare().run(&args);
        assert!(!json.stderr.contains("panicked"), "{}", json.dump());
        assert_eq!(
            table.code,
            json.code,
            "table and JSON agree:\n{}",
            table.dump()
        );
        json
    }
}

/// A file outside every image (user data, marks), in a directory of its own.
pub struct Outside(pub tempfile::TempDir);

impl Default for Outside {
    fn default() -> Self {
        Outside::new()
    }
}

impl Outside {
    pub fn new() -> Outside {
        Outside(tempfile::tempdir().unwrap())
    }
    pub fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

/// Asserts `id`'s status, the exit code, and that the finding names each of `needles`.
#[track_caller]
pub fn expect(o: &Outcome, id: &str, status: &str, code: i32, needles: &[&str]) {
    assert_eq!(o.status(id), status, "{id}:\n{}", o.dump());
    assert_eq!(o.code, code, "exit code:\n{}", o.dump());
    let text = o.finding_text(id);
    for n in needles {
        assert!(text.contains(n), "{id} does not name {n:?}:\n{text}");
    }
}
