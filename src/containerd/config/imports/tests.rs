use super::*;
use crate::containerd::config::load_in;

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = inside(tmp.path(), Path::new(path));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    tmp
}

fn table(text: &str) -> Table {
    text.parse().unwrap()
}

#[test]
fn merge_overrides_scalars_appends_arrays_and_replaces_plugin_tables_whole() {
    for (to, from, want) in [
        // scalars: the later file wins; a zero value never overrides
        ("root = \"/a\"", "root = \"/b\"", "root = \"/b\""),
        ("root = \"/a\"", "root = \"\"", "root = \"/a\""),
        ("oom_score = -5", "oom_score = 0", "oom_score = -5"),
        // non-plugin tables merge key by key (grpc is a struct in containerd)
        (
            "[grpc]\naddress = \"/a.sock\"\nuid = 1",
            "[grpc]\naddress = \"/b.sock\"",
            "[grpc]\naddress = \"/b.sock\"\nuid = 1",
        ),
        // arrays append
        (
            "disabled_plugins = [\"a\"]",
            "disabled_plugins = [\"b\"]",
            "disabled_plugins = [\"a\", \"b\"]",
        ),
        // a plugin's table is replaced whole: the earlier snapshotter key is gone
        (
            "[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"p:1\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"native\"",
            "[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"p:2\"",
            "[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"p:2\"",
        ),
        // other plugins stay
        (
            "[plugins.a]\nx = 1\n[plugins.b]\ny = 2",
            "[plugins.b]\nz = 3",
            "[plugins.a]\nx = 1\n[plugins.b]\nz = 3",
        ),
    ] {
        let mut t = table(to);
        merge(&mut t, table(from));
        assert_eq!(t, table(want), "{to:?} + {from:?}");
    }
}

#[test]
fn globs_match_star_and_question_mark_per_component() {
    for (p, n, want) in [
        ("*.toml", "a.toml", true),
        ("*.toml", "a.toml.bak", false),
        ("?.toml", "ab.toml", false),
        ("a*b*c", "axxbyyc", true),
        ("a*b*c", "axxbyy", false),
        ("*", ".hidden", true),
    ] {
        assert_eq!(matches(p, n), want, "{p} ~ {n}");
    }
}

#[test]
fn imports_follow_containerd_relative_glob_breadth_first_and_once() {
    let t = tree(&[
        (
            "/etc/containerd/config.toml",
            "version = 2\nroot = \"/var/lib/containerd\"\nimports = [\"conf.d/root.toml\", \"/etc/cd/*.toml\"]\n\
             [grpc]\naddress = \"/run/containerd/containerd.sock\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"p:1\"\n",
        ),
        // relative to the importing file's directory; imports itself back (read once)
        (
            "/etc/containerd/conf.d/root.toml",
            "version = 2\nroot = \"/mnt/eph\"\nimports = [\"../config.toml\"]\n",
        ),
        // globbed, in lexical order: b overrides a
        ("/etc/cd/a.toml", "state = \"/run/a\"\n[grpc]\naddress = \"/run/a.sock\"\n"),
        ("/etc/cd/b.toml", "state = \"/run/b\"\n"),
        ("/etc/cd/c.txt", "state = \"/run/c\"\n"),
    ]);
    let c = load_in(t.path(), Path::new("/etc/containerd/config.toml")).unwrap();
    assert_eq!(c.root, Path::new("/mnt/eph"));
    assert_eq!(c.state, Path::new("/run/b"));
    assert_eq!(c.address, Path::new("/run/a.sock"));
    assert_eq!(c.sandbox_image, "p:1");
}

#[test]
fn version_3_imports_replace_the_images_plugin_whole() {
    let t = tree(&[
        (
            "/c.toml",
            "version = 3\nimports = [\"/d.toml\"]\n\
             [plugins.\"io.containerd.cri.v1.images\"]\nsnapshotter = \"native\"\n\
             [plugins.\"io.containerd.cri.v1.images\".pinned_images]\nsandbox = \"p:9\"\n",
        ),
        (
            "/d.toml",
            "version = 3\n[plugins.\"io.containerd.cri.v1.images\"]\nsnapshotter = \"btrfs\"\n",
        ),
    ]);
    let c = load_in(t.path(), Path::new("/c.toml")).unwrap();
    assert_eq!(c.snapshotter, "btrfs");
    // the pin went with the replaced table: containerd 2's own default applies
    assert_eq!(
        c.sandbox_image,
        crate::containerd::config::DEFAULT_SANDBOX_V3
    );
}

#[test]
fn a_missing_import_keeps_what_was_merged_and_bad_imports_name_the_file() {
    let t = tree(&[
        (
            "/c.toml",
            "version = 2\nroot = \"/x\"\nimports = [\"/gone.toml\", \"/later.toml\"]\n",
        ),
        ("/later.toml", "root = \"/y\"\n"),
    ]);
    assert_eq!(
        load_in(t.path(), Path::new("/c.toml")).unwrap().root,
        Path::new("/x")
    );
    let t = tree(&[
        ("/c.toml", "version = 2\nimports = [\"/bad.toml\"]\n"),
        ("/bad.toml", "root = 5\n"),
    ]);
    let err = load_in(t.path(), Path::new("/c.toml")).unwrap_err();
    assert!(
        err.text().contains("key `root` must be a string"),
        "{err:?}"
    );
    let t = tree(&[("/c.toml", "imports = \"/x.toml\"\n")]);
    let err = load_in(t.path(), Path::new("/c.toml")).unwrap_err();
    assert!(err.text().contains("/c.toml: key `imports`"), "{err:?}");
}

#[test]
fn an_import_that_is_a_fifo_is_refused_not_waited_on() {
    let t = tree(&[("/c.toml", "version = 2\nimports = [\"/f.toml\"]\n")]);
    let fifo = t.path().join("f.toml");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    match load_in(t.path(), Path::new("/c.toml")) {
        Err(LoadError::Refused(why)) => assert!(why.contains("a FIFO"), "{why}"),
        other => panic!("{other:?}"),
    }
}

/// containerd 2.3's own default config with a `conf.d` drop-in, as an image builder
/// writes one: the drop-in's socket (a version 3 `[grpc]`, migrated on its own) and its
/// sandbox image are the values read, and `guard config` names the drop-in for each.
#[test]
fn a_conf_d_drop_ins_values_are_read_and_named_by_their_file() {
    let main = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/containerd/v4-2.3.4-default.toml"),
    )
    .unwrap();
    let drop_in = "version = 3\n[grpc]\naddress = \"/run/k8s/containerd.sock\"\n\
                   [plugins.\"io.containerd.cri.v1.images\".pinned_images]\n\
                   sandbox = \"registry.example/pause:3.10.2\"\n";
    let t = tree(&[
        ("/etc/containerd/config.toml", &main),
        ("/etc/containerd/conf.d/10-node.toml", drop_in),
    ]);
    let named = Path::new("/etc/containerd/config.toml");
    let c = load_in(t.path(), named).unwrap();
    assert_eq!(c.address, Path::new("/run/k8s/containerd.sock"));
    assert_eq!(c.sandbox_image, "registry.example/pause:3.10.2");
    let from = c.for_the_guard(named);
    let drop_in = "containerd's config /etc/containerd/conf.d/10-node.toml";
    assert_eq!(from.socket.1, format!("{drop_in}: grpc.address"));
    let key = "plugins.\"io.containerd.cri.v1.images\".pinned_images.sandbox";
    assert_eq!(from.sandbox_image.1, format!("{drop_in}: {key}"));
}
