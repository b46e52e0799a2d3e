//! Table tests of the phase-1 rules on mount tables copied from real machines
//! (`tests/fixtures/mountinfo/`).

use super::*;
use crate::checks::volume::facts::{ContainerdSeen, FsStats, HiddenData, VolumeFacts};
use crate::config::units::Size;
use crate::config::{DeviceSpec, Settings};
use crate::host::blockdev::BtrfsDevices;
use crate::host::mountinfo::{DevNum, MountTable};
use crate::report::{status_of, Status};
use std::path::{Path, PathBuf};

mod ready;
mod shapes;

fn table(name: &str) -> MountTable {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mountinfo")
        .join(name);
    MountTable::read(&p).unwrap()
}

/// A TKGS worker: /dev/sdb (8:16) at /var/lib/containerd, label "eph" configured.
fn tkgs() -> (VolumeSettings, VolumeFacts) {
    let mut settings = Settings::default().volume;
    settings.device = Some(DeviceSpec::Label("eph".into()));
    settings.min_free = Size::of_bytes(1 << 30);
    settings.min_free_inodes = 1000;
    let facts = VolumeFacts {
        path: PathBuf::from("/var/lib/containerd"),
        missing: false,
        mounts: Ok(table("tkgs-worker.txt").into()),
        device: Some((
            DeviceSpec::Label("eph".into()),
            Lookup::Found {
                dev: DevNum {
                    major: 8,
                    minor: 16,
                },
                node: "/dev/disk/by-label/eph".into(),
                how: "udev link".into(),
            },
        )),
        btrfs: None,
        stats: Some(Ok(FsStats {
            free_bytes: 10 << 30,
            total_bytes: 20 << 30,
            free_inodes: 100_000,
            total_inodes: 200_000,
        })),
        write_probe: Some(Ok(())),
        kubelet: None,
        hidden: Some(Ok(HiddenData {
            entries: 0,
            bytes: 0,
            truncated: false,
        })),
        containerd: ContainerdSeen {
            listener: Listener::Absent,
            socket: "/run/containerd/containerd.sock".into(),
            processes: vec![],
            not_counted: vec![],
        },
    };
    (settings, facts)
}

/// "eph" found on /dev/sdc (8:32), while /dev/sdb (8:16) is mounted: the wrong disk.
fn another_disk() -> Option<(DeviceSpec, Lookup)> {
    let dev = DevNum {
        major: 8,
        minor: 32,
    };
    let how = "x".into();
    Some((
        DeviceSpec::Label("eph".into()),
        Lookup::Found {
            dev,
            node: "/dev/sdc".into(),
            how,
        },
    ))
}

fn fails(findings: &[Finding]) -> Vec<&str> {
    findings
        .iter()
        .filter(|f| f.status == Status::Fail)
        .map(|f| f.id.as_str())
        .collect()
}

#[test]
fn healthy_tkgs_worker_passes_every_check() {
    let (s, f) = tkgs();
    let out = evaluate(&s, &f, Phase::BeforeContainerd);
    assert!(fails(&out).is_empty(), "{out:#?}");
    for id in [
        "volume.mounted",
        "volume.device",
        "volume.fstype",
        "volume.not-root",
        "volume.backing",
        "volume.writable",
        "volume.free-space",
        "volume.free-inodes",
        "volume.hidden-data",
        "volume.containerd-not-started",
    ] {
        assert_eq!(status_of(&out, id), Status::Pass, "{id}");
    }
    assert!(!worth_waiting(&f));
}

