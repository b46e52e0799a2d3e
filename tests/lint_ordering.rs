//! The lint's judgement of the boot order: the gates' drop-ins, the volume's mount and
//! its ordering (fstab, cloud-init), kubelet's gate, systemd's prefixes, kill modes and
//! start timeouts.
//!
//! `guard lint --root DIR` on image trees built here the way docs/image-builder.md says
//! (testkit::suite::lint::Image): Debian's containerd unit, kubeadm's kubelet unit, the
//! package's drop-ins and hygiene units copied from this repository, an fstab line,
//! containerd's config, the guard's fragment and a real OCI archive of the sandbox image.
//! Each test plants one hazard in a clean image and checks the finding that names it (id,
//! status, `FILE:LINE`, exit code). The same hazards are planted in the vm-tests image
//! (vm-tests/run lint), and scenario disks are linted before they boot.

use testkit as support;

use support::suite::lint::{expect, Image, Outside, ETC, LIB, SANDBOX};

#[test]
fn a_clean_image_built_as_documented_passes_with_nothing_above_ok() {
    let img = Image::clean();
    let o = img.lint(&["--warn-is-error"]);
    assert_eq!(o.code, 0, "{}", o.dump());
    let findings = o.json.as_ref().unwrap()["findings"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        findings.len(),
        16,
        "one finding per lint rule:\n{}",
        o.dump()
    );
    // (before kubeadm writes kubelet's configuration and with no kubelet package, the
    // image says nothing of kubelet's endpoint or version: those are not judged)
    let not_judged = ["lint.kubelet-endpoint", "lint.kubelet-cgroup-v1"];
    for f in &findings {
        let id = f["id"].as_str().unwrap();
        assert!(id.starts_with("lint."), "{f}");
        let want = if not_judged.contains(&id) {
            "skip"
        } else {
            "pass"
        };
        assert_eq!(f["status"], want, "{f}");
    }
    expect(
        &o,
        "lint.guard-dropin",
        "pass",
        0,
        &[&format!(
            "{LIB}/containerd.service.d/10-containerd-guard.conf:"
        )],
    );
    expect(&o, "lint.volume-mount", "pass", 0, &["/etc/fstab:3"]);
    expect(
        &o,
        "lint.sandbox-archive",
        "pass",
        0,
        &[SANDBOX, "pause.tar"],
    );
    println!("guard lint on the clean image took {:?}", o.elapsed);
}

#[test]
fn the_guard_dropin_masked_overridden_or_missing_fails() {
    let img = Image::clean();
    let dropin = "containerd.service.d/10-containerd-guard.conf";
    img.link(&format!("{ETC}/{dropin}"), "/dev/null");
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.guard-dropin",
        "fail",
        1,
        &["masked by", &format!("{ETC}/{dropin}")],
    );
    // nofail without the drop-in: containerd would start on the bare directory
    expect(&o, "lint.volume-nofail", "fail", 1, &["/etc/fstab:3"]);

    let img = Image::clean();
    img.put(
        &format!("{ETC}/containerd.service.d/20-site.conf"),
        "[Service]\nExecStartPre=\nExecStartPre=/bin/true\n",
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.guard-dropin",
        "fail",
        1,
        &[
            "overridden",
            &format!("{ETC}/containerd.service.d/20-site.conf:2"),
        ],
    );

    let img = Image::clean();
    std::fs::remove_file(img.at(&format!("{LIB}/{dropin}"))).unwrap();
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.guard-dropin",
        "fail",
        1,
        &["no containerd.service.d/10-containerd-guard.conf drop-in"],
    );
    expect(
        &o,
        "lint.containerd-order",
        "fail",
        1,
        &["var-lib-containerd.mount"],
    );
}

#[test]
fn an_after_reset_leaves_containerd_unordered() {
    let img = Image::clean();
    img.put(
        &format!("{ETC}/containerd.service.d/50-x.conf"),
        "[Unit]\nAfter=\nAfter=network.target\n",
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.containerd-order",
        "fail",
        1,
        &["empty After=", "50-x.conf:2"],
    );
    // a RequiresMountsFor= of the volume orders it as well
    img.put(
        &format!("{ETC}/containerd.service.d/60-y.conf"),
        "[Unit]\nRequiresMountsFor=/var/lib/containerd\n",
    );
    expect(
        &img.lint(&[]),
        "lint.containerd-order",
        "pass",
        0,
        &["RequiresMountsFor"],
    );
}

