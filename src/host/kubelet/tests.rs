use super::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/kubelet");

/// kubelet's eviction settings on `host` ([`KubeletFiles::eviction`]).
fn read(host: &Host, configured: Option<&Path>) -> Result<Option<Eviction>, String> {
    KubeletFiles::read(host, configured).eviction()
}

/// kubelet's contract on `host` ([`KubeletFiles::contract`]).
fn read_contract(host: &Host, configured: Option<&Path>) -> Result<contract::Contract, String> {
    KubeletFiles::read(host, configured).contract()
}

fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(FIXTURES).join(name)).unwrap()
}

/// A node's tree: kubelet's packaged unit, and `files` (OS path, fixture name or text).
fn node(files: &[(&str, &str)]) -> (tempfile::TempDir, Host) {
    let tree = tempfile::tempdir().unwrap();
    let mut all = vec![(
        "/lib/systemd/system/kubelet.service",
        fixture("kubelet.service"),
    )];
    for (path, what) in files {
        let text = match what.ends_with(".yaml") || what.ends_with(".conf") {
            true => fixture(what),
            false => what.to_string(),
        };
        all.push((path, text));
    }
    for (path, text) in all {
        let at = tree.path().join(path.trim_start_matches('/'));
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::fs::write(at, text).unwrap();
    }
    let host = Host::at(tree.path());
    (tree, host)
}

const KUBEADM_DROPIN: &str = "/etc/systemd/system/kubelet.service.d/10-kubeadm.conf";

#[test]
fn kubeadm_defaults_leave_kubelets_own_thresholds() {
    let (_t, host) = node(&[
        (KUBEADM_DROPIN, "10-kubeadm.conf"),
        ("/var/lib/kubelet/config.yaml", "kubeadm-defaults.yaml"),
    ]);
    let e = read(&host, None).unwrap().expect("a config");
    assert_eq!(e.file.as_deref(), Some(Path::new(DEFAULT_CONFIG)));
    assert_eq!(e.hard, None);
    assert_eq!(
        e.hard_threshold("imagefs.available"),
        Some(("15%".into(), "kubelet's default"))
    );
}

#[test]
fn a_partial_eviction_hard_drops_the_image_filesystem_defaults() {
    let (_t, host) = node(&[
        (KUBEADM_DROPIN, "10-kubeadm.conf"),
        ("/var/lib/kubelet/config.yaml", "partial-eviction-hard.yaml"),
    ]);
    let e = read(&host, None).unwrap().unwrap();
    assert_eq!(e.hard.as_ref().map(|h| h.len()), Some(3));
    assert_eq!(e.hard_threshold("imagefs.available"), None);
    assert_eq!(e.hard_threshold("imagefs.inodesFree"), None);
    assert_eq!(
        e.soft_threshold("memory.available").as_deref(),
        Some("500Mi")
    );
    assert_eq!(e.set_by, [DEFAULT_CONFIG]);
}

#[test]
fn merged_defaults_and_explicit_imagefs_thresholds() {
    let e = parse(&fixture("merge-defaults.yaml")).unwrap();
    assert_eq!(
        e.hard_threshold("imagefs.inodesFree"),
        Some(("5%".into(), "kubelet's default (merged)"))
    );
    let e = parse(&fixture("eviction-with-imagefs.yaml")).unwrap();
    assert_eq!(
        e.hard_threshold("imagefs.available"),
        Some(("10%".into(), "evictionHard"))
    );
}

#[test]
fn flags_only_kubelet_has_its_thresholds_on_the_command_line() {
    let (_t, host) = node(&[(
        "/etc/systemd/system/kubelet.service.d/20-flags.conf",
        "flags-only.conf",
    )]);
    let e = read(&host, None)
        .unwrap()
        .expect("flags count without a file");
    assert_eq!(e.file, None);
    let hard = e.hard.as_ref().unwrap();
    assert_eq!(
        hard.get("memory.available").map(String::as_str),
        Some("100Mi")
    );
    assert_eq!(e.hard_threshold("imagefs.available"), None);
    assert!(
        e.set_by[0].starts_with("--eviction-hard in kubelet.service"),
        "{:?}",
        e.set_by
    );
}

#[test]
fn the_config_path_comes_from_the_guard_then_the_unit_then_the_default() {
    let (_t, host) = node(&[
        (
            "/etc/systemd/system/kubelet.service.d/10-c.conf",
            "[Service]\nEnvironment=\"KUBELET_CONFIG_ARGS=--config /etc/kubelet/custom.yaml\"\n\
             ExecStart=\nExecStart=/usr/bin/kubelet $KUBELET_CONFIG_ARGS\n",
        ),
        ("/etc/kubelet/custom.yaml", "partial-eviction-hard.yaml"),
        ("/var/lib/kubelet/config.yaml", "kubeadm-defaults.yaml"),
        ("/etc/guard/kubelet.yaml", "eviction-with-imagefs.yaml"),
    ]);
    let from_unit = read(&host, None).unwrap().unwrap();
    assert_eq!(
        from_unit.file.as_deref(),
        Some(Path::new("/etc/kubelet/custom.yaml"))
    );
    let configured = read(&host, Some(Path::new("/etc/guard/kubelet.yaml")))
        .unwrap()
        .unwrap();
    assert_eq!(
        configured.file.as_deref(),
        Some(Path::new("/etc/guard/kubelet.yaml"))
    );
}

