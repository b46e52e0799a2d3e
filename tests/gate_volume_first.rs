//! The volume first: with the volume detached under a running containerd (an HA failover),
//! no command restarts containerd onto the root filesystem's directory or writes into it;
//! once the volume is mounted again, the same repair restarts containerd onto it. Real
//! components: Debian's containerd on temp paths, a loop-mounted ext4 volume, the built
//! `guard`. Root only.

use testkit as support;

use std::path::Path;
use support::node::{Node, TOOLS};
use support::runtime::dead_port;
use support::{root_or_skip, run, Guard};

/// Every entry under `dir` (not following links) with its size: what a write there
/// would change.
fn tree(dir: &Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let meta = e.path().symlink_metadata().unwrap();
            if meta.is_dir() {
                todo.push(e.path());
            }
            out.push((e.path().display().to_string(), meta.len()));
        }
    }
    out.sort();
    out
}

#[test]
fn a_detached_volume_is_mounted_first_and_only_then_containerd_is_restarted() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    // The sandbox image is not imported: every repairing run would restore it.
    let mut n = Node::with_other_image(&format!("127.0.0.1:{}/guard/pause:first", dead_port()));
    let before = n.content_with_other_image();
    let archive = n.oci_archive(false);
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_archives(&[&archive])
            .sandbox_pull(false)
            .hold_timeout("3s")
    });
    let root = n.t.volume_path();
    let pid = n.ctrd.pid();
    run("umount", &["-l", root.to_str().unwrap()]);
    drop(n.vol.mount.take()); // (detached: nothing left to unmount)
    let beneath = tree(&root);
    let guard = Guard::with_config(&cfg);
    for args in [
        &["--json", "verify"][..],
        &["--json", "verify", "--repair"],
        &["--json", "verify", "--repair", "--force"],
        &["--json", "runtime"],
        &["--json", "hygiene"],
    ] {
        let out = guard.run(args);
        let said = format!("guard {}: {}", args[1..].join(" "), out.dump());
        assert_eq!(out.code, 1, "{said}");
        assert_eq!(n.ctrd.pid(), pid, "containerd was restarted: {said}");
        assert_eq!(n.ctrd.restarts(), 0, "{said}");
        assert_eq!(
            tree(&root),
            beneath,
            "written under the root filesystem's directory: {said}"
        );
        let refused = "the volume is not mounted at";
        match args[1] {
            "verify" if args.len() == 2 => {
                let stale = out.finding_text("runtime.stale");
                assert!(stale.contains("first"), "{said}");
                assert!(!stale.contains("now mounted there"), "{said}");
            }
            "hygiene" => {
                out.mentions("remedy.restore-image", &["not restoring", refused]);
            }
            _ => {
                out.expect(1, "remedy.restart", "fail");
                out.mentions(
                    "remedy.restart",
                    &["not restarting containerd (stale)", refused],
                );
                out.mentions(
                    "remedy.restart",
                    &["a restart would start containerd on the root filesystem"],
                );
            }
        }
    }
    // The volume mounted again: the same repair restarts containerd onto it, once, and
    // restores the image there.
    n.vol.mount = Some(n.vol.device.mount(&root, ""));
    let out = guard.run(&["--json", "verify", "--repair"]);
    assert_eq!(out.code, 0, "{}", out.dump());
    assert_eq!(n.ctrd.restarts(), 1, "{}", out.dump());
    assert_ne!(n.ctrd.pid(), pid);
    out.expect(0, "remedy.restart", "pass");
    out.expect(0, "remedy.restore-image", "pass");
    before.assert_nothing_lost(&n.content());
}
