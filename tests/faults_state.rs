//! The guard's own state and containerd's socket path broken in every way: `state_dir`
//! read-only, full or a file, the state file truncated, garbage, huge or of another boot,
//! and a socket path that is not a socket or may not be connected to.
//!
//! The fault matrix around the guard's own inputs and state, on real components. Each
//! case that reaches a real containerd ends with the "nothing lost" check of its content
//! store and images. Root only (`sudo scripts/test`), except the fragment faults, which
//! need nothing but the binary.

use testkit as support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use support::node::{runtime, Node, TOOLS};
use support::process::Identity;
use support::suite::faults_inputs::{chmod, image, shown, InputsNode};
use support::{root_or_skip, Guard, Mount, Outcome, TempRoot};

// ---- containerd's socket path ------------------------------------------------------------

/// How long [`socket_node`]'s guard holds kubelet.
const HOLD: Duration = Duration::from_secs(4);

/// A healthy node with the image, a guard config that waits briefly and holds briefly.
fn socket_node(n: &Node) -> PathBuf {
    n.ctrd.ctr_import(&n.archive());
    n.guard_config(&n.ctrd.restart_program())
        .containerd_wait("2s")
        .sandbox_pull(false)
        .hold_timeout(&format!("{}s", HOLD.as_secs()))
        .write(&n.t)
}

/// The guard failed on `runtime.answers` naming `needles`, restarted nothing, after
/// holding kubelet its whole hold (a socket fixed meanwhile is taken) and not much more;
/// then the operator's fix (containerd restarted by hand recreates its socket) shows
/// nothing was lost.
#[track_caller]
fn socket_fault_held(n: &Node, out: &Outcome, pid: Identity, needles: &[&str]) {
    assert_eq!(out.code, 1, "{}", out.dump());
    out.mentions("runtime.answers", needles);
    assert_eq!(out.status("runtime.answers"), "fail");
    assert_eq!(out.status("runtime.hold"), "fail", "{}", out.dump());
    assert!(
        out.elapsed >= HOLD && out.elapsed < HOLD + Duration::from_secs(15),
        "held for the hold, bounded by it: {:?}",
        out.elapsed
    );
    assert_eq!(n.ctrd.restarts(), 0, "not proven stale: not restarted");
    pid.assert_still_runs("containerd");
}

#[test]
fn socket_path_a_regular_file_is_named_and_containerd_not_restarted() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&image("sock-file"));
    let cfg = socket_node(&n);
    let before = n.content();
    let pid = n.ctrd.identity();
    let sock = n.t.socket();
    std::fs::remove_file(&sock).unwrap();
    std::fs::write(&sock, "not a socket\n").unwrap();
    let out = runtime(&cfg);
    socket_fault_held(&n, &out, pid, &[&shown(&sock), "a regular file", "rm "]);
    n.ctrd.restart_by_hand();
    before.assert_nothing_lost(&n.content());
}

#[test]
fn socket_path_a_dangling_symlink_is_named_and_containerd_not_restarted() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&image("sock-link"));
    let cfg = socket_node(&n);
    let before = n.content();
    let pid = n.ctrd.identity();
    let sock = n.t.socket();
    let nowhere = n.t.path().join("nowhere.sock");
    std::fs::remove_file(&sock).unwrap();
    std::os::unix::fs::symlink(&nowhere, &sock).unwrap();
    let out = runtime(&cfg);
    socket_fault_held(&n, &out, pid, &[&shown(&sock), &shown(&nowhere), "symlink"]);
    n.ctrd.restart_by_hand();
    before.assert_nothing_lost(&n.content());
}

/// Runs the guard as uid/gid 65534 (nobody), no supplementary groups.
const AS_NOBODY: &[&str] = &[
    "setpriv",
    "--reuid",
    "65534",
    "--regid",
    "65534",
    "--clear-groups",
    "--",
];

#[test]
fn socket_the_guard_may_not_connect_to_is_named_and_containerd_not_restarted() {
    let Some(_root) = root_or_skip(&[TOOLS, &["setpriv"]].concat()) else {
        return;
    };
    // Everything readable by nobody except the socket (root's, no access for others).
    let base = std::env::temp_dir();
    let t = TempRoot::world_readable_in(Path::new(if is_private(&base) {
        "/var/tmp"
    } else {
        base.to_str().unwrap()
    }));
    let n = Node::healthy_in(t, &image("sock-perm"));
    let cfg = socket_node(&n);
    let sock = n.t.socket();
    chmod(&sock, 0o660);
    chmod(&n.t.containerd_config(), 0o644);
    let before = n.content();
    let pid = n.ctrd.identity();
    let out = Guard::with_config(&cfg)
        .wrapped_in(AS_NOBODY)
        .run(&["--json", "runtime"]);
    socket_fault_held(
        &n,
        &out,
        pid,
        &[
            &shown(&sock),
            "(uid 65534) may not connect",
            "mode 0660",
            "run the guard as root",
        ],
    );
    before.assert_nothing_lost(&n.content());
    // root's guard, same config, same socket: usable.
    runtime(&cfg).expect(0, "runtime.answers", "pass");
}

