//! `volume.device` on btrfs, as root with real `mkfs.btrfs` loop devices. btrfs shows an
//! anonymous device number (`0:N`) in mountinfo, never the block device's, so the guard
//! matches a btrfs volume by the device that backs it: the one mountinfo's source names,
//! carrying the filesystem whose devices the kernel lists in `/sys/fs/btrfs/<fsid>/devices`.

use testkit as support;

use std::path::{Path, PathBuf};
use support::{root_or_skip, run, unique, FsKind, Guard, LoopVolume, Outcome, TempRoot};

const TOOLS: &[&str] = &["losetup", "mkfs.btrfs", "mount", "umount"];

fn config(t: &TempRoot, device: &str) -> PathBuf {
    t.write_guard_config_with(|c| {
        c.volume_device(device)
            .volume_fstypes(&["btrfs"])
            .volume_wait("300ms")
    })
}

/// `guard --json volume`, asserting the exit code and `volume.device`'s status.
#[track_caller]
fn device_status(cfg: &Path, code: i32, status: &str) -> Outcome {
    let o = Guard::with_config(cfg).volume_json();
    o.expect(code, "volume.device", status);
    o
}

fn all_pass(o: &Outcome) {
    for f in o.json.as_ref().unwrap()["findings"].as_array().unwrap() {
        assert_eq!(f["status"], "pass", "{f}\n{}", o.dump());
    }
}

#[test]
fn a_btrfs_volume_passes_volume_device_by_label_uuid_and_path() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let l = unique("cg", 8);
    let v = LoopVolume::new(&t.images(), FsKind::Btrfs, &l, &t.volume_path());
    let dev = v.device.path.display().to_string();
    for spec in [
        format!("LABEL={l}"),
        format!("UUID={}", v.uuid),
        dev.clone(),
    ] {
        let o = device_status(&config(&t, &spec), 0, "pass");
        o.mentions("volume.device", &[&spec, &dev]);
        all_pass(&o);
    }
}

#[test]
fn a_btrfs_subvolume_mounted_with_subvol_passes_volume_device() {
    let Some(_root) = root_or_skip(&[TOOLS, &["btrfs"]].concat()) else {
        return;
    };
    let t = TempRoot::new();
    let l = unique("cg", 8);
    let mut v = LoopVolume::unmounted(&t.images(), FsKind::Btrfs, &l, &[]);
    {
        let top = v.device.mount(&t.path().join("top"), "");
        run(
            "btrfs",
            &[
                "-q",
                "subvolume",
                "create",
                top.target.join("containerd").to_str().unwrap(),
            ],
        );
    }
    v.mount_at(&t.volume_path(), "subvol=containerd");
    let o = device_status(&config(&t, &format!("LABEL={l}")), 0, "pass");
    o.mentions("volume.device", &[&v.device.path.display().to_string()]);
    all_pass(&o);
}

#[test]
fn another_btrfs_device_mounted_there_fails_volume_device() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let (la, lb) = (unique("cg", 8), unique("cg", 8));
    let a = LoopVolume::unmounted(&t.images(), FsKind::Btrfs, &la, &[]);
    let b = LoopVolume::new(&t.images(), FsKind::Btrfs, &lb, &t.volume_path());
    let (dev_a, dev_b) = (
        a.device.path.display().to_string(),
        b.device.path.display().to_string(),
    );
    // The configured filesystem exists, but another one is mounted at containerd's root.
    let o = device_status(&config(&t, &format!("LABEL={la}")), 1, "fail");
    o.mentions("volume.device", &[&format!("LABEL={la}"), &dev_a, &dev_b]);
    let o = device_status(&config(&t, &dev_a), 1, "fail");
    o.mentions("volume.device", &[&dev_a, &dev_b]);
    // The mounted one, named by its device, passes.
    device_status(&config(&t, &dev_b), 0, "pass");
}
