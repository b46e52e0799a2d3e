//! The lint's judgement of what the image feeds the guard: the sandbox image's archive,
//! the guard's config fragments, containerd's config and its imports, user data, and the
//! exit codes of a tree that is not an image.
//!
//! `guard lint --root DIR` on image trees built here the way docs/image-builder.md says
//! (testkit::suite::lint::Image): Debian's containerd unit, kubeadm's kubelet unit, the
//! package's drop-ins and hygiene units copied from this repository, an fstab line,
//! containerd's config, the guard's fragment and a real OCI archive of the sandbox image.
//! Each test plants one hazard in a clean image and checks the finding that names it (id,
//! status, `FILE:LINE`, exit code). The same hazards are planted in the vm-tests image
//! (vm-tests/run lint), and scenario disks are linted before they boot.

use testkit as support;

use support::runtime::PauseImage;
use support::suite::lint::{expect, fragment_base, Image, Outside, SANDBOX};
use support::Guard;

#[test]
fn the_sandbox_image_must_be_in_a_sound_archive() {
    let archive = "/usr/lib/containerd-guard/images/pause.tar";
    let img = Image::clean();
    std::fs::remove_file(img.at(archive)).unwrap();
    expect(
        &img.lint(&[]),
        "lint.sandbox-archive",
        "fail",
        1,
        &[archive, "no such file"],
    );

    let img = Image::clean();
    PauseImage::new(SANDBOX).write_oci(&img.at(archive), true);
    expect(
        &img.lint(&[]),
        "lint.sandbox-archive",
        "fail",
        1,
        &[archive, "digest"],
    );

    let img = Image::clean();
    let data = std::fs::read(img.at(archive)).unwrap();
    std::fs::write(img.at(archive), &data[..data.len() / 2]).unwrap();
    expect(
        &img.lint(&[]),
        "lint.sandbox-archive",
        "fail",
        1,
        &[archive],
    );

    // containerd 2.x's config (v3) names another image than the archive holds
    let img = Image::clean();
    img.put(
        "/etc/containerd/config.toml",
        "version = 3\n[plugins.\"io.containerd.cri.v1.images\".pinned_images]\n  sandbox = \"registry.k8s.io/pause:3.10\"\n",
    );
    expect(
        &img.lint(&[]),
        "lint.sandbox-archive",
        "fail",
        1,
        &["holds registry.k8s.io/pause:3.9, not registry.k8s.io/pause:3.10"],
    );

    let img = Image::clean();
    img.put(
        "/usr/lib/containerd-guard/config.d/50-image.toml",
        &fragment_base().volume_device("LABEL=containerd").render(),
    );
    expect(
        &img.lint(&[]),
        "lint.sandbox-archive",
        "warn",
        0,
        &["no archive", "registry"],
    );
}

#[test]
fn guard_fragments_that_break_or_name_an_unknown_device_are_reported() {
    let img = Image::clean();
    img.put(
        "/etc/containerd-guard/config.d/60-site.toml",
        "[volume\ndevice = 1\n",
    );
    expect(
        &img.lint(&[]),
        "lint.config",
        "fail",
        1,
        &[
            "/etc/containerd-guard/config.d/60-site.toml:1",
            "not valid TOML",
        ],
    );
    let img = Image::clean();
    img.put(
        "/etc/containerd-guard/config.d/60-site.toml",
        "[volume]\ndevice = \"LABEL=nosuch\"\n",
    );
    expect(&img.lint(&[]), "lint.config", "warn", 0, &["LABEL=nosuch"]);
    // a fragment masked by a same-named /dev/null link in /etc is not read
    img.link("/etc/containerd-guard/config.d/60-site.toml", "/dev/null");
    expect(
        &img.lint(&[]),
        "lint.config",
        "pass",
        0,
        &["LABEL=containerd"],
    );
}

#[test]
fn a_missing_empty_or_unit_less_dir_is_exit_3_and_bad_user_data_exit_2() {
    let o = Guard::bare().run(&["lint", "--root", "/nonexistent/image"]);
    assert_eq!(o.code, 3, "{}", o.dump());
    assert!(o.stderr.contains("/nonexistent/image"), "{}", o.dump());
    let empty = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(empty.path().join("etc/systemd/system")).unwrap();
    let o = Guard::bare().run(&["lint", "--root", &empty.path().display().to_string()]);
    assert_eq!(o.code, 3, "{}", o.dump());
    assert!(o.stderr.contains("no systemd unit"), "{}", o.dump());
    let img = Image::clean();
    let o = img.lint(&["--user-data", "/nonexistent/user-data"]);
    assert_eq!(o.code, 2, "{}", o.dump());
    assert!(o.stderr.contains("/nonexistent/user-data"), "{}", o.dump());
}