#[test]
fn a_mount_ordered_after_containerd_fails() {
    let img = Image::clean();
    img.put(
        "/etc/fstab",
        "LABEL=containerd /var/lib/containerd ext4 nofail,x-systemd.after=containerd.service 0 2\n",
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.volume-mount",
        "fail",
        1,
        &["after containerd.service at /etc/fstab:1"],
    );

    // the same in a mount unit, the way a generator or an image role writes one
    let img = Image::clean();
    img.put("/etc/fstab", "");
    img.put(
        &format!("{ETC}/var-lib-containerd.mount"),
        "[Unit]\nAfter=containerd.service\n[Mount]\nWhat=/dev/disk/by-label/containerd\nWhere=/var/lib/containerd\nOptions=nofail\n",
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.volume-mount",
        "fail",
        1,
        &[&format!("{ETC}/var-lib-containerd.mount:2")],
    );
    expect(
        &o,
        "lint.config",
        "pass",
        1,
        &["var-lib-containerd.mount:4"],
    );
}

#[test]
fn no_mount_warns_and_fails_once_the_user_data_is_known() {
    let img = Image::clean();
    img.put("/etc/fstab", "LABEL=root / ext4 defaults 0 1\n");
    let o = img.lint(&[]);
    expect(&o, "lint.volume-mount", "warn", 0, &["--user-data"]);
    expect(
        &img.lint(&["--warn-is-error"]),
        "lint.volume-mount",
        "warn",
        1,
        &[],
    );
    let out = Outside::new();
    let ud = out.file("user-data-none", "#cloud-config\nruncmd:\n  - echo hi\n");
    let o = img.lint(&["--user-data", &ud]);
    expect(&o, "lint.volume-mount", "fail", 1, &["user-data-none"]);
    // user data that mounts it: the mount is known, and containerd waits for cloud-init
    let ud = out.file(
        "user-data-none",
        "#cloud-config\nfs_setup:\n  - label: containerd\n    filesystem: ext4\n    device: /dev/sdb\n\
         mounts:\n  - [LABEL=containerd, /var/lib/containerd, ext4, \"defaults,nofail\"]\n",
    );
    let o = img.lint(&["--user-data", &ud]);
    expect(&o, "lint.volume-mount", "pass", 0, &["user-data-none:7"]);
    expect(&o, "lint.cloud-init", "pass", 0, &["cloud-init.service"]);
}

#[test]
fn cloud_init_mounting_the_volume_without_ordering_fails() {
    let img = Image::clean();
    img.put(
        &format!("{LIB}/cloud-init.service"),
        "[Unit]\nDescription=cloud-init\n[Service]\nExecStart=/usr/bin/cloud-init init\n",
    );
    // a site drop-in that replaces containerd's ordering (the guard's After= with it)
    img.put(
        &format!("{ETC}/containerd.service.d/50-order.conf"),
        "[Unit]\nAfter=\nAfter=var-lib-containerd.mount\n",
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.cloud-init",
        "warn",
        0,
        &["After=cloud-init.service", "50-order.conf:2"],
    );
    img.put(
        "/etc/cloud/cloud.cfg.d/90-disk.cfg",
        "mounts:\n  - [LABEL=containerd, /var/lib/containerd, ext4, \"defaults,nofail\"]\n",
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.cloud-init",
        "fail",
        1,
        &["/etc/cloud/cloud.cfg.d/90-disk.cfg:2"],
    );
}

