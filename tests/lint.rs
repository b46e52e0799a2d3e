//! `guard lint --root DIR` on image trees built here the way docs/image-builder.md says:
//! Debian's containerd unit, kubeadm's kubelet unit, the package's drop-ins and hygiene
//! units copied from this repository, an fstab line, containerd's config, the guard's
//! fragment and a real OCI archive of the sandbox image. Each test plants one hazard in a
//! clean image and checks the finding that names it (id, status, `FILE:LINE`, exit code);
//! the hostile-tree tests check that the lint reads nothing outside DIR, never blocks,
//! never writes and never runs what the image holds. The same hazards are planted in the
//! vm-tests image (vm-tests/run lint), and scenario disks are linted before they boot.

use testkit as support;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use support::runtime::PauseImage;
use support::{Guard, GuardConfig, Outcome};

const SANDBOX: &str = "registry.k8s.io/pause:3.9";

/// Debian 12's containerd.service (containerd 1.6.20~ds1-1), as installed.
const CONTAINERD_UNIT: &str = "\
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
const KUBELET_UNIT: &str = "\
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
const KUBEADM_DROPIN: &str = "\
[Service]
Environment=\"KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf\"
Environment=\"KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml\"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
";

/// The fragment docs/image-builder.md shows, but for its device and its archive.
fn fragment_base() -> GuardConfig {
    GuardConfig::new()
        .volume_fstypes(&["ext4"])
        .volume_min_free("2GiB")
        .volume_wait("90s")
        .sandbox_pull(false)
}

/// The fragment docs/image-builder.md shows.
fn fragment() -> GuardConfig {
    fragment_base()
        .volume_device("LABEL=containerd")
        .sandbox_archives(&["/usr/lib/containerd-guard/images/pause.tar".into()])
}

const LIB: &str = "/usr/lib/systemd/system";
const ETC: &str = "/etc/systemd/system";

/// A node image under construction.
struct Image {
    dir: tempfile::TempDir,
}

