//! Inputs another user could write or that cannot be read: config files, directories,
//! archives and config fragments are refused (exit 3) and nothing is done; root-owned
//! inputs are trusted.
//!
//! The fault matrix around the guard's own inputs and state, on real components. Each
//! case that reaches a real containerd ends with the "nothing lost" check of its content
//! store and images. Root only (`sudo scripts/test`), except the fragment faults, which
//! need nothing but the binary.

use testkit as support;

use std::path::{Path, PathBuf};
use support::node::{runtime, Node, TOOLS};
use support::runtime::run_pod_sandbox;
use support::suite::faults_inputs::{chmod, image, shown, InputsNode};
use support::{root_or_skip, write_executable, Guard, TempRoot};

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::chown(p, Some(uid), Some(uid)).unwrap();
}

/// Runs `guard runtime` with the config `fault` leaves, on a node a trusting guard would
/// restart; expects exit 3 naming `needles` and nothing done.
fn refused(tag: &str, fault: impl FnOnce(&Node, PathBuf) -> (PathBuf, Vec<String>)) {
    let n = Node::tkgs(&image(tag));
    let archive = n.archive();
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_archives(&[&archive]).sandbox_pull(false)
    });
    let (cfg, needles) = fault(&n, cfg);
    let before = n.content();
    let pid = n.ctrd.identity();
    let out = runtime(&cfg);
    let needles: Vec<&str> = needles.iter().map(String::as_str).collect();
    out.expect_config_error(&needles);
    n.assert_untouched(pid, &before);
}

#[test]
fn config_file_writable_by_others_is_refused_exit_3() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    refused("other-writable", |_, cfg| {
        chmod(&cfg, 0o646);
        let fix = format!("chown root: {0} && chmod go-w {0}", cfg.display());
        (cfg.clone(), vec![shown(&cfg), "mode 0646".into(), fix])
    });
}

#[test]
fn config_file_owned_by_another_user_is_refused_exit_3() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    refused("other-owner", |_, cfg| {
        chown(&cfg, 65534);
        let owner = "(uid 65534)".to_string();
        (
            cfg.clone(),
            vec![shown(&cfg), owner, "owned by another user".into()],
        )
    });
}

#[test]
fn config_in_an_other_writable_directory_is_refused_unless_sticky() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    refused("open-dir", |n, cfg| {
        let dir = n.t.path().join("open");
        std::fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o777);
        let moved = dir.join("guard.toml");
        std::fs::rename(&cfg, &moved).unwrap();
        let why = "writable by group or others without the sticky bit".to_string();
        (moved, vec![shown(&dir), why, "mode 0777".into()])
    });
    // The same file in a sticky directory (/tmp's mode) is read: only its owner can
    // replace it there.
    let t = TempRoot::new();
    let dir = t.path().join("sticky");
    std::fs::create_dir(&dir).unwrap();
    chmod(&dir, 0o1777);
    let cfg = dir.join("guard.toml");
    std::fs::write(&cfg, "[hold]\ntimeout = \"1s\"\n").unwrap();
    chmod(&cfg, 0o644);
    let out = Guard::with_config(&cfg).run(&["config"]);
    assert_eq!(out.code, 0, "{}", out.dump());
}

#[test]
fn archive_owned_by_another_user_is_refused_exit_3() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    refused("archive-owner", |n, cfg| {
        let archive = n.t.path().join("pause.oci.tar");
        chown(&archive, 65534);
        let listed = format!("listed in {}", cfg.display());
        let needles = vec![
            shown(&archive),
            "sandbox.archives".into(),
            "(uid 65534)".into(),
            listed,
        ];
        (cfg, needles)
    });
}

#[test]
fn archive_writable_by_group_is_refused_exit_3() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    refused("archive-group", |n, cfg| {
        let archive = n.t.path().join("pause.oci.tar");
        chmod(&archive, 0o664);
        let fix = format!("chmod go-w {}", archive.display());
        (cfg, vec![shown(&archive), "mode 0664".into(), fix])
    });
}

/// `guard --sysroot S`: the layered search under S (`S/etc/containerd-guard/config.d`).
fn layered(sysroot: &Path) -> Guard {
    Guard::bare()
        .arg("--sysroot")
        .arg(sysroot.display().to_string())
}

#[test]
fn config_fragment_writable_by_group_is_refused_exit_3() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&image("fragment-group"));
    let sysroot = n.t.path().join("sysroot");
    let dir = sysroot.join("etc/containerd-guard/config.d");
    std::fs::create_dir_all(&dir).unwrap();
    let fragment = dir.join("50-node.toml");
    std::fs::write(
        &fragment,
        n.guard_config(&n.ctrd.restart_program()).render(),
    )
    .unwrap();
    chmod(&fragment, 0o664);
    let before = n.content();
    let pid = n.ctrd.identity();
    let out = layered(&sysroot).run(&["--json", "runtime"]);
    out.expect_config_error(&[&shown(&fragment), "mode 0664", "chmod go-w"]);
    n.assert_untouched(pid, &before);
    chmod(&fragment, 0o644);
    let out = layered(&sysroot).run(&["config"]);
    assert_eq!(out.code, 0, "root's 0644 fragment is read:\n{}", out.dump());
    assert!(out.stdout.contains(&shown(&fragment)), "{}", out.dump());
}

