//! Self-test of the shared harness (testkit/): a loop volume mounts and cleans up, the
//! real containerd starts on temp paths and is gone after drop, and the "nothing lost" check
//! of the fault tests fails when image data is lost (and only then).

use testkit as support;

use std::path::Path;
use std::time::Duration;
use support::node::{Node, TOOLS};
use support::{
    bounded, containerd_tool, is_mount_point, poll_until, root_or_skip, run, run_exe, runtime,
    unique, workload, Containerd, ContentSnapshot, FsKind, Guard, LoopVolume, TempRoot,
};

#[test]
fn loop_volume_mounts_and_cleans_up() {
    let Some(_root) = root_or_skip(&["losetup", "mkfs.ext4", "mount", "umount"]) else {
        return;
    };
    let t = TempRoot::new();
    let at = t.volume_path();
    let (dev, target) = {
        let v = LoopVolume::new(&t.images(), FsKind::Ext4, &unique("cgs", 8), &at);
        assert!(is_mount_point(&at));
        assert!(v.device.devnum().starts_with("7:"), "{}", v.device.devnum());
        (v.device.path.clone(), at.clone())
    };
    assert!(
        !is_mount_point(&target),
        "mount left behind at {}",
        target.display()
    );
    let list = run(
        "losetup",
        &["--list", "--noheadings", "--output", "NAME,BACK-FILE"],
    );
    assert!(
        !list
            .lines()
            .any(|l| l.contains(&*t.images().to_string_lossy())),
        "{} still attached:\n{list}",
        dev.display()
    );
}

#[test]
fn containerd_starts_on_temp_paths_and_stops() {
    let Some(_root) = root_or_skip(&["containerd", "runc"]) else {
        return;
    };
    let t = TempRoot::new();
    std::fs::create_dir_all(t.volume_path()).unwrap();
    let pid = {
        let c = Containerd::start(&t);
        assert!(std::os::unix::net::UnixStream::connect(&c.socket).is_ok());
        c.pid()
    };
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
            || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true),
        "containerd {pid} still running after drop"
    );
}

/// The check of "nothing lost" must be able to fail: a node with an imported image.
fn node_with_image(tag: &str) -> Node {
    Node::healthy(&format!(
        "127.0.0.1:{}/guard/pause:{tag}",
        runtime::dead_port()
    ))
}

/// Whether `assert_nothing_lost` panicked.
fn lost(before: &ContentSnapshot, after: &ContentSnapshot) -> bool {
    let (b, a) = (before.clone(), after.clone());
    std::panic::catch_unwind(move || b.assert_nothing_lost(&a)).is_err()
}

fn ctr(n: &Node, args: &[&str]) -> String {
    let socket = n.t.socket();
    let mut all = vec!["-a", socket.to_str().unwrap(), "-n", "k8s.io"];
    all.extend_from_slice(args);
    run_exe(&containerd_tool("ctr"), &all)
}

#[test]
fn nothing_lost_reads_the_images_on_the_disk_and_refuses_to_check_nothing() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node_with_image("selftest-disk");
    let empty = n.content();
    assert!(
        lost(&empty, &n.content()),
        "a check that reached no blob proves nothing and must fail"
    );
    n.import_image();
    let before = n.content();
    // what containerd's metadata on the disk holds is what containerd lists
    let listed = ctr(&n, &["images", "ls", "-q"]);
    assert!(!listed.trim().is_empty());
    for name in listed.lines() {
        assert!(
            before.has_image_named(name),
            "{name} not read from meta.db: {before:?}"
        );
    }
    // the image's manifest, config and layer at least
    let checked = before.assert_nothing_lost(&n.content());
    assert!(checked >= 3, "checked {checked}: {before:?}");
}

#[test]
fn nothing_lost_fails_when_a_reachable_layer_is_damaged() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node_with_image("selftest-damage");
    n.import_image();
    let before = n.content();
    assert!(
        !lost(&before, &n.content()),
        "an untouched store lost nothing"
    );
    let layer = runtime::sha256(&n.img.layer);
    let blob =
        n.t.volume_path()
            .join("io.containerd.content.v1.content/blobs/sha256")
            .join(layer.trim_start_matches("sha256:"));
    let mut bytes = std::fs::read(&blob).expect("the imported layer is in the content store");
    bytes[0] ^= 0xff;
    std::fs::write(&blob, &bytes).unwrap();
    assert!(
        lost(&before, &n.content()),
        "a damaged layer must count as lost"
    );
}

#[test]
fn nothing_lost_fails_when_an_image_is_removed() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node_with_image("selftest-rm");
    n.import_image();
    let before = n.content();
    ctr(&n, &["images", "rm", "--sync", &n.img.name]);
    assert!(
        lost(&before, &n.content()),
        "a removed image must count as lost"
    );
}

