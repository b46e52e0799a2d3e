//! The lint on a hostile image tree: ownership judged against the image's owner, links
//! that never reach the host's files, fifos and huge files refused without blocking, a
//! budget on what it reads, and nothing written or executed.
//!
//! `guard lint --root DIR` on image trees built here the way docs/image-builder.md says
//! (testkit::suite::lint::Image): Debian's containerd unit, kubeadm's kubelet unit, the
//! package's drop-ins and hygiene units copied from this repository, an fstab line,
//! containerd's config, the guard's fragment and a real OCI archive of the sandbox image.
//! Each test plants one hazard in a clean image and checks the finding that names it (id,
//! status, `FILE:LINE`, exit code). The same hazards are planted in the vm-tests image
//! (vm-tests/run lint), and scenario disks are linted before they boot.

use testkit as support;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use support::suite::lint::{expect, Image, Outside, ETC};
use support::{Guard, Outcome};

/// Ownership is judged against the image's own owner: a rootless build (every file
/// owned by a subuid) is fine; a file of another uid, or group-writable, is not.
#[test]
fn ownership_is_judged_relative_to_the_images_owner() {
    let Some(_root) = support::root_or_skip(&[]) else {
        return;
    };
    let img = Image::clean();
    chown_tree(img.root(), 100_000);
    let o = img.lint(&["--warn-is-error"]);
    assert_eq!(
        o.code,
        0,
        "a rootless image owned by uid 100000:\n{}",
        o.dump()
    );
    let fragment = img.at("/usr/lib/containerd-guard/config.d/50-image.toml");
    std::os::unix::fs::chown(&fragment, Some(100_999), None).unwrap();
    expect(
        &img.lint(&[]),
        "lint.config",
        "fail",
        1,
        &["owned by another user", "uid 100999", "uid 100000"],
    );
    std::os::unix::fs::chown(&fragment, Some(100_000), None).unwrap();
    std::fs::set_permissions(
        &fragment,
        std::os::unix::fs::PermissionsExt::from_mode(0o664),
    )
    .unwrap();
    expect(
        &img.lint(&[]),
        "lint.config",
        "fail",
        1,
        &["writable by group or others"],
    );
    std::fs::set_permissions(
        &fragment,
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let archive = img.at("/usr/lib/containerd-guard/images/pause.tar");
    std::os::unix::fs::chown(&archive, Some(4242), None).unwrap();
    expect(
        &img.lint(&[]),
        "lint.sandbox-archive",
        "fail",
        1,
        &["owned by another user"],
    );
}

fn chown_tree(dir: &Path, uid: u32) {
    std::os::unix::fs::lchown(dir, Some(uid), None).unwrap();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.file_type().unwrap().is_dir() {
            chown_tree(&e.path(), uid);
        } else {
            std::os::unix::fs::lchown(e.path(), Some(uid), None).unwrap();
        }
    }
}

/// Links to the host's files are resolved inside the image: an absolute link, and a
/// linked directory on the way, both name the image's own paths, never the host's.
#[test]
fn links_never_reach_the_hosts_files() {
    let host_side = tempfile::tempdir().unwrap();
    let hostile_fstab = host_side.path().join("fstab");
    std::fs::write(
        &hostile_fstab,
        "LABEL=x /var/lib/containerd ext4 x-systemd.after=containerd.service 0 0\n",
    )
    .unwrap();
    let host_units = host_side.path().join("units");
    std::fs::create_dir_all(host_units.join("containerd.service.d")).unwrap();
    symlink(
        "/dev/null",
        host_units.join("containerd.service.d/10-containerd-guard.conf"),
    )
    .unwrap();

    let img = Image::clean();
    img.link("/etc/fstab", &hostile_fstab.display().to_string());
    // the image's /etc/systemd/system is a link to a directory of the host
    std::fs::remove_dir_all(img.at(ETC)).unwrap();
    img.link(ETC, &host_units.display().to_string());
    let o = img.lint(&[]);
    // inside the image the fstab link names nothing, and /etc/systemd/system nothing
    expect(&o, "lint.volume-mount", "warn", 0, &["no fstab line"]);
    expect(&o, "lint.guard-dropin", "pass", 0, &[]);
    assert!(
        !o.stdout.contains(&*host_side.path().to_string_lossy()),
        "{}",
        o.dump()
    );
}