/// A directory other users cannot enter (scripts/test's per-run TMPDIR is 0700).
fn is_private(dir: &Path) -> bool {
    let mut d = Some(dir);
    while let Some(p) = d {
        if std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o001 == 0) {
            return true;
        }
        d = p.parent();
    }
    false
}

// ---- state_dir and the state file ----------------------------------------------------

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .unwrap()
        .trim()
        .to_string()
}

/// A valid state file of boot `boot` with `restarts` restarts recorded.
fn state_json(boot: &str, restarts: usize, terminal: bool) -> String {
    let record = r#"{"uptime_ms": 1000, "unix": 1, "item": "containerd", "action": "restart", "outcome": "stale: ok"}"#;
    let list = vec![record; restarts].join(", ");
    let terminal = match terminal {
        true => r#"{"unix": 1, "reason": "restart budget spent"}"#,
        false => "null",
    };
    format!(
        "{{\"format\": 1, \"boot_id\": \"{boot}\", \"restarts\": [{list}], \"history\": [{list}], \"terminal\": {terminal}, \"void\": null, \"last\": null}}\n"
    )
}

/// A TKGS node (a restart is due) whose guard config names `state_dir`.
fn stale_with_state_dir(
    tag: &str,
    state_dir: impl FnOnce(&Node) -> PathBuf,
) -> (Node, PathBuf, PathBuf) {
    let n = Node::tkgs(&image(tag));
    let dir = state_dir(&n);
    let cfg = n
        .guard_config(&n.ctrd.restart_program())
        .state_dir(&dir)
        .sandbox_pull(false)
        .hold_timeout("5s")
        .write(&n.t);
    (n, cfg, dir)
}

/// No restart, because none could be recorded: exit 1 naming the state_dir problem.
#[track_caller]
fn refused_unrecorded(n: &Node, out: &Outcome, pid: Identity, cause: &[&str]) {
    out.expect(1, "remedy.budget", "fail")
        .mentions("remedy.budget", &["cannot be recorded"])
        .mentions("remedy.budget", cause);
    assert_eq!(n.ctrd.restarts(), 0, "no restart without a durable record");
    pid.assert_still_runs("containerd");
    assert!(!out.stderr.contains("panicked"), "{}", out.dump());
}

/// No temporary file of an atomic write left in `dir` (which must be readable: an
/// unreadable directory is no proof that nothing was left in it).
#[track_caller]
fn no_partial_files(dir: &Path) {
    let left: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        left.iter().all(|f| !f.ends_with(".tmp")),
        "partial files left in {}: {left:?}",
        dir.display()
    );
}

#[test]
fn state_dir_read_only_on_a_healthy_node_is_usable_with_a_warning_naming_it() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&image("state-ro"));
    n.ctrd.ctr_import(&n.archive());
    let ro = n.t.path().join("ro-state");
    let _ro = Mount::fs("tmpfs", "cg-ro-state", &ro, "ro,size=1m");
    let cfg = n
        .guard_config(&n.ctrd.restart_program())
        .state_dir(&ro)
        .sandbox_pull(false)
        .write(&n.t);
    let before = n.content();
    let pid = n.ctrd.identity();
    let out = runtime(&cfg);
    out.expect(0, "remedy.budget", "warn").mentions(
        "remedy.budget",
        &[&shown(&ro), "read-only", "writable directory"],
    );
    // no canary either: one that could not be recorded first could never be proven the
    // guard's, so never removed once left behind
    out.expect(0, "runtime.can-create", "warn")
        .mentions("runtime.can-create", &["cannot record it", &shown(&ro)]);
    assert_eq!(n.ctrd.restarts(), 0);
    pid.assert_still_runs("containerd");
    before.assert_nothing_lost(&n.content());
}