impl Image {
    /// The clean image: the package's units and drop-ins from this repository, and what
    /// the image-builder role adds.
    fn clean() -> Image {
        let img = Image {
            dir: tempfile::tempdir().unwrap(),
        };
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd");
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

    fn at(&self, os: &str) -> PathBuf {
        let at = self.dir.path().join(os.trim_start_matches('/'));
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        at
    }
    fn put(&self, os: &str, text: &str) -> &Image {
        std::fs::write(self.at(os), text).unwrap();
        self
    }
    fn link(&self, os: &str, target: &str) -> &Image {
        let at = self.at(os);
        let _ = std::fs::remove_file(&at);
        symlink(target, at).unwrap();
        self
    }
    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// `guard lint --root DIR --json [extra]`, and the table.
    #[track_caller]
    fn lint(&self, extra: &[&str]) -> Outcome {
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
struct Outside(tempfile::TempDir);

impl Outside {
    fn new() -> Outside {
        Outside(tempfile::tempdir().unwrap())
    }
    fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

/// Asserts `id`'s status, the exit code, and that the finding names each of `needles`.
#[track_caller]
fn expect(o: &Outcome, id: &str, status: &str, code: i32, needles: &[&str]) {
    assert_eq!(o.status(id), status, "{id}:\n{}", o.dump());
    assert_eq!(o.code, code, "exit code:\n{}", o.dump());
    let text = o.finding_text(id);
    for n in needles {
        assert!(text.contains(n), "{id} does not name {n:?}:\n{text}");
    }
}

#[test]
fn a_clean_image_built_as_documented_passes_with_nothing_above_ok() {
    let img = Image::clean();
    let o = img.lint(&["--warn-is-error"]);
    assert_eq!(o.code, 0, "{}", o.dump());
    let findings = o.json.as_ref().unwrap()["findings"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        findings.len(),
        11,
        "one finding per lint rule:\n{}",
        o.dump()
    );
    for f in &findings {
        assert!(f["id"].as_str().unwrap().starts_with("lint."), "{f}");
        assert_eq!(f["status"], "pass", "{f}");
    }
    expect(
        &o,
        "lint.guard-dropin",
        "pass",
        0,
        &[&format!(
            "{LIB}/containerd.service.d/10-containerd-guard.conf:"
        )],
    );
    expect(&o, "lint.volume-mount", "pass", 0, &["/etc/fstab:3"]);
    expect(
        &o,
        "lint.sandbox-archive",
        "pass",
        0,
        &[SANDBOX, "pause.tar"],
    );
    println!("guard lint on the clean image took {:?}", o.elapsed);
}

#[test]
fn the_guard_dropin_masked_overridden_or_missing_fails() {
    let img = Image::clean();
    let dropin = "containerd.service.d/10-containerd-guard.conf";
    img.link(&format!("{ETC}/{dropin}"), "/dev/null");
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.guard-dropin",
        "fail",
        1,
        &["masked by", &format!("{ETC}/{dropin}")],
    );
    // nofail without the drop-in: containerd would start on the bare directory
    expect(&o, "lint.volume-nofail", "fail", 1, &["/etc/fstab:3"]);

    let img = Image::clean();
    img.put(
        &format!("{ETC}/containerd.service.d/20-site.conf"),
        "[Service]\nExecStartPre=\nExecStartPre=/bin/true\n",
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.guard-dropin",
        "fail",
        1,
        &[
            "overridden",
            &format!("{ETC}/containerd.service.d/20-site.conf:2"),
        ],
    );

    let img = Image::clean();
    std::fs::remove_file(img.at(&format!("{LIB}/{dropin}"))).unwrap();
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.guard-dropin",
        "fail",
        1,
        &["no containerd.service.d/10-containerd-guard.conf drop-in"],
    );
    expect(
        &o,
        "lint.containerd-order",
        "fail",
        1,
        &["var-lib-containerd.mount"],
    );
}

#[test]
fn an_after_reset_leaves_containerd_unordered() {
    let img = Image::clean();
    img.put(
        &format!("{ETC}/containerd.service.d/50-x.conf"),
        "[Unit]\nAfter=\nAfter=network.target\n",
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.containerd-order",
        "fail",
        1,
        &["empty After=", "50-x.conf:2"],
    );
    // a RequiresMountsFor= of the volume orders it as well
    img.put(
        &format!("{ETC}/containerd.service.d/60-y.conf"),
        "[Unit]\nRequiresMountsFor=/var/lib/containerd\n",
    );
    expect(
        &img.lint(&[]),
        "lint.containerd-order",
        "pass",
        0,
        &["RequiresMountsFor"],
    );
}

#[test]
fn a_mount_ordered_after_containerd_fails() {
    let img = Image::clean();
    img.put(
        "/etc/fstab",
        "LABEL=containerd /var/lib/containerd ext4 nofail,x-systemd.after=containerd.service 0 2\n",
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.volume-mount",
        "fail",
        1,
        &["after containerd.service at /etc/fstab:1"],
    );

    // the same in a mount unit, the way a generator or an image role writes one
    let img = Image::clean();
    img.put("/etc/fstab", "");
    img.put(
        &format!("{ETC}/var-lib-containerd.mount"),
        "[Unit]\nAfter=containerd.service\n[Mount]\nWhat=/dev/disk/by-label/containerd\nWhere=/var/lib/containerd\nOptions=nofail\n",
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.volume-mount",
        "fail",
        1,
        &[&format!("{ETC}/var-lib-containerd.mount:2")],
    );
    expect(
        &o,
        "lint.config",
        "pass",
        1,
        &["var-lib-containerd.mount:4"],
    );
}

#[test]
fn no_mount_warns_and_fails_once_the_user_data_is_known() {
    let img = Image::clean();
    img.put("/etc/fstab", "LABEL=root / ext4 defaults 0 1\n");
    let o = img.lint(&[]);
    expect(&o, "lint.volume-mount", "warn", 0, &["--user-data"]);
    expect(
        &img.lint(&["--warn-is-error"]),
        "lint.volume-mount",
        "warn",
        1,
        &[],
    );
    let out = Outside::new();
    let ud = out.file("user-data-none", "#cloud-config\nruncmd:\n  - echo hi\n");
    let o = img.lint(&["--user-data", &ud]);
    expect(&o, "lint.volume-mount", "fail", 1, &["user-data-none"]);
    // user data that mounts it: the mount is known, and containerd waits for cloud-init
    let ud = out.file(
        "user-data-none",
        "#cloud-config\nfs_setup:\n  - label: containerd\n    filesystem: ext4\n    device: /dev/sdb\n\
         mounts:\n  - [LABEL=containerd, /var/lib/containerd, ext4, \"defaults,nofail\"]\n",
    );
    let o = img.lint(&["--user-data", &ud]);
    expect(&o, "lint.volume-mount", "pass", 0, &["user-data-none:7"]);
    expect(&o, "lint.cloud-init", "pass", 0, &["cloud-init.service"]);
}

#[test]
fn cloud_init_mounting_the_volume_without_ordering_fails() {
    let img = Image::clean();
    img.put(
        &format!("{LIB}/cloud-init.service"),
        "[Unit]\nDescription=cloud-init\n[Service]\nExecStart=/usr/bin/cloud-init init\n",
    );
    // a site drop-in that replaces containerd's ordering (the guard's After= with it)
    img.put(
        &format!("{ETC}/containerd.service.d/50-order.conf"),
        "[Unit]\nAfter=\nAfter=var-lib-containerd.mount\n",
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.cloud-init",
        "warn",
        0,
        &["After=cloud-init.service", "50-order.conf:2"],
    );
    img.put(
        "/etc/cloud/cloud.cfg.d/90-disk.cfg",
        "mounts:\n  - [LABEL=containerd, /var/lib/containerd, ext4, \"defaults,nofail\"]\n",
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.cloud-init",
        "fail",
        1,
        &["/etc/cloud/cloud.cfg.d/90-disk.cfg:2"],
    );
}

#[test]
fn kubelet_without_the_gate_and_a_racing_kubeadm_unit_fail() {
    let img = Image::clean();
    img.link(
        &format!("{ETC}/kubelet.service.d/10-containerd-guard.conf"),
        "/dev/null",
    );
    let o = img.lint(&[]);
    expect(&o, "lint.kubelet-gate", "fail", 1, &["masked by"]);
    // the guard's drop-in was what ordered kubelet after containerd
    expect(
        &o,
        "lint.kubelet-order",
        "fail",
        1,
        &["kubelet.service has no After=containerd.service"],
    );

    let img = Image::clean();
    img.put(
        &format!("{ETC}/node-join.service"),
        "[Unit]\nAfter=network-online.target\n[Service]\nType=oneshot\nExecStart=/usr/bin/kubeadm join --config /etc/kubeadm.yaml\n",
    );
    expect(
        &img.lint(&[]),
        "lint.kubelet-order",
        "fail",
        1,
        &["node-join.service runs kubeadm (/etc/systemd/system/node-join.service:5)"],
    );

    let img = Image::clean();
    let out = Outside::new();
    let ud = out.file(
        "ud",
        "#cloud-config\nruncmd:\n  - [kubeadm, join, --config, /run/kubeadm/kubeadm.yaml]\n",
    );
    let o = img.lint(&["--user-data", &ud]);
    expect(
        &o,
        "lint.kubelet-order",
        "warn",
        0,
        &["ud:3", "cloud-final.service"],
    );
}

#[test]
fn kill_mode_hazards_fail() {
    let img = Image::clean();
    img.put(
        &format!("{ETC}/containerd.service.d/50-kill.conf"),
        "[Service]\nKillMode=control-group\n",
    );
    expect(
        &img.lint(&[]),
        "lint.kill-mode",
        "fail",
        1,
        &["KillMode=control-group", "50-kill.conf:2"],
    );
    let img = Image::clean();
    img.put(&format!("{ETC}/k3s.service"), "[Service]\nKillMode=process\nExecStartPre=-/usr/bin/pkill -9 containerd-shim\nExecStart=/usr/local/bin/k3s server\n");
    expect(
        &img.lint(&[]),
        "lint.kill-mode",
        "fail",
        1,
        &["pkill -9 containerd-shim", "k3s.service:3"],
    );
}

#[test]
fn the_sandbox_image_must_be_in_a_sound_archive() {
    let archive = "/usr/lib/containerd-guard/images/pause.tar";
    let img = Image::clean();
    std::fs::remove_file(img.at(archive)).unwrap();
    expect(
        &img.lint(&[]),
        "lint.sandbox-archive",
        "fail",
        1,
        &[archive, "no such file"],
    );

    let img = Image::clean();
    PauseImage::new(SANDBOX).write_oci(&img.at(archive), true);
    expect(
        &img.lint(&[]),
        "lint.sandbox-archive",
        "fail",
        1,
        &[archive, "digest"],
    );

    let img = Image::clean();
    let data = std::fs::read(img.at(archive)).unwrap();
    std::fs::write(img.at(archive), &data[..data.len() / 2]).unwrap();
    expect(
        &img.lint(&[]),
        "lint.sandbox-archive",
        "fail",
        1,
        &[archive],
    );

    // containerd 2.x's config (v3) names another image than the archive holds
    let img = Image::clean();
    img.put(
        "/etc/containerd/config.toml",
        "version = 3\n[plugins.\"io.containerd.cri.v1.images\".pinned_images]\n  sandbox = \"registry.k8s.io/pause:3.10\"\n",
    );
    expect(
        &img.lint(&[]),
        "lint.sandbox-archive",
        "fail",
        1,
        &["holds registry.k8s.io/pause:3.9, not registry.k8s.io/pause:3.10"],
    );

    let img = Image::clean();
    img.put(
        "/usr/lib/containerd-guard/config.d/50-image.toml",
        &fragment_base().volume_device("LABEL=containerd").render(),
    );
    expect(
        &img.lint(&[]),
        "lint.sandbox-archive",
        "warn",
        0,
        &["no archive", "registry"],
    );
}

#[test]
fn guard_fragments_that_break_or_name_an_unknown_device_are_reported() {
    let img = Image::clean();
    img.put(
        "/etc/containerd-guard/config.d/60-site.toml",
        "[volume\ndevice = 1\n",
    );
    expect(
        &img.lint(&[]),
        "lint.config",
        "fail",
        1,
        &[
            "/etc/containerd-guard/config.d/60-site.toml:1",
            "not valid TOML",
        ],
    );
    let img = Image::clean();
    img.put(
        "/etc/containerd-guard/config.d/60-site.toml",
        "[volume]\ndevice = \"LABEL=nosuch\"\n",
    );
    expect(&img.lint(&[]), "lint.config", "warn", 0, &["LABEL=nosuch"]);
    // a fragment masked by a same-named /dev/null link in /etc is not read
    img.link("/etc/containerd-guard/config.d/60-site.toml", "/dev/null");
    expect(
        &img.lint(&[]),
        "lint.config",
        "pass",
        0,
        &["LABEL=containerd"],
    );
}

/// Ownership is judged against the image's own owner: a rootless build (every file
/// owned by a subuid) is fine; a file of another uid, or group-writable, is not.
#[test]
fn ownership_is_judged_relative_to_the_images_owner() {
    let Some(_root) = support::root_or_skip(&[]) else {
        return;
    };
    let img = Image::clean();
    chown_tree(img.root(), 100_000);
    let o = img.lint(&["--warn-is-error"]);
    assert_eq!(
        o.code,
        0,
        "a rootless image owned by uid 100000:\n{}",
        o.dump()
    );
    let fragment = img.at("/usr/lib/containerd-guard/config.d/50-image.toml");
    std::os::unix::fs::chown(&fragment, Some(100_999), None).unwrap();
    expect(
        &img.lint(&[]),
        "lint.config",
        "fail",
        1,
        &["owned by another user", "uid 100999", "uid 100000"],
    );
    std::os::unix::fs::chown(&fragment, Some(100_000), None).unwrap();
    std::fs::set_permissions(
        &fragment,
        std::os::unix::fs::PermissionsExt::from_mode(0o664),
    )
    .unwrap();
    expect(
        &img.lint(&[]),
        "lint.config",
        "fail",
        1,
        &["writable by group or others"],
    );
    std::fs::set_permissions(
        &fragment,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let archive = img.at("/usr/lib/containerd-guard/images/pause.tar");
    std::os::unix::fs::chown(&archive, Some(4242), None).unwrap();
    expect(
        &img.lint(&[]),
        "lint.sandbox-archive",
        "fail",
        1,
        &["owned by another user"],
    );
}

fn chown_tree(dir: &Path, uid: u32) {
    std::os::unix::fs::lchown(dir, Some(uid), None).unwrap();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            chown_tree(&e.path(), uid);
        } else {
            std::os::unix::fs::lchown(e.path(), Some(uid), None).unwrap();
        }
    }
}

/// Links to the host's files are resolved inside the image: an absolute link, and a
/// linked directory on the way, both name the image's own paths, never the host's.
#[test]
fn links_never_reach_the_hosts_files() {
    let host_side = tempfile::tempdir().unwrap();
    let hostile_fstab = host_side.path().join("fstab");
    std::fs::write(
        &hostile_fstab,
        "LABEL=x /var/lib/containerd ext4 x-systemd.after=containerd.service 0 0\n",
    )
    .unwrap();
    let host_units = host_side.path().join("units");
    std::fs::create_dir_all(host_units.join("containerd.service.d")).unwrap();
    symlink(
        "/dev/null",
        host_units.join("containerd.service.d/10-containerd-guard.conf"),
    )
    .unwrap();

    let img = Image::clean();
    img.link("/etc/fstab", &hostile_fstab.display().to_string());
    // the image's /etc/systemd/system is a link to a directory of the host
    std::fs::remove_dir_all(img.at(ETC)).unwrap();
    img.link(ETC, &host_units.display().to_string());
    let o = img.lint(&[]);
    // inside the image the fstab link names nothing, and /etc/systemd/system nothing
    expect(&o, "lint.volume-mount", "warn", 0, &["no fstab line"]);
    expect(&o, "lint.guard-dropin", "pass", 0, &[]);
    assert!(
        !o.stdout.contains(&*host_side.path().to_string_lossy()),
        "{}",
        o.dump()
    );
}

#[test]
fn fifos_and_huge_files_are_refused_without_blocking() {
    let img = Image::clean();
    std::fs::remove_file(img.at("/etc/fstab")).unwrap();
    nix::unistd::mkfifo(
        &img.at("/etc/fstab"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    expect(
        &img.lint(&[]),
        "lint.volume-mount",
        "fail",
        1,
        &["/etc/fstab", "not a regular file"],
    );
    let img = Image::clean();
    img.put(
        &format!("{ETC}/containerd.service.d/99-big.conf"),
        &"#".repeat(2 << 20),
    );
    let o = img.lint(&[]);
    expect(&o, "lint.guard-dropin", "fail", 1, &["larger than"]);
}

/// The lint reads the image and nothing else: the tree is the same after it (names,
/// sizes, modes, times), and programs in the image that would leave a mark if run did not.
#[test]
fn the_image_is_never_written_or_executed() {
    let img = Image::clean();
    let out = Outside::new();
    let mark = out.0.path().join("ran");
    for tool in [
        "/usr/bin/guard",
        "/usr/bin/systemctl",
        "/bin/systemctl",
        "/usr/bin/containerd",
    ] {
        img.put(tool, &format!("#!/bin/sh\ntouch {}\n", mark.display()));
        std::fs::set_permissions(
            img.at(tool),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
    }
    let before = snapshot(img.root());
    let o = img.lint(&[]);
    assert_eq!(o.code, 0, "{}", o.dump());
    assert_eq!(snapshot(img.root()), before, "the lint changed the image");
    assert!(!mark.exists(), "the lint ran a program of the image");
    // the host's own guard configuration is not read: a --config that does not exist
    // would be an error (exit 3) for any other command
    let root = img.root().display().to_string();
    let o = Guard::bare().run(&[
        "--config",
        "/nonexistent/guard.toml",
        "lint",
        "--root",
        &root,
    ]);
    assert_eq!(o.code, 0, "{}", o.dump());
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, u32, i64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = e.path().symlink_metadata().unwrap();
            if m.is_dir() {
                todo.push(e.path());
            }
            out.push((
                e.path(),
                m.len(),
                m.mode(),
                m.mtime_nsec() + m.mtime() * 1_000_000_000,
            ));
        }
    }
    out.sort();
    out
}

#[test]
fn a_missing_empty_or_unit_less_dir_is_exit_3_and_bad_user_data_exit_2() {
    let o = Guard::bare().run(&["lint", "--root", "/nonexistent/image"]);
    assert_eq!(o.code, 3, "{}", o.dump());
    assert!(o.stderr.contains("/nonexistent/image"), "{}", o.dump());
    let empty = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(empty.path().join("etc/systemd/system")).unwrap();
    let o = Guard::bare().run(&["lint", "--root", &empty.path().display().to_string()]);
    assert_eq!(o.code, 3, "{}", o.dump());
    assert!(o.stderr.contains("no systemd unit"), "{}", o.dump());
    let img = Image::clean();
    let o = img.lint(&["--user-data", "/nonexistent/user-data"]);
    assert_eq!(o.code, 2, "{}", o.dump());
    assert!(o.stderr.contains("/nonexistent/user-data"), "{}", o.dump());
}

/// containerd's config is read with its `imports` merged, as containerd merges them
/// (containerd 2.x images put settings in `conf.d`), every import read inside the image.
#[test]
fn containerd_imports_are_followed_inside_the_image() {
    let img = Image::clean();
    img.put(
        "/etc/containerd/config.toml",
        &format!(
            "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n\
             [plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"{SANDBOX}\"\n"
        ),
    );
    img.put(
        "/etc/containerd/conf.d/50-site.toml",
        "version = 2\nroot = \"/data/containerd\"\n\
         [plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.k8s.io/pause:3.10\"\n",
    );
    let o = img.lint(&[]);
    // the import's root: its mount unit, and the fstab line for /var/lib/containerd is
    // not the volume's
    expect(
        &o,
        "lint.containerd-order",
        "fail",
        1,
        &["data-containerd.mount"],
    );
    expect(&o, "lint.volume-mount", "warn", 1, &["/data/containerd"]);
    expect(
        &o,
        "lint.sandbox-archive",
        "fail",
        1,
        &["registry.k8s.io/pause:3.10"],
    );
    // an import that links to the host's own file is the image's path, here nothing
    let host_side = tempfile::tempdir().unwrap();
    let host_file = host_side.path().join("evil.toml");
    std::fs::write(&host_file, "version = 2\nroot = \"/evil\"\n").unwrap();
    img.link(
        "/etc/containerd/conf.d/50-site.toml",
        &host_file.display().to_string(),
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.containerd-order",
        "pass",
        0,
        &["var-lib-containerd.mount"],
    );
    expect(&o, "lint.sandbox-archive", "pass", 0, &[SANDBOX]);
}

/// systemd's `ExecStartPre=` prefixes (systemd.service(5)): `-` ignores the command's
/// failure, so the gate never holds; `@` makes the next word argv[0], so `@/usr/bin/guard
/// volume --pre-start` runs guard without its subcommand; `+`, `!`, `!!` only change
/// privileges and `:` only turns off `$VAR` expansion: the gate still holds.
#[test]
fn a_gate_whose_failure_systemd_ignores_or_whose_subcommand_is_argv0_fails() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "-/usr/bin/guard volume --pre-start",
            "fail",
            &["`-`", "ignore"],
        ),
        (
            "-@/usr/bin/guard guard volume --pre-start",
            "fail",
            &["`-`"],
        ),
        (
            "@-/usr/bin/guard guard volume --pre-start",
            "fail",
            &["`-`"],
        ),
        (
            "@/usr/bin/guard volume --pre-start",
            "fail",
            &["`@`", "argv[0]"],
        ),
        ("@/usr/bin/guard guard volume --pre-start", "pass", &[]),
        ("+/usr/bin/guard volume --pre-start", "pass", &[]),
        ("!/usr/bin/guard volume --pre-start", "pass", &[]),
        ("!!/usr/bin/guard volume --pre-start", "pass", &[]),
        (":/usr/bin/guard volume --pre-start", "pass", &[]),
        (
            ":/usr/bin/guard volume --pre-start $GUARD_ARGS",
            "fail",
            &["`:`", "literal"],
        ),
    ];
    let img = Image::clean();
    let site = format!("{ETC}/containerd.service.d/20-site.conf");
    for (line, status, needles) in cases {
        img.put(
            &site,
            &format!("[Service]\nExecStartPre=\nExecStartPre={line}\n"),
        );
        let o = img.lint(&[]);
        let code = if *status == "fail" { 1 } else { 0 };
        let mut all = needles.to_vec();
        all.push("20-site.conf:3");
        expect(
            &o,
            "lint.guard-dropin",
            status,
            code,
            if *status == "fail" { &all } else { &[] },
        );
    }
    let img = Image::clean();
    img.put(
        &format!("{ETC}/kubelet.service.d/20-site.conf"),
        "[Service]\nExecStartPre=\nExecStartPre=-/usr/bin/guard runtime\n",
    );
    expect(
        &img.lint(&[]),
        "lint.kubelet-gate",
        "fail",
        1,
        &["`-`", "20-site.conf:3"],
    );
}

