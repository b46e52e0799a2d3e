//! The volume is accepted when it is the one configured: ext4 and xfs loop devices by
//! label, UUID, path, PARTUUID and PARTLABEL on GPT, a device that appears within the
//! wait, tmpfs when allowed, and enough free space.
//!
//! `guard volume` (phase 1) against real components, as root. Each test checks the exit
//! code, the finding's id and status in `--json`, and that the table a person reads names
//! the thing at fault. Every test builds its own tree ([`TempRoot`]): its own containerd
//! config whose `root` is the volume path, and its own guard config naming that file via
//! `[containerd] config`.

use testkit as support;

use std::os::unix::process::CommandExt;
use std::time::Duration;
use support::suite::volume::{check, label, SHORT_WAIT, TOOLS};
use support::{
    random_uuid, root_or_skip, unique, which, FsKind, Guard, Image, LoopDevice, LoopVolume, Mount,
    Outcome, TempRoot,
};

fn all_pass(o: &Outcome) {
    for f in o.json.as_ref().unwrap()["findings"].as_array().unwrap() {
        assert!(
            f["status"] == "pass",
            "expected every finding to pass:\n{}",
            o.dump()
        );
    }
}

// ---- healthy volumes --------------------------------------------------------------------

#[test]
fn healthy_ext4_by_label_passes() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let l = label();
    let _v = LoopVolume::new(&t.images(), FsKind::Ext4, &l, &t.volume_path());
    let cfg = t.write_guard_config_with(|c| {
        c.volume_device(&format!("LABEL={l}"))
            .volume_wait(SHORT_WAIT)
    });
    let o = check(&cfg, 0, "volume.device", "pass", &[&format!("LABEL={l}")]);
    all_pass(&o);
    o.expect(0, "volume.mounted", "pass")
        .mentions("volume.mounted", &[&t.volume_path().display().to_string()]);
    // The outcome is left for containerd's unit and `guard status`, in the configured dir.
    let state = t.guard_state_dir();
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let marker = std::fs::read_to_string(state.join("volume.ok")).expect("volume.ok written");
    assert_eq!(marker.trim(), boot_id.trim());
    let status: serde_json::Value =
        serde_json::from_slice(&std::fs::read(state.join("volume.json")).unwrap()).unwrap();
    assert_eq!(status["verdict"], "usable");
}

#[test]
fn healthy_ext4_by_uuid_passes() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let v = LoopVolume::new(&t.images(), FsKind::Ext4, &label(), &t.volume_path());
    // Upper case in the config: UUIDs compare case-insensitively.
    let cfg = t.write_guard_config_with(|c| {
        c.volume_device(&format!("UUID={}", v.uuid.to_uppercase()))
            .volume_wait(SHORT_WAIT)
    });
    let o = check(&cfg, 0, "volume.device", "pass", &[&v.uuid]);
    all_pass(&o);
}

#[test]
fn healthy_xfs_passes() {
    let Some(_root) = root_or_skip(&[TOOLS, &["mkfs.xfs"]].concat()) else {
        return;
    };
    let t = TempRoot::new();
    let l = label();
    let _v = LoopVolume::new(&t.images(), FsKind::Xfs, &l, &t.volume_path());
    let cfg = t.write_guard_config_with(|c| {
        c.volume_device(&format!("LABEL={l}"))
            .volume_wait(SHORT_WAIT)
    });
    let o = check(&cfg, 0, "volume.fstype", "pass", &["xfs"]);
    o.expect(0, "volume.device", "pass");
    all_pass(&o);
}

#[test]
fn device_path_form_passes() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let v = LoopVolume::new(&t.images(), FsKind::Ext4, &label(), &t.volume_path());
    let dev = v.device.path.display().to_string();
    let cfg = t.write_guard_config_with(|c| c.volume_device(&dev).volume_wait(SHORT_WAIT));
    let o = check(&cfg, 0, "volume.device", "pass", &[&dev]);
    o.mentions("volume.device", &[&v.device.devnum()]);
}

