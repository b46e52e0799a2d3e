//! The sandbox image while the node runs: removed, it is restored by hygiene without a
//! restart; present but unpinned, `verify --repair` pins it.
//!
//! The guard against the faults that break pods while a node runs, created for real
//! (testkit/src/hygiene.rs) on a real containerd with CRI, runc and kubelet's cgroupfs
//! layout. Each is found with its evidence and repaired by the guard (or left alone where it
//! must be); a healthy pod beside keeps its payload PID, containerd keeps its PID, nothing
//! restarts. Root only.
//!
//! The tests in each file run one at a time (`serial()`): a repairing guard reaps every
//! orphaned container cgroup on the host, including another test's on purpose; cargo runs
//! the test binaries one after another.

use testkit as support;

use support::suite::hygiene::{guard, guard_config_with, serial, shown, TOOLS};
use support::workload::{HygieneNode, PAUSE_IMAGE};
use support::{containerd_major_minor, root_or_skip, Guard};

/// Where the guard cannot read containerd's task bundles (its config names another state
/// directory than the running containerd's), it asks containerd instead: the containers
/// CRI did not make (`Containers.List`, filtered) and each container CRI does not vouch
/// for. The same leak is deleted and the same stranger left alone as in h06.
#[test]
fn h12_a_sandbox_image_removed_while_the_node_runs_is_restored_by_hygiene_without_a_restart() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    use support::cri::{image_pinned, remove_image};
    use support::runtime::{block_on, PauseImage};
    let _serial = serial();
    let n = HygieneNode::on_a_volume();
    // The registry (localhost:80) is unreachable, and pulls are off: only the archive can
    // bring the image back.
    let archive = PauseImage::new(PAUSE_IMAGE).write_oci(&n.t.path().join("pause.oci.tar"), false);
    let cfg = guard_config_with(&n, |c| c.sandbox_archives(&[&archive]).sandbox_pull(false));
    let containerd = n.ctrd.identity();
    guard(&cfg, &["hygiene"]).expect(0, "runtime.sandbox-image", "pass");

    // What kubelet's image GC or `crictl rmi` does.
    block_on("CRI RemoveImage", remove_image(&n.socket(), PAUSE_IMAGE))
        .unwrap_or_else(|e| panic!("RemoveImage {PAUSE_IMAGE}: {e}"));
    let gone = block_on("CRI ImageStatus", image_pinned(&n.socket(), PAUSE_IMAGE));
    assert_eq!(gone, Ok(None), "the sandbox image is gone");
    guard(&cfg, &["verify"]).expect(1, "runtime.sandbox-image", "fail");

    let out = guard(&cfg, &["hygiene"]);
    shown(
        &["hygiene"],
        &out,
        &["runtime.sandbox-image", "remedy.restore-image"],
    );
    out.expect(0, "runtime.sandbox-image", "pass")
        .expect(0, "remedy.restore-image", "pass");
    n.assert_never_restarted(containerd, &[&out]);
    // Pinned as containerd pins its own sandbox image, so kubelet's image GC leaves it
    // alone: CRI reports it from 1.7 on; 1.6 knows no pinning (the label is only a label).
    out.mentions(
        "remedy.restore-image",
        &[PAUSE_IMAGE, "io.cri-containerd.pinned=pinned"],
    );
    let back = block_on("CRI ImageStatus", image_pinned(&n.socket(), PAUSE_IMAGE));
    let pins = containerd_major_minor() >= (1, 7);
    assert_eq!(
        back,
        Ok(Some(pins)),
        "CRI knows the image again, pinned from 1.7 on"
    );
    // A real RunPodSandbox with the restored image (panics with CRI's error otherwise).
    n.pod("after-restore");
    let status = Guard::with_config(&cfg).run(&["status"]);
    assert!(
        history_line(
            &status.stdout,
            "import",
            &format!("imported {PAUSE_IMAGE} from")
        )
        .is_some(),
        "guard status records the import of {PAUSE_IMAGE}: {}",
        status.dump()
    );
    // the finding reads CRI: pinned from 1.7 on, and on 1.6 no pinning at all
    let pinned = if pins { "pass" } else { "skip" };
    guard(&cfg, &["verify"]).expect(0, "runtime.sandbox-pinned", pinned);
}

