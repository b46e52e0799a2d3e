//! What the guard keeps and reads about itself on a hostile or hand-driven node:
//! a hand-run `guard volume` on a live node, files the guard creates as root in
//! directories another user can write to (the Prometheus textfile directory, a
//! `state_dir` someone else owns), and config values and directories that must be
//! refused before anything runs. Real users (`useradd`), real links, real containerd.

use testkit as support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use support::node::{runtime, Node, TOOLS};
use support::runtime::{dead_port, PauseImage, Restartable};
use support::{
    root_or_skip, run, run_quiet, unique, FsKind, Guard, GuardConfig, LoopVolume, Outcome, TempRoot,
};

fn shown(p: &Path) -> String {
    p.display().to_string()
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A file's content and modification time (to the nanosecond).
#[derive(Debug, PartialEq, Eq)]
struct Snapshot {
    text: String,
    mtime: (i64, i64),
    ino: u64,
}

#[track_caller]
fn snapshot(p: &Path) -> Snapshot {
    let m = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    Snapshot {
        text: String::from_utf8_lossy(&std::fs::read(p).unwrap()).into_owned(),
        mtime: (m.mtime(), m.mtime_nsec()),
        ino: m.ino(),
    }
}

// ---- a hand-run `guard volume` on a running node -----------------------------------------

/// The guard's config for a node whose volume is `LABEL=label` and whose restart command
/// is the test's restart program (written by `Restartable::start` at this path).
fn volume_node_config(t: &TempRoot, label: &str) -> PathBuf {
    t.write_guard_config_with(|c| {
        c.containerd_wait("20s")
            .containerd_restart(&[&shown(&t.path().join("restart-containerd"))])
            .volume_device(&format!("LABEL={label}"))
            .volume_wait("2s")
            .sandbox_pull(false)
            .hold_timeout("60s")
    })
}

#[test]
fn hand_run_volume_on_a_running_node_writes_nothing_and_a_later_stale_containerd_is_restarted() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let image = format!("127.0.0.1:{}/guard/pause:hand-run", dead_port());
    let t = TempRoot::new();
    t.write_containerd_config_with(Some(&image));
    let label = unique("cg", 8);
    let vol = LoopVolume::new(&t.images(), FsKind::Ext4, &label, &t.volume_path());
    let cfg = volume_node_config(&t, &label);
    // The boot: phase 1 before containerd, then containerd on the verified volume.
    Guard::with_config(&cfg)
        .volume_json()
        .expect(0, "volume.containerd-not-started", "pass");
    let marker = t.guard_state_dir().join("volume.ok");
    let record = t.guard_state_dir().join("volume.json");
    let (marker_before, record_before) = (snapshot(&marker), snapshot(&record));
    let ctrd = Restartable::start(&t);
    let mut n = Node {
        ctrd,
        vol,
        img: PauseImage::new(&image),
        t,
    };
    n.import_image();
    // An operator re-runs phase 1 by hand on the running node.
    let out = Guard::with_config(&cfg).volume_json();
    assert_eq!(
        snapshot(&marker),
        marker_before,
        "volume.ok must stay as phase 1 wrote it:\n{}",
        out.dump()
    );
    assert_eq!(
        snapshot(&record),
        record_before,
        "volume.json must stay as phase 1 wrote it:\n{}",
        out.dump()
    );
    out.expect(1, "volume.containerd-not-started", "fail")
        .mentions(
            "volume.containerd-not-started",
            &["guard verify", "volume.ok", "nothing was written"],
        );
    // Later containerd goes stale (the TKGS order): phase 2 still restarts it, phase 1 did
    // not hold it back.
    n.ctrd.stop();
    drop(n.vol.mount.take());
    n.ctrd.restart_by_hand();
    n.vol.mount = Some(n.vol.device.mount(&n.t.volume_path(), ""));
    let before = n.content();
    let out = runtime(&cfg);
    out.expect(0, "remedy.restart", "pass");
    assert_eq!(n.ctrd.restarts(), 1, "{}", out.dump());
    before.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

#[test]
fn hand_run_volume_with_containerd_stopped_rechecks_for_real_and_keeps_the_marker_true() {
    let Some(_root) = root_or_skip(&["losetup", "mkfs.ext4", "mount"]) else {
        return;
    };
    let t = TempRoot::new();
    let label = unique("cg", 8);
    let mut vol = LoopVolume::new(&t.images(), FsKind::Ext4, &label, &t.volume_path());
    let cfg = volume_node_config(&t, &label);
    let marker = t.guard_state_dir().join("volume.ok");
    Guard::with_config(&cfg)
        .volume_json()
        .expect(0, "volume.mounted", "pass");
    let first = snapshot(&marker);
    // containerd is not running: a passing re-check rewrites the marker...
    Guard::with_config(&cfg)
        .volume_json()
        .expect(0, "volume.mounted", "pass");
    assert_eq!(snapshot(&marker).text, first.text);
    // ...and a failing one removes it: nothing runs that it would disarm, and containerd
    // must not start on what is now there.
    drop(vol.mount.take());
    Guard::with_config(&cfg)
        .volume_json()
        .expect(1, "volume.mounted", "fail");
    assert!(
        !marker.exists(),
        "a failed re-check with containerd stopped"
    );
}

// ---- files created as root where another user can plant links ----------------------------

/// A system user made for one test, removed on drop.
struct TestUser {
    name: String,
    uid: u32,
}

impl TestUser {
    fn new() -> TestUser {
        let name = unique("cgp", 10);
        run(
            "useradd",
            &[
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                &name,
            ],
        );
        let uid = run("id", &["-u", &name]).trim().parse().unwrap();
        TestUser { name, uid }
    }

    /// Runs `perl -e script args...` as this user.
    fn perl(&self, script: &str, args: &[&str]) {
        let uid = self.uid.to_string();
        let mut argv = vec![
            "--reuid",
            &uid,
            "--regid",
            &uid,
            "--clear-groups",
            "--",
            "perl",
            "-e",
            script,
        ];
        argv.extend_from_slice(args);
        run("setpriv", &argv);
    }

    /// Plants `dir/NAME -> victim` and, for each of the next `count` pids,
    /// `dir/.NAME.<pid>.tmp -> victim` (the old writer's temporary name), for each name.
    fn plant(&self, dir: &Path, names: &[&str], victim: &Path, count: u32) -> usize {
        let last: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let max: u32 = std::fs::read_to_string("/proc/sys/kernel/pid_max")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let script = r#"my ($dir, $victim, $last, $count, $max, @names) = @ARGV;
            for my $name (@names) {
                symlink($victim, "$dir/$name") or die "$name: $!";
                for my $i (1 .. $count) {
                    my $pid = ($last + $i) % $max;
                    next if $pid < 2;
                    symlink($victim, "$dir/.$name.$pid.tmp") or die "$pid: $!";
                }
            }"#;
        let (last, count, max) = (last.to_string(), count.to_string(), max.to_string());
        let mut args = vec![
            dir.to_str().unwrap(),
            victim.to_str().unwrap(),
            &last,
            &count,
            &max,
        ];
        args.extend_from_slice(names);
        self.perl(script, &args);
        links_in(dir)
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        run_quiet("userdel", &[&self.name]);
    }
}

fn links_in(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_symlink())
        .count()
}