#[test]
fn partuuid_and_partlabel_on_gpt_loop_device_pass() {
    let Some(_root) = root_or_skip(&[TOOLS, &["sfdisk"]].concat()) else {
        return;
    };
    let t = TempRoot::new();
    let img = Image::sparse(t.images().join("gpt.img"), 96 << 20);
    let partuuid = random_uuid();
    let partlabel = unique("cgpart-", 8);
    let script = format!(
        "label: gpt\nstart=2048, size=65536, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, \
         uuid={partuuid}, name=\"{partlabel}\"\n"
    );
    let mut child = std::process::Command::new(which("sfdisk").unwrap())
        .args(["--quiet", img.path.to_str().unwrap()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
    }
    let status = support::bounded::wait(child, "sfdisk", support::bounded::COMMAND_DEADLINE);
    assert!(status.success(), "sfdisk failed");
    let lo = LoopDevice::attach(&img.path, true);
    let part = lo.partition(1);
    support::mounts::mkfs(&part, FsKind::Ext4, &label(), None, &[]);
    let _m = Mount::device(&part, &t.volume_path(), "");
    for spec in [
        format!("PARTUUID={}", partuuid.to_uppercase()),
        format!("PARTLABEL={partlabel}"),
    ] {
        let cfg = t.write_guard_config_with(|c| c.volume_device(&spec).volume_wait(SHORT_WAIT));
        let shown = spec.replace(&partuuid.to_uppercase(), &partuuid);
        let o = check(&cfg, 0, "volume.device", "pass", &[&shown]);
        all_pass(&o);
    }
}

#[test]
fn tmpfs_passes_when_allowed() {
    let Some(_root) = root_or_skip(&["mount", "umount"]) else {
        return;
    };
    let t = TempRoot::new();
    let _m = Mount::fs("tmpfs", "cg-test-tmpfs", &t.volume_path(), "size=16m");
    let cfg = t.write_guard_config_with(|c| c.volume_allow(&["tmpfs"]).volume_wait(SHORT_WAIT));
    check(&cfg, 0, "volume.backing", "warn", &["tmpfs", "allow"]);
}

// ---- waiting for a late device -------------------------------------------------------

#[test]
fn device_that_appears_within_wait_passes() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let l = label();
    let at = t.volume_path();
    std::fs::create_dir_all(&at).unwrap();
    let img = Image::formatted(t.images().join("late.img"), FsKind::Ext4, &l, None, &[]);
    let cfg =
        t.write_guard_config_with(|c| c.volume_device(&format!("LABEL={l}")).volume_wait("30s"));
    let running = Guard::with_config(&cfg).spawn(&["--json", "volume"]);
    // The guard has looked once and found nothing: now the disk arrives.
    running.wait_for_stderr("waiting", Duration::from_secs(10));
    let arrive = std::thread::spawn(move || {
        let lo = img.attach();
        let m = lo.mount(&at, "");
        (m, lo) // dropped by the test thread: unmount, then detach
    });
    let (mount, lo) = arrive.join().expect("attach thread");
    let o = running.finish(Duration::from_secs(40));
    drop(mount);
    drop(lo);
    o.expect(0, "volume.mounted", "pass")
        .expect(0, "volume.device", "pass")
        .mentions("volume.device", &[&format!("LABEL={l}")]);
    assert!(
        o.stderr.contains("waiting"),
        "no progress log:\n{}",
        o.dump()
    );
    assert!(
        o.elapsed < Duration::from_secs(30),
        "must pass as soon as the disk is there, took {:?}",
        o.elapsed
    );
}

#[test]
fn healthy_volume_meets_min_free() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let _v = LoopVolume::new(&t.images(), FsKind::Ext4, &label(), &t.volume_path());
    let cfg = t.write_guard_config_with(|c| c.volume_min_free("16MiB").volume_wait(SHORT_WAIT));
    check(&cfg, 0, "volume.free-space", "pass", &["minimum 16.0 MiB"]);
}