#[test]
fn trusted_root_owned_inputs_are_read_and_the_guard_acts() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&image("trusted"));
    let archive = n.archive();
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_archives(&[&archive]).sandbox_pull(false)
    });
    let before = n.content();
    let out = runtime(&cfg);
    out.expect(0, "remedy.restart", "pass");
    assert_eq!(n.ctrd.restarts(), 1, "{}", out.dump());
    before.assert_nothing_lost(&n.content());
    assert!(run_pod_sandbox(&n.t.socket()).is_ok(), "{}", out.dump());
}

/// A wrapper around the restart program that, once containerd is back, drops `archive`
/// in place with `mode`: an archive that appears after the config was read.
fn restart_then_drop(n: &Node, archive: &Path, mode: u32) -> PathBuf {
    let good = n.archive();
    let p = n.t.path().join("restart-and-drop");
    let body = format!(
        "#!/bin/sh\n'{}' || exit 1\ncp '{}' '{}' && chmod {:o} '{}'\n",
        n.ctrd.restart_program().display(),
        good.display(),
        archive.display(),
        mode,
        archive.display()
    );
    write_executable(&p, &body);
    p
}

#[test]
fn archive_appearing_later_writable_by_others_is_refused_at_import() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::with_other_image(&image("late-archive"));
    let before = n.content_with_other_image();
    // containerd died (a restart is due); the archive is not there when the guard starts.
    n.ctrd.stop();
    let archive = n.t.path().join("late/pause.oci.tar");
    std::fs::create_dir(archive.parent().unwrap()).unwrap();
    let restart = restart_then_drop(&n, &archive, 0o666);
    let cfg = n.config_with(&restart, |c| {
        c.sandbox_archives(&[&archive])
            .sandbox_pull(false)
            .hold_timeout("15s")
    });
    let out = runtime(&cfg);
    assert_eq!(out.code, 1, "held, honestly unusable:\n{}", out.dump());
    assert_eq!(out.status("remedy.restart"), "pass", "{}", out.dump());
    assert_eq!(
        out.status("runtime.sandbox-image"),
        "fail",
        "{}",
        out.dump()
    );
    out.mentions(
        "remedy.restore-image",
        &["REFUSED", &shown(&archive), "mode 0666", "chmod go-w"],
    );
    assert_eq!(n.ctrd.restarts(), 1);
    let after = n.content();
    before.assert_nothing_lost(&after);
    assert_eq!(
        before.added_in(&after),
        Vec::<&str>::new(),
        "nothing imported"
    );
    // Now that it exists, the next run refuses it with the config.
    let verify = Guard::with_config(&cfg).run(&["--json", "verify"]);
    verify.expect_config_error(&[&shown(&archive), "sandbox.archives"]);
}

/// Fragment faults end at the config: no containerd needed, nor root.
fn fragment_error(write: impl FnOnce(&Path) -> PathBuf, needles: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("etc/containerd-guard/config.d");
    std::fs::create_dir_all(&dir).unwrap();
    let file = write(&dir);
    let out = layered(tmp.path()).run(&["--json", "runtime"]);
    let mut all = vec![shown(&file)];
    all.extend(needles.iter().map(|s| s.to_string()));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    out.expect_config_error(&all);
}

#[test]
fn config_fragment_with_an_unknown_key_exits_3_naming_file_and_key() {
    fragment_error(
        |dir| {
            let f = dir.join("50-x.toml");
            std::fs::write(&f, "[hold]\ntimeuot = \"1s\"\n").unwrap();
            chmod(&f, 0o644);
            f
        },
        &["hold.timeuot"],
    );
}

#[test]
fn config_fragment_not_utf8_exits_3_naming_the_file() {
    fragment_error(
        |dir| {
            let f = dir.join("50-x.toml");
            std::fs::write(&f, b"[hold]\ntimeout = \"1\xffs\"\n").unwrap();
            chmod(&f, 0o644);
            f
        },
        &["not UTF-8"],
    );
}

#[test]
fn config_fragment_symlink_loop_exits_3_naming_the_file() {
    fragment_error(
        |dir| {
            std::os::unix::fs::symlink("b", dir.join("50-a.toml")).unwrap();
            std::os::unix::fs::symlink("50-a.toml", dir.join("b")).unwrap();
            dir.join("50-a.toml")
        },
        &["symbolic links"],
    );
}