/// A tree other users can enter (the test's TMPDIR may be 0700), with a root-owned victim
/// file in it.
fn traversable_tree() -> (tempfile::TempDir, PathBuf) {
    let base = std::env::temp_dir();
    let base = if is_private(&base) {
        PathBuf::from("/var/tmp")
    } else {
        base
    };
    let tree = tempfile::Builder::new()
        .prefix("cg-hostile.")
        .tempdir_in(base)
        .unwrap();
    chmod(tree.path(), 0o755);
    let victim = tree.path().join("victim");
    std::fs::write(&victim, "root's file\n").unwrap();
    chmod(&victim, 0o644);
    (tree, victim)
}

/// A directory other users cannot enter (scripts/test's per-run TMPDIR is 0700).
fn is_private(dir: &Path) -> bool {
    dir.ancestors()
        .any(|p| std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 == 0))
}

/// A guard config whose volume is missing (phase 1 fails at once, and writes its state
/// and metrics): `state_dir` and `[metrics] textfile` as given.
fn missing_volume_config(tree: &Path, state_dir: &Path, textfile: &Path) -> PathBuf {
    let t = tree.join("guard.toml");
    let containerd = tree.join("containerd.toml");
    std::fs::write(
        &containerd,
        format!(
            "version = 2\nroot = \"{}\"\n",
            shown(&tree.join("nothing-here"))
        ),
    )
    .unwrap();
    chmod(&containerd, 0o644);
    let config = GuardConfig::new()
        .state_dir(state_dir)
        .containerd_config(&containerd)
        .volume_wait("0s")
        .metrics_textfile(textfile);
    std::fs::write(&t, config.render()).unwrap();
    chmod(&t, 0o644);
    t
}

const USER_TOOLS: &[&str] = &["useradd", "userdel", "setpriv", "perl"];