#[test]
fn kubelet_without_the_gate_and_a_racing_kubeadm_unit_fail() {
    let img = Image::clean();
    img.link(
        &format!("{ETC}/kubelet.service.d/10-containerd-guard.conf"),
        "/dev/null",
    );
    let o = img.lint(&[]);
    expect(&o, "lint.kubelet-gate", "fail", 1, &["masked by"]);
    // the guard's drop-in was what ordered kubelet after containerd
    expect(
        &o,
        "lint.kubelet-order",
        "fail",
        1,
        &["kubelet.service has no After=containerd.service"],
    );

    let img = Image::clean();
    img.put(
        &format!("{ETC}/node-join.service"),
        "[Unit]\nAfter=network-online.target\n[Service]\nType=oneshot\nExecStart=/usr/bin/kubeadm join --config /etc/kubeadm.yaml\n",
    );
    expect(
        &img.lint(&[]),
        "lint.kubelet-order",
        "fail",
        1,
        &["node-join.service runs kubeadm (/etc/systemd/system/node-join.service:5)"],
    );

    let img = Image::clean();
    let out = Outside::new();
    let ud = out.file(
        "ud",
        "#cloud-config\nruncmd:\n  - [kubeadm, join, --config, /run/kubeadm/kubeadm.yaml]\n",
    );
    let o = img.lint(&["--user-data", &ud]);
    expect(
        &o,
        "lint.kubelet-order",
        "warn",
        0,
        &["ud:3", "cloud-final.service"],
    );
}

#[test]
fn kill_mode_hazards_fail() {
    let img = Image::clean();
    img.put(
        &format!("{ETC}/containerd.service.d/50-kill.conf"),
        "[Service]\nKillMode=control-group\n",
    );
    expect(
        &img.lint(&[]),
        "lint.kill-mode",
        "fail",
        1,
        &["KillMode=control-group", "50-kill.conf:2"],
    );
    let img = Image::clean();
    img.put(&format!("{ETC}/k3s.service"), "[Service]\nKillMode=process\nExecStartPre=-/usr/bin/pkill -9 containerd-shim\nExecStart=/usr/local/bin/k3s server\n");
    expect(
        &img.lint(&[]),
        "lint.kill-mode",
        "fail",
        1,
        &["pkill -9 containerd-shim", "k3s.service:3"],
    );
}

/// systemd's `ExecStartPre=` prefixes (systemd.service(5)): `-` ignores the command's
/// failure, so the gate never holds; `@` makes the next word argv[0], so `@/usr/bin/guard
/// volume --pre-start` runs guard without its subcommand; `+`, `!`, `!!` only change
/// privileges and `:` only turns off `$VAR` expansion: the gate still holds.
#[test]
fn a_gate_whose_failure_systemd_ignores_or_whose_subcommand_is_argv0_fails() {
    let cases: &[(&str, &str, &[&str])] = &[
        (
            "-/usr/bin/guard volume --pre-start",
            "fail",
            &["`-`", "ignore"],
        ),
        (
            "-@/usr/bin/guard guard volume --pre-start",
            "fail",
            &["`-`"],
        ),
        (
            "@-/usr/bin/guard guard volume --pre-start",
            "fail",
            &["`-`"],
        ),
        (
            "@/usr/bin/guard volume --pre-start",
            "fail",
            &["`@`", "argv[0]"],
        ),
        ("@/usr/bin/guard guard volume --pre-start", "pass", &[]),
        ("+/usr/bin/guard volume --pre-start", "pass", &[]),
        ("!/usr/bin/guard volume --pre-start", "pass", &[]),
        ("!!/usr/bin/guard volume --pre-start", "pass", &[]),
        (":/usr/bin/guard volume --pre-start", "pass", &[]),
        (
            ":/usr/bin/guard volume --pre-start $GUARD_ARGS",
            "fail",
            &["`:`", "literal"],
        ),
    ];
    let img = Image::clean();
    let site = format!("{ETC}/containerd.service.d/20-site.conf");
    for (line, status, needles) in cases {
        img.put(
            &site,
            &format!("[Service]\nExecStartPre=\nExecStartPre={line}\n"),
        );
        let o = img.lint(&[]);
        let code = if *status == "fail" { 1 } else { 0 };
        let mut all = needles.to_vec();
        all.push("20-site.conf:3");
        expect(
            &o,
            "lint.guard-dropin",
            status,
            code,
            if *status == "fail" { &all } else { &[] },
        );
    }
    let img = Image::clean();
    img.put(
        &format!("{ETC}/kubelet.service.d/20-site.conf"),
        "[Service]\nExecStartPre=\nExecStartPre=-/usr/bin/guard runtime\n",
    );
    expect(
        &img.lint(&[]),
        "lint.kubelet-gate",
        "fail",
        1,
        &["`-`", "20-site.conf:3"],
    );
}