#[test]
fn fifos_and_huge_files_are_refused_without_blocking() {
    let img = Image::clean();
    std::fs::remove_file(img.at("/etc/fstab")).unwrap();
    nix::unistd::mkfifo(
        &img.at("/etc/fstab"),
        nix::sys::stat::Mode::from_bits_truncate(0o644),
    )
    .unwrap();
    expect(
        &img.lint(&[]),
        "lint.volume-mount",
        "fail",
        1,
        &["/etc/fstab", "not a regular file"],
    );
    let img = Image::clean();
    img.put(
        &format!("{ETC}/containerd.service.d/99-big.conf"),
        &"#".repeat(2 << 20),
    );
    let o = img.lint(&[]);
    expect(&o, "lint.guard-dropin", "fail", 1, &["larger than"]);
}

/// The lint reads the image and nothing else: the tree is the same after it (names,
/// sizes, modes, times), and programs in the image that would leave a mark if run did not.
#[test]
fn the_image_is_never_written_or_executed() {
    let img = Image::clean();
    let out = Outside::new();
    let mark = out.0.path().join("ran");
    for tool in [
        "/usr/bin/guard",
        "/usr/bin/systemctl",
        "/bin/systemctl",
        "/usr/bin/containerd",
    ] {
        img.put(tool, &format!("#!/bin/sh\ntouch {}\n", mark.display()));
        std::fs::set_permissions(
            img.at(tool),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
    }
    let before = snapshot(img.root());
    let o = img.lint(&[]);
    assert_eq!(o.code, 0, "{}", o.dump());
    assert_eq!(snapshot(img.root()), before, "the lint changed the image");
    assert!(!mark.exists(), "the lint ran a program of the image");
    // the host's own guard configuration is not read: a --config, which names one, is a
    // usage error saying so (a config that does not exist is exit 3 for any other command)
    let root = img.root().display().to_string();
    let o = Guard::bare().run(&[
        "--config",
        "/nonexistent/guard.toml",
        "lint",
        "--root",
        &root,
    ]);
    assert_eq!(o.code, 2, "{}", o.dump());
    assert!(o.stderr.contains("--config does not apply"), "{}", o.dump());
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, u64, u32, i64)> {
    use std::os::unix::fs::MetadataExt;
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = e.path().symlink_metadata().unwrap();
            if m.is_dir() {
                todo.push(e.path());
            }
            out.push((
                e.path(),
                m.len(),
                m.mode(),
                m.mtime_nsec() + m.mtime() * 1_000_000_000,
            ));
        }
    }
    out.sort();
    out
}

/// A hostile image: 20 unit names linked to one 1 MiB file of assignments. The lint reads
/// units within a total budget and fails naming it, and what it read is bounded by it
/// (cloud-init's configs share the budget: `lint::facts::tests`).
#[test]
fn units_past_the_lints_budget_fail_naming_it_and_bound_the_work() {
    let img = Image::clean();
    let body = "[Service]\n".to_string() + &"A=b\n".repeat((1 << 20) / 4 - 4);
    img.put("/opt/huge.service", &body);
    for i in 0..20 {
        img.link(&format!("{ETC}/huge{i}.service"), "/opt/huge.service");
    }
    let o = img.lint(&[]);
    expect(&o, "lint.budget", "fail", 1, &["budget", "huge"]);
    let read = units_read(&o);
    assert!(
        read.1 <= 16 << 20,
        "read {} bytes of units:\n{}",
        read.1,
        o.dump()
    );
    let clean = Image::clean().lint(&[]);
    expect(&clean, "lint.budget", "pass", 0, &[]);
    let read = units_read(&clean);
    assert!(read.0 > 0 && read.0 < 20, "{read:?}\n{}", clean.dump());
}

/// `(files, bytes)` of unit files the lint read, from `lint.budget`'s evidence
/// (`read N unit files, M bytes`).
fn units_read(o: &Outcome) -> (u64, u64) {
    let text = o.finding_text("lint.budget");
    let at = text.find("read ").unwrap_or_else(|| panic!("{text}"));
    let words: Vec<&str> = text[at..].split_whitespace().collect();
    let num = |w: &str| w.trim_end_matches(',').parse::<u64>().unwrap();
    (num(words[1]), num(words[4]))
}
