use super::*;

fn fixture(name: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/containerd")
        .join(name);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn debian_package_config_uses_containerd_defaults() {
    // The file Debian's containerd package ships: everything commented out.
    let c = parse(&fixture("debian-1.6-default.toml")).unwrap();
    assert_eq!(c.version, 2);
    assert_eq!(c.sandbox_image_key, "(containerd default)");
    assert_eq!(c.root, Path::new(DEFAULT_ROOT));
    assert_eq!(c.sandbox_image, DEFAULT_SANDBOX_V2);
}

#[test]
fn version_2_as_written_by_containerd_config_default() {
    let c = parse(&fixture("v2-tkgs.toml")).unwrap();
    assert_eq!(c.version, 2);
    assert_eq!(c.root, Path::new("/var/lib/containerd"));
    assert_eq!(c.state, Path::new("/run/containerd"));
    assert_eq!(c.address, Path::new("/run/containerd/containerd.sock"));
    assert_eq!(c.sandbox_image, "localhost:5000/vmware.io/pause:3.4.1");
    assert_eq!(c.snapshotter, "overlayfs");
    assert!(c.sandbox_image_key.contains("io.containerd.grpc.v1.cri"));
}

#[test]
fn version_3_pinned_sandbox_image() {
    let c = parse(&fixture("v3-custom-root.toml")).unwrap();
    assert_eq!(c.version, 3);
    assert_eq!(c.root, Path::new("/mnt/eph/containerd"));
    assert_eq!(c.address, Path::new("/run/k8s/containerd.sock"));
    assert_eq!(c.sandbox_image, "registry.k8s.io/pause:3.10");
    assert_eq!(c.snapshotter, "native");
}

/// containerd 2.3's own default config: read, not refused (a refusal is every
/// pre-start's exit 3, and containerd and kubelet never start).
#[test]
fn version_4_as_containerd_2_3_writes_it() {
    let c = parse(&fixture("v4-2.3.4-default.toml")).unwrap();
    assert_eq!(c.version, 4);
    assert_eq!(c.root, Path::new("/var/lib/containerd"));
    assert_eq!(c.state, Path::new("/run/containerd"));
    assert_eq!(c.address, Path::new("/run/containerd/containerd.sock"));
    assert_eq!(
        c.address_key.as_deref(),
        Some("plugins.\"io.containerd.server.v1.grpc\".address")
    );
    assert_eq!(c.sandbox_image, "registry.k8s.io/pause:3.10.2");
    assert!(c.sandbox_image_key.contains("io.containerd.cri.v1.images"));
    assert_eq!(
        (c.snapshotter.as_str(), c.sandbox_runtime.as_str()),
        ("overlayfs", "runc")
    );
    assert!(!c.systemd_cgroup);
    assert!(c.notes.is_empty(), "{:?}", c.notes);
    // unset, the sandbox image is 2.3's built-in one
    assert_eq!(
        parse("version = 4").unwrap().sandbox_image,
        DEFAULT_SANDBOX_V4
    );
}

/// The socket as containerd 2.3 finds it: the gRPC server plugin's address; an older
/// file's `[grpc] address` moved there (its own plugin table winning); a version 4
/// file's `[grpc]` read by nothing, and said.
#[test]
fn the_socket_is_where_containerd_2_3_reads_it() {
    let plugin = "[plugins.\"io.containerd.server.v1.grpc\"]\naddress = \"/run/p.sock\"\n";
    let grpc = "[grpc]\naddress = \"/run/g.sock\"\n";
    for (text, want) in [
        (format!("version = 4\n{plugin}"), "/run/p.sock"),
        (format!("version = 3\n{plugin}"), "/run/p.sock"),
        (format!("version = 3\n{grpc}"), "/run/g.sock"),
        (format!("version = 2\n{grpc}{plugin}"), "/run/p.sock"),
        (format!("version = 4\n{grpc}"), DEFAULT_ADDRESS),
    ] {
        let c = parse_merged(&[&text]).unwrap();
        assert_eq!(c.address, Path::new(want), "{text}");
    }
    let c = parse_merged(&[&format!("version = 4\n{grpc}")]).unwrap();
    assert!(
        c.notes[0].starts_with("`grpc.address` is read by nothing in a version 4"),
        "{:?}",
        c.notes
    );
    // each file migrated on its own: a version 3 drop-in's `[grpc]` overrides the root's
    // plugin table, as containerd 2.3 merges them
    let c = parse_merged(&[
        &format!("version = 3\n{plugin}"),
        &format!("version = 3\n{grpc}"),
    ]);
    assert_eq!(c.unwrap().address, Path::new("/run/g.sock"));
}

#[test]
fn a_version_newer_than_the_guard_knows_is_read_as_the_newest_and_said() {
    let c = parse(
        "version = 5\n[plugins.\"io.containerd.server.v1.grpc\"]\naddress = \"/run/p.sock\"\n",
    )
    .unwrap();
    assert_eq!(
        (c.version, c.address.as_path()),
        (4, Path::new("/run/p.sock"))
    );
    assert!(c.notes[0].contains("`version = 5` is newer than this guard knows"));
}

#[test]
fn the_default_runtimes_cgroup_driver() {
    assert!(!parse("version = 2\n").unwrap().systemd_cgroup);
    let v2 = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\nSystemdCgroup = true\n";
    assert!(parse(v2).unwrap().systemd_cgroup);
    // another default runtime: its options count, not runc's
    let other = format!(
        "{v2}[plugins.\"io.containerd.grpc.v1.cri\".containerd]\ndefault_runtime_name = \"crun\"\n"
    );
    assert!(!parse(&other).unwrap().systemd_cgroup);
    let v3 = "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]\nSystemdCgroup = true\n";
    assert!(parse(v3).unwrap().systemd_cgroup);
    let bad = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc.options]\nSystemdCgroup = \"yes\"\n";
    assert!(parse(bad).unwrap_err().contains("SystemdCgroup"));
}

