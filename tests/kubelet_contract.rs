//! The kubelet family on a real node (containerd on its volume): kubelet's configuration
//! naming another runtime's socket, and a kubelet unit that still passes
//! `--pod-infra-container-image` to a kubelet stand-in that says its version. The unit is
//! given to the guard alone: it runs in a mount namespace of its own where the test's
//! directory is `/etc/systemd/system` (the test host has no kubelet unit). And one look
//! reads kubelet's files once, however many families judge them (counted with `strace`).
//! On this host's own cgroups (v1 or v2, read apart from the guard), kubelet 1.35's refusal
//! of cgroup v1 as `guard verify` judges it.
//! Root only.

use testkit as support;

use std::path::{Path, PathBuf};
use support::node::{runtime, Node, TOOLS};
use support::runtime::dead_port;
use support::{root_or_skip, write_executable, Guard, Outcome};

fn node() -> Node {
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:kc", dead_port()));
    n.import_image();
    n
}

/// The guard's config with `[kubelet] config` naming `yaml`, written as `kubelet.yaml`.
fn with_kubelet_config(n: &Node, yaml: &str) -> (PathBuf, PathBuf) {
    let file = n.t.path().join("kubelet.yaml");
    std::fs::write(&file, yaml).unwrap();
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_pull(false)
            .canary_enabled(false)
            .kubelet_config(&file)
    });
    (cfg, file)
}

#[test]
fn k01_a_kubelet_on_another_runtimes_socket_fails_verify_and_warns_runtime() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node();
    let yaml = "kind: KubeletConfiguration\n\
                containerRuntimeEndpoint: unix:///run/k3s/containerd/containerd.sock\n";
    let (cfg, file) = with_kubelet_config(&n, yaml);
    let at = format!("{}:2", file.display());
    Guard::with_config(&cfg)
        .run(&["--json", "verify"])
        .expect(1, "kubelet.endpoint", "fail")
        .mentions(
            "kubelet.endpoint",
            &["/run/k3s/containerd/containerd.sock", &at],
        );
    // kubelet is never held for it: two runtimes on one host may be deliberate
    runtime(&cfg).expect(0, "kubelet.endpoint", "warn");

    let ours = format!(
        "kind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix://{}\n",
        n.t.socket().display()
    );
    let (cfg, _) = with_kubelet_config(&n, &ours);
    Guard::with_config(&cfg)
        .run(&["--json", "verify"])
        .expect(0, "kubelet.endpoint", "pass");
}

/// A directory to stand for `/etc/systemd/system`, holding a kubelet unit that runs the
/// stand-in `kubelet` (which says `version`) with the removed flag.
fn kubelet_unit(n: &Node, version: &str) -> PathBuf {
    let units = n.t.path().join("units");
    std::fs::create_dir_all(&units).unwrap();
    let binary = n.t.path().join("kubelet");
    // (the build string a release binary carries, for a reader that does not run it; and
    // a mark left by each run)
    let ran = n.t.path().join("kubelet.ran");
    write_executable(
        &binary,
        &format!(
            "#!/bin/sh\n# k8s.io/component-base/version.gitVersion=v{version} (build)\n\
             echo run >> '{}'\necho 'Kubernetes v{version}'\n",
            ran.display()
        ),
    );
    let unit = format!(
        "[Service]\nExecStart={} --pod-infra-container-image=registry.k8s.io/pause:3.9\n",
        binary.display()
    );
    std::fs::write(units.join("kubelet.service"), unit).unwrap();
    units
}

/// `guard ARGS` where `units` is `/etc/systemd/system`, private to the guard.
fn with_units(cfg: &Path, units: &Path, args: &[&str]) -> Outcome {
    let wrapper = format!(
        "mount --bind '{}' /etc/systemd/system && exec \"$0\" \"$@\"",
        units.display()
    );
    Guard::with_config(cfg)
        .wrapped_in(&["unshare", "-m", "sh", "-c", &wrapper])
        .run(args)
}

#[test]
fn k02_pod_infra_container_image_fails_on_kubelet_1_35_and_warns_on_1_34() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node();
    let (cfg, _) = with_kubelet_config(&n, "kind: KubeletConfiguration\n");
    let cache = n.t.guard_state_dir().join("kubelet.version.json");

    let units = kubelet_unit(&n, "1.35.0");
    // --npd writes nothing and runs nothing (NPD runs it all day): kubelet's version is
    // read from its binary, not asked, and not kept
    let npd = with_units(&cfg, &units, &["verify", "--npd"]);
    assert_eq!(npd.code, 1, "{}", npd.dump());
    assert!(
        npd.stdout.contains("kubelet.pod-infra-image"),
        "{}",
        npd.dump()
    );
    assert!(!cache.exists(), "--npd wrote {}", cache.display());
    let ran = n.t.path().join("kubelet.ran");
    assert!(!ran.exists(), "--npd ran kubelet's binary");
    with_units(&cfg, &units, &["--json", "verify"])
        .expect(1, "kubelet.pod-infra-image", "fail")
        .mentions(
            "kubelet.pod-infra-image",
            &[
                "kubelet 1.35.0",
                "registry.k8s.io/pause:3.9",
                "kubelet.service",
            ],
        );
    assert!(
        cache.exists(),
        "plain verify keeps kubelet's version for the boot"
    );

    // an upgrade (a new binary: another inode) is asked again, never taken from the cache
    let units = kubelet_unit(&n, "1.34.2");
    with_units(&cfg, &units, &["--json", "verify"])
        .expect(0, "kubelet.pod-infra-image", "warn")
        .mentions("kubelet.pod-infra-image", &["kubelet 1.34.2"]);
}

