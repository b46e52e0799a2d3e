use super::*;
use std::fs;
use std::time::Duration;

/// A fake host root with the three config directories.
struct Tree {
    tmp: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        Tree {
            tmp: tempfile::tempdir().unwrap(),
        }
    }
    fn host(&self) -> Host {
        Host::at(self.tmp.path())
    }
    fn write(&self, host_path: &str, text: &str) -> PathBuf {
        let p = self.host().path(host_path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        // As a package installs it, whatever the umask of whoever runs the tests.
        chmod(&p, 0o644);
        p
    }
}

fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

fn error_of(text: &str) -> ConfigError {
    let t = Tree::new();
    let file = t.write("/etc/containerd-guard/config.d/50-x.toml", text);
    let err = load(&t.host(), None).unwrap_err();
    assert_eq!(err.file, file, "error must name the file");
    err
}

#[test]
fn no_file_at_all_gives_working_defaults() {
    let t = Tree::new();
    let loaded = load(&t.host(), None).unwrap();
    assert!(loaded.files.is_empty());
    assert_eq!(loaded.settings, Settings::default());
    assert_eq!(loaded.settings.volume.fstypes, vec!["ext4", "xfs"]);
    assert_eq!(loaded.settings.volume.wait, Duration::from_secs(90));
    assert_eq!(
        loaded.settings.containerd.restart_timeout,
        Duration::from_secs(120)
    );
    assert_eq!(
        loaded.settings.state_dir,
        PathBuf::from("/run/containerd-guard")
    );
    assert_eq!(loaded.source_of("volume.wait"), &Source::Default);
}

#[test]
fn layers_apply_with_systemd_precedence_and_remember_their_source() {
    let t = Tree::new();
    t.write(
        "/usr/lib/containerd-guard/config.d/10-vendor.toml",
        "[volume]\ndevice = \"LABEL=vendor\"\nmin_free = \"1GiB\"\nwait = \"30s\"\n",
    );
    // Same name in /etc replaces the vendor file entirely.
    t.write(
        "/usr/lib/containerd-guard/config.d/20-site.toml",
        "[volume]\nmin_free_inodes = 999\n",
    );
    let site = t.write(
        "/etc/containerd-guard/config.d/20-site.toml",
        "[volume]\ndevice = \"UUID=ABCD-1234\"\n",
    );
    let runtime = t.write(
        "/run/containerd-guard/config.d/30-runtime.toml",
        "[hold]\ntimeout = \"2m\"\n",
    );
    let loaded = load(&t.host(), None).unwrap();
    let s = &loaded.settings;
    assert_eq!(s.volume.device, Some(DeviceSpec::Uuid("abcd-1234".into())));
    assert_eq!(
        s.volume.min_free.bytes,
        1 << 30,
        "vendor value survives where not overridden"
    );
    assert_eq!(s.volume.min_free_inodes, 0, "replaced file's keys are gone");
    assert_eq!(s.volume.wait, Duration::from_secs(30));
    assert_eq!(s.hold.timeout, Duration::from_secs(120));
    assert_eq!(loaded.source_of("volume.device"), &Source::File(site));
    assert_eq!(loaded.source_of("hold.timeout"), &Source::File(runtime));
    let inherited = Inherited {
        containerd: Err("not read in this test".into()),
        kubelet_config: None,
    };
    let text = describe(&loaded, &inherited);
    // (as its fragment wrote it; the guard compares it in lower case, above)
    assert!(
        text.contains("volume.device = \"UUID=ABCD-1234\"    # "),
        "{text}"
    );
    assert!(
        text.contains("volume.min_free = \"1GiB\"    # "),
        "the vendor's text survives with its value: {text}"
    );
    assert!(
        text.contains("volume.fstypes = [\"ext4\", \"xfs\"]    # (default)"),
        "{text}"
    );
}

