//! A remote snapshotter (containerd's `[proxy_plugins.NAME] type = "snapshot"`, as stargz
//! or SOCI are set up) fetches layers itself: the guard names it and judges the sandbox
//! image there by its snapshot alone, never by layer blobs in the content store. The
//! remote snapshotter is real: testkit's `SnapshotProxy` serves containerd's Snapshots
//! service by forwarding to a second, real containerd's `native` snapshotter. CRI's
//! snapshotter is the proxy plugin; the image is pulled through CRI from a real registry
//! and unpacked through the proxy. On containerd 1.6, 1.7 and 2.1 (scripts/test runs this
//! file on each).

use testkit as support;

use support::cri::pull_image;
use support::node::{Node, TOOLS};
use support::runtime::{block_on, run_pod_sandbox, sha256, Registry};
use support::snapshot_proxy::SnapshotProxy;
use support::workload::{ctr_k8s, ctr_k8s_ok};
use support::{root_or_skip, Containerd, CriConfig, Guard, TempRoot};

/// The proxy plugin's name in the node's containerd config.
const REMOTE: &str = "lazy";
/// The backing containerd's snapshotter the proxy forwards to.
const BACKING: &str = "native";

/// The backing containerd's snapshot keys (namespace k8s.io) that end with `chain`:
/// containerd's metadata store names a backend snapshot `<namespace>/<id>/<key>`.
fn backing_keys(backing: &Containerd, chain: &str) -> Vec<String> {
    let args = ["snapshots", "--snapshotter", BACKING, "ls"];
    let listed = ctr_k8s_ok(&backing.socket, &args);
    let rows = listed.lines().skip(1); // the header
    let keys = rows.filter_map(|l| l.split_whitespace().next());
    keys.filter(|k| k.ends_with(chain))
        .map(String::from)
        .collect()
}

#[test]
fn a_remote_snapshotter_is_named_and_judged_by_its_snapshot_alone() {
    let Some(_root) = root_or_skip(&[TOOLS, &["docker-registry"]].concat()) else {
        return;
    };
    let reg = Registry::start();
    let image = format!("127.0.0.1:{}/guard/pause:remote", reg.port);
    let backing_tree = TempRoot::new();
    backing_tree.write_containerd_config_cri(&CriConfig::new());
    let backing = Containerd::start(&backing_tree);
    let proxy_socket = backing_tree.path().join("remote-snapshotter.sock");
    let proxy = SnapshotProxy::start(&backing.socket, &proxy_socket, BACKING, "k8s.io");
    let cri = CriConfig::new().remote_snapshotter(REMOTE, &proxy.socket);
    let n = Node::healthy_cri(TempRoot::new(), &image, cri);
    reg.push(&n.img, "guard/pause", "remote");
    block_on("CRI PullImage", pull_image(&n.t.socket(), &image)).expect("CRI pulls the image");
    // one layer: its diff id is the chain id, the key of the unpacked snapshot
    let chain = sha256(&n.img.layer);
    let keys = backing_keys(&backing, &chain);
    assert_eq!(keys.len(), 1, "unpacked through the proxy once: {keys:?}");
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| c.hold_timeout("10s"));
    let verify = || Guard::with_config(&cfg).run(&["--json", "verify"]);

    // The layer blob gone from the node's content store: a remote snapshotter's image
    // is judged by its snapshot, so still usable.
    ctr_k8s_ok(&n.t.socket(), &["content", "rm", &chain]);
    verify()
        .expect(0, "runtime.sandbox-image", "pass")
        .mentions(
            "runtime.sandbox-image",
            &[
                &format!("unpacked in the remote snapshotter {REMOTE}"),
                "1 layer blob(s) absent",
                &format!("{REMOTE} (plugins."),
            ],
        );

    // The snapshot gone where the remote snapshotter keeps it: not unpacked.
    let removed = ctr_k8s(
        &backing.socket,
        &["snapshots", "--snapshotter", BACKING, "rm", &keys[0]],
    );
    assert!(removed.status.success(), "ctr snapshots rm: {removed:?}");
    assert!(backing_keys(&backing, &chain).is_empty(), "ctr removed it");
    verify()
        .expect(1, "runtime.sandbox-image", "fail")
        .mentions(
            "runtime.sandbox-image",
            &[&format!("not unpacked for the remote {REMOTE} snapshotter")],
        );

    // The remote snapshotter gone: nothing can be judged there, and it is named.
    drop(proxy);
    verify()
        .expect(1, "runtime.sandbox-image", "fail")
        .mentions(
            "runtime.sandbox-image",
            &[
                &format!("the remote snapshotter {REMOTE} does not answer"),
                &proxy_socket.display().to_string(),
            ],
        );
    // why a FAIL and not "could not judge": no pod sandbox starts without it
    let started = run_pod_sandbox(&n.t.socket());
    assert!(started.is_err(), "a sandbox started: {started:?}");
    assert_eq!(n.ctrd.restarts(), 0);
}
