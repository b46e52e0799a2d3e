//! Promises about settings: the default and the empty metrics textfile,
//! `require_network`, `[volume] mount` never formatting, and `[sandbox] image`.
//!
//! Promises of README.md and docs/ that only the fake world (`src/phases/gate/tests/`)
//! or nothing proved, on real components: Debian's containerd on temp paths, a real
//! loop-mounted ext4 volume, the built `guard`. Root only.

use testkit as support;

use std::path::Path;
use std::time::Duration;
use support::node::{has_finding, runtime, Node, TOOLS};
use support::runtime::{dead_port, PauseImage};
use support::{is_mount_point, root_or_skip, unique, Guard, GuardConfig, Outcome, TempRoot};

/// Where docs/fleet.md's default textfile lives: `/var/lib/prometheus/node-exporter/`.
const DEFAULT_TEXTFILE_PARENT: &str = "/var/lib/prometheus";

/// The guard run in a mount namespace of its own where `dir` (the test's) is
/// `/var/lib/prometheus`: the default textfile path lands in the test's tree, never the
/// host's.
fn with_prometheus_dir(dir: &Path) -> Vec<String> {
    assert!(
        Path::new(DEFAULT_TEXTFILE_PARENT).is_dir(),
        "{DEFAULT_TEXTFILE_PARENT} is missing: install prometheus-node-exporter (tests/gate_reports.rs s18 needs it too)"
    );
    let script = format!(
        "mount --bind '{}' {DEFAULT_TEXTFILE_PARENT} && exec \"$0\" \"$@\"",
        dir.display()
    );
    ["unshare", "-m", "sh", "-c", &script]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// A healthy node (the sandbox image imported) and its `guard verify --json` run with the
/// default textfile directory replaced by `prometheus` (a directory of the test's), with
/// the `[metrics]` keys `metrics` sets.
fn verify_with_metrics(
    tag: &str,
    prometheus: &Path,
    metrics: impl FnOnce(GuardConfig) -> GuardConfig,
) -> (Node, Outcome) {
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:{tag}", dead_port()));
    n.import_image();
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        metrics(c.sandbox_pull(false))
    });
    let wrapper = with_prometheus_dir(prometheus);
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let out = Guard::with_config(&cfg)
        .wrapped_in(&wrapper)
        .run(&["--json", "verify"]);
    (n, out)
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn default_textfile_is_written_when_its_directory_exists_and_not_when_it_is_missing() {
    let Some(_root) = root_or_skip(&[TOOLS, &["unshare", "mount"]].concat()) else {
        return;
    };
    // docs/fleet.md: "default /var/lib/prometheus/node-exporter/containerd-guard.prom, Debian's
    // textfile directory, written only when that directory exists".
    let t = TempRoot::new();
    let prometheus = t.path().join("prometheus");
    std::fs::create_dir(&prometheus).unwrap();
    let (_n, out) = verify_with_metrics("nodir", &prometheus, |c| c.metrics_textfile_default());
    assert_eq!(out.code, 0, "{}", out.dump());
    assert!(
        !out.stdout.contains("metrics.textfile"),
        "a missing default directory is no warning: {}",
        out.dump()
    );
    assert_eq!(
        entries(&prometheus),
        Vec::<String>::new(),
        "node-exporter/ is not created: {}",
        out.dump()
    );

    // The same with the directory there: the file is written (the namespace works).
    std::fs::create_dir(prometheus.join("node-exporter")).unwrap();
    let (_n, out) = verify_with_metrics("dir", &prometheus, |c| c.metrics_textfile_default());
    assert_eq!(out.code, 0, "{}", out.dump());
    let text = std::fs::read_to_string(prometheus.join("node-exporter/containerd-guard.prom"))
        .unwrap_or_else(|e| panic!("the default textfile: {e}\n{}", out.dump()));
    assert!(text.contains("containerd_guard_usable 1"), "{text}");
}

#[test]
fn empty_textfile_writes_no_textfile_and_reports_no_metrics_warning() {
    let Some(_root) = root_or_skip(&[TOOLS, &["unshare", "mount"]].concat()) else {
        return;
    };
    // docs/fleet.md: "`textfile = \"\"` turns it off" (and docs/configuration.md: "\"\" turns
    // metrics off"), even where node_exporter's directory exists.
    let t = TempRoot::new();
    let prometheus = t.path().join("prometheus");
    std::fs::create_dir_all(prometheus.join("node-exporter")).unwrap();
    let (n, out) = verify_with_metrics("off", &prometheus, |c| c.metrics_off());
    assert_eq!(out.code, 0, "{}", out.dump());
    assert!(
        !out.stdout.contains("metrics.textfile"),
        "no metrics warning: {}",
        out.dump()
    );
    assert_eq!(
        entries(&prometheus.join("node-exporter")),
        Vec::<String>::new(),
        "no textfile: {}",
        out.dump()
    );
    assert!(
        !n.t.guard_state_dir().join("metrics.json").exists(),
        "metrics off keeps no metrics either"
    );
}