/// containerd's config is read with its `imports` merged, as containerd merges them
/// (containerd 2.x images put settings in `conf.d`), every import read inside the image.
#[test]
fn containerd_imports_are_followed_inside_the_image() {
    let img = Image::clean();
    img.put(
        "/etc/containerd/config.toml",
        &format!(
            "version = 2\nimports = [\"/etc/containerd/conf.d/*.toml\"]\n\
             [plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"{SANDBOX}\"\n"
        ),
    );
    img.put(
        "/etc/containerd/conf.d/50-site.toml",
        "version = 2\nroot = \"/data/containerd\"\n\
         [plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.k8s.io/pause:3.10\"\n",
    );
    let o = img.lint(&[]);
    // the import's root: its mount unit, and the fstab line for /var/lib/containerd is
    // not the volume's
    expect(
        &o,
        "lint.containerd-order",
        "fail",
        1,
        &["data-containerd.mount"],
    );
    expect(&o, "lint.volume-mount", "warn", 1, &["/data/containerd"]);
    expect(
        &o,
        "lint.sandbox-archive",
        "fail",
        1,
        &["registry.k8s.io/pause:3.10"],
    );
    // an import that links to the host's own file is the image's path, here nothing
    let host_side = tempfile::tempdir().unwrap();
    let host_file = host_side.path().join("evil.toml");
    std::fs::write(&host_file, "version = 2\nroot = \"/evil\"\n").unwrap();
    img.link(
        "/etc/containerd/conf.d/50-site.toml",
        &host_file.display().to_string(),
    );
    let o = img.lint(&[]);
    expect(
        &o,
        "lint.containerd-order",
        "pass",
        0,
        &["var-lib-containerd.mount"],
    );
    expect(&o, "lint.sandbox-archive", "pass", 0, &[SANDBOX]);
}

/// Cluster API and TKGS user data start `## template: jinja` then `#cloud-config`: read as
/// a cloud config. A shell script or a MIME archive is not read: a warning that says so,
/// never a claim about what it mounts.
#[test]
fn user_data_is_read_as_cloud_init_reads_it_or_said_to_be_unread() {
    let img = Image::clean();
    img.put("/etc/fstab", "LABEL=root / ext4 defaults 0 1\n");
    let out = Outside::new();
    let jinja = out.file(
        "capi-user-data",
        "## template: jinja\n#cloud-config\nhostname: '{{ ds.meta_data.local_hostname }}'\n\
         mounts:\n  - [LABEL=containerd, /var/lib/containerd, ext4, \"defaults,nofail\"]\n",
    );
    let o = img.lint(&["--user-data", &jinja]);
    expect(&o, "lint.volume-mount", "pass", 0, &["capi-user-data:5"]);
    expect(&o, "lint.cloud-init", "pass", 0, &[]);
    for (name, text) in [
        (
            "script",
            "#!/bin/bash\nmount LABEL=containerd /var/lib/containerd\n",
        ),
        (
            "mime",
            "Content-Type: multipart/mixed; boundary=\"XX\"\nMIME-Version: 1.0\n\n--XX\n",
        ),
    ] {
        let ud = out.file(name, text);
        let o = img.lint(&["--user-data", &ud]);
        expect(&o, "lint.cloud-init", "warn", 0, &[name, "not read"]);
        expect(&o, "lint.volume-mount", "warn", 0, &[name, "not read"]);
        assert!(
            !o.finding_text("lint.volume-mount").contains("nor does"),
            "{}",
            o.dump()
        );
    }
}

/// `lint.config` and `guard verify` judge an unset `[volume] device` alike.
#[test]
fn an_unset_device_warns_in_lint_as_in_verify() {
    let img = Image::clean();
    img.put(
        "/usr/lib/containerd-guard/config.d/50-image.toml",
        &fragment_base()
            .sandbox_archives(&["/usr/lib/containerd-guard/images/pause.tar"])
            .render(),
    );
    expect(
        &img.lint(&[]),
        "lint.config",
        "warn",
        0,
        &["no [volume] device configured"],
    );
}
