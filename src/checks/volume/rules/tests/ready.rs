//! [`unverified`]: what a remedy that starts containerd or writes into it must know of the
//! volume, for each shape the fault matrix has (docs/faults.md).

use super::*;

/// The TKGS worker, its volume detached under it: containerd's root is a plain directory.
fn detached(f: &mut VolumeFacts, text: &str) {
    f.mounts = MountTable::parse(text).map(Into::into);
    f.stats = None;
    f.write_probe = None;
    f.hidden = None;
}

const ROOT_ONLY: &str = "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n";

#[test]
fn the_verified_volume_allows_every_remedy() {
    let (s, f) = tkgs();
    assert_eq!(unverified(&s, &f), None);
}

#[test]
fn a_running_containerd_is_no_reason_to_refuse_its_restart() {
    let (s, mut f) = tkgs();
    f.containerd.listener = Listener::Accepts;
    f.containerd.processes = vec![(42, "/usr/bin/containerd".into())];
    assert_eq!(unverified(&s, &f), None);
}

#[test]
fn a_full_volume_only_warns_as_containerds_own_later_start_does() {
    let (s, mut f) = tkgs();
    f.stats = Some(Ok(FsStats {
        free_bytes: 1 << 20,
        total_bytes: 1 << 30,
        free_inodes: 10,
        total_inodes: 200_000,
    }));
    assert_eq!(unverified(&s, &f), None);
}

#[test]
fn a_detached_volume_names_the_root_filesystem_as_where_containerd_would_land() {
    let (s, mut f) = tkgs();
    detached(&mut f, ROOT_ONLY);
    let u = unverified(&s, &f).expect("refused");
    assert_eq!(
        u.condition,
        "the volume is not mounted at /var/lib/containerd"
    );
    assert_eq!(u.lands_on, "the root filesystem");
    assert_eq!(
        u.restart_refusal(),
        "the volume is not mounted at /var/lib/containerd: a restart would start containerd \
         on the root filesystem"
    );
    assert!(
        u.fix
            .starts_with("mount the volume at /var/lib/containerd first"),
        "{}",
        u.fix
    );
    assert!(
        u.fix.ends_with("then run `guard verify --repair`"),
        "{}",
        u.fix
    );
    assert!(!u.fix.contains("now mounted"), "{}", u.fix);
    assert_eq!(
        u.failed.first().map(String::as_str),
        Some("volume.mounted: /var/lib/containerd is not a mount point"),
        "{u:#?}"
    );
}

#[test]
fn a_detached_volume_under_a_separate_var_names_that_filesystem() {
    let (s, mut f) = tkgs();
    detached(
        &mut f,
        "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n2 1 8:2 / /var rw - ext4 /dev/sda2 rw\n",
    );
    let u = unverified(&s, &f).expect("refused");
    assert_eq!(u.lands_on, "the filesystem mounted at /var (/dev/sda2)");
}

#[test]
fn the_wrong_disk_mounted_there_is_refused_with_its_failed_check() {
    let (s, mut f) = tkgs();
    f.device = another_disk();
    let u = unverified(&s, &f).expect("refused");
    assert!(
        u.condition
            .starts_with("/var/lib/containerd is not the verified volume (volume.device: "),
        "{}",
        u.condition
    );
    assert_eq!(u.lands_on, "a filesystem containerd's pre-start refuses");
    assert!(u.fix.starts_with("fix the volume first"), "{}", u.fix);
}

#[test]
fn a_bind_mount_of_the_root_filesystem_is_refused_as_the_root_device() {
    let (mut s, mut f) = tkgs();
    s.device = None;
    f.device = None;
    f.mounts = MountTable::parse(
        "1 0 8:1 / / rw - ext4 /dev/sda1 rw\n\
         2 1 8:1 /srv/cd /var/lib/containerd rw - ext4 /dev/sda1 rw\n",
    )
    .map(Into::into);
    let u = unverified(&s, &f).expect("refused");
    assert_eq!(u.lands_on, "the root filesystem's device");
    assert!(
        u.failed.iter().any(|l| l.starts_with("volume.not-root: ")),
        "{u:#?}"
    );
}

#[test]
fn an_unreadable_mount_table_refuses() {
    let (s, mut f) = tkgs();
    f.mounts = Err("/proc/self/mountinfo: permission denied".into());
    let u = unverified(&s, &f).expect("refused");
    assert_eq!(u.lands_on, "whatever filesystem holds that directory");
}