#[test]
fn each_single_fault_fails_exactly_its_check() {
    type Mutate = fn(&mut VolumeSettings, &mut VolumeFacts);
    let cases: &[(&str, Mutate, &[&str])] = &[
        (
            "wrong device",
            |_, f| f.device = another_disk(),
            &["volume.device"],
        ),
        (
            "device absent",
            |_, f| {
                f.device = Some((
                    DeviceSpec::Label("eph".into()),
                    Lookup::Absent {
                        looked: "nothing".into(),
                    },
                ))
            },
            &["volume.device"],
        ),
        (
            "duplicate label",
            |_, f| {
                f.device = Some((
                    DeviceSpec::Label("eph".into()),
                    Lookup::Invalid {
                        problem: "two".into(),
                    },
                ))
            },
            &["volume.device"],
        ),
        (
            "fstype not allowed",
            |s, _| s.fstypes = vec!["xfs".into()],
            &["volume.fstype"],
        ),
        (
            "too little space",
            |_, f| {
                f.stats = Some(Ok(FsStats {
                    free_bytes: 1 << 20,
                    total_bytes: 1 << 30,
                    free_inodes: 100_000,
                    total_inodes: 200_000,
                }))
            },
            &["volume.free-space"],
        ),
        (
            "too few inodes",
            |_, f| {
                f.stats = Some(Ok(FsStats {
                    free_bytes: 10 << 30,
                    total_bytes: 20 << 30,
                    free_inodes: 10,
                    total_inodes: 200_000,
                }))
            },
            &["volume.free-inodes"],
        ),
        (
            "write probe fails",
            |_, f| f.write_probe = Some(Err("EIO".into())),
            &["volume.writable"],
        ),
        (
            "containerd already serving",
            |_, f| f.containerd.listener = Listener::Accepts,
            &["volume.containerd-not-started"],
        ),
        (
            "containerd process",
            |_, f| f.containerd.processes = vec![(42, "/usr/bin/containerd".into())],
            &["volume.containerd-not-started"],
        ),
    ];
    for (name, mutate, want) in cases {
        let (mut s, mut f) = tkgs();
        mutate(&mut s, &mut f);
        let out = evaluate(&s, &f, Phase::BeforeContainerd);
        assert_eq!(&fails(&out), want, "case {name}: {out:#?}");
        for fail in out.iter().filter(|x| x.status == Status::Fail) {
            assert!(
                !fail.remedy.is_empty() || fail.id == "volume.free-space",
                "case {name}: {} has no remedy",
                fail.id
            );
        }
    }
}

#[test]
fn verify_warns_on_space_near_kubelets_image_threshold_and_only_there() {
    use crate::host::kubelet::parse;
    use crate::report::Status;
    let (settings, mut facts) = tkgs();
    // 10 of 20 GiB free (50%), inodes 50%: far from the defaults (15%, 5%)
    facts.kubelet = Some(Ok(Some(parse("kind: KubeletConfiguration\n").unwrap())));
    let status = |f: &[Finding], id: &str| f.iter().find(|f| f.id == id).unwrap().status;
    let far = evaluate(&settings, &facts, Phase::Verify);
    assert_eq!(status(&far, "volume.free-space"), Status::Pass);
    // kubelet evicts at 48%: within the default 5 points
    let near = "evictionHard:\n  imagefs.available: \"48%\"\n  imagefs.inodesFree: 5%\n";
    facts.kubelet = Some(Ok(Some(parse(near).unwrap())));
    let f = evaluate(&settings, &facts, Phase::Verify);
    assert_eq!(status(&f, "volume.free-space"), Status::Warn, "{f:?}");
    assert_eq!(status(&f, "volume.free-inodes"), Status::Pass);
    let warned = f.iter().find(|f| f.id == "volume.free-space").unwrap();
    assert!(
        warned.evidence[0].contains("imagefs.available<48% (evictionHard"),
        "{warned:?}"
    );
    // phase 1 before containerd never reads it, and a fail stays a fail
    let before = evaluate(&settings, &facts, Phase::BeforeContainerd);
    assert_eq!(status(&before, "volume.free-space"), Status::Pass);
    let mut full = settings.clone();
    full.min_free = Size::of_bytes(15 << 30);
    let f = evaluate(&full, &facts, Phase::Verify);
    assert_eq!(status(&f, "volume.free-space"), Status::Fail);
}
