//! The snapshotter the guard judges the sandbox image in is the one its pod sandboxes
//! start from: the sandbox runtime's own (`runtimes.runc.snapshotter`) where containerd
//! reads that key (1.7 and later), else CRI's default (1.6 ignores the key). Here runc
//! uses `native` (1.7 and later) while CRI's default stays `overlayfs`. The image is
//! pulled through CRI from a real registry, as kubelet pulls it: without a runtime
//! handler, so containerd unpacks it for CRI's default snapshotter only. Its layers are there, and CRI unpacks
//! an image for the sandbox's snapshotter when it starts a pod sandbox (all three
//! versions' `WithNewSnapshot`): usable, a warning says the first sandbox unpacks it.
//! Without its layers it is not usable. On 1.6 runc's own snapshotter is one whose plugin
//! does not load: 1.6 never uses it, so `runtime.plugins` must not fail for it. On
//! containerd 1.6, 1.7 and 2.1 (scripts/test runs this file on each).

use testkit as support;

use support::cri::pull_image;
use support::node::{runtime, Node, TOOLS};
use support::runtime::{block_on, sha256, Registry};
use support::workload::{ctr_k8s, ctr_k8s_ok};
use support::{containerd_major_minor, root_or_skip, CriConfig, Guard, TempRoot};

const CRI_DEFAULT: &str = "overlayfs";
/// runc's own snapshotter where containerd reads the key (1.7 and later).
const RUNC_OWN: &str = "native";
/// runc's own snapshotter on 1.6, which ignores the key: `btrfs`, whose plugin does not
/// load on the test's ext4 volume. Ignored, its failure must not fail the node.
const RUNC_OWN_IGNORED: &str = "btrfs";

/// Whether `snapshotter` holds the committed snapshot `key` (namespace k8s.io).
fn has_snapshot(n: &Node, snapshotter: &str, key: &str) -> bool {
    let args = ["snapshots", "--snapshotter", snapshotter, "info", key];
    ctr_k8s(&n.t.socket(), &args).status.success()
}

#[test]
fn the_sandbox_image_is_judged_in_its_runtimes_own_snapshotter() {
    let Some(_root) = root_or_skip(&[TOOLS, &["docker-registry"]].concat()) else {
        return;
    };
    let reg = Registry::start();
    let image = format!("127.0.0.1:{}/guard/pause:runtime-snapshotter", reg.port);
    let reads_runtimes_own = containerd_major_minor() >= (1, 7);
    let runc_own = match reads_runtimes_own {
        true => RUNC_OWN,
        false => RUNC_OWN_IGNORED,
    };
    let cri = CriConfig::new().runc_snapshotter(runc_own);
    let n = Node::healthy_cri(TempRoot::new(), &image, cri);
    reg.push(&n.img, "guard/pause", "runtime-snapshotter");
    block_on("CRI PullImage", pull_image(&n.t.socket(), &image)).expect("CRI pulls the image");
    // one layer: its diff id is the chain id, the key of the unpacked snapshot
    let chain = sha256(&n.img.layer);
    assert!(
        has_snapshot(&n, CRI_DEFAULT, &chain) && !has_snapshot(&n, runc_own, &chain),
        "a pull without a runtime handler unpacks for CRI's default snapshotter only"
    );
    let judged = if reads_runtimes_own {
        RUNC_OWN
    } else {
        CRI_DEFAULT
    };
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_pull(true).hold_timeout("10s")
    });
    let verify = || Guard::with_config(&cfg).run(&["--json", "verify"]);

    if reads_runtimes_own {
        // unpacked for CRI's default only, its layers there: CRI unpacks it for runc's
        // snapshotter when it starts the first pod sandbox, so the node is usable
        verify()
            .expect(0, "runtime.sandbox-image", "warn")
            .mentions(
                "runtime.sandbox-image",
                &[
                    "not unpacked for the native snapshotter",
                    "the first pod sandbox",
                    "runtimes.runc.snapshotter",
                ],
            );
        n.kubelet_can_start_a_pod();
        assert!(
            has_snapshot(&n, RUNC_OWN, &chain),
            "starting a pod sandbox unpacked it for native"
        );
    }
    let said = match reads_runtimes_own {
        true => "runtimes.runc.snapshotter",
        false => {
            "ignores plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.snapshotter"
        }
    };
    let judged_there = verify();
    if !reads_runtimes_own {
        // 1.6 starts no sandbox from runc's own snapshotter: its plugin not loading is
        // named, and fails nothing
        judged_there.expect(0, "runtime.plugins", "pass").mentions(
            "runtime.plugins",
            &[&format!("io.containerd.snapshotter.v1.{RUNC_OWN_IGNORED}")],
        );
    }
    judged_there
        .expect(0, "runtime.sandbox-image", "pass")
        .mentions(
            "runtime.sandbox-image",
            &[&format!("unpacked for {judged}"), said],
        );

    // The snapshot gone from the judged snapshotter, the layers there: usable, as the
    // first pod sandbox unpacks it; nothing is pulled for it.
    let rm = ["snapshots", "--snapshotter", judged, "rm", chain.as_str()];
    let removed = ctr_k8s(&n.t.socket(), &rm);
    assert!(removed.status.success(), "ctr snapshots rm: {removed:?}");
    assert!(
        !has_snapshot(&n, judged, &chain),
        "ctr removed the snapshot"
    );
    verify()
        .expect(0, "runtime.sandbox-image", "warn")
        .mentions(
            "runtime.sandbox-image",
            &[&format!("not unpacked for the {judged} snapshotter")],
        );
    // Its layer gone too (as `discard_unpacked_layers` leaves it): nothing to unpack
    // from, unusable, and repaired there by a pull for the sandbox's runtime.
    ctr_k8s_ok(&n.t.socket(), &["content", "rm", chain.as_str()]);
    verify()
        .expect(1, "runtime.sandbox-image", "fail")
        .mentions("runtime.sandbox-image", &["incomplete", "missing layer"]);
    runtime(&cfg).expect(0, "runtime.sandbox-image", "pass");
    assert!(
        has_snapshot(&n, judged, &chain),
        "the repair unpacked it for {judged}"
    );
    assert_eq!(n.ctrd.restarts(), 0);
    n.kubelet_can_start_a_pod();
}