#[test]
fn nothing_lost_ignores_an_unreferenced_blob_removed_by_containerds_gc() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node_with_image("selftest-gc");
    n.import_image();
    // A blob no image names (no lease, no gc.root label): containerd's GC may remove it,
    // even before the snapshot sees it (a collection the import scheduled may run right
    // after the ingest). The snapshot must hold the blob, so ingest and snapshot are
    // repeated, a bounded number of times, until it does.
    let without = n.content();
    let (blob, before) = (0..5)
        .find_map(|_| {
            let (hex, blob) = ingest_unreferenced_blob(&n);
            let before = n.content();
            before.has_blob(&hex).then_some((blob, before))
        })
        .expect("an ingested unreferenced blob stays in the store long enough to be seen");
    // what was ingested is seen as added, whatever GC removed beside it
    assert!(
        !without.added_in(&before).is_empty(),
        "an ingest adds a blob"
    );
    // containerd collects garbage shortly after it starts.
    n.ctrd.restart_by_hand();
    poll_until(
        "containerd's GC to remove the unreferenced blob",
        Duration::from_secs(30),
        || (!blob.exists()).then_some(()),
    );
    let after = n.content();
    // (containerd 2.x may also collect the imported archive's own index, unreferenced too)
    assert!(after.blob_count() < before.blob_count());
    assert_eq!(
        before.added_in(&after),
        Vec::<&str>::new(),
        "GC adds nothing"
    );
    assert!(
        !lost(&before, &after),
        "an unreferenced blob is not image data"
    );
}

/// `ctr content ingest` of a blob no image names: its hex digest and its path in the
/// volume's content store.
fn ingest_unreferenced_blob(n: &Node) -> (String, std::path::PathBuf) {
    let data = format!("unreferenced {}", unique("", 16)).into_bytes();
    let digest = runtime::sha256(&data);
    let blob = n.t.images().join(unique("blob-", 8));
    std::fs::write(&blob, &data).unwrap();
    let ingest = bounded::output(
        std::process::Command::new(containerd_tool("ctr"))
            .args(["-a", n.t.socket().to_str().unwrap(), "-n", "k8s.io"])
            .args(["--timeout", workload::CTR_TIMEOUT])
            .args(["content", "ingest", "--expected-digest", &digest])
            .arg(format!("--expected-size={}", data.len()))
            .arg(unique("selftest-", 8))
            .stdin(std::fs::File::open(&blob).unwrap()),
        bounded::COMMAND_DEADLINE,
    );
    assert!(ingest.status.success(), "ctr content ingest: {ingest:?}");
    let hex = digest.trim_start_matches("sha256:").to_string();
    let path =
        n.t.volume_path()
            .join("io.containerd.content.v1.content/blobs/sha256")
            .join(&hex);
    (hex, path)
}

/// The `textfile = "..."` values of a guard config.
fn textfiles(config: &Path) -> Vec<String> {
    std::fs::read_to_string(config)
        .unwrap()
        .lines()
        .filter_map(|l| l.trim().strip_prefix("textfile = "))
        .map(|v| v.trim_matches('"').to_string())
        .collect()
}

#[test]
fn a_nodes_guard_config_puts_the_metrics_textfile_in_its_own_tree() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    // Without it every real `verify`/`runtime` rewrote the host's
    // /var/lib/prometheus/node-exporter/containerd-guard.prom (the default path).
    let n = node_with_image("selftest-metrics");
    n.import_image();
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| c.sandbox_pull(false));
    let named = textfiles(&cfg);
    assert_eq!(
        named,
        vec![n.t.metrics_textfile().display().to_string()],
        "one textfile, the tree's: {}",
        std::fs::read_to_string(&cfg).unwrap()
    );
    assert!(n.t.metrics_textfile().starts_with(n.t.path()));
    let out = Guard::with_config(&cfg).run(&["--json", "verify"]);
    assert_eq!(out.code, 0, "{}", out.dump());
    let text = std::fs::read_to_string(n.t.metrics_textfile())
        .unwrap_or_else(|e| panic!("the tree's textfile: {e}\n{}", out.dump()));
    assert!(text.contains("containerd_guard_usable 1"), "{text}");

    // A test's own [metrics] table is kept, alone (a TOML table may appear only once).
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| c.metrics_off());
    assert_eq!(textfiles(&cfg), vec![String::new()]);
    let cfg = n.t.write_guard_config_with(|c| c.metrics_off());
    assert_eq!(textfiles(&cfg), vec![String::new()]);
    let cfg = n.t.write_guard_config();
    assert_eq!(
        textfiles(&cfg),
        vec![n.t.metrics_textfile().display().to_string()]
    );
    // A raw config says nothing about metrics: the tree's textfile is added; one that does
    // is written as given.
    let cfg = n.t.write_guard_config_raw("[volume]\nwait = \"1s\"\n");
    assert_eq!(
        textfiles(&cfg),
        vec![n.t.metrics_textfile().display().to_string()]
    );
    let cfg = n.t.write_guard_config_raw("metrics.textfile = \"\"\n");
    assert!(textfiles(&cfg).is_empty(), "written as given");
}