/// `noauto`: nothing mounts the volume at boot, so containerd is held every boot, unless
/// the guard mounts it itself (`[volume] mount = true`). `x-systemd.automount`: the mount
/// happens on first access, so containerd's ordering after the `.mount` orders it after
/// nothing, the guard sees an autofs placeholder, and `x-systemd.idle-timeout` could
/// unmount containerd's root: failed, whatever `[volume] mount` says.
#[test]
fn noauto_or_an_automount_on_the_volume_fails_unless_the_guard_mounts_it() {
    let img = Image::clean();
    let fstab = |opts: &str| {
        format!("LABEL=root / ext4 defaults 0 1\nLABEL=containerd /var/lib/containerd ext4 {opts} 0 2\n")
    };
    img.put("/etc/fstab", &fstab("defaults,nofail,noauto"));
    expect(
        &img.lint(&[]),
        "lint.volume-mount",
        "fail",
        1,
        &["noauto", "/etc/fstab:2", "[volume] mount = true"],
    );
    img.put(
        "/etc/containerd-guard/config.d/60-mount.toml",
        "[volume]\nmount = true\n",
    );
    expect(
        &img.lint(&[]),
        "lint.volume-mount",
        "pass",
        0,
        &["/etc/fstab:2"],
    );
    img.put("/etc/fstab", &fstab("defaults,nofail,x-systemd.automount"));
    expect(
        &img.lint(&[]),
        "lint.volume-mount",
        "fail",
        1,
        &["x-systemd.automount", "/etc/fstab:2"],
    );
}

