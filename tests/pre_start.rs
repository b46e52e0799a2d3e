//! `guard volume --pre-start`, containerd's `ExecStartPre=`, against real components: a
//! loop-mounted ext4 volume, Debian's real containerd, real mounts. The first start of a
//! boot runs phase 1 in full; once containerd has run this boot (its state directory
//! exists), a start gets the quick check: it waits at most 10 s, never mounts, and low
//! space only warns. From the initrd (`--sysroot`) nothing is recorded, and a volume under
//! a `/var` the OS mounts after switch-root is left to the OS.

use testkit as support;

use containerd_guard::host::mountinfo::MountTable;
use containerd_guard::phases::volume::LATER_START_WAIT;
use std::path::Path;
use std::time::Duration;
use support::{
    root_or_skip, unique, Containerd, FsKind, Guard, LoopVolume, Mount, Outcome, TempRoot,
};

const TOOLS: &[&str] = &["losetup", "mkfs.ext4", "mount", "umount", "containerd"];

fn mounted_at(p: &Path) -> bool {
    let table = MountTable::read(Path::new("/proc/self/mountinfo")).expect("mountinfo");
    table.at(p).is_some()
}

/// Unmounts what the guard mounted (the harness tracks only its own mounts).
fn unmount(p: &Path) {
    drop(Mount {
        target: p.to_path_buf(),
    });
}

fn pre_start(cfg: &Path) -> Outcome {
    Guard::with_config(cfg).run(&["--json", "volume", "--pre-start"])
}

/// containerd has run this boot: a real containerd started and stopped on the tree, so its
/// state directory is there (as on a node where it ran, crashed or was restarted).
fn containerd_ran(t: &TempRoot) {
    let mut c = Containerd::start(t);
    c.stop();
    assert!(
        t.state_path().is_dir(),
        "containerd made no state directory"
    );
}

/// The first start of a boot: no marker, no state directory of containerd's.
fn first_start_of_a_boot(t: &TempRoot) {
    let _ = std::fs::remove_dir_all(t.state_path());
    let _ = std::fs::remove_file(t.guard_state_dir().join("volume.ok"));
}

#[test]
fn after_an_ha_failover_a_later_start_fails_within_the_quick_wait_and_never_mounts() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let l = unique("cg", 8);
    let mut vol = LoopVolume::unmounted(&t.images(), FsKind::Ext4, &l, &[]);
    let cfg = t.write_guard_config_with(|c| {
        c.volume_device(&format!("LABEL={l}"))
            .volume_wait("120s")
            .volume_mount(true)
    });
    // The boot's first start: phase 1 in full, which mounts the volume itself.
    first_start_of_a_boot(&t);
    let first = pre_start(&cfg);
    first.expect(0, "volume.mount", "pass");
    first.expect(0, "volume.mounted", "pass");
    assert!(first.stderr.contains("phase 1 in full"), "{}", first.dump());
    assert!(mounted_at(&t.volume_path()), "{}", first.dump());
    containerd_ran(&t);
    // The failover takes the disk's mount away; containerd's restart must not run on the
    // directory beneath, nor wait out [volume] wait, nor mount anything.
    unmount(&t.volume_path());
    let later = pre_start(&cfg);
    later.expect(1, "volume.mounted", "fail");
    assert!(
        later.stderr.contains("quick check before a later start"),
        "{}",
        later.dump()
    );
    // It waits out the quick wait for the mount (not less: a disk that is being
    // re-attached gets its chance), then fails, long before [volume] wait (120 s); the
    // margin is for a loaded 2-core machine.
    let quick = LATER_START_WAIT;
    assert!(
        later.elapsed >= quick && later.elapsed < quick + Duration::from_secs(10),
        "a later start waits {quick:?}, not less and not [volume] wait (120 s): {}",
        later.dump()
    );
    assert!(
        !mounted_at(&t.volume_path()),
        "a later start never mounts:\n{}",
        later.dump()
    );
    assert!(
        !t.guard_state_dir().join("volume.ok").exists(),
        "{}",
        later.dump()
    );
    let record = std::fs::read_to_string(t.guard_state_dir().join("volume.json")).unwrap();
    assert!(
        record.contains("volume.mounted"),
        "guard status must say why: {record}"
    );
    // The disk is back: the next start (containerd's Restart=) passes.
    vol.mount_at(&t.volume_path(), "");
    pre_start(&cfg).expect(0, "volume.mounted", "pass");
}

#[test]
fn a_volume_that_filled_while_the_node_ran_only_warns_on_a_later_start() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let l = unique("cg", 8);
    let _vol = LoopVolume::new(&t.images(), FsKind::Ext4, &l, &t.volume_path());
    let cfg = t.write_guard_config_with(|c| {
        c.volume_device(&format!("LABEL={l}"))
            .volume_wait("2s")
            .volume_min_free("100GiB")
    });
    // At the first start of a boot the threshold holds containerd back...
    first_start_of_a_boot(&t);
    pre_start(&cfg).expect(1, "volume.free-space", "fail");
    // ...once containerd has run, a restart (its package upgrade, a crash) must not turn a
    // filling disk into an outage.
    containerd_ran(&t);
    let later = pre_start(&cfg);
    later
        .expect(0, "volume.free-space", "warn")
        .mentions("volume.free-space", &["later start"]);
    later.expect(0, "volume.device", "pass");
    later.expect(0, "volume.writable", "pass");
    assert!(
        t.guard_state_dir().join("volume.ok").exists(),
        "{}",
        later.dump()
    );
}