#[test]
fn require_network_holds_while_cri_reports_the_network_not_ready_and_not_otherwise() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    // The test's containerd has no CNI configuration: CRI reports NetworkReady=false.
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:net", dead_port()));
    n.import_image();
    let restart = n.ctrd.restart_program();
    let pid = n.ctrd.identity();

    // README: `runtime.network` is "CRI NetworkReady; warn only, unless [hold]
    // require_network = true"; docs/configuration.md: `require_network = false` "does not
    // block by default".
    let cfg = n.config_with(&restart, |c| {
        c.sandbox_pull(false)
            .hold_require_network(false)
            .hold_timeout("3s")
    });
    let out = runtime(&cfg);
    out.expect(0, "runtime.network", "warn")
        .mentions("runtime.network", &["NetworkReady=false"]);

    // Required: `guard runtime` holds kubelet for its hold timeout, then fails naming it.
    let hold = Duration::from_secs(3);
    let cfg = n.config_with(&restart, |c| {
        c.sandbox_pull(false)
            .hold_require_network(true)
            .hold_timeout("3s")
    });
    let out = runtime(&cfg);
    out.expect(1, "runtime.network", "fail").mentions(
        "runtime.network",
        &["NetworkReady=false", "require_network"],
    );
    assert!(
        out.elapsed >= hold - Duration::from_millis(500)
            && out.elapsed < hold + Duration::from_secs(10),
        "held for its {hold:?} hold: {}",
        out.dump()
    );
    assert_eq!(
        n.ctrd.restarts(),
        0,
        "a restart does not bring CNI: {}",
        out.dump()
    );
    pid.assert_still_runs("containerd");
    println!(
        "BENCH require_network hold ended after {:.2}s",
        out.elapsed.as_secs_f64()
    );
}

/// The first MiB of `dev`, read directly (where any filesystem's superblock would be).
fn first_mib(dev: &Path) -> Vec<u8> {
    use std::io::Read;
    let mut bytes = vec![0u8; 1 << 20];
    std::fs::File::open(dev)
        .and_then(|mut f| f.read_exact(&mut bytes))
        .unwrap_or_else(|e| panic!("read {}: {e}", dev.display()));
    bytes
}

#[test]
fn volume_mount_refuses_a_device_with_no_filesystem_and_formats_nothing() {
    let Some(_root) = root_or_skip(&["losetup", "mount"]) else {
        return;
    };
    // README: "`volume.mount` ... refuses a disk without a known filesystem";
    // docs/configuration.md: "mount the device when it is not mounted yet (never formats)".
    let t = TempRoot::new();
    let img = support::mounts::Image::sparse(t.images().join("blank.img"), 64 << 20);
    // Bytes that are no filesystem's superblock, so "unchanged" means more than "still zero".
    let pattern: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8 | 1).collect();
    std::fs::write(&img.path, &pattern).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&img.path)
        .and_then(|f| f.set_len(img.size))
        .unwrap();
    let dev = img.attach();
    let before = first_mib(&dev.path);
    let cfg = t.write_guard_config_with(|c| {
        c.volume_device(&dev.path.display().to_string())
            .volume_mount(true)
            .volume_wait("2s")
    });
    let out = Guard::with_config(&cfg).run(&["--json", "volume"]);
    out.expect(1, "volume.mount", "fail").mentions(
        "volume.mount",
        &[
            &format!("refused to mount {}", dev.path.display()),
            "no known filesystem on it",
        ],
    );
    assert!(
        !is_mount_point(&t.volume_path()),
        "something was mounted at {}: {}",
        t.volume_path().display(),
        out.dump()
    );
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(
        !mountinfo.contains(&format!(" {} ", dev.path.display())),
        "{} is mounted somewhere:\n{mountinfo}",
        dev.path.display()
    );
    assert!(
        first_mib(&dev.path) == before,
        "the first MiB of {} changed: the guard wrote to a disk it refused",
        dev.path.display()
    );
}

#[test]
fn sandbox_image_override_passes_on_an_image_present_under_another_name_without_restore_or_pull() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    // docs/configuration.md: `[sandbox] image` overrides the sandbox image named in
    // containerd's config. containerd's configured image is absent; the override names one
    // that is there.
    let configured = format!("127.0.0.1:{}/guard/pause:configured", dead_port());
    let n = Node::healthy(&configured);
    let present = PauseImage::new(&format!(
        "127.0.0.1:{}/guard/present:{}",
        dead_port(),
        unique("", 6)
    ));
    n.ctrd
        .ctr_import(&present.write_oci(&n.t.path().join("present.oci.tar"), false));
    // Both remedies available: an archive of the configured image and pulls (from a dead
    // registry), so a restore or a pull would show in the findings and the image list.
    let archive = n.oci_archive(false);
    let sandbox = n
        .guard_config(&n.ctrd.restart_program())
        .sandbox_archives(&[&archive]);

    let without = sandbox.write(&n.t);
    let v = Guard::with_config(&without).run(&["--json", "verify"]);
    v.expect(1, "runtime.sandbox-image", "fail").mentions(
        "runtime.sandbox-image",
        &[&configured, "not in namespace k8s.io"],
    );

    // (no canary: RunPodSandbox uses containerd's own sandbox image, absent here on
    // purpose, and would fail the gate as it would fail every pod; this is about the
    // guard's remedies)
    let with = sandbox
        .sandbox_image(&present.name)
        .canary_enabled(false)
        .write(&n.t);
    let before = n.content();
    let out = runtime(&with);
    out.expect(0, "runtime.sandbox-image", "pass").mentions(
        "runtime.sandbox-image",
        &[&present.name, "complete and unpacked"],
    );
    for remedy in ["remedy.restore-image", "remedy.pull"] {
        assert!(!has_finding(&out, remedy), "no {remedy}:\n{}", out.dump());
    }
    let after = n.content();
    before.assert_nothing_lost(&after);
    assert!(
        !after.has_image_named("guard/pause:configured"),
        "the configured image was restored or pulled: {after:?}\n{}",
        out.dump()
    );
    assert_eq!(n.ctrd.restarts(), 0, "{}", out.dump());
}