/// Removes `io.cri-containerd.pinned` from every image record whose target is `digest`
/// (`ctr images label REF KEY=` removes a label).
fn unpin_everywhere(n: &HygieneNode, digest: &str) {
    let ls = support::workload::ctr_k8s(&n.socket(), &["images", "ls"]);
    let listing = String::from_utf8_lossy(&ls.stdout).into_owned();
    let refs: Vec<&str> = listing
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some(digest))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(!refs.is_empty(), "no record of {digest} in\n{listing}");
    for r in refs {
        let unlabel = ["images", "label", r, "io.cri-containerd.pinned="];
        let out = support::workload::ctr_k8s(&n.socket(), &unlabel);
        assert!(out.status.success(), "unlabel {r}: {out:?}");
    }
}

/// A sandbox image without the pin label is reported unpinned by
/// a plain `verify`, whatever the version; `verify --repair` labels it as containerd
/// labels its own, and from then on CRI reports it pinned (1.7 and later) or the finding
/// says this containerd has no pinning (1.6).
#[test]
fn h13_repair_pins_a_present_but_unpinned_sandbox_image() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    use support::cri::image_pinned;
    use support::runtime::{block_on, PauseImage};
    let _serial = serial();
    let n = HygieneNode::on_a_volume();
    let cfg = guard_config_with(&n, |c| c.sandbox_pull(false));
    // containerd 1.7 and 2.1 label their configured sandbox image pinned themselves when
    // it is imported (its name and its sha256: id); to stand for one that is not (an
    // older 1.7, a label someone removed), the label is removed from every record. 1.6
    // never labels: nothing to remove.
    unpin_everywhere(&n, &PauseImage::new(PAUSE_IMAGE).manifest_digest());
    let before = block_on("CRI ImageStatus", image_pinned(&n.socket(), PAUSE_IMAGE));
    if containerd_major_minor() >= (2, 0) {
        // containerd 2 pins its configured sandbox image by its config (`pinned_images`),
        // label or not: nothing to repair
        assert_eq!(before, Ok(Some(true)), "containerd 2 pins it by config");
        let repair = guard(&cfg, &["verify", "--repair"]);
        repair.expect(0, "runtime.sandbox-pinned", "pass");
        assert!(
            !support::node::has_finding(&repair, "remedy.pin-image"),
            "{}",
            repair.dump()
        );
        return;
    }
    assert_eq!(before, Ok(Some(false)), "the image is unpinned");
    guard(&cfg, &["verify"])
        .expect(0, "runtime.sandbox-pinned", "warn")
        .mentions("runtime.sandbox-pinned", &["not pinned", "--repair"]);
    let dry = guard(&cfg, &["verify", "--repair", "--dry-run"]);
    dry.expect(0, "remedy.pin-image", "skip")
        .mentions("remedy.pin-image", &["would label"]);
    let still = block_on("CRI ImageStatus", image_pinned(&n.socket(), PAUSE_IMAGE));
    assert_eq!(still, Ok(Some(false)), "a dry run labels nothing");

    let pins = containerd_major_minor() >= (1, 7);
    let pinned = if pins { "pass" } else { "skip" };
    guard(&cfg, &["verify", "--repair"])
        .expect(0, "remedy.pin-image", "pass")
        .expect(0, "runtime.sandbox-pinned", pinned);
    let after = block_on("CRI ImageStatus", image_pinned(&n.socket(), PAUSE_IMAGE));
    assert_eq!(after, Ok(Some(pins)), "CRI reports the pin from 1.7 on");
    // once labelled, nothing more to do: the next repair does not label again
    let again = guard(&cfg, &["verify", "--repair"]);
    assert!(
        !support::node::has_finding(&again, "remedy.pin-image"),
        "{}",
        again.dump()
    );
    let status = Guard::with_config(&cfg).run(&["status"]);
    assert!(
        history_line(&status.stdout, "pin", &format!("labelled {PAUSE_IMAGE} ")).is_some(),
        "guard status records the pin of {PAUSE_IMAGE}: {}",
        status.dump()
    );
}

/// The line of `guard status`'s history for a remedy of `word` (the column after its
/// time) that says `said`: `  09:41:03 UTC (5m ago)  WORD  ITEM: message`.
fn history_line<'a>(status: &'a str, word: &str, said: &str) -> Option<&'a str> {
    status.lines().find(|l| {
        let after_time = l.split_once(" ago)  ").map(|(_, rest)| rest);
        let named = after_time.and_then(|rest| rest.split_whitespace().next());
        named == Some(word) && l.contains(said)
    })
}