#[test]
fn metrics_textfile_in_a_directory_another_user_owns_never_writes_through_planted_links() {
    let Some(_root) = root_or_skip(USER_TOOLS) else {
        return;
    };
    let user = TestUser::new();
    let (tree, victim) = traversable_tree();
    // Like Debian's /var/lib/prometheus/node-exporter: the prometheus user's, 0755.
    let textdir = tree.path().join("node-exporter");
    std::fs::create_dir(&textdir).unwrap();
    std::os::unix::fs::chown(&textdir, Some(user.uid), Some(user.uid)).unwrap();
    let textfile = textdir.join("containerd-guard.prom");
    let cfg = missing_volume_config(tree.path(), &tree.path().join("state"), &textfile);
    let victim_before = snapshot(&victim);
    let planted = user.plant(&textdir, &["containerd-guard.prom"], &victim, 5000);
    let out = Guard::with_config(&cfg).run(&["--json", "volume"]);
    assert_eq!(out.code, 1, "the volume is missing:\n{}", out.dump());
    assert_eq!(
        snapshot(&victim),
        victim_before,
        "root wrote through a link the textfile directory's owner planted:\n{}",
        out.dump()
    );
    let written = std::fs::symlink_metadata(&textfile).unwrap();
    assert!(
        written.is_file(),
        "the final name is the guard's own file now"
    );
    assert_eq!(written.uid(), 0);
    let text = std::fs::read_to_string(&textfile).unwrap();
    assert!(text.contains("containerd_guard_usable 0"), "{text}");
    assert!(
        !out.stdout.contains("metrics.textfile"),
        "a directory owned by another user is fine:\n{}",
        out.dump()
    );
    assert_eq!(
        links_in(&textdir),
        planted - 1,
        "only the final name was replaced"
    );
}

#[test]
fn metrics_textfile_in_a_directory_writable_by_others_is_not_written_and_warns_naming_it() {
    let Some(_root) = root_or_skip(USER_TOOLS) else {
        return;
    };
    let user = TestUser::new();
    let (tree, victim) = traversable_tree();
    let textdir = tree.path().join("textfiles");
    std::fs::create_dir(&textdir).unwrap();
    chmod(&textdir, 0o777);
    let textfile = textdir.join("containerd-guard.prom");
    let cfg = missing_volume_config(tree.path(), &tree.path().join("state"), &textfile);
    let victim_before = snapshot(&victim);
    user.plant(&textdir, &["containerd-guard.prom"], &victim, 2000);
    let out = Guard::with_config(&cfg).run(&["--json", "volume"]);
    out.expect(1, "metrics.textfile", "warn").mentions(
        "metrics.textfile",
        &[&shown(&textdir), "mode 0777", "sticky", "chmod"],
    );
    assert_eq!(
        out.status("volume.mounted"),
        "fail",
        "the verdict is the volume's"
    );
    assert_eq!(snapshot(&victim), victim_before);
    assert!(
        std::fs::symlink_metadata(&textfile).unwrap().is_symlink(),
        "nothing written there"
    );
}

#[test]
fn state_dir_another_user_owns_is_refused_naming_it_and_its_links_are_never_followed() {
    let Some(_root) = root_or_skip(USER_TOOLS) else {
        return;
    };
    let user = TestUser::new();
    let (tree, victim) = traversable_tree();
    // The user owns the directory above state_dir and state_dir itself, with links in it.
    let theirs = tree.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(user.uid), Some(user.uid)).unwrap();
    let state = theirs.join("containerd-guard");
    user.perl(
        "mkdir($ARGV[0], 0755) or die $!",
        &[state.to_str().unwrap()],
    );
    let names = [
        "volume.ok",
        "volume.json",
        "metrics.json",
        "runtime.json",
        "runtime.status",
        "repair.lock",
    ];
    user.plant(&state, &names, &victim, 3000);
    let textfile = tree.path().join("metrics/containerd-guard.prom");
    std::fs::create_dir(textfile.parent().unwrap()).unwrap();
    let cfg = missing_volume_config(tree.path(), &state, &textfile);
    let victim_before = snapshot(&victim);
    let volume = Guard::with_config(&cfg).run(&["--json", "volume"]);
    assert_eq!(snapshot(&victim), victim_before, "{}", volume.dump());
    let reset = Guard::with_config(&cfg).run(&["reset"]);
    assert_eq!(snapshot(&victim), victim_before, "{}", reset.dump());
    assert_eq!(reset.code, 1, "{}", reset.dump());
    for out in [&volume, &reset] {
        let said = format!("{}{}", out.stdout, out.stderr);
        let dir = shown(&state);
        for needle in [
            dir.as_str(),
            user.name.as_str(),
            "another user",
            "chown root",
        ] {
            assert!(said.contains(needle), "no {needle:?} in:\n{}", out.dump());
        }
    }
}

