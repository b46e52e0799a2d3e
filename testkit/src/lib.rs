//! The harness of the root-only integration tests (`tests/`): real loop devices, real
//! mounts, a real containerd, and the built `guard` binary. A crate of its own (a
//! dev-dependency of the guard's), so nothing of it is compiled into the guard; its
//! binaries (`src/bin/`) are the CRI tools the demo, the benches and the VM tests use as
//! kubelet's stand-in. Every resource is owned by a guard value
//! whose `Drop` releases it (unmount, detach, kill), so a failing assertion leaves nothing
//! behind. Nothing here sleeps to synchronise: waits poll a condition with a deadline.
//!
//! Use from a test file with `use testkit as support;`, naming what it uses (no glob
//! imports), and start each root-only test with
//! `let Some(_root) = root_or_skip(&[...]) else { return; };` ([`root_or_skip`]: as a
//! normal user it skips the test, reported by [`Skip::report`] alone). Resources are named uniquely (random labels, temp dirs)
//! because other engineers and parallel tests use loop devices on the same machine at the
//! same time.
//!
//! ```text
//! use testkit::mounts::{FsKind, LoopVolume};
//! use testkit::{root_or_skip, unique, Containerd, Guard, TempRoot};
//!
//! #[test]
//! fn example() {
//!     let Some(_root) = root_or_skip(&["losetup", "mkfs.ext4", "containerd"]) else {
//!         return;
//!     };
//!     let t = TempRoot::new(); // containerd config.toml with root/state/socket under a tempdir
//!     let label = unique("cg", 8);
//!     let _vol = LoopVolume::new(&t.images(), FsKind::Ext4, &label, &t.volume_path());
//!     let cfg = t.write_guard_config_with(|c| c.volume_device(&format!("LABEL={label}")));
//!     Guard::with_config(&cfg).volume_json().expect(0, "volume.device", "pass");
//!     let ctrd = Containerd::start(&t); // real containerd on t's paths; killed on drop
//!     let out = Guard::with_config(&cfg).run(&["--json", "verify"]);
//!     assert_eq!(out.verdict(), "usable", "{}", out.dump());
//!     drop(ctrd);
//! } // drops: unmount, detach the loop device, remove the tempdir
//! ```
//!
//! Hygiene faults (a leaked task, an orphaned payload holding a `flock`) are made for real
//! by [`hygiene`] on a [`workload::HygieneNode`] (CRI on runc/cgroupfs, a `locker` payload
//! image, kubelet-like [`workload::Pod`]s in `/kubepods/besteffort/pod<uid>`); see
//! `testkit/tests/hygiene_harness.rs`.
//!
//! `scripts/test` points `TMPDIR` at a per-run directory and sweeps it afterwards, so a
//! leak (a mount, loop device or containerd under it) fails the run and is cleaned up.

pub mod alert_rules;
pub mod bolt;
pub mod bounded;
pub mod containerd;
pub mod content;
pub mod cri;
pub mod cri_config;
pub mod executable;
pub mod exporter;
pub mod grpc_proxy;
pub mod guard;
pub mod guard_config;
pub mod hygiene;
pub mod journal;
pub mod locks;
pub mod mounts;
pub mod node;
pub mod poll;
pub mod process;
pub mod runtime;
pub mod skip;
pub mod snapshot_proxy;
pub mod suite;
pub mod temproot;
pub mod timeline;
pub mod unix_server;
pub mod workload;

pub use containerd::{
    containerd_major_minor, containerd_tool, containerd_version, Containerd, CONTAINERD_DIR_ENV,
};
pub use content::ContentSnapshot;
pub use cri_config::CriConfig;
pub use executable::{copy_executable, write_executable};
pub use exporter::NodeExporter;
pub use guard::{guard_bin, Guard, Outcome, Running};
pub use guard_config::GuardConfig;
pub use locks::{flock_holders, flock_is_free, KillOnDrop};
pub use mounts::{FsKind, Image, LoopDevice, LoopVolume, Mount};
pub use poll::poll_until;
pub use skip::{require_root, root_or_skip, Root, Skip, SKIP_LOG_ENV, SKIP_MARKER};
pub use temproot::TempRoot;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Finds an executable on PATH, also looking in the sbin directories root normally has.
pub fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// Runs a command to completion and panics with its output when it fails.
pub fn run(program: &str, args: &[&str]) -> String {
    run_exe(
        &which(program).unwrap_or_else(|| PathBuf::from(program)),
        args,
    )
}

/// As [`run`], for an executable given by its path (e.g. [`containerd_tool`]'s). Bounded
/// by [`bounded::COMMAND_DEADLINE`].
#[track_caller]
pub fn run_exe(exe: &Path, args: &[&str]) -> String {
    let program = exe.display();
    let out = bounded::output(
        Command::new(exe)
            .args(args)
            .stdin(std::process::Stdio::null()),
        bounded::COMMAND_DEADLINE,
    );
    assert!(
        out.status.success(),
        "`{program} {}` failed ({}):\nstdout: {}\nstderr: {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a command and returns whether it succeeded; for best-effort cleanup. Bounded by
/// [`bounded::COMMAND_DEADLINE`] like every other command.
pub fn run_quiet(program: &str, args: &[&str]) -> bool {
    let exe = which(program).unwrap_or_else(|| PathBuf::from(program));
    let mut cmd = Command::new(&exe);
    cmd.args(args).stdin(std::process::Stdio::null());
    bounded::output(&mut cmd, bounded::COMMAND_DEADLINE)
        .status
        .success()
}

/// A short random hex string for labels and names that must not collide with other runs.
pub fn unique(prefix: &str, len: usize) -> String {
    let mut bytes = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut bytes);
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}{}", &hex[..len.min(32)])
}

/// A random RFC 4122 v4 UUID, lower case.
pub fn random_uuid() -> String {
    let h = unique("", 32);
    let variant = ['8', '9', 'a', 'b'][usize::from_str_radix(&h[16..17], 16).unwrap() % 4];
    format!(
        "{}-{}-4{}-{}{}-{}",
        &h[0..8],
        &h[8..12],
        &h[13..16],
        variant,
        &h[17..20],
        &h[20..32]
    )
}

/// Whether `path` is currently a mount point in this mount namespace.
pub fn is_mount_point(path: &Path) -> bool {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let want = path.to_string_lossy();
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|mp| decode_octal(mp) == want)
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
pub fn decode_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() {
            if let Ok(v) =
                u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 4]).unwrap_or("x"), 8)
            {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