/// `noauto`: nothing mounts the volume at boot, so containerd is held every boot, unless
/// the guard mounts it itself (`[volume] mount = true`). `x-systemd.automount`: the mount
/// happens on first access, so containerd's ordering after the `.mount` orders it after
/// nothing, the guard sees an autofs placeholder, and `x-systemd.idle-timeout` could
/// unmount containerd's root: failed, whatever `[volume] mount` says.
#[test]
fn noauto_or_an_automount_on_the_volume_fails_unless_the_guard_mounts_it() {
    let img = Image::clean();
    let fstab = |opts: &str| {
        format!("LABEL=root / ext4 defaults 0 1\nLABEL=containerd /var/lib/containerd ext4 {opts} 0 2\n")
    };
    img.put("/etc/fstab", &fstab("defaults,nofail,noauto"));
    expect(
        &img.lint(&[]),
        "lint.volume-mount",
        "fail",
        1,
        &["noauto", "/etc/fstab:2", "[volume] mount = true"],
    );
    img.put(
        "/etc/containerd-guard/config.d/60-mount.toml",
        "[volume]\nmount = true\n",
    );
    expect(
        &img.lint(&[]),
        "lint.volume-mount",
        "pass",
        0,
        &["/etc/fstab:2"],
    );
    img.put("/etc/fstab", &fstab("defaults,nofail,x-systemd.automount"));
    expect(
        &img.lint(&[]),
        "lint.volume-mount",
        "fail",
        1,
        &["x-systemd.automount", "/etc/fstab:2"],
    );
}

/// systemd kills a pre-start that outlives the unit's effective `TimeoutStartSec=` (after
/// drop-ins; 90 s when unset; `infinity` or 0: none) unless the unit lets the guard
/// extend it (`NotifyAccess=exec` or `all`).
#[test]
fn waits_longer_than_the_units_start_timeout_fail_without_notify_access() {
    let img = Image::clean();
    img.put(
        "/etc/containerd-guard/config.d/60-wait.toml",
        "[volume]\nwait = \"200s\"\n",
    );
    // the guard's drop-in lets it extend the timeout: passes
    expect(&img.lint(&[]), "lint.guard-dropin", "pass", 0, &[]);
    let site = format!("{ETC}/containerd.service.d/20-site.conf");
    img.put(&site, "[Service]\nNotifyAccess=main\n");
    expect(
        &img.lint(&[]),
        "lint.guard-dropin",
        "fail",
        1,
        &[
            "[volume] wait",
            "TimeoutStartSec=150s",
            "10-containerd-guard.conf",
            "NotifyAccess",
        ],
    );
    img.put(&site, "[Service]\nNotifyAccess=main\nTimeoutStartSec=\n");
    img.put(
        "/etc/containerd-guard/config.d/60-wait.toml",
        "[volume]\nwait = \"90s\"\n",
    );
    expect(
        &img.lint(&[]),
        "lint.guard-dropin",
        "fail",
        1,
        &["systemd's default of 90s"],
    );
    img.put(&site, "[Service]\nNotifyAccess=main\nTimeoutSec=infinity\n");
    expect(&img.lint(&[]), "lint.guard-dropin", "pass", 0, &[]);
    img.put(
        &site,
        "[Service]\nNotifyAccess=none\nTimeoutStartSec=5min\n",
    );
    expect(&img.lint(&[]), "lint.guard-dropin", "pass", 0, &[]);

    let img = Image::clean();
    img.put(
        "/etc/containerd-guard/config.d/60-hold.toml",
        "[hold]\ntimeout = \"10m\"\n",
    );
    expect(&img.lint(&[]), "lint.kubelet-gate", "pass", 0, &[]);
    img.put(
        &format!("{ETC}/kubelet.service.d/20-site.conf"),
        "[Service]\nNotifyAccess=\n",
    );
    expect(
        &img.lint(&[]),
        "lint.kubelet-gate",
        "fail",
        1,
        &["[hold] timeout", "TimeoutStartSec=360s"],
    );
}