#[test]
fn state_dir_on_a_full_tmpfs_refuses_the_restart_and_keeps_the_old_file_whole() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let mut mount = None;
    let (n, cfg, dir) = stale_with_state_dir("state-full", |n| {
        let dir = n.t.path().join("full-state");
        mount = Some(Mount::fs("tmpfs", "cg-full-state", &dir, "size=16k"));
        dir
    });
    // A valid file of this boot, then the filesystem filled to the last byte.
    let valid = state_json(&boot_id(), 0, false);
    std::fs::write(dir.join("runtime.json"), &valid).unwrap();
    support::mounts::fill(&dir.join("filler"));
    let before = n.content();
    let pid = n.ctrd.identity();
    let out = runtime(&cfg);
    refused_unrecorded(&n, &out, pid, &["No space left", "full"]);
    assert_eq!(
        std::fs::read_to_string(dir.join("runtime.json")).unwrap(),
        valid,
        "the old state file is whole: writes are atomic"
    );
    no_partial_files(&dir);
    before.assert_nothing_lost(&n.content());
    drop(mount);
}

#[test]
fn state_dir_that_is_a_regular_file_refuses_the_restart_naming_it() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let (n, cfg, file) = stale_with_state_dir("state-file", |n| {
        let f = n.t.path().join("state-is-a-file");
        std::fs::write(&f, "operator notes\n").unwrap();
        f
    });
    let before = n.content();
    let pid = n.ctrd.identity();
    let out = runtime(&cfg);
    refused_unrecorded(&n, &out, pid, &[&shown(&file), "not a directory"]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "operator notes\n");
    before.assert_nothing_lost(&n.content());
}

/// A TKGS node whose state file holds `bytes`; the guard must not restart and must name
/// the file, keep it aside and say how to allow restarts again.
fn untrusted_state_file(tag: &str, bytes: &[u8], wrapper: &[&str]) -> Outcome {
    let (n, cfg, dir) = stale_with_state_dir(tag, |n| n.t.guard_state_dir());
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("runtime.json"), bytes).unwrap();
    let before = n.content();
    let pid = n.ctrd.identity();
    let out = Guard::with_config(&cfg)
        .wrapped_in(wrapper)
        .run(&["--json", "runtime"]);
    out.expect(4, "remedy.budget", "fail").mentions(
        "remedy.budget",
        &["cannot be trusted", "runtime.json.corrupt", "guard reset"],
    );
    assert_eq!(n.ctrd.restarts(), 0, "no budget is known: none is left");
    pid.assert_still_runs("containerd");
    assert!(!out.stderr.contains("panicked"), "{}", out.dump());
    let kept = std::fs::metadata(dir.join("runtime.json.corrupt")).unwrap();
    assert_eq!(
        kept.len(),
        bytes.len() as u64,
        "kept whole for the operator"
    );
    no_partial_files(&dir);
    before.assert_nothing_lost(&n.content());
    out
}

#[test]
fn state_file_truncated_means_no_restart_budget_and_is_named() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let valid = state_json(&boot_id(), 1, false);
    let half = &valid.as_bytes()[..valid.len() / 2];
    untrusted_state_file("state-half", half, &[]).mentions("remedy.budget", &["does not parse"]);
}

#[test]
fn state_file_of_garbage_bytes_means_no_restart_budget_and_is_named() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    untrusted_state_file("state-garbage", &garbage, &[]);
}

#[test]
fn state_file_huge_is_read_bounded_and_means_no_restart_budget() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    // 64 MiB: a valid beginning, then restart records repeated. The guard runs with its
    // data segment limited to 16 MiB: reading it whole would fail (ENOMEM) or abort.
    let head = format!(
        "{{\"format\": 1, \"boot_id\": \"{}\", \"restarts\": [",
        boot_id()
    );
    let record = r#"{"uptime_ms": 1, "unix": 2, "item": "containerd", "action": "restart", "outcome": "ok"}, "#;
    let mut big = head.into_bytes();
    while big.len() < 64 << 20 {
        big.extend_from_slice(record.as_bytes());
    }
    let limited = ["sh", "-c", "ulimit -d 16384 && exec \"$@\"", "sh"];
    untrusted_state_file("state-huge", &big, &limited)
        .mentions("remedy.budget", &["larger than the 1024 KiB"]);
}

#[test]
fn state_file_of_another_boot_is_a_fresh_budget_for_this_one() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let (n, cfg, dir) = stale_with_state_dir("state-other-boot", |n| n.t.guard_state_dir());
    std::fs::create_dir_all(&dir).unwrap();
    let other = "00000000-0000-0000-0000-000000000000";
    std::fs::write(dir.join("runtime.json"), state_json(other, 3, true)).unwrap();
    let before = n.content();
    let out = runtime(&cfg);
    out.expect(0, "remedy.restart", "pass");
    assert_eq!(
        n.ctrd.restarts(),
        1,
        "the other boot's spent budget does not count"
    );
    let now: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("runtime.json")).unwrap()).unwrap();
    assert_eq!(now["boot_id"], boot_id().as_str());
    assert_eq!(now["restarts"].as_array().unwrap().len(), 1);
    no_partial_files(&dir);
    before.assert_nothing_lost(&n.content());
}
