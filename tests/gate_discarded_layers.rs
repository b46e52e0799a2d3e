//! containerd's own settings decide what a healthy sandbox image is. With
//! `discard_unpacked_layers = true` (EKS nodeadm's default) containerd deletes an image's
//! layer blobs once it has unpacked them: the manifest, the config and the snapshot stay,
//! pods start. The guard reads the setting from containerd's config and judges such an
//! image by its manifest, config and snapshot: usable, the absent layers said, nothing
//! restored, imported or pulled. Without the setting, absent layers still fail. The image
//! is pulled through CRI, as kubelet pulls it, from a real registry; on containerd 1.6,
//! 1.7 and 2.1 (scripts/test runs this file on each).

use testkit as support;

use std::path::Path;
use std::time::Duration;
use support::cri::pull_image;
use support::node::{has_finding, runtime, Node, TOOLS};
use support::runtime::{block_on, sha256, Registry};
use support::{poll_until, root_or_skip, ContentSnapshot, CriConfig, Guard, TempRoot};

/// The layer blob of the node's pause image is in its content store.
fn has_layer(n: &Node, root: &Path) -> bool {
    let layer = sha256(&n.img.layer);
    ContentSnapshot::take(root).has_blob(layer.trim_start_matches("sha256:"))
}

#[test]
fn an_image_whose_layers_containerd_discarded_after_unpacking_is_usable_and_left_alone() {
    let Some(_root) = root_or_skip(&[TOOLS, &["docker-registry"]].concat()) else {
        return;
    };
    let reg = Registry::start();
    let image = format!("127.0.0.1:{}/guard/pause:discard", reg.port);
    let discarding = CriConfig::new().discard_unpacked_layers(true);
    let n = Node::healthy_cri(TempRoot::new(), &image, discarding);
    reg.push(&n.img, "guard/pause", "discard");
    block_on("CRI PullImage", pull_image(&n.t.socket(), &image)).expect("CRI pulls the image");
    let root = n.t.volume_path();
    // containerd's garbage collection drops the layer once the pull's lease is gone
    poll_until(
        "containerd to discard the unpacked layer",
        Duration::from_secs(30),
        || (!has_layer(&n, &root)).then_some(()),
    );
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| c.sandbox_pull(true));
    let before = ContentSnapshot::take(&root);

    let verify = Guard::with_config(&cfg).run(&["--json", "verify"]);
    verify.expect(0, "runtime.sandbox-image", "pass").mentions(
        "runtime.sandbox-image",
        &["1 layer blob(s) absent", "discard_unpacked_layers = true"],
    );
    let gate = runtime(&cfg);
    gate.expect(0, "runtime.sandbox-image", "pass");
    for remedy in ["remedy.restore-image", "remedy.pull"] {
        assert!(!has_finding(&gate, remedy), "no {remedy}:\n{}", gate.dump());
    }
    let after = ContentSnapshot::take(&root);
    assert_eq!(
        before, after,
        "the content store and the images are unchanged"
    );
    assert!(
        !has_layer(&n, &root),
        "nothing brought the discarded layer back"
    );
    assert_eq!(n.ctrd.restarts(), 0);
    n.kubelet_can_start_a_pod();

    // The same content without the setting: an absent layer is a broken image.
    n.ctrd.stop();
    let keeping = CriConfig::new().discard_unpacked_layers(false);
    n.t.write_containerd_config_cri(&keeping.sandbox_image(&image));
    n.ctrd.restart_by_hand();
    let verify = Guard::with_config(&cfg).run(&["--json", "verify"]);
    verify
        .expect(1, "runtime.sandbox-image", "fail")
        .mentions("runtime.sandbox-image", &["incomplete", "missing layer"]);
}
