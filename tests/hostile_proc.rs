//! Processes that merely name themselves `containerd` cannot make the guard eat memory,
//! hang, or steer it: real processes whose `comm` is `containerd`, started
//! with `--config /dev/zero`, a FIFO, a 1 GiB sparse file, and one in a chroot whose config
//! names the host's volume, beside a real containerd on a real loop volume.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use support::locks::pid_alive;
use support::node::{Node, TOOLS};
use support::{copy_executable, poll_until, root_or_skip, run, Guard, Outcome};
use testkit as support;

/// The most memory one guard run may use among hostile processes. Most of it is the
/// debug binary's own pages, which grow with the code, not with what a process offers.
const MAX_RSS_KB: u64 = 24 * 1024;
/// How much more `guard verify` may use among hostile processes than beside none: its
/// reads are bounded (a config is read to its cap), so what a hostile process offers
/// (`/dev/zero`, a sparse file) cannot grow it further.
const MAX_GROWTH_KB: u64 = 2 * 1024;
/// A run that outlives this is a hang (the guard's own bounds are far shorter).
const HANG_SECS: &str = "60";

/// A static program that waits forever, installed as `dir/containerd`: its `comm` is
/// `containerd`, whatever its arguments.
fn containerd_named_program(dir: &Path) -> PathBuf {
    let src = dir.join("waiter.c");
    std::fs::write(
        &src,
        "#include <unistd.h>\nint main(void){for(;;)pause();}\n",
    )
    .unwrap();
    let exe = dir.join("containerd");
    run(
        "gcc",
        &[
            "-static",
            "-Os",
            "-o",
            exe.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    exe
}

/// A hostile process, our child: killed and reaped on drop.
struct Hostile(std::process::Child);

impl Hostile {
    fn alive(&self) -> bool {
        pid_alive(self.0.id() as i32)
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(program: &Path, args: &[&str]) -> Hostile {
    let child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", program.display()));
    let h = Hostile(child);
    poll_until(
        "the hostile process to show its name",
        Duration::from_secs(10),
        || {
            let comm = std::fs::read_to_string(format!("/proc/{}/comm", h.0.id())).ok()?;
            (comm.trim() == "containerd").then_some(())
        },
    );
    h
}

/// The four hostile `containerd`s, killed on drop.
fn start_hostiles(tree: &Path, volume: &Path) -> Vec<Hostile> {
    let dir = &tree.join("hostile");
    std::fs::create_dir_all(dir).unwrap();
    let exe = containerd_named_program(dir);
    let fifo = dir.join("config.fifo");
    run("mkfifo", &[fifo.to_str().unwrap()]);
    let sparse = dir.join("huge.toml");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    // A chroot (its own root directory) whose config names the host's volume as its root.
    let jail = dir.join("jail");
    std::fs::create_dir_all(jail.join("etc/containerd")).unwrap();
    copy_executable(&exe, &jail.join("containerd"));
    std::fs::write(
        jail.join("etc/containerd/config.toml"),
        format!("version = 2\nroot = \"{}\"\n", volume.display()),
    )
    .unwrap();
    vec![
        spawn(&exe, &["--config", "/dev/zero"]),
        spawn(&exe, &["--config", fifo.to_str().unwrap()]),
        spawn(&exe, &["-c", sparse.to_str().unwrap()]),
        spawn(
            Path::new("/usr/sbin/chroot"),
            &[
                jail.to_str().unwrap(),
                "/containerd",
                "--config",
                "/etc/containerd/config.toml",
            ],
        ),
    ]
}

/// Runs the guard bounded in time and address space, and measures its peak RSS.
fn measured(cfg: &Path, args: &[&str]) -> (Outcome, u64) {
    let out = Guard::with_config(cfg)
        .wrapped_in(&[
            "timeout",
            "-s",
            "KILL",
            HANG_SECS,
            "sh",
            "-c",
            "ulimit -v 1048576; exec /usr/bin/time -f maxrss_kb=%M \"$@\"",
            "sh",
        ])
        .run(args);
    let rss = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("maxrss_kb="))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak RSS measured (killed?):\n{}", out.dump()));
    (out, rss)
}

#[test]
fn verify_among_containerd_named_hostile_processes_stays_small_quick_and_unchanged() {
    let Some(_root) = root_or_skip(&[TOOLS, &["mkfifo", "chroot", "timeout"]].concat()) else {
        return;
    };
    let n = Node::healthy("registry.k8s.io/pause:3.6");
    n.import_image();
    let cfg = n.config(&n.ctrd.noop_program());
    let (before, before_rss) = measured(&cfg, &["--json", "verify"]);
    let hostiles = start_hostiles(n.t.path(), &n.t.volume_path());
    let (after, rss) = measured(&cfg, &["--json", "verify"]);
    eprintln!(
        "verify: {:?} and {before_rss} KiB alone, {:?} and {rss} KiB among hostiles",
        before.elapsed, after.elapsed
    );
    assert!(
        rss < MAX_RSS_KB && rss < before_rss + MAX_GROWTH_KB,
        "guard verify among hostile processes peaked at {rss} KiB, {before_rss} KiB beside \
         none (bounds {MAX_RSS_KB} KiB, {MAX_GROWTH_KB} KiB more):\n{}",
        after.dump()
    );
    assert_eq!(
        (after.code, after.verdict()),
        (before.code, before.verdict()),
        "the same verdict as without the hostile processes:\n{}",
        after.dump()
    );
    assert!(
        after.elapsed < before.elapsed + Duration::from_secs(5),
        "verify took {:?} among hostile processes, {:?} without",
        after.elapsed,
        before.elapsed
    );
    assert!(
        hostiles.iter().all(Hostile::alive),
        "the hostiles kept running"
    );
}

#[test]
fn phase1_among_containerd_named_hostile_processes_passes_and_says_why_they_do_not_count() {
    let Some(_root) = root_or_skip(&[TOOLS, &["mkfifo", "chroot", "timeout"]].concat()) else {
        return;
    };
    let n = Node::healthy("registry.k8s.io/pause:3.6");
    n.ctrd.stop();
    let cfg = n.config(&n.ctrd.noop_program());
    let _hostiles = start_hostiles(n.t.path(), &n.t.volume_path());
    let (out, rss) = measured(&cfg, &["--json", "volume"]);
    eprintln!("volume among hostiles: {:?}, {rss} KiB", out.elapsed);
    assert!(
        rss < MAX_RSS_KB,
        "phase 1 peaked at {rss} KiB:\n{}",
        out.dump()
    );
    out.expect(0, "volume.containerd-not-started", "pass");
    // Each is left out with its reason, never silently.
    out.mentions(
        "volume.containerd-not-started",
        &[
            "/dev/zero is not a regular file",
            "a FIFO",
            "more than",
            "another root directory",
        ],
    );
}