/// Cluster API and TKGS user data start `## template: jinja` then `#cloud-config`: read as
/// a cloud config. A shell script or a MIME archive is not read: a warning that says so,
/// never a claim about what it mounts.
#[test]
fn user_data_is_read_as_cloud_init_reads_it_or_said_to_be_unread() {
    let img = Image::clean();
    img.put("/etc/fstab", "LABEL=root / ext4 defaults 0 1\n");
    let out = Outside::new();
    let jinja = out.file(
        "capi-user-data",
        "## template: jinja\n#cloud-config\nhostname: '{{ ds.meta_data.local_hostname }}'\n\
         mounts:\n  - [LABEL=containerd, /var/lib/containerd, ext4, \"defaults,nofail\"]\n",
    );
    let o = img.lint(&["--user-data", &jinja]);
    expect(&o, "lint.volume-mount", "pass", 0, &["capi-user-data:5"]);
    expect(&o, "lint.cloud-init", "pass", 0, &[]);
    for (name, text) in [
        (
            "script",
            "#!/bin/bash\nmount LABEL=containerd /var/lib/containerd\n",
        ),
        (
            "mime",
            "Content-Type: multipart/mixed; boundary=\"XX\"\nMIME-Version: 1.0\n\n--XX\n",
        ),
    ] {
        let ud = out.file(name, text);
        let o = img.lint(&["--user-data", &ud]);
        expect(&o, "lint.cloud-init", "warn", 0, &[name, "not read"]);
        expect(&o, "lint.volume-mount", "warn", 0, &[name, "not read"]);
        assert!(
            !o.finding_text("lint.volume-mount").contains("nor does"),
            "{}",
            o.dump()
        );
    }
}

