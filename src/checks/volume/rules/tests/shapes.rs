//! The volume's shapes beyond the TKGS worker: btrfs, hidden data, a bare directory, a
//! bind mount, tmpfs and overlay, read-only filesystems, a running containerd, later starts.

use super::*;

/// The TKGS worker with its volume on btrfs (a subvolume): mountinfo shows `0:45`.
fn on_btrfs(devices: Result<Vec<(&str, DevNum)>, &str>) -> VolumeFacts {
    let (_, mut f) = tkgs();
    let text = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
                29 1 0:45 /containerd /var/lib/containerd rw - btrfs /dev/sdb rw,subvol=/containerd\n";
    f.mounts = MountTable::parse(text).map(Into::into);
    f.btrfs = Some(
        devices
            .map(|d| BtrfsDevices {
                fsid: "5f0c3f5e-7b1d-4c6a-9d0e-123456789abc".into(),
                devices: d.into_iter().map(|(n, d)| (n.to_string(), d)).collect(),
            })
            .map_err(String::from),
    );
    f
}

#[test]
fn btrfs_passes_volume_device_only_when_the_configured_disk_backs_it() {
    let (s, _) = tkgs();
    let sdb = DevNum {
        major: 8,
        minor: 16,
    };
    let sdc = DevNum {
        major: 8,
        minor: 32,
    };
    let out = evaluate(
        &s,
        &on_btrfs(Ok(vec![("sdb", sdb)])),
        Phase::BeforeContainerd,
    );
    assert_eq!(status_of(&out, "volume.device"), Status::Pass, "{out:#?}");
    let out = evaluate(
        &s,
        &on_btrfs(Ok(vec![("sdc", sdc)])),
        Phase::BeforeContainerd,
    );
    assert_eq!(status_of(&out, "volume.device"), Status::Fail, "{out:#?}");
    let unknown = on_btrfs(Err("/sys/fs/btrfs/x/devices: No such file or directory"));
    let out = evaluate(&s, &unknown, Phase::BeforeContainerd);
    let device = out.iter().find(|f| f.id == "volume.device").unwrap();
    assert_eq!(device.status, Status::Fail, "{out:#?}");
    assert!(
        device.evidence.iter().any(|e| e.contains("No such file")),
        "{device:#?}"
    );
}

#[test]
fn hidden_data_is_a_warning_with_its_size() {
    let (s, mut f) = tkgs();
    f.hidden = Some(Ok(HiddenData {
        entries: 12,
        bytes: 3 << 30,
        truncated: false,
    }));
    let out = evaluate(&s, &f, Phase::BeforeContainerd);
    let h = out.iter().find(|x| x.id == "volume.hidden-data").unwrap();
    assert_eq!(h.status, Status::Warn);
    assert!(h.summary.contains("12 entries (3.0 GiB)"), "{}", h.summary);
    assert!(fails(&out).is_empty());
}

#[test]
fn bare_directory_on_root_fails_and_is_worth_waiting_for() {
    let (s, mut f) = tkgs();
    f.path = PathBuf::from("/var/lib/containerd-not-mounted");
    f.stats = None;
    f.write_probe = None;
    f.hidden = None;
    let out = evaluate(&s, &f, Phase::BeforeContainerd);
    let m = out.iter().find(|x| x.id == "volume.mounted").unwrap();
    assert_eq!(m.status, Status::Fail);
    assert!(
        m.evidence[0].contains("plain directory on /dev/sda1"),
        "{m:?}"
    );
    assert!(
        m.remedy
            .contains("systemctl status var-lib-containerd\\x2dnot\\x2dmounted.mount"),
        "{m:?}"
    );
    assert!(worth_waiting(&f));
    // A device that can never match is not worth waiting for.
    f.device = Some((
        DeviceSpec::Label("eph".into()),
        Lookup::Invalid {
            problem: "two".into(),
        },
    ));
    assert!(!worth_waiting(&f));
}

#[test]
fn bind_mount_of_a_root_directory_is_caught() {
    let (s, mut f) = tkgs();
    f.mounts = Ok(table("real-loop-bind-stacked.txt").into());
    f.device = None;
    let out = evaluate(&s, &f, Phase::BeforeContainerd);
    assert_eq!(status_of(&out, "volume.not-root"), Status::Fail);
    let nr = out.iter().find(|x| x.id == "volume.not-root").unwrap();
    assert!(
        nr.evidence[0].contains("directory /srv/containerd"),
        "{nr:?}"
    );
    assert_eq!(
        status_of(&out, "volume.device"),
        Status::Warn,
        "unset device is a warning"
    );
}