#[test]
fn version_3_without_pin_uses_its_own_default() {
    let c = parse("version = 3\n").unwrap();
    assert_eq!(c.sandbox_image, DEFAULT_SANDBOX_V3);
}

#[test]
fn missing_file_means_defaults() {
    let c = load(Path::new("/nonexistent/containerd/config.toml")).unwrap();
    assert_eq!(c, ContainerdConfig::defaults());
}

#[test]
fn errors_name_the_key() {
    for (text, want) in [
        ("version = -1", "key `version`"),
        ("version = 2\nroot = 5", "key `root` must be a string"),
        (
            "version = 2\nroot = \"var/lib\"",
            "key `root`: \"var/lib\" is not an absolute path",
        ),
        (
            "version = 2\n[grpc]\naddress = true",
            "key `grpc.address` must be a string",
        ),
        ("version = 2\nplugins = 1", "key `plugins` must be a table"),
        ("version = = 2", "not valid TOML"),
    ] {
        let err = parse(text).unwrap_err();
        assert!(err.contains(want), "{text:?} gave {err:?}, want {want:?}");
    }
}

#[test]
fn the_sandboxs_snapshotter_is_its_runtimes_own_else_cris() {
    let c = parse("version = 2\n").unwrap();
    assert_eq!(
        (c.snapshotter.as_str(), c.sandbox_runtime.as_str()),
        ("overlayfs", "runc")
    );
    assert!(!c.remote_snapshotter && !c.discard_unpacked_layers);
    let v2 = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n\
              snapshotter = \"native\"\ndefault_runtime_name = \"kata\"\n\
              discard_unpacked_layers = true\n\
              [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.kata]\n\
              snapshotter = \"devmapper\"\n\
              [plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n\
              snapshotter = \"btrfs\"\n";
    let c = parse(v2).unwrap();
    assert_eq!(c.snapshotter, "devmapper");
    assert_eq!(
        c.snapshotter_key,
        "plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.kata.snapshotter"
    );
    assert!(c.discard_unpacked_layers);
    // version 3: the images plugin holds CRI's snapshotter and the discard setting
    let v3 = "version = 3\n[plugins.'io.containerd.cri.v1.images']\n\
              snapshotter = \"stargz\"\ndiscard_unpacked_layers = true\n\
              [proxy_plugins.stargz]\ntype = \"snapshot\"\naddress = \"/run/stargz.sock\"\n";
    let c = parse(v3).unwrap();
    assert_eq!(c.snapshotter, "stargz");
    assert!(c.remote_snapshotter && c.discard_unpacked_layers);
    // the 1.x table is not where 2.x reads the setting
    let moved = "version = 3\n[plugins.'io.containerd.cri.v1.runtime'.containerd]\n\
                 discard_unpacked_layers = true\n";
    assert!(!parse(moved).unwrap().discard_unpacked_layers);
    let bad = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd]\n\
               discard_unpacked_layers = \"yes\"\n";
    assert!(parse(bad)
        .unwrap_err()
        .contains("discard_unpacked_layers` must be true or false"));
}

#[test]
fn containerd_1_6_ignores_a_runtimes_own_snapshotter() {
    let v2 = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".containerd.runtimes.runc]\n\
              snapshotter = \"native\"\n";
    let c = parse(v2).unwrap();
    assert_eq!(
        (c.snapshotter.as_str(), c.cri_snapshotter.as_str()),
        ("native", "overlayfs")
    );
    assert_eq!(c.cri_snapshotter_key, "(containerd default)");
    for (version, reads) in [
        ("1.6.20~ds1", false),
        ("v1.6.39", false),
        ("1.5.9", false),
        ("0.9", false),
        ("1.7.24~ds1-1", true),
        ("v2.1.9", true),
        ("10.0", true),
        ("", true),
        ("dev", true),
    ] {
        assert_eq!(reads_runtime_snapshotter(version), reads, "{version:?}");
    }
}
