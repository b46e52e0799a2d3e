//! `volume.eviction` and the early warning on space, on a real node (containerd on a
//! loop-mounted ext4 volume) with kubelet configuration files as kubeadm and node images
//! write them (tests/fixtures/kubelet/). Root only.

use testkit as support;

use std::path::Path;
use support::node::{runtime, Node, TOOLS};
use support::runtime::dead_port;
use support::{root_or_skip, Guard, GuardConfig};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/kubelet");

fn node() -> Node {
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:ev", dead_port()));
    n.import_image();
    n
}

/// The guard's config with `[kubelet] config` naming a copy of `fixture` (or `text`).
fn with_kubelet_config(
    n: &Node,
    name: &str,
    text: &str,
    adjust: impl FnOnce(GuardConfig) -> GuardConfig,
) -> std::path::PathBuf {
    let file = n.t.path().join(name);
    std::fs::write(&file, text).unwrap();
    n.config_with(&n.ctrd.restart_program(), |c| {
        adjust(
            c.sandbox_pull(false)
                .canary_enabled(false)
                .kubelet_config(&file),
        )
    })
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(FIXTURES).join(name)).unwrap()
}

#[test]
fn e01_a_partial_eviction_hard_leaves_the_volume_uncovered_and_says_what_to_add() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node();
    let defaults = with_kubelet_config(
        &n,
        "defaults.yaml",
        &fixture("kubeadm-defaults.yaml"),
        |c| c,
    );
    let out = Guard::with_config(&defaults).run(&["--json", "verify"]);
    out.expect(0, "volume.eviction", "pass").mentions(
        "volume.eviction",
        &["imagefs.available<15% (kubelet's default)"],
    );
    runtime(&defaults).expect(0, "volume.eviction", "pass");

    let partial = with_kubelet_config(
        &n,
        "partial.yaml",
        &fixture("partial-eviction-hard.yaml"),
        |c| c,
    );
    let out = Guard::with_config(&partial).run(&["--json", "verify"]);
    // a warning: the node is usable
    out.expect(0, "volume.eviction", "warn").mentions(
        "volume.eviction",
        &[
            "no imagefs.available, no imagefs.inodesFree",
            "partial.yaml",
            "imagefs.available: \"15%\"",
        ],
    );
    runtime(&partial).expect(0, "volume.eviction", "warn");
    // no configuration yet (before kubeadm joins the node): nothing to judge
    let missing = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_pull(false)
            .kubelet_config(n.t.path().join("absent.yaml"))
    });
    Guard::with_config(&missing)
        .run(&["--json", "verify"])
        .expect(0, "volume.eviction", "skip");
    // a hostile file is refused naming it, the rest of verify goes on
    let broken = with_kubelet_config(&n, "broken.yaml", "evictionHard: [oops\n", |c| c);
    Guard::with_config(&broken)
        .run(&["--json", "verify"])
        .expect(0, "volume.eviction", "warn")
        .mentions("volume.eviction", &["broken.yaml"]);
}

#[test]
fn e02_verify_warns_when_free_space_nears_kubelets_image_threshold() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node();
    let stats = nix::sys::statvfs::statvfs(&n.t.volume_path()).unwrap();
    let free = stats.blocks_available() as f64 * 100.0 / stats.blocks() as f64;
    // a threshold 2 points under what is free now: inside the default 5-point margin
    let near = format!(
        "evictionHard:\n  imagefs.available: \"{}%\"\n  imagefs.inodesFree: \"5%\"\n",
        (free - 2.0).floor()
    );
    let cfg = with_kubelet_config(&n, "near.yaml", &near, |c| c);
    let out = Guard::with_config(&cfg).run(&["--json", "verify"]);
    out.expect(0, "volume.free-space", "warn").mentions(
        "volume.free-space",
        &[
            "kubelet evicts pods at imagefs.available<",
            "[volume] warn_margin",
        ],
    );
    assert_eq!(out.status("volume.eviction"), "pass", "{}", out.dump());
    // with no margin it passes again; phase 1 before containerd never reads kubelet's file
    let cfg = with_kubelet_config(&n, "near.yaml", &near, |c| c.volume_warn_margin(0));
    Guard::with_config(&cfg)
        .run(&["--json", "verify"])
        .expect(0, "volume.free-space", "pass");
}