#[test]
fn tmpfs_and_overlay_fail_unless_allowed() {
    for (file, path, fstype) in [
        ("real-loop-bind-stacked.txt", "/mnt/stack", "tmpfs"),
        ("container-overlay-root.txt", "/", "overlay"),
    ] {
        let (mut s, mut f) = tkgs();
        f.mounts = Ok(table(file).into());
        f.path = PathBuf::from(path);
        f.device = None;
        let out = evaluate(&s, &f, Phase::BeforeContainerd);
        assert_eq!(status_of(&out, "volume.backing"), Status::Fail, "{fstype}");
        assert_eq!(status_of(&out, "volume.fstype"), Status::Fail, "{fstype}");
        s.allow = vec![fstype.into()];
        let out = evaluate(&s, &f, Phase::BeforeContainerd);
        assert_eq!(
            status_of(&out, "volume.backing"),
            Status::Warn,
            "{fstype} allowed"
        );
        assert_eq!(
            status_of(&out, "volume.fstype"),
            Status::Pass,
            "{fstype} allowed"
        );
    }
}

#[test]
fn read_only_and_tripped_filesystems_are_not_writable() {
    for path in ["/mnt/ro", "/mnt/remounted-ro", "/mnt/tab\there"] {
        let (s, mut f) = tkgs();
        f.mounts = Ok(table("real-loop-bind-stacked.txt").into());
        f.path = PathBuf::from(path);
        f.device = None;
        let out = evaluate(&s, &f, Phase::BeforeContainerd);
        assert_eq!(status_of(&out, "volume.writable"), Status::Fail, "{path}");
    }
}

#[test]
fn verify_tolerates_a_running_containerd() {
    let (s, mut f) = tkgs();
    f.containerd.listener = Listener::Accepts;
    let out = evaluate(&s, &f, Phase::Verify);
    assert_eq!(
        status_of(&out, "volume.containerd-not-started"),
        Status::Skip
    );
    assert!(fails(&out).is_empty());
}

#[test]
fn unreadable_mount_table_fails_closed() {
    let (s, mut f) = tkgs();
    f.mounts = Err("/proc/self/mountinfo: permission denied".into());
    let out = evaluate(&s, &f, Phase::BeforeContainerd);
    assert_eq!(fails(&out), vec!["volume.mounted"]);
}

#[test]
fn mount_unit_names_follow_systemd_escape() {
    assert_eq!(
        mount_unit_name(Path::new("/var/lib/containerd")),
        "var-lib-containerd.mount"
    );
    assert_eq!(
        mount_unit_name(Path::new("/mnt/eph disk")),
        "mnt-eph\\x20disk.mount"
    );
    assert_eq!(
        mount_unit_name(Path::new("/var/lib/containerd-x")),
        "var-lib-containerd\\x2dx.mount"
    );
    assert_eq!(mount_unit_name(Path::new("/")), "-.mount");
}

#[test]
fn a_later_start_only_warns_on_space_but_still_fails_on_the_volume_itself() {
    let (s, mut f) = tkgs();
    f.stats = Some(Ok(FsStats {
        free_bytes: 1 << 20,
        total_bytes: 1 << 30,
        free_inodes: 10,
        total_inodes: 200_000,
    }));
    let first = evaluate(&s, &f, Phase::BeforeContainerd);
    assert_eq!(fails(&first), ["volume.free-space", "volume.free-inodes"]);
    let later = evaluate(&s, &f, Phase::LaterStart);
    assert!(fails(&later).is_empty(), "{later:#?}");
    for id in ["volume.free-space", "volume.free-inodes"] {
        let w = later.iter().find(|x| x.id == id).unwrap();
        assert_eq!(w.status, Status::Warn, "{id}");
        assert!(
            w.evidence.iter().any(|e| e.contains("later start")),
            "{w:?}"
        );
    }
    // The volume itself is judged the same: the wrong filesystem type still holds containerd.
    let mut xfs_only = s.clone();
    xfs_only.fstypes = vec!["xfs".into()];
    assert_eq!(
        fails(&evaluate(&xfs_only, &f, Phase::LaterStart)),
        ["volume.fstype"]
    );
}
