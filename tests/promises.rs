//! README promises that only the fake world (`src/phases/runtime/tests.rs`) or nothing
//! proved, on real components: Debian's containerd on temp paths, a real loop-mounted ext4
//! volume, the built `guard`. Root only.

mod support;

use std::time::Duration;
use support::node::*;
use support::runtime::*;
use support::*;

/// containerd's start time (`/proc/PID/stat` field 22, clock ticks since boot): a pid can
/// be reused, a start time with it cannot.
fn start_time(pid: i32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("containerd's stat");
    let after_comm = &stat[stat.rfind(')').expect("stat has (comm)") + 2..];
    // field 3 is the first after comm; the start time is field 22
    after_comm
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap()
}

/// The TKGS order with a pod: the volume holds the images (the sandbox image and another),
/// containerd runs on the root filesystem's copy of the directory with a running pod
/// sandbox, the volume is mounted over it. Returns the node, the pod's id and a content
/// snapshot of the volume taken while containerd ran on it.
fn stale_with_running_pod(tag: &str) -> (Node, String, support::content::ContentSnapshot) {
    let mut n = Node::with_other_image(&format!("127.0.0.1:{}/guard/pause:{tag}", dead_port()));
    n.import_image();
    let on_volume = n.content_with_other_image();
    n.ctrd.stop();
    drop(n.vol.mount.take());
    assert!(!is_mount_point(&n.t.volume_path()));
    n.ctrd.restart_by_hand();
    n.import_image();
    let pod = start_pod_sandbox(&n.t.socket()).expect("a running pod sandbox");
    n.vol.mount = Some(n.vol.device.mount(&n.t.volume_path(), ""));
    (n, pod, on_volume)
}