#[test]
fn no_configuration_yet_is_none_and_a_broken_one_names_the_file() {
    let (_t, host) = node(&[(KUBEADM_DROPIN, "10-kubeadm.conf")]);
    assert_eq!(read(&host, None), Ok(None));
    let (_t, host) = node(&[("/var/lib/kubelet/config.yaml", "evictionHard: [unclosed\n")]);
    let e = read(&host, None).unwrap_err();
    assert!(e.starts_with("/var/lib/kubelet/config.yaml: "), "{e}");
}

#[test]
fn hostile_yaml_is_refused_or_skipped_without_expanding_anything() {
    // an alias where a threshold belongs is refused, not followed
    let e = parse("x: &a \"15%\"\nevictionHard:\n  imagefs.available: *a\n").unwrap_err();
    assert!(e.contains("not a plain value"), "{e}");
    // a billion laughs under a key the guard does not read is walked, never expanded
    let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..30 {
        let prev = format!("*a{}", i - 1);
        bomb.push_str(&format!(
            "a{i}: &a{i} [{}]\n",
            [prev.as_str(); 10].join(", ")
        ));
    }
    bomb.push_str("evictionHard:\n  imagefs.available: \"15%\"\n");
    let e = parse(&bomb).unwrap();
    assert_eq!(e.hard_threshold("imagefs.available").unwrap().0, "15%");
    for bad in [
        "- a list\n",
        "\"just text\"\n",
        "evictionHard: [1, 2]\n",
        "evictionHard:\n  ? [a]\n  : b\n",
    ] {
        assert!(parse(bad).is_err(), "{bad:?}");
    }
    assert_eq!(parse("").unwrap(), Eviction::default());
    assert_eq!(
        parse("evictionHard:\n").unwrap().hard,
        Some(BTreeMap::new())
    );
}

/// kubeadm's drop-in with its two environment files: the flags kubeadm writes
/// (`KUBELET_KUBEADM_ARGS`, double-quoted) and the operator's `/etc/default/kubelet`
/// (`KUBELET_EXTRA_ARGS`, quoted, continued over two lines, with commented-out lines and a
/// variable ExecStart does not name), read as systemd reads them.
#[test]
fn kubelets_environment_files_are_read_as_systemd_reads_them() {
    let (_t, host) = node(&[
        (KUBEADM_DROPIN, "10-kubeadm.conf"),
        (
            "/var/lib/kubelet/kubeadm-flags.env",
            fixture("kubeadm-flags.env").as_str(),
        ),
        ("/etc/default/kubelet", fixture("default-kubelet").as_str()),
        ("/var/lib/kubelet/config.yaml", "kubeadm-defaults.yaml"),
    ]);
    let e = read(&host, None).unwrap().unwrap();
    let hard = e
        .hard
        .as_ref()
        .expect("--eviction-hard from KUBELET_EXTRA_ARGS");
    assert_eq!(
        hard.get("imagefs.available").map(String::as_str),
        Some("20%")
    );
    assert_eq!(
        hard.get("memory.available").map(String::as_str),
        Some("200Mi")
    );
    assert_eq!(
        e.soft, None,
        "a commented-out or unreferenced variable sets nothing"
    );
    assert_eq!(e.file.as_deref(), Some(Path::new(DEFAULT_CONFIG)));
    // the commented-out line alone sets nothing
    let (_t, host) = node(&[
        (KUBEADM_DROPIN, "10-kubeadm.conf"),
        (
            "/etc/default/kubelet",
            "#KUBELET_EXTRA_ARGS=--eviction-hard=imagefs.available<1%\n",
        ),
        ("/var/lib/kubelet/config.yaml", "kubeadm-defaults.yaml"),
    ]);
    assert_eq!(read(&host, None).unwrap().unwrap().hard, None);
}

#[test]
fn each_flag_is_placed_where_an_operator_set_it() {
    let (_t, host) = node(&[
        (KUBEADM_DROPIN, "10-kubeadm.conf"),
        (
            "/var/lib/kubelet/kubeadm-flags.env",
            "# kubeadm\nKUBELET_KUBEADM_ARGS=\"--container-runtime-endpoint=unix:///run/k3s/containerd/containerd.sock --pod-infra-container-image registry.k8s.io/pause:3.10\"\n",
        ),
    ]);
    let flags = node_flags(&host);
    assert_eq!(flags.binary.as_deref(), Some("/usr/bin/kubelet"));
    let endpoint = flags.get("container-runtime-endpoint").unwrap();
    assert_eq!(endpoint.value, "unix:///run/k3s/containerd/containerd.sock");
    assert_eq!(endpoint.at, "/var/lib/kubelet/kubeadm-flags.env:2");
    let infra = flags.get("pod-infra-container-image").unwrap();
    assert_eq!(infra.value, "registry.k8s.io/pause:3.10");
    let config = flags.get("config").unwrap();
    assert_eq!(config.at, format!("{KUBEADM_DROPIN}:4"));
}