/// The `openat` calls of `file` that `guard ARGS` made (`strace`).
fn opens_of(cfg: &Path, file: &Path, args: &[&str]) -> Vec<String> {
    let trace = file.with_extension("strace");
    let out = Guard::with_config(cfg).tracing_opens(&trace).run(args);
    assert!(out.code == 0 || out.code == 1, "{}", out.dump());
    let quoted = format!("\"{}\"", file.display());
    let text = std::fs::read_to_string(&trace).unwrap();
    let opens = text.lines().filter(|l| l.contains(&quoted));
    opens.map(str::to_string).collect()
}

#[test]
fn k03_a_look_reads_kubelets_files_once_for_all_its_families() {
    let Some(_root) = root_or_skip(&[TOOLS, &["strace"]].concat()) else {
        return;
    };
    let n = node();
    let (cfg, file) = with_kubelet_config(&n, "kind: KubeletConfiguration\n");
    // (a first run pins the sandbox image and looks again; the runs below look once)
    let first = runtime(&cfg);
    assert_eq!(first.code, 0, "{}", first.dump());
    // the eviction and kubelet families both judge this file: the gate reads it once
    let runtime = opens_of(&cfg, &file, &["runtime"]);
    assert_eq!(runtime.len(), 1, "guard runtime: {runtime:#?}");
    // verify's volume checks read it too, beside the gate, in a phase of their own
    let verify = opens_of(&cfg, &file, &["verify"]);
    assert_eq!(verify.len(), 2, "guard verify: {verify:#?}");
}

/// Whether this host mounts cgroup v1 (hybrid included), read apart from the guard:
/// `statfs` of `/sys/fs/cgroup`, which is cgroup2 itself only on a pure v2 host.
fn host_is_cgroup_v1() -> bool {
    use nix::sys::statfs::{statfs, CGROUP2_SUPER_MAGIC};
    let fs = statfs("/sys/fs/cgroup").expect("statfs /sys/fs/cgroup");
    fs.filesystem_type() != CGROUP2_SUPER_MAGIC
}

#[test]
fn k04_kubelet_1_35_fails_on_this_cgroup_v1_host_unless_told_fail_cgroup_v1_false() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node();
    let units = kubelet_unit(&n, "1.35.0");
    let v1 = host_is_cgroup_v1();
    let id = "kubelet.cgroup-v1";

    let (cfg, _) = with_kubelet_config(&n, "kind: KubeletConfiguration\n");
    let o = with_units(&cfg, &units, &["--json", "verify"]);
    assert_eq!(
        o.code,
        1,
        "the removed flag fails verify anyway: {}",
        o.dump()
    );
    match v1 {
        true => o.mentions(
            id,
            &["kubelet 1.35 refuses", "1.35.0", "failCgroupV1: false"],
        ),
        false => o.mentions(id, &["cgroup v2"]),
    };
    assert_eq!(
        o.status(id),
        if v1 { "fail" } else { "pass" },
        "{}",
        o.dump()
    );

    let (cfg, file) = with_kubelet_config(&n, "kind: KubeletConfiguration\nfailCgroupV1: false\n");
    let o = with_units(&cfg, &units, &["--json", "verify"]);
    assert_eq!(o.status(id), "pass", "{}", o.dump());
    if v1 {
        o.mentions(id, &[&format!("failCgroupV1=false ({}:2)", file.display())]);
    }
}

/// kubelet 1.33 (it asks containerd for the cgroup driver: KubeletCgroupDriverFromCRI on by
/// default) with `cgroupDriver: systemd`, containerd with its default cgroupfs. containerd
/// 2.x answers CRI RuntimeConfig, and kubelet takes its driver: pass. 1.6 ("unknown
/// method") and 1.7 ("not implemented") do not: kubelet falls back to its own systemd
/// driver, which is not containerd's, and the node's pods would fail: fail.
#[test]
fn k05_the_cgroup_driver_is_judged_by_what_this_containerd_answers() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node();
    let (cfg, _) = with_kubelet_config(&n, "kind: KubeletConfiguration\ncgroupDriver: systemd\n");
    let units = kubelet_unit(&n, "1.33.0");
    let out = with_units(&cfg, &units, &["--json", "verify"]);
    let driver = out.finding("kubelet.cgroup-driver").clone();
    if support::containerd_major_minor() >= (2, 0) {
        assert_eq!(driver["status"], "pass", "{}", out.dump());
        out.mentions(
            "kubelet.cgroup-driver",
            &["containerd answers CRI RuntimeConfig: cgroupfs"],
        );
    } else {
        assert_eq!(out.code, 1, "{}", out.dump());
        assert_eq!(driver["status"], "fail", "{}", out.dump());
        out.mentions(
            "kubelet.cgroup-driver",
            &[
                "kubelet's cgroup driver is systemd, containerd's is cgroupfs",
                "does not implement CRI RuntimeConfig",
            ],
        );
    }
}