/// systemd kills a pre-start that outlives the unit's effective `TimeoutStartSec=` (after
/// drop-ins; 90 s when unset; `infinity` or 0: none) unless the unit lets the guard
/// extend it (`NotifyAccess=exec` or `all`).
#[test]
fn waits_longer_than_the_units_start_timeout_fail_without_notify_access() {
    let img = Image::clean();
    img.put(
        "/etc/containerd-guard/config.d/60-wait.toml",
        "[volume]\nwait = \"200s\"\n",
    );
    // the guard's drop-in lets it extend the timeout: passes
    expect(&img.lint(&[]), "lint.guard-dropin", "pass", 0, &[]);
    let site = format!("{ETC}/containerd.service.d/20-site.conf");
    img.put(&site, "[Service]\nNotifyAccess=main\n");
    expect(
        &img.lint(&[]),
        "lint.guard-dropin",
        "fail",
        1,
        &[
            "[volume] wait",
            "TimeoutStartSec=150s",
            "10-containerd-guard.conf",
            "NotifyAccess",
        ],
    );
    img.put(&site, "[Service]\nNotifyAccess=main\nTimeoutStartSec=\n");
    img.put(
        "/etc/containerd-guard/config.d/60-wait.toml",
        "[volume]\nwait = \"90s\"\n",
    );
    expect(
        &img.lint(&[]),
        "lint.guard-dropin",
        "fail",
        1,
        &["systemd's default of 90s"],
    );
    img.put(&site, "[Service]\nNotifyAccess=main\nTimeoutSec=infinity\n");
    expect(&img.lint(&[]), "lint.guard-dropin", "pass", 0, &[]);
    img.put(
        &site,
        "[Service]\nNotifyAccess=none\nTimeoutStartSec=5min\n",
    );
    expect(&img.lint(&[]), "lint.guard-dropin", "pass", 0, &[]);

    let img = Image::clean();
    img.put(
        "/etc/containerd-guard/config.d/60-hold.toml",
        "[hold]\ntimeout = \"10m\"\n",
    );
    expect(&img.lint(&[]), "lint.kubelet-gate", "pass", 0, &[]);
    img.put(
        &format!("{ETC}/kubelet.service.d/20-site.conf"),
        "[Service]\nNotifyAccess=\n",
    );
    expect(
        &img.lint(&[]),
        "lint.kubelet-gate",
        "fail",
        1,
        &["[hold] timeout", "TimeoutStartSec=360s"],
    );
}

