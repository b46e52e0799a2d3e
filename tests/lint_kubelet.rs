//! The lint's judgement of kubelet's contract with containerd in a node image: the socket
//! kubelet talks to, the flag kubelet 1.35 removed, cgroup v1, and the cgroup driver. The
//! same rules as `guard verify`'s kubelet family, over the image's files: kubeadm's
//! kubelet unit and drop-in, `kubeadm-flags.env`, kubelet's `config.yaml`, containerd's
//! config, and kubelet's version from dpkg's record of its package or the version string
//! in its binary (never run).
//!
//! `guard lint --root DIR` on image trees built as docs/image-builder.md says
//! (testkit::suite::lint::Image); each test plants kubelet's files in a clean image and
//! checks the findings that name them (id, status, `FILE:LINE`, exit code).

use testkit as support;

use support::suite::lint::{expect, Image, Outside};
use support::write_executable;

const FLAGS_ENV: &str = "/var/lib/kubelet/kubeadm-flags.env";
const CONFIG: &str = "/var/lib/kubelet/config.yaml";
const DPKG_STATUS: &str = "/var/lib/dpkg/status";
const K3S: &str = "/run/k3s/containerd/containerd.sock";

/// dpkg's status file with kubeadm's and kubelet's records (kubelet at `version`).
fn dpkg_status(version: &str) -> String {
    format!(
        "Package: kubeadm\nStatus: install ok installed\nVersion: 1.30.0-1.1\n\n\
         Package: kubelet\nStatus: install ok installed\nPriority: optional\n\
         Architecture: amd64\nVersion: {version}-1.1\n"
    )
}

/// The clean image with kubelet's files as kubeadm writes them, but for the hazards:
/// the removed flag and another runtime's socket in `kubeadm-flags.env`, and the systemd
/// driver (containerd's config keeps cgroupfs) with kubelet told not to ask containerd.
fn kubeadm_image() -> Image {
    let img = Image::clean();
    img.put(
        FLAGS_ENV,
        &format!(
            "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix://{K3S} \
             --pod-infra-container-image=registry.k8s.io/pause:3.10\"\n"
        ),
    )
    .put(
        CONFIG,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
         cgroupDriver: systemd\nfeatureGates:\n  KubeletCgroupDriverFromCRI: false\n",
    );
    img
}

#[test]
fn kubelet_1_35s_removed_flag_other_socket_and_driver_mismatch_fail() {
    let img = kubeadm_image();
    img.put(DPKG_STATUS, &dpkg_status("1.35.0"));
    let o = img.lint(&[]);
    let flags_at = format!("{FLAGS_ENV}:1");
    expect(
        &o,
        "lint.kubelet-pod-infra-image",
        "fail",
        1,
        &[
            "kubelet 1.35.0",
            "--pod-infra-container-image=registry.k8s.io/pause:3.10",
            &flags_at,
            DPKG_STATUS,
        ],
    );
    expect(
        &o,
        "lint.kubelet-endpoint",
        "fail",
        1,
        &[K3S, &flags_at, "/run/containerd/containerd.sock"],
    );
    expect(
        &o,
        "lint.kubelet-cgroup-driver",
        "fail",
        1,
        &[
            &format!("cgroupDriver=systemd ({CONFIG}:3)"),
            "SystemdCgroup = false",
            "/etc/containerd/config.toml",
        ],
    );
    // the image does not decide the host's cgroup version: a warning naming the setting
    expect(
        &o,
        "lint.kubelet-cgroup-v1",
        "warn",
        1,
        &["kubelet 1.35", "failCgroupV1: false", "cgroup version"],
    );
    // unless the image's own kernel command line asks for cgroup v1 (an Ubuntu cloud
    // image's grub.d drop-in)
    img.put(
        "/etc/default/grub.d/50-cgroup.cfg",
        "# cgroup v1 for an old agent\n\
         GRUB_CMDLINE_LINUX_DEFAULT=\"$GRUB_CMDLINE_LINUX_DEFAULT systemd.unified_cgroup_hierarchy=0\"\n",
    );
    expect(
        &img.lint(&[]),
        "lint.kubelet-cgroup-v1",
        "fail",
        1,
        &["/etc/default/grub.d/50-cgroup.cfg:2", "failCgroupV1: false"],
    );
}