#[test]
fn repair_lock_that_is_a_symlink_in_root_s_state_dir_is_refused_naming_it() {
    let Some(_root) = root_or_skip(&[]) else {
        return;
    };
    let (tree, victim) = traversable_tree();
    let state = tree.path().join("state");
    std::fs::create_dir(&state).unwrap();
    let lock = state.join("repair.lock");
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let textfile = tree.path().join("containerd-guard.prom");
    let cfg = missing_volume_config(tree.path(), &state, &textfile);
    let victim_before = snapshot(&victim);
    let out = Guard::with_config(&cfg).run(&["reset"]);
    assert_eq!(snapshot(&victim), victim_before, "{}", out.dump());
    assert_eq!(out.code, 1, "{}", out.dump());
    for needle in [shown(&lock).as_str(), "repair.lock is a symbolic link"] {
        assert!(
            out.stderr.contains(needle),
            "no {needle:?}:\n{}",
            out.dump()
        );
    }
}

// ---- config bounds and the ownership of config.d -----------------------------------------

/// A config that is valid but for `extra` (TOML tables appended as text: these tests write
/// values out of bounds, which the builder's typed setters would not let them spell).
fn config_with(t: &TempRoot, extra: &str) -> PathBuf {
    t.write_guard_config_raw(&format!(
        "state_dir = \"{}\"\n\n[containerd]\nconfig = \"{}\"\n\n{extra}\n",
        shown(&t.guard_state_dir()),
        shown(&t.containerd_config()),
    ))
}

#[test]
fn a_duration_over_7_days_is_a_config_error_not_a_panic() {
    let t = TempRoot::new();
    let cfg = config_with(&t, "[volume]\nwait = \"18000000000000000000s\"\n");
    let out = Guard::with_config(&cfg).run(&["volume"]);
    out.expect_config_error(&[&shown(&cfg), "volume.wait", "7d"]);
    let cfg = config_with(&t, "[hold]\ntimeout = \"169h\"\n");
    let out = Guard::with_config(&cfg).run(&["runtime"]);
    out.expect_config_error(&[&shown(&cfg), "hold.timeout", "7d"]);
    let cfg = config_with(&t, "[hold]\ntimeout = \"168h\"\n");
    let out = Guard::with_config(&cfg).run(&["config"]);
    assert_eq!(out.code, 0, "7 days is accepted:\n{}", out.dump());
}

#[test]
fn a_size_over_1_pib_is_a_config_error() {
    let t = TempRoot::new();
    for (value, shown_as) in [
        ("\"2048TiB\"", "2048TiB"),
        ("2305843009213693952", "2305843009213693952"),
    ] {
        let cfg = config_with(&t, &format!("[volume]\nmin_free = {value}\n"));
        let out = Guard::with_config(&cfg).run(&["config"]);
        out.expect_config_error(&[&shown(&cfg), "volume.min_free", shown_as, "1PiB"]);
    }
    let cfg = config_with(&t, "[volume]\nmin_free = \"1024TiB\"\n");
    let out = Guard::with_config(&cfg).run(&["config"]);
    assert_eq!(out.code, 0, "1 PiB is accepted:\n{}", out.dump());
}

/// `guard --sysroot S config`: the layered search under S.
fn layered_config(sysroot: &Path) -> Outcome {
    Guard::bare()
        .arg("--sysroot")
        .arg(shown(sysroot))
        .run(&["config"])
}

#[test]
fn a_config_d_directory_or_mask_link_another_user_owns_or_can_write_is_a_config_error() {
    let Some(_root) = root_or_skip(USER_TOOLS) else {
        return;
    };
    let user = TestUser::new();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("etc/containerd-guard/config.d");
    std::fs::create_dir_all(&dir).unwrap();
    chmod(&dir, 0o755);
    let mask = dir.join("50-site.toml");
    std::os::unix::fs::symlink("/dev/null", &mask).unwrap();
    let out = layered_config(tmp.path());
    assert_eq!(out.code, 0, "root's directory and mask:\n{}", out.dump());
    // A mask link another user made (e.g. in a directory they could write once).
    std::os::unix::fs::lchown(&mask, Some(user.uid), Some(user.uid)).unwrap();
    layered_config(tmp.path()).expect_config_error(&[&shown(&mask), &user.name, "another user"]);
    std::os::unix::fs::lchown(&mask, Some(0), Some(0)).unwrap();
    // The directory itself: another user's, then writable by others, even holding only a
    // mask (nothing read from it, so nothing else would judge it).
    std::os::unix::fs::chown(&dir, Some(user.uid), Some(user.uid)).unwrap();
    layered_config(tmp.path()).expect_config_error(&[&shown(&dir), &user.name, "chown root"]);
    std::os::unix::fs::chown(&dir, Some(0), Some(0)).unwrap();
    chmod(&dir, 0o777);
    layered_config(tmp.path()).expect_config_error(&[&shown(&dir), "mode 0777", "chmod go-w"]);
}