/// `lint.config` and `guard verify` judge an unset `[volume] device` alike.
#[test]
fn an_unset_device_warns_in_lint_as_in_verify() {
    let img = Image::clean();
    img.put(
        "/usr/lib/containerd-guard/config.d/50-image.toml",
        &fragment_base()
            .sandbox_archives(&["/usr/lib/containerd-guard/images/pause.tar".into()])
            .render(),
    );
    expect(
        &img.lint(&[]),
        "lint.config",
        "warn",
        0,
        &["no [volume] device configured"],
    );
}

/// A hostile image: 20 unit names linked to one 1 MiB file of assignments. The lint reads
/// units within a total budget and fails naming it, and what it read is bounded by it
/// (cloud-init's configs share the budget: `lint::facts::tests`).
#[test]
fn units_past_the_lints_budget_fail_naming_it_and_bound_the_work() {
    let img = Image::clean();
    let body = "[Service]\n".to_string() + &"A=b\n".repeat((1 << 20) / 4 - 4);
    img.put("/opt/huge.service", &body);
    for i in 0..20 {
        img.link(&format!("{ETC}/huge{i}.service"), "/opt/huge.service");
    }
    let o = img.lint(&[]);
    expect(&o, "lint.budget", "fail", 1, &["budget", "huge"]);
    let read = units_read(&o);
    assert!(
        read.1 <= 16 << 20,
        "read {} bytes of units:\n{}",
        read.1,
        o.dump()
    );
    let clean = Image::clean().lint(&[]);
    expect(&clean, "lint.budget", "pass", 0, &[]);
    let read = units_read(&clean);
    assert!(read.0 > 0 && read.0 < 20, "{read:?}\n{}", clean.dump());
}

/// `(files, bytes)` of unit files the lint read, from `lint.budget`'s evidence
/// (`read N unit files, M bytes`).
fn units_read(o: &Outcome) -> (u64, u64) {
    let text = o.finding_text("lint.budget");
    let at = text.find("read ").unwrap_or_else(|| panic!("{text}"));
    let words: Vec<&str> = text[at..].split_whitespace().collect();
    let num = |w: &str| w.trim_end_matches(',').parse::<u64>().unwrap();
    (num(words[1]), num(words[4]))
}