/// systemd reads an environment file whole up to 64 MiB: kubeadm-flags.env padded past
/// 64 KiB (71,033 bytes, the removed flag on its last line) is read as kubelet gets it.
#[test]
fn a_large_environment_file_is_read_whole_as_systemd_reads_it() {
    let img = kubeadm_image();
    img.put(DPKG_STATUS, &dpkg_status("1.35.0"));
    let padding = "# kubeadm\n".repeat(7_000);
    let flags = format!(
        "{padding}KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix://{K3S} \
         --pod-infra-container-image=registry.k8s.io/pause:3.10\"\n"
    );
    assert!(flags.len() > 70_000, "{}", flags.len());
    img.put(FLAGS_ENV, &flags);
    let o = img.lint(&[]);
    let flags_at = format!("{FLAGS_ENV}:7001");
    expect(
        &o,
        "lint.kubelet-pod-infra-image",
        "fail",
        1,
        &[
            "--pod-infra-container-image=registry.k8s.io/pause:3.10",
            &flags_at,
        ],
    );
}

#[test]
fn before_1_35_the_flag_only_warns_and_cgroup_v1_is_let_be() {
    let img = kubeadm_image();
    img.put(DPKG_STATUS, &dpkg_status("1.34.2"));
    img.put(
        FLAGS_ENV,
        "KUBELET_KUBEADM_ARGS=\"--pod-infra-container-image=registry.k8s.io/pause:3.10\"\n",
    );
    img.put(CONFIG, "kind: KubeletConfiguration\n");
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.kubelet-pod-infra-image",
        "warn",
        0,
        &["kubelet 1.34.2", "1.35 removes", &format!("{FLAGS_ENV}:1")],
    );
    expect(&o, "lint.kubelet-cgroup-v1", "pass", 0, &["kubelet 1.34.2"]);
    let o = img.lint(&["--warn-is-error"]);
    assert_eq!(o.code, 1, "{}", o.dump());
}

#[test]
fn without_a_dpkg_record_the_version_is_the_binarys_string_never_run() {
    let img = kubeadm_image();
    let ran = Outside::new();
    let mark = ran.0.path().join("ran");
    // a kubelet that would leave a mark if anything ran it, its version in its build info
    write_executable(
        &img.at("/usr/bin/kubelet"),
        &format!(
            "#!/bin/sh\ntouch '{}'\n# build\t-ldflags=\"-X 'k8s.io/component-base/version.gitVersion=v1.35.1'\"\n",
            mark.display()
        ),
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.kubelet-pod-infra-image",
        "fail",
        1,
        &["kubelet 1.35.1", "/usr/bin/kubelet"],
    );
    assert!(!mark.exists(), "guard lint ran the image's kubelet");

    // neither a record nor a version string: what is not known only warns, and says why
    std::fs::write(img.at("/usr/bin/kubelet"), "#!/bin/sh\n").unwrap();
    img.put("/var/lib/rpm/rpmdb.sqlite", "");
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.kubelet-pod-infra-image",
        "warn",
        1,
        &["version not known", "/usr/bin/kubelet", "rpm"],
    );
    expect(&o, "lint.kubelet-cgroup-driver", "warn", 1, &["not known"]);
}