#[test]
fn the_files_contract_settings_are_read_with_their_lines() {
    let text = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
                cgroupDriver: systemd\ncontainerRuntimeEndpoint: unix:///run/other.sock\n\
                featureGates:\n  KubeletCgroupDriverFromCRI: true\nfailCgroupV1: false\n\
                evictionHard:\n  imagefs.available: 10%\n";
    let f = yaml::parse_file(text).unwrap();
    let at = |k: &str| f.plain.get(k).map(|l| (l.value.as_str(), l.line));
    assert_eq!(at("cgroupDriver"), Some(("systemd", 3)));
    assert_eq!(
        at("containerRuntimeEndpoint"),
        Some(("unix:///run/other.sock", 4))
    );
    assert_eq!(at("failCgroupV1"), Some(("false", 7)));
    let gate = &f.feature_gates["KubeletCgroupDriverFromCRI"];
    assert_eq!((gate.value.as_str(), gate.line), ("true", 6));
    assert_eq!(f.eviction.hard.unwrap()["imagefs.available"], "10%");
    let bad = yaml::parse_file("cgroupDriver: [systemd]\n").unwrap_err();
    assert!(bad.contains("cgroupDriver: not a plain value"), "{bad}");
}

#[test]
fn the_contract_takes_a_flag_over_the_file_and_names_both() {
    let (_t, host) = node(&[
        (KUBEADM_DROPIN, "10-kubeadm.conf"),
        (
            "/var/lib/kubelet/config.yaml",
            "kind: KubeletConfiguration\ncgroupDriver: systemd\n\
             containerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n",
        ),
        (
            "/etc/default/kubelet",
            "KUBELET_EXTRA_ARGS=--cgroup-driver=cgroupfs --feature-gates=A=true,KubeletCgroupDriverFromCRI=false\n",
        ),
    ]);
    let c = read_contract(&host, None).unwrap();
    let driver = c.cgroup_driver.unwrap();
    assert_eq!(
        (driver.value.as_str(), driver.at.as_str()),
        ("cgroupfs", "/etc/default/kubelet:1")
    );
    let endpoint = c.runtime_endpoint.unwrap();
    assert_eq!(endpoint.at, "/var/lib/kubelet/config.yaml:3");
    assert_eq!(
        contract::socket_path(&endpoint.value),
        Some("/run/containerd/containerd.sock")
    );
    assert_eq!(c.driver_from_cri_gate.unwrap().value, "false");
    assert_eq!(c.binary.as_deref(), Some("/usr/bin/kubelet"));
    // a config that is not YAML is an error naming the file
    let (_t, host) = node(&[("/var/lib/kubelet/config.yaml", "a: [\n")]);
    let e = read_contract(&host, None).unwrap_err();
    assert!(
        e.starts_with("/var/lib/kubelet/config.yaml: not YAML"),
        "{e}"
    );
}

/// `--feature-gates` in kubeadm-flags.env and again in /etc/default/kubelet, and the same
/// for `--eviction-hard`: kubelet merges each map flag's occurrences (a later entry
/// winning), so a gate or a signal set only in the first still holds.
#[test]
fn repeated_map_flags_merge_as_kubelet_merges_them() {
    let (_t, host) = node(&[
        (KUBEADM_DROPIN, "10-kubeadm.conf"),
        (
            "/var/lib/kubelet/kubeadm-flags.env",
            "KUBELET_KUBEADM_ARGS=\"--feature-gates=KubeletCgroupDriverFromCRI=false \
             --eviction-hard=imagefs.available<20%,memory.available<100Mi\"\n",
        ),
        (
            "/etc/default/kubelet",
            "KUBELET_EXTRA_ARGS=\"--feature-gates=RotateKubeletServerCertificate=true \
             --eviction-hard=memory.available<300Mi\"\n",
        ),
        ("/var/lib/kubelet/config.yaml", "kubeadm-defaults.yaml"),
    ]);
    let c = read_contract(&host, None).unwrap();
    let gate = c
        .driver_from_cri_gate
        .expect("the gate of kubeadm-flags.env");
    assert_eq!(gate.value, "false");
    assert!(
        gate.at.starts_with("/var/lib/kubelet/kubeadm-flags.env:"),
        "{gate:?}"
    );
    let hard = read(&host, None).unwrap().unwrap().hard.unwrap();
    assert_eq!(
        hard.get("imagefs.available").map(String::as_str),
        Some("20%")
    );
    assert_eq!(
        hard.get("memory.available").map(String::as_str),
        Some("300Mi")
    );
}