#[test]
fn pre_start_typed_by_hand_on_a_live_node_writes_nothing() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let l = unique("cg", 8);
    let _vol = LoopVolume::new(&t.images(), FsKind::Ext4, &l, &t.volume_path());
    let cfg =
        t.write_guard_config_with(|c| c.volume_device(&format!("LABEL={l}")).volume_wait("2s"));
    // A node where the guard was installed while containerd ran: no marker, no record.
    let c = Containerd::start(&t);
    let out = pre_start(&cfg);
    out.expect(1, "volume.containerd-not-started", "fail")
        .mentions(
            "volume.containerd-not-started",
            &[
                "guard verify",
                "nothing was written",
                &format!("pid {}", c.pid()),
            ],
        );
    for f in ["volume.ok", "volume.json"] {
        assert!(
            !t.guard_state_dir().join(f).exists(),
            "{f} written:\n{}",
            out.dump()
        );
    }
}

#[test]
fn installed_on_a_running_node_a_restart_warns_until_the_volume_passed_once_then_holds() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let l = unique("cg", 8);
    let mut vol = LoopVolume::new(&t.images(), FsKind::Ext4, &l, &t.volume_path());
    // containerd ran this boot without the guard; the config names a disk this machine
    // lacks (a wrong fragment, or an image build VM with no ephemeral disk).
    containerd_ran(&t);
    let missing = unique("cgx", 8);
    let wrong = t.write_guard_config_with(|c| {
        c.volume_device(&format!("LABEL={missing}"))
            .volume_wait("2s")
    });
    for restart in 1..=2 {
        let out = pre_start(&wrong);
        out.expect(0, "volume.device", "warn").mentions(
            "volume.device",
            &[&missing, "not holding containerd", "without the guard"],
        );
        assert!(
            out.stderr.contains("only warns"),
            "restart {restart}:\n{}",
            out.dump()
        );
        for f in ["volume.ok", "volume.json"] {
            assert!(
                !t.guard_state_dir().join(f).exists(),
                "restart {restart}: {f}\n{}",
                out.dump()
            );
        }
    }
    // The right config: the first pass is the boot's baseline...
    let right =
        t.write_guard_config_with(|c| c.volume_device(&format!("LABEL={l}")).volume_wait("2s"));
    pre_start(&right).expect(0, "volume.device", "pass");
    assert!(t.guard_state_dir().join("volume.json").exists());
    // ...and from then on a failure holds containerd (an HA failover after the install).
    drop(vol.mount.take());
    pre_start(&right).expect(1, "volume.mounted", "fail");
}

/// An OS tree below `sysroot` as the initrd sees it: containerd's config at its
/// /etc/containerd/config.toml (root /var/lib/containerd), the guard's config naming it,
/// and `fstab` as its /etc/fstab.
fn initrd_tree(t: &TempRoot, label: &str, fstab: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let sysroot = t.path().join("sysroot");
    for d in ["etc/containerd", "var/lib/containerd"] {
        std::fs::create_dir_all(sysroot.join(d)).unwrap();
    }
    std::fs::write(
        sysroot.join("etc/containerd/config.toml"),
        "version = 2\nroot = \"/var/lib/containerd\"\nstate = \"/run/containerd\"\n",
    )
    .unwrap();
    std::fs::write(sysroot.join("etc/fstab"), fstab).unwrap();
    let cfg = t.write_guard_config_with(|c| {
        c.containerd_config("/etc/containerd/config.toml")
            .volume_device(&format!("LABEL={label}"))
            .volume_wait("2s")
            .volume_mount(true)
    });
    (sysroot, cfg)
}

fn initrd_volume(sysroot: &Path, cfg: &Path) -> Outcome {
    Guard::with_config(cfg)
        .arg("--sysroot")
        .arg(sysroot.display().to_string())
        .run(&["--json", "volume"])
}

#[test]
fn the_initrd_leaves_a_volume_under_a_later_var_to_the_os_and_records_nothing() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let l = unique("cg", 8);
    let vol = LoopVolume::unmounted(&t.images(), FsKind::Ext4, &l, &[]);
    let fstab = format!(
        "LABEL=vmroot / ext4 defaults 0 1\nLABEL=vmvar /var ext4 defaults 0 2\n\
                         LABEL={l} /var/lib/containerd ext4 nofail 0 2\n"
    );
    let (sysroot, cfg) = initrd_tree(&t, &l, &fstab);
    let target = sysroot.join("var/lib/containerd");
    // /var is the OS's to mount after switch-root: mounting now would be hidden under it.
    let out = initrd_volume(&sysroot, &cfg);
    out.expect(0, "volume.mounted", "skip").mentions(
        "volume.mounted",
        &["left to the OS", "/var", "x-initrd.mount"],
    );
    assert!(
        !mounted_at(&target),
        "mounted under a /var that comes later:\n{}",
        out.dump()
    );
    // With /var mounted in the initrd (x-initrd.mount), the volume lands on it.
    let var = Mount::fs("tmpfs", "tmpfs", &sysroot.join("var"), "");
    std::fs::create_dir_all(&target).unwrap();
    let out = initrd_volume(&sysroot, &cfg);
    let mounted = Mount {
        target: target.clone(),
    };
    out.expect(0, "volume.mount", "pass");
    out.expect(0, "volume.device", "pass");
    assert!(mounted_at(&target), "{}", out.dump());
    // Neither run left anything in /run/containerd-guard, which survives switch-root.
    for f in ["volume.ok", "volume.json"] {
        assert!(
            !t.guard_state_dir().join(f).exists(),
            "{f} written:\n{}",
            out.dump()
        );
    }
    drop(mounted);
    drop(var);
    drop(vol);
}