#[test]
fn kubelet_on_the_images_containerd_passes_and_its_address_is_the_socket() {
    let img = kubeadm_image();
    // (containerd 2.1: it answers kubelet's CRI RuntimeConfig, so kubelet takes its driver)
    let containerd = "\nPackage: containerd\nStatus: install ok installed\nVersion: 2.1.9~ds1-5\n";
    img.put(DPKG_STATUS, &(dpkg_status("1.35.0") + containerd));
    img.put(
        FLAGS_ENV,
        "KUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock\"\n",
    );
    img.put(
        CONFIG,
        "kind: KubeletConfiguration\ncgroupDriver: systemd\nfailCgroupV1: false\n",
    );
    let o = img.lint(&["--warn-is-error"]);
    expect(
        &o,
        "lint.kubelet-endpoint",
        "pass",
        0,
        &[&format!("{FLAGS_ENV}:1")],
    );
    expect(&o, "lint.kubelet-pod-infra-image", "pass", 0, &[]);
    expect(
        &o,
        "lint.kubelet-cgroup-v1",
        "pass",
        0,
        &[&format!("{CONFIG}:3")],
    );
    // kubelet 1.35 asks containerd for the driver (KubeletCgroupDriverFromCRI is on)
    expect(
        &o,
        "lint.kubelet-cgroup-driver",
        "pass",
        0,
        &["asks containerd", "on by default"],
    );

    // containerd's config moves its socket: kubelet's default path is another socket now
    let cd = "/etc/containerd/config.toml";
    let text = std::fs::read_to_string(img.at(cd)).unwrap();
    img.put(
        cd,
        &format!("{text}[grpc]\n  address = \"/run/containerd/other.sock\"\n"),
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.kubelet-endpoint",
        "fail",
        1,
        &["/run/containerd/other.sock", &format!("{FLAGS_ENV}:1")],
    );
}

/// A drop-in that adds kubelet's `ExecStart=` without resetting it first gives the
/// `Type=simple` unit two: systemd refuses to load it and kubelet never starts. The lint
/// fails naming systemd's reason, the very words `systemd-analyze verify` gives for the
/// same files.
#[test]
fn a_kubelet_unit_systemd_refuses_to_load_fails_the_lint() {
    let img = Image::clean();
    let drop_in = "/etc/systemd/system/kubelet.service.d/20-verbose.conf";
    img.put(drop_in, "[Service]\nExecStart=/usr/bin/kubelet --v=4\n");
    let o = img.lint(&[]);
    let why = "Service has more than one ExecStart= setting, which is only allowed for \
               Type=oneshot services. Refusing.";
    expect(
        &o,
        "lint.kubelet-gate",
        "fail",
        1,
        &["systemd refuses to load kubelet.service", why, drop_in],
    );
    let root = img.dir.path().to_str().unwrap();
    let verify = std::process::Command::new("systemd-analyze")
        .args(["verify", "--root", root, "kubelet.service"])
        .env("SYSTEMD_LOG_LEVEL", "err")
        .output()
        .expect("systemd-analyze (systemd's own unit loader) runs here");
    let said = String::from_utf8_lossy(&verify.stderr);
    assert!(said.contains(why), "systemd-analyze verify said: {said}");
}

/// kubelet 1.33 asks containerd for the cgroup driver; the image's containerd answers CRI
/// RuntimeConfig from 2.0 only. With kubelet's systemd and containerd's cgroupfs, the
/// image's containerd 1.7 leaves kubelet its own driver: fail; 2.1 gives kubelet its own:
/// pass.
#[test]
fn the_cgroup_driver_is_judged_by_what_the_images_containerd_answers() {
    for (containerd, status, needle) in [
        (
            "1.7.24~ds1-6",
            "fail",
            "does not implement CRI RuntimeConfig",
        ),
        (
            "2.1.9~ds1-5",
            "pass",
            "containerd answers CRI RuntimeConfig: cgroupfs",
        ),
    ] {
        let img = Image::clean();
        img.put(CONFIG, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n");
        let record = format!(
            "{}\nPackage: containerd\nStatus: install ok installed\nVersion: {containerd}\n",
            dpkg_status("1.33.0")
        );
        img.put(DPKG_STATUS, &record);
        let o = img.lint(&[]);
        assert_eq!(
            o.status("lint.kubelet-cgroup-driver"),
            status,
            "{containerd}: {}",
            o.dump()
        );
        let text = o.finding_text("lint.kubelet-cgroup-driver");
        assert!(text.contains(needle), "{containerd}: {text}");
    }
}
