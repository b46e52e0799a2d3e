//! `lint.cloud-init` against the units cloud-init really ships, not units typed here:
//! Debian 12's cloud-init 22.4 (`cloud-init.service` runs `disk_setup`, `fs_setup` and
//! `mounts`) and Debian 13's 25.1 (no `cloud-init.service`: one process,
//! `cloud-init-main.service`, whose network stage `cloud-init-network.service` mounts).
//! The packages come from the Debian archive this machine's apt uses, through
//! scripts/debian-package (cached in target/; scripts/test fetches them first).

use testkit as support;

use std::path::{Path, PathBuf};
use support::suite::lint::{expect, Image, Outside, LIB};

/// The unpacked cloud-init package of `suite`.
fn cloud_init_package(suite: &str) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new(repo.join("scripts/debian-package"))
        .args([suite, "cloud-init"])
        .output()
        .expect("scripts/debian-package runs");
    assert!(
        out.status.success(),
        "scripts/debian-package {suite} cloud-init failed (it needs the Debian mirror once; \
         then target/ caches it):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A clean image with `suite`'s cloud-init units installed where its package puts them.
fn image_with_cloud_init(suite: &str) -> Image {
    let img = Image::clean();
    let package = cloud_init_package(suite);
    for dir in ["lib/systemd/system", "usr/lib/systemd/system"] {
        let Ok(units) = std::fs::read_dir(package.join(dir)) else {
            continue;
        };
        for unit in units.flatten().filter(|u| u.path().is_file()) {
            let name = unit.file_name().into_string().unwrap();
            let text = std::fs::read_to_string(unit.path()).unwrap();
            img.put(&format!("/{dir}/{name}"), &text);
        }
    }
    img
}

/// User data that formats and mounts the guard's volume, as Cluster API and TKGS write it.
const MOUNTING_USER_DATA: &str = "#cloud-config\nfs_setup:\n  - label: containerd\n    \
    filesystem: ext4\n    device: /dev/sdb\nmounts:\n  - [LABEL=containerd, \
    /var/lib/containerd, ext4, \"defaults,nofail\"]\n";

/// The containerd drop-in's ordering as it was before cloud-init 24.3 renamed its units.
const PRE_24_3_ORDERING: &str =
    "[Unit]\nAfter=var-lib-containerd.mount local-fs.target cloud-init.service\n";

#[test]
fn the_shipped_dropin_waits_for_the_units_each_cloud_init_release_mounts_in() {
    let out = Outside::new();
    let ud = out.file("user-data", MOUNTING_USER_DATA);
    for (suite, units) in [
        ("bookworm", &["cloud-init.service"][..]),
        (
            "trixie",
            &["cloud-init-main.service", "cloud-init-network.service"][..],
        ),
    ] {
        let img = image_with_cloud_init(suite);
        let o = img.lint(&["--user-data", &ud]);
        let mut named = units.to_vec();
        named.push("10-containerd-guard.conf");
        expect(&o, "lint.cloud-init", "pass", 0, &named);
    }
}

#[test]
fn an_ordering_on_cloud_init_service_alone_fails_on_cloud_init_25() {
    let out = Outside::new();
    let ud = out.file("user-data", MOUNTING_USER_DATA);
    let dropin = format!("{LIB}/containerd.service.d/10-containerd-guard.conf");
    let old = |suite: &str| {
        let img = image_with_cloud_init(suite);
        let shipped = std::fs::read_to_string(img.at(&dropin)).unwrap();
        let ordering = shipped
            .lines()
            .filter(|l| !l.starts_with("After="))
            .collect::<Vec<_>>()
            .join("\n")
            .replace("[Unit]", PRE_24_3_ORDERING.trim_end());
        img.put(&dropin, &ordering);
        img
    };
    // cloud-init 22.4: cloud-init.service is the unit that mounts
    let o = old("bookworm").lint(&["--user-data", &ud]);
    expect(&o, "lint.cloud-init", "pass", 0, &["cloud-init.service"]);
    // cloud-init 25.1 has no cloud-init.service: that ordering orders against nothing
    let o = old("trixie").lint(&["--user-data", &ud]);
    expect(
        &o,
        "lint.cloud-init",
        "fail",
        1,
        &[
            "does not wait for cloud-init-main.service, cloud-init-network.service",
            "user-data:7",
            "After=cloud-init-main.service cloud-init-network.service",
        ],
    );
    // and without user data: cloud-init is in the image, so the ordering is wanted
    let o = old("trixie").lint(&[]);
    expect(
        &o,
        "lint.cloud-init",
        "warn",
        0,
        &["cloud-init-network.service"],
    );
}