#[test]
fn verify_repair_force_restarts_a_stale_containerd_with_running_tasks_once() {
    if !require_root(TOOLS) {
        return;
    }
    let (n, pod, on_volume) = stale_with_running_pod("force");
    let cfg = n.config(&n.ctrd.restart_program(), "[sandbox]\npull = false\n");
    let stale_pid = n.ctrd.pid();

    // README: "if the stale containerd still runs tasks it refuses and lists them: drain
    // the node first, then `guard verify --repair --force`".
    let refused = Guard::with_config(&cfg).run(&["--json", "verify", "--repair"]);
    refused
        .expect(1, "runtime.stale", "fail")
        .mentions("remedy.restart", &["refused", &pod, "--force"]);
    assert_eq!(
        refused.status("remedy.restart"),
        "fail",
        "{}",
        refused.dump()
    );
    assert_eq!(n.ctrd.restarts(), 0, "refused: {}", refused.dump());
    assert_eq!(n.ctrd.pid(), stale_pid);

    let forced = Guard::with_config(&cfg).run(&["--json", "verify", "--repair", "--force"]);
    assert_eq!(
        forced.status("remedy.restart"),
        "pass",
        "--force restarts over the running task: {}",
        forced.dump()
    );
    assert_eq!(forced.status("runtime.stale"), "pass", "{}", forced.dump());
    assert_eq!(
        n.ctrd.restarts(),
        1,
        "exactly one restart: {}",
        forced.dump()
    );
    assert_ne!(n.ctrd.pid(), stale_pid, "containerd was restarted");
    on_volume.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

#[test]
fn verify_repair_dry_run_on_a_stale_containerd_names_the_restart_and_changes_nothing() {
    if !require_root(TOOLS) {
        return;
    }
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:dry", dead_port()));
    let restart = n.ctrd.restart_program();
    let cfg = n.config(&restart, "[sandbox]\npull = false\n");
    let (pid, started) = (n.ctrd.pid(), start_time(n.ctrd.pid()));
    let before = n.content();

    // README: "--repair --dry-run prints each action it would take and changes nothing".
    let out = Guard::with_config(&cfg).run(&["--json", "verify", "--repair", "--dry-run"]);
    assert_eq!(
        n.ctrd.restarts(),
        0,
        "a dry run restarts nothing: {}",
        out.dump()
    );
    assert_eq!(n.ctrd.pid(), pid, "{}", out.dump());
    assert_eq!(start_time(pid), started, "the same containerd process");
    assert!(
        !n.state_file().exists(),
        "a dry run writes no state file: {}",
        n.state_file().display()
    );
    out.expect(1, "runtime.stale", "fail");
    assert_eq!(out.status("remedy.restart"), "skip", "{}", out.dump());
    out.mentions(
        "remedy.restart",
        &[
            "dry run: would restart containerd",
            &restart.display().to_string(),
        ],
    );
    before.assert_nothing_lost(&n.content());
    // The table form says the same to an operator.
    let table = Guard::with_config(&cfg).run(&["verify", "--repair", "--dry-run"]);
    assert!(
        table.stdout.contains("would restart containerd"),
        "{}",
        table.dump()
    );
    assert_eq!(n.ctrd.restarts(), 0);
}

#[test]
fn a_guard_waiting_on_a_live_holder_of_the_repair_lock_ends_within_its_hold_restarting_nothing() {
    if !require_root(TOOLS) {
        return;
    }
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:lock", dead_port()));
    let stale_pid = n.ctrd.pid();
    let marker = n.t.path().join("restart-started");
    let hanging = n.t.path().join("restart-hangs");
    // The first guard's restart command hangs (a `systemctl restart` stuck on a stop job),
    // so that guard lives on holding the repair lock.
    write_script(
        &hanging,
        &format!(
            "#!/bin/sh\necho $$ > '{m}.tmp' && mv '{m}.tmp' '{m}'\nexec sleep 600\n",
            m = marker.display()
        ),
    );
    let holder_cfg = n.config(
        &hanging,
        "[sandbox]\npull = false\n\n[hold]\ntimeout = \"60s\"\n",
    );
    let mut holder = Guard::with_config(&holder_cfg).spawn(&["--json", "runtime"]);
    let hung = KillOnDrop {
        pid: poll_until(
            "the first guard's restart command to start",
            Duration::from_secs(30),
            || {
                std::fs::read_to_string(&marker)
                    .ok()
                    .and_then(|s| s.trim().parse::<i32>().ok())
            },
        ),
    };
    let lock_file = n.t.guard_state_dir().join("repair.lock");
    assert_eq!(flock_holders(&lock_file), vec![holder.pid() as i32]);

    // The second guard (kubelet's ExecStartPre) may restart for real, but holds 3 s only.
    // README: repairs serialise on the lock, "so one fault costs one restart however many
    // guards see it"; `[hold] timeout`: "guard runtime blocks at most this long".
    let hold = Duration::from_secs(3);
    let cfg = n.config(
        &n.ctrd.restart_program(),
        "[sandbox]\npull = false\n\n[hold]\ntimeout = \"3s\"\n",
    );
    let second =
        Guard::with_config(&cfg).run_within(&["--json", "runtime"], Duration::from_secs(60));
    assert!(
        second.elapsed < hold + Duration::from_secs(5),
        "the second guard ends within its {hold:?} hold (+5 s): {}",
        second.dump()
    );
    second.expect(1, "remedy.budget", "fail").mentions(
        "remedy.budget",
        &["repair lock is held", &format!("pid {}", holder.pid())],
    );
    assert!(!holder.exited(), "the holder still holds the lock");
    assert_eq!(n.ctrd.restarts(), 0, "the second guard restarted nothing");
    assert_eq!(n.ctrd.pid(), stale_pid);
    assert_eq!(
        recorded_restarts(&n).len(),
        1,
        "only the holder's restart is recorded"
    );
    println!(
        "BENCH lock-waiter ended after {:.2}s",
        second.elapsed.as_secs_f64()
    );
    let _killed = holder.sigkill();
    hung.kill();
}