#[test]
fn dev_null_symlink_masks_a_vendor_fragment() {
    let t = Tree::new();
    t.write(
        "/usr/lib/containerd-guard/config.d/10-vendor.toml",
        "[volume]\ndevice = \"LABEL=vendor\"\n",
    );
    let mask = t
        .host()
        .path("/etc/containerd-guard/config.d/10-vendor.toml");
    fs::create_dir_all(mask.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink("/dev/null", &mask).unwrap();
    let loaded = load(&t.host(), None).unwrap();
    assert_eq!(loaded.settings.volume.device, None);
    assert!(loaded.files.is_empty());
}

#[test]
fn explicit_file_bypasses_the_search() {
    let t = Tree::new();
    t.write(
        "/etc/containerd-guard/config.d/50-x.toml",
        "[volume]\nwait = \"1s\"\n",
    );
    let mine = t.write("/elsewhere/mine.toml", "[volume]\nwait = \"7s\"\n");
    let loaded = load(&t.host(), Some(&mine)).unwrap();
    assert_eq!(loaded.settings.volume.wait, Duration::from_secs(7));
    assert_eq!(loaded.files, vec![mine]);

    let err = load(&t.host(), Some(Path::new("/nonexistent.toml"))).unwrap_err();
    assert!(
        err.to_string().contains("/nonexistent.toml: no such file"),
        "{err}"
    );
}

#[test]
fn every_error_names_file_key_and_what_is_accepted() {
    let cases = [
        (
            "[volume]\nwiat = \"5s\"\n",
            "volume.wiat",
            "unknown key; did you mean `volume.wait`? It accepts a string like \"500ms\"",
        ),
        (
            "[volume]\ncolour = \"red\"\n",
            "volume.colour",
            "unknown key; [volume] has device, fstypes, allow, min_free,",
        ),
        (
            "colour = \"red\"\n",
            "colour",
            "the top of a file has state_dir, and the sections [containerd], [volume],",
        ),
        (
            "[volum]\nwait = \"5s\"\n",
            "volum",
            "unknown section; did you mean `[volume]`?",
        ),
        (
            "volume = 3\n",
            "volume",
            "is an integer, expected a table [volume]",
        ),
        (
            "[volume]\nwait = \"5\"\n",
            "volume.wait",
            "\"5\" is not a duration; use a string like \"500ms\", \"90s\"",
        ),
        (
            "[volume]\nwait = 5\n",
            "volume.wait",
            "is an integer, expected a string like",
        ),
        (
            "[volume]\nmin_free = \"2 gigs\"\n",
            "volume.min_free",
            "\"2 gigs\" is not a size; use a byte count or a string like \"512MiB\"",
        ),
        (
            "[volume]\nmin_free = 1.5\n",
            "volume.min_free",
            "is a float, expected a byte count",
        ),
        (
            "[volume]\nmin_free_inodes = -1\n",
            "volume.min_free_inodes",
            "-1 is negative",
        ),
        (
            "[volume]\ndevice = \"sdb\"\n",
            "volume.device",
            "\"sdb\" is not a device; use LABEL=, UUID=",
        ),
        (
            "[volume]\ndevice = \"FOO=bar\"\n",
            "volume.device",
            "is not a device",
        ),
        (
            "[volume]\nfstypes = []\n",
            "volume.fstypes",
            "must list at least one filesystem type",
        ),
        (
            "[volume]\nfstypes = [\"ext 4\"]\n",
            "volume.fstypes",
            "\"ext 4\" is not a filesystem type name",
        ),
        (
            "[volume]\nmount = \"yes\"\n",
            "volume.mount",
            "is a string, expected true or false",
        ),
        (
            "state_dir = \"run/x\"\n",
            "state_dir",
            "\"run/x\" is not an absolute path",
        ),
        (
            "[containerd]\nrestart = \"systemctl restart containerd\"\n",
            "containerd.restart",
            "is a string, expected a list of strings",
        ),
        (
            "[containerd]\nrestart = []\n",
            "containerd.restart",
            "must name a program",
        ),
        (
            "[containerd]\nrestart_timeout = \"0s\"\n",
            "containerd.restart_timeout",
            "must be more than 0s",
        ),
        (
            "[sandbox]\narchives = [\"pause.tar\"]\n",
            "sandbox.archives",
            "is not an absolute path",
        ),
        (
            "[sandbox]\nimage = \"\"\n",
            "sandbox.image",
            "is not an image reference",
        ),
        (
            "[sandbox]\npull_attempts = 0\n",
            "sandbox.pull_attempts",
            "must be at least 1; accepted: an integer from 1 to 100",
        ),
        (
            "[remediation]\nrestart_budget = 100000\n",
            "remediation.restart_budget",
            "too large",
        ),
    ];
    for (text, key, want) in cases {
        let err = error_of(text);
        assert_eq!(err.key, key, "for {text:?}: {err}");
        assert!(
            err.problem.contains(want),
            "for {text:?}: got {:?}, want {want:?}",
            err.problem
        );
        let shown = err.to_string();
        let at = err
            .at
            .unwrap_or_else(|| panic!("for {text:?}: no line and column"));
        assert!(shown.contains(&format!("50-x.toml:{at}: key `")), "{shown}");
    }
}

#[test]
fn broken_toml_names_the_file_line_and_column() {
    let err = error_of("[volume]\nwait = \"5s\"\n[volume\nwait = 5");
    assert_eq!(err.key, "");
    assert!(err.problem.starts_with("not valid TOML"), "{}", err.problem);
    assert_eq!(err.at.map(|at| at.line), Some(3), "{err}");
    assert!(err.to_string().contains("50-x.toml:3:"), "{err}");
}

#[test]
fn device_specs() {
    for (text, want) in [
        ("LABEL=eph", Some(DeviceSpec::Label("eph".into()))),
        ("UUID=0A1B", Some(DeviceSpec::Uuid("0a1b".into()))),
        ("PARTUUID=AB-01", Some(DeviceSpec::PartUuid("ab-01".into()))),
        (
            "PARTLABEL=containerd",
            Some(DeviceSpec::PartLabel("containerd".into())),
        ),
        ("/dev/vdb", Some(DeviceSpec::Path("/dev/vdb".into()))),
        ("/dev/", None),
        ("LABEL=", None),
        ("vdb", None),
    ] {
        assert_eq!(DeviceSpec::parse(text), want, "{text}");
    }
}

#[test]
fn fragment_that_is_not_utf8_names_the_file() {
    let t = Tree::new();
    let file = t.host().path("/etc/containerd-guard/config.d/50-x.toml");
    fs::create_dir_all(file.parent().unwrap()).unwrap();
    fs::write(&file, b"[volume]\nwait = \"1\xffs\"\n").unwrap();
    let err = load(&t.host(), None).unwrap_err();
    assert_eq!(err.file, file);
    assert!(err.problem.contains("not UTF-8"), "{err}");
}

#[test]
fn fragment_that_is_a_symlink_loop_names_the_file() {
    let t = Tree::new();
    let dir = t.host().path("/etc/containerd-guard/config.d");
    fs::create_dir_all(&dir).unwrap();
    // `ln -s b 50-a.toml; ln -s 50-a.toml b`: only 50-a.toml is a fragment.
    std::os::unix::fs::symlink("b", dir.join("50-a.toml")).unwrap();
    std::os::unix::fs::symlink("50-a.toml", dir.join("b")).unwrap();
    let err = load(&t.host(), None).unwrap_err();
    assert_eq!(err.file, dir.join("50-a.toml"));
    assert!(err.problem.contains("symbolic links"), "{err}");
}

#[test]
fn fragment_writable_by_group_or_others_is_refused_with_the_fix() {
    for mode in [0o664, 0o646] {
        let t = Tree::new();
        let file = t.write("/etc/containerd-guard/config.d/50-x.toml", "");
        chmod(&file, mode);
        let err = load(&t.host(), None).unwrap_err();
        assert_eq!(err.file, file);
        let shown = err.to_string();
        assert!(shown.contains("writable by group or others"), "{shown}");
        assert!(shown.contains(&format!("mode {mode:04o}")), "{shown}");
        assert!(shown.contains("chmod go-w"), "{shown}");
    }
}

#[test]
fn fragment_directory_writable_by_others_is_refused_unless_sticky() {
    let t = Tree::new();
    let file = t.write("/etc/containerd-guard/config.d/50-x.toml", "");
    let dir = file.parent().unwrap();
    chmod(dir, 0o777);
    let err = load(&t.host(), None).unwrap_err();
    assert!(err.problem.contains(&*dir.to_string_lossy()), "{err}");
    assert!(err.problem.contains("sticky"), "{err}");
    chmod(dir, 0o1777);
    assert!(
        load(&t.host(), None).is_ok(),
        "sticky: only owners replace files"
    );
}

#[test]
fn huge_fragment_is_refused_unread() {
    let t = Tree::new();
    let file = t.write("/etc/containerd-guard/config.d/50-x.toml", "");
    fs::write(&file, vec![b'#'; (MAX_CONFIG + 1) as usize]).unwrap();
    let err = load(&t.host(), None).unwrap_err();
    assert!(err.problem.contains("larger than"), "{err}");
}

#[test]
fn an_existing_archive_is_judged_with_the_config_a_missing_one_later() {
    let t = Tree::new();
    let archive = t.write("/usr/lib/containerd-guard/images/pause.tar", "");
    let cfg = t.write(
        "/etc/containerd-guard/config.d/50-x.toml",
        "[sandbox]\narchives = [\"/usr/lib/containerd-guard/images/pause.tar\", \"/later.tar\"]\n",
    );
    assert!(
        load(&t.host(), None).is_ok(),
        "root's 0644 archive, one not there yet"
    );
    chmod(&archive, 0o666);
    let err = load(&t.host(), None).unwrap_err();
    assert_eq!(err.file, archive);
    assert_eq!(err.key, "sandbox.archives");
    assert!(
        err.problem.contains(&*cfg.to_string_lossy()),
        "names where it is listed: {err}"
    );
    assert!(err.problem.contains("chown root:"), "{err}");
}
