//! Self-test of the shared harness (tests/support): a loop volume mounts and cleans up, and
//! the real containerd starts on temp paths and is gone after drop.

mod support;

use support::*;

#[test]
fn loop_volume_mounts_and_cleans_up() {
    if !require_root(&["losetup", "mkfs.ext4", "mount", "umount"]) {
        return;
    }
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
    if !require_root(&["containerd", "runc"]) {
        return;
    }
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
