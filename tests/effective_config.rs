//! Where a real containerd runs, computed as containerd computes it: its
//! `imports` (relative and glob), its `--root` over its config, and a snapshotter
//! directory that is a symlink inside its root.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::node::{has_finding, runtime, Node, TOOLS};
use support::runtime::dead_port;
use support::{containerd_tool, poll_until, root_or_skip, Guard, KillOnDrop, TempRoot};
use testkit as support;

/// Rewrites `t`'s containerd config so that everything but the version comes from
/// imports: a relative one (root, state, sockets, CRI) and an absolute glob (one more
/// table). The main file alone names another root and no socket.
fn split_into_imports(t: &TempRoot) {
    let main = t.containerd_config();
    let full = std::fs::read_to_string(&main).unwrap();
    let dir = main.parent().unwrap();
    std::fs::create_dir_all(dir.join("conf.d")).unwrap();
    std::fs::create_dir_all(dir.join("extra.d")).unwrap();
    std::fs::write(dir.join("conf.d/paths.toml"), &full).unwrap();
    std::fs::write(
        dir.join("extra.d/10-debug.toml"),
        "[debug]\n  level = \"info\"\n",
    )
    .unwrap();
    let version = full.lines().next().unwrap();
    std::fs::write(
        &main,
        format!(
            "{version}\nroot = \"/nonexistent/containerd-root\"\n\
             imports = [\"conf.d/paths.toml\", \"{}/*.toml\"]\n",
            dir.join("extra.d").display()
        ),
    )
    .unwrap();
}

#[test]
fn a_containerd_configured_through_imports_is_found_where_its_imports_put_it() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let image = format!("127.0.0.1:{}/guard/pause:imports", dead_port());
    let n = Node::healthy_prepared(TempRoot::new(), &image, split_into_imports);
    n.import_image();
    let cfg = n.config(&n.ctrd.noop_program());
    // Phase 2 talks to the socket the import names and judges the root it names.
    // (Its checks, not the node's verdict: other tests' pods on this machine may be judged.)
    let out = Guard::with_config(&cfg).run(&["--json", "verify"]);
    for id in ["runtime.answers", "runtime.stale", "runtime.sandbox-image"] {
        assert_eq!(out.status(id), "pass", "{id}: {}", out.dump());
    }
    // Phase 1 on this live node sees the running containerd for the imported root.
    let out = Guard::with_config(&cfg).run(&["--json", "volume"]);
    out.expect(1, "volume.containerd-not-started", "fail");
    out.mentions(
        "volume.containerd-not-started",
        &[&format!("pid {}", n.ctrd.pid())],
    );
    assert_eq!(n.ctrd.restarts(), 0);
}

#[test]
fn a_containerd_whose_root_flag_overrides_its_config_is_said_not_restarted() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy("registry.k8s.io/pause:3.6");
    n.import_image();
    n.ctrd.stop();
    // The same containerd config, started with `--root` elsewhere on the volume.
    let elsewhere = n.t.volume_path().join("other-root");
    let log = std::fs::File::create(n.t.path().join("flagged.log")).unwrap();
    let mut child = Command::new(containerd_tool("containerd"))
        .arg("--config")
        .arg(n.t.containerd_config())
        .arg("--root")
        .arg(&elsewhere)
        .env("PATH", support::containerd::path_with_containerd_dir(None))
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let _kill = KillOnDrop {
        pid: child.id() as i32,
    };
    poll_until(
        "containerd --root to answer",
        Duration::from_secs(30),
        || std::os::unix::net::UnixStream::connect(n.t.socket()).ok(),
    );
    let cfg = n.config(&n.ctrd.noop_program());
    let out = Guard::with_config(&cfg).run(&["--json", "verify", "--repair"]);
    assert_eq!(out.status("runtime.stale"), "warn", "{}", out.dump());
    out.mentions(
        "runtime.stale",
        &[&format!("uses {}", elsewhere.display()), "--root"],
    );
    assert_eq!(
        n.ctrd.restarts(),
        0,
        "a healthy containerd is not restarted"
    );
    assert!(!has_finding(&out, "remedy.restart") || out.status("remedy.restart") != "pass");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_snapshotter_directory_symlinked_inside_the_root_is_judged_current() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let image = format!("127.0.0.1:{}/guard/pause:symlink", dead_port());
    // The overlayfs snapshotter's directory is a symlink to a directory inside the root.
    let n = Node::healthy_prepared(TempRoot::new(), &image, |t| {
        std::fs::create_dir_all(t.volume_path().join("snapshots-overlayfs")).unwrap();
        std::os::unix::fs::symlink(
            "snapshots-overlayfs",
            t.volume_path()
                .join("io.containerd.snapshotter.v1.overlayfs"),
        )
        .unwrap();
    });
    let real = n.t.volume_path().join("snapshots-overlayfs");
    n.import_image();
    poll_until(
        "containerd to hold the snapshotter's database",
        Duration::from_secs(10),
        || {
            let fds = std::fs::read_dir(format!("/proc/{}/fd", n.ctrd.pid())).ok()?;
            fds.flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .any(|l| l == real.join("metadata.db"))
                .then_some(())
        },
    );
    let cfg = n.config(&n.ctrd.restart_program());
    let out = runtime(&cfg);
    out.expect(0, "runtime.stale", "pass");
    // Both databases are judged: the metadata and the snapshotter's through its link.
    out.mentions("runtime.stale", &["holds 2 database(s)"]);
    assert_eq!(n.ctrd.restarts(), 0);
    assert!(Path::new(&real).is_dir());
}
