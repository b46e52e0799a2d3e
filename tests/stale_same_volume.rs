//! `runtime.stale` is told by the file, not the device: another directory of the same
//! volume bound over a running containerd's root, holding copies of its databases, is
//! stale, and, the volume being verified, restarted. Real components: Debian's containerd
//! on temp paths, a loop-mounted ext4 volume, the built `guard`. Root only.

use testkit as support;

use containerd_guard::checks::stale::facts::is_metadata_db;
use std::path::{Path, PathBuf};
use support::node::{Node, TOOLS};
use support::runtime::dead_port;
use support::{root_or_skip, Guard, Mount};

/// containerd's databases under `root`, as the stale detector names them
/// (`stale::facts::is_metadata_db`), relative to it.
fn databases(root: &Path) -> Vec<PathBuf> {
    let dirs = std::fs::read_dir(root).unwrap().flatten();
    let files = dirs.flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten());
    let relative = files.map(|f| f.path().strip_prefix(root).unwrap().to_path_buf());
    relative.filter(|rel| is_metadata_db(rel)).collect()
}

/// Another directory of the same volume bound over a running containerd's root, holding
/// copies of containerd's databases: the same device, another file. Stale, and, the
/// volume being verified (a mount point of the configured disk), restarted.
#[test]
fn another_directory_of_the_same_volume_over_the_root_is_stale_and_restarted() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:ino", dead_port()));
    n.import_image();
    let root = n.t.volume_path();
    let second = n.vol.device.mount(&n.t.path().join("second"), "");
    let other = second.target.join("other");
    let dbs = databases(&root);
    assert!(dbs.len() >= 2, "containerd's databases: {dbs:?}");
    for db in dbs {
        std::fs::create_dir_all(other.join(&db).parent().unwrap()).unwrap();
        std::fs::copy(root.join(&db), other.join(&db)).unwrap();
    }
    let _over = Mount::bind(&other, &root);
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| c.sandbox_pull(false));
    let verify = Guard::with_config(&cfg).run(&["--json", "verify"]);
    verify
        .expect(1, "runtime.stale", "fail")
        .mentions("runtime.stale", &["but that path is now"])
        .expect(1, "volume.mounted", "pass");
    // (the restarted containerd runs on the copies, whose content store is empty: the
    // node is not usable after, and that is not this test's concern)
    let repaired = Guard::with_config(&cfg).run(&["--json", "verify", "--repair"]);
    assert_eq!(
        repaired.status("remedy.restart"),
        "pass",
        "{}",
        repaired.dump()
    );
    assert_eq!(n.ctrd.restarts(), 1, "{}", repaired.dump());
}
