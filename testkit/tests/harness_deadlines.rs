//! Self-test of the harness's deadlines (testkit/src/bounded.rs): a command that outlives
//! its deadline fails the test naming the command and the deadline, and its whole process
//! group (a grandchild included) is gone afterwards; a guard facing a SIGSTOPped
//! containerd is bounded the same way.

use testkit as support;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::Command;
use std::time::{Duration, Instant};
use support::bounded;
use support::node::{Node, TOOLS};
use support::{poll_until, root_or_skip, Guard};

/// Runs `f`, which must panic, and returns its panic message.
fn panic_message(f: impl FnOnce()) -> String {
    let err = catch_unwind(AssertUnwindSafe(f)).expect_err("the deadline did not fail the test");
    err.downcast_ref::<String>()
        .cloned()
        .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// The process group the helper said it killed.
fn killed_group(message: &str) -> i32 {
    message
        .rsplit_once("killed its process group ")
        .and_then(|(_, g)| g.trim().parse().ok())
        .unwrap_or_else(|| panic!("no process group in {message:?}"))
}

fn gone(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

#[test]
fn a_command_past_its_deadline_fails_naming_it_and_its_group_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let grandchild_pid = dir.path().join("grandchild.pid");
    let script = format!(
        "sleep 300 & echo $! > '{}'; sleep 301",
        grandchild_pid.display()
    );
    let started = Instant::now();
    let message = panic_message(|| {
        bounded::output(
            Command::new("sh").args(["-c", &script]),
            Duration::from_millis(500),
        );
    });
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the deadline of 500ms held the test for {:?}",
        started.elapsed()
    );
    assert!(
        message.contains("sleep 301") && message.contains("deadline of 500ms"),
        "the failure must name the command and the deadline: {message:?}"
    );
    let pgid = killed_group(&message);
    let grandchild: i32 = std::fs::read_to_string(&grandchild_pid)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    poll_until(
        "the killed group's grandchild `sleep 300` to be gone",
        Duration::from_secs(10),
        || gone(grandchild).then_some(()),
    );
    // SIGKILL is delivered to each member on its own: `sleep 301` may still be exiting
    // when the grandchild is gone (seen 3 times in 30 runs as nobody)
    poll_until(
        &format!("every process of the killed group {pgid} to be gone"),
        Duration::from_secs(10),
        || (!bounded::group_alive(pgid)).then_some(()),
    );
}

#[test]
fn a_command_within_its_deadline_returns_its_output() {
    let out = bounded::output(
        Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
}

#[test]
fn a_guard_facing_a_stopped_containerd_is_bounded() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy("localhost/guard-test/pause:deadline");
    let cfg = n.config(&n.ctrd.noop_program());
    let containerd = nix::unistd::Pid::from_raw(n.ctrd.pid());
    nix::sys::signal::kill(containerd, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let started = Instant::now();
    let message = panic_message(|| {
        Guard::with_config(&cfg).run_within(&["--json", "runtime"], Duration::from_secs(2));
    });
    // A gRPC exchange of the harness with it is bounded the same way.
    let socket = n.t.socket();
    let grpc = panic_message(|| {
        support::runtime::block_on_within("containerd Version", Duration::from_secs(1), async {
            let conn =
                containerd_guard::containerd::client::connect(&socket, Duration::from_secs(60))
                    .await
                    .ok()?;
            containerd_guard::containerd::client::version(&conn)
                .await
                .ok()
        });
    });
    let _ = nix::sys::signal::kill(containerd, nix::sys::signal::Signal::SIGCONT);
    assert!(
        grpc.contains("`containerd Version` did not finish within its deadline of 1s"),
        "{grpc:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the 2s deadline held the test for {:?}",
        started.elapsed()
    );
    assert!(
        message.contains("runtime") && message.contains("deadline of 2s"),
        "the failure must name the guard's command and the deadline: {message:?}"
    );
    let pgid = killed_group(&message);
    assert!(
        !bounded::group_alive(pgid),
        "the guard's group {pgid} survived"
    );
}
