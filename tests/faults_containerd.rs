//! Faults of containerd and of its restart: containerd missing, hung, slow to start or
//! crashing; the restart command missing, hanging or failing; the volume unmounted or the
//! device vanishing while the guard runs.
//!
//! The fault matrix of phase 2 on real components (docs/faults.md). Each test asserts what
//! the guard does, that it ends in bounded time, and, where containerd is reached, that
//! nothing was lost (support::content). Root only.

use testkit as support;

use std::path::{Path, PathBuf};
use std::time::Duration;
use support::node::{has_finding, lines_in, recorded_restarts, runtime, Node, TOOLS};
use support::runtime::{dead_port, remove_pod_sandbox, sha256, start_pod_sandbox};
use support::{
    containerd_tool, is_mount_point, poll_until, root_or_skip, run, run_exe, unique,
    write_executable, ContentSnapshot, FsKind, Guard, GuardConfig, Image, TempRoot,
};

/// SIGCONTs a SIGSTOPped containerd when dropped, so a failing assertion never leaves it
/// stopped (its drop could not stop it otherwise: SIGTERM waits for SIGCONT).
struct Stopped(i32);

impl Stopped {
    fn stop(pid: i32) -> Stopped {
        signal(pid, nix::sys::signal::Signal::SIGSTOP);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, nix::sys::signal::Signal::SIGCONT);
    }
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

// ---- containerd -----------------------------------------------------------------------

#[test]
fn containerd_missing_is_started_by_the_restart_command_once() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:miss", dead_port()));
    n.import_image();
    let before = n.content();
    n.ctrd.stop();
    let _ = std::fs::remove_file(n.t.socket());
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_pull(false)
            .remediation_restart_budget(1)
            .hold_timeout("60s")
    });
    let out = runtime(&cfg);
    // No process and no socket is "not answering": the restart command starts it.
    out.expect(0, "remedy.restart", "pass")
        .mentions("remedy.restart", &["not answering", "pid before: none"]);
    assert_eq!(n.ctrd.restarts(), 1, "started once, within the budget");
    before.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

#[test]
fn containerd_missing_and_not_started_is_terminal_within_the_hold_naming_the_socket() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:miss2", dead_port()));
    n.ctrd.stop();
    let _ = std::fs::remove_file(n.t.socket());
    let wait = Duration::from_secs(2);
    let cfg = n
        .guard_config(&n.ctrd.noop_program())
        .containerd_wait(&format!("{}s", wait.as_secs()))
        .sandbox_pull(false)
        .remediation_restart_budget(1)
        .remediation_backoff("100ms")
        .hold_timeout("10s")
        .write(&n.t);
    let out = runtime(&cfg);
    println!("containerd missing: guard ended after {:?}", out.elapsed);
    out.expect(4, "runtime.answers", "fail")
        .mentions("runtime.answers", &[n.t.socket().to_str().unwrap()])
        .mentions("remedy.budget", &["TERMINAL"]);
    assert_eq!(n.ctrd.restarts(), 1, "exactly the budget");
    // containerd given its whole wait before the restart and again after it
    assert!(
        out.elapsed >= wait * 2 && out.elapsed < Duration::from_secs(10 + 15),
        "{:?}",
        out.elapsed
    );
    // The next run is terminal at once: no more restarts this boot.
    assert_eq!(runtime(&cfg).code, 4);
    assert_eq!(n.ctrd.restarts(), 1);
}

/// containerd SIGSTOPped: its socket accepts, nothing answers. Every call is bounded; the
/// guard restarts it (a silent containerd is restarted; the shims keep the pods running),
/// within the budget, and the pod that ran before still runs after.
#[test]
fn hung_containerd_is_restarted_within_the_hold_and_its_running_pod_survives() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:hung", dead_port()));
    n.import_image();
    let pod = start_pod_sandbox(&n.t.socket()).expect("a running pod sandbox");
    let before = n.content();
    let cfg = n
        .guard_config(&n.ctrd.restart_program())
        .containerd_wait("3s")
        .sandbox_pull(false)
        .remediation_restart_budget(1)
        .hold_timeout("60s")
        .write(&n.t);
    let hung_pid = n.ctrd.identity();
    let stopped = Stopped::stop(hung_pid.pid);
    let out = runtime(&cfg);
    drop(stopped);
    println!("hung containerd: guard ended after {:?}", out.elapsed);
    out.expect(0, "remedy.restart", "pass").mentions(
        "remedy.restart",
        &["not answering", &hung_pid.pid.to_string()],
    );
    assert_eq!(n.ctrd.restarts(), 1);
    assert!(!hung_pid.still_runs(), "containerd was restarted");
    assert!(
        out.elapsed < Duration::from_secs(60 + 15),
        "{:?}",
        out.elapsed
    );
    let tasks = run_exe(
        &containerd_tool("ctr"),
        &[
            "-a",
            n.t.socket().to_str().unwrap(),
            "-n",
            "k8s.io",
            "tasks",
            "ls",
        ],
    );
    assert!(
        tasks
            .lines()
            .any(|l| l.starts_with(&pod) && l.contains("RUNNING")),
        "the pod {pod} ran before the restart and must still run:\n{tasks}"
    );
    remove_pod_sandbox(&n.t.socket(), &pod).unwrap();
    before.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

#[test]
fn hung_containerd_with_a_restart_that_does_not_help_ends_within_the_hold_timeout() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:hung2", dead_port()));
    n.import_image();
    let before = n.content();
    let wait = Duration::from_secs(2);
    let cfg = n
        .guard_config(&n.ctrd.noop_program())
        .containerd_wait(&format!("{}s", wait.as_secs()))
        .sandbox_pull(false)
        .remediation_restart_budget(1)
        .remediation_backoff("100ms")
        .hold_timeout("8s")
        .write(&n.t);
    let stopped = Stopped::stop(n.ctrd.pid());
    let v = Guard::with_config(&cfg).run(&["--json", "verify"]);
    let out = runtime(&cfg);
    drop(stopped);
    println!(
        "hung containerd: verify {:?}, runtime {:?} (hold timeout 8s)",
        v.elapsed, out.elapsed
    );
    v.expect(1, "runtime.answers", "fail")
        .mentions("runtime.answers", &["does not answer"]);
    // "does not answer" only once its wait has passed, and bounded by it
    assert!(
        v.elapsed >= wait && v.elapsed < Duration::from_secs(15),
        "{:?}",
        v.elapsed
    );
    out.expect(4, "runtime.answers", "fail")
        .mentions(
            "runtime.answers",
            &["does not answer", n.t.socket().to_str().unwrap()],
        )
        .mentions("remedy.budget", &["TERMINAL"]);
    // its wait before the restart and again after it, then terminal within the hold
    assert!(
        out.elapsed >= wait * 2 && out.elapsed < Duration::from_secs(8 + 15),
        "{:?}",
        out.elapsed
    );
    assert_eq!(n.ctrd.restarts(), 1, "the budget, not more");
    n.ctrd.wait_answering();
    before.assert_nothing_lost(&n.content());
}

#[test]
fn containerd_slow_to_start_is_waited_for_without_a_restart() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:slow", dead_port()));
    n.import_image();
    let before = n.content();
    n.ctrd.stop();
    let _ = std::fs::remove_file(n.t.socket());
    let cfg = n.config_with(&n.ctrd.noop_program(), |c| {
        c.sandbox_pull(false).hold_timeout("60s")
    });
    let running = Guard::with_config(&cfg)
        .arg("-v")
        .spawn(&["--json", "runtime"]);
    running.wait_for_stderr("containerd not answering yet", Duration::from_secs(15));
    n.ctrd.restart_by_hand(); // the test starts it (not counted as the guard's restart)
    let out = running.finish(Duration::from_secs(60));
    println!("slow containerd: guard ended after {:?}", out.elapsed);
    out.expect(0, "runtime.answers", "pass");
    assert!(!has_finding(&out, "remedy.restart"), "{}", out.dump());
    assert_eq!(n.ctrd.restarts(), 0, "a late containerd is waited for");
    before.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

#[test]
fn containerd_crashing_after_each_restart_spends_the_budget_then_terminal() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:crash", dead_port()));
    let before = n.content();
    n.ctrd.stop();
    let _ = std::fs::remove_file(n.t.socket());
    // The restart command starts a containerd that exits at once (its config is broken).
    let broken = n.t.path().join("broken.toml");
    std::fs::write(&broken, "version = [\n").unwrap();
    let crash = n.t.path().join("restart-crashing");
    write_executable(
        &crash,
        &format!(
            "#!/bin/sh\necho \"restart $(date +%s.%N)\" >> '{d}/restarts.log'\n\
             '{exe}' --config '{broken}' >> '{d}/crash.log' 2>&1 &\n",
            d = n.t.path().display(),
            exe = containerd_tool("containerd").display(),
            broken = broken.display()
        ),
    );
    let wait = Duration::from_secs(2);
    let cfg = n
        .guard_config(&crash)
        .containerd_wait(&format!("{}s", wait.as_secs()))
        .sandbox_pull(false)
        .remediation_restart_budget(2)
        .remediation_backoff("100ms")
        .hold_timeout("60s")
        .write(&n.t);
    let out = runtime(&cfg);
    println!("crashing containerd: guard ended after {:?}", out.elapsed);
    out.expect(4, "runtime.answers", "fail")
        .mentions("runtime.answers", &[n.t.socket().to_str().unwrap()])
        .mentions("remedy.budget", &["TERMINAL", "2 of 2"]);
    assert_eq!(n.ctrd.restarts(), 2, "exactly the budget, never a loop");
    // containerd given its whole wait before the first restart and after each
    assert!(
        out.elapsed >= wait * 3 && out.elapsed < Duration::from_secs(60),
        "{:?}",
        out.elapsed
    );
    // containerd comes back by hand (the operator's fix): the image data is all there.
    n.ctrd.restart_by_hand();
    before.assert_nothing_lost(&n.content());
}

// ---- the restart command ---------------------------------------------------------------

/// A stale (TKGS-order) node whose restart command is `restart`; budget 2.
fn stale_with_restart(tag: &str, restart: &Path) -> (Node, PathBuf, ContentSnapshot) {
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:{tag}", dead_port()));
    let cfg = stale_config(&n, restart).write(&n.t);
    let before = n.content();
    (n, cfg, before)
}

/// The config of [`stale_with_restart`]: no pull, two restarts 100ms apart, a 30s hold.
fn stale_config(n: &Node, restart: &Path) -> GuardConfig {
    n.guard_config(restart)
        .sandbox_pull(false)
        .remediation_restart_budget(2)
        .remediation_backoff("100ms")
        .hold_timeout("30s")
}

#[test]
fn restart_command_missing_is_reported_counted_and_terminal() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let missing = PathBuf::from("/nonexistent/containerd-guard-test/restart");
    let (n, cfg, before) = stale_with_restart("enoent", &missing);
    let pid = n.ctrd.identity();
    let out = runtime(&cfg);
    out.expect(4, "runtime.stale", "fail")
        .mentions("remedy.restart", &["cannot run", missing.to_str().unwrap()])
        .mentions("remedy.budget", &["TERMINAL"]);
    assert_eq!(recorded_restarts(&n).len(), 2, "each attempt counts");
    pid.assert_still_runs("containerd untouched");
    before.assert_nothing_lost(&n.content());
}

/// A restart command stuck (like `systemctl restart` behind a stop job that never ends):
/// killed at `[containerd] restart_timeout`, counted, the guard goes on and ends terminal.
#[test]
fn restart_command_hanging_is_killed_at_its_timeout() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let hanging = t.path().join("restart-hanging");
    let pids = t.path().join("pids");
    write_executable(
        &hanging,
        &format!(
            "#!/bin/sh\necho $$ >> '{}'\nexec sleep 600\n",
            pids.display()
        ),
    );
    let (n, _, before) = stale_with_restart("hang", &hanging);
    let timeout = Duration::from_secs(2);
    let cfg = stale_config(&n, &hanging)
        .containerd_restart_timeout(&format!("{}s", timeout.as_secs()))
        .write(&n.t);
    let pid = n.ctrd.identity();
    let out = runtime(&cfg);
    println!(
        "hanging restart command: guard ended after {:?}",
        out.elapsed
    );
    out.expect(4, "runtime.stale", "fail")
        .mentions("remedy.restart", &["did not finish within 2s", "killed"])
        .mentions("remedy.budget", &["TERMINAL"]);
    assert_eq!(lines_in(&pids), 2, "run exactly restart_budget times");
    for hung in std::fs::read_to_string(&pids).unwrap().lines() {
        let stat = std::fs::read_to_string(format!("/proc/{hung}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next());
        assert!(
            matches!(state, None | Some("Z")),
            "the hung restart command {hung} still runs: {stat}"
        );
    }
    // each run of the command given its whole timeout, and no more than that
    assert!(
        out.elapsed >= timeout * 2 && out.elapsed < timeout * 2 + Duration::from_secs(20),
        "{:?}",
        out.elapsed
    );
    pid.assert_still_runs("containerd");
    before.assert_nothing_lost(&n.content());
}

#[test]
fn restart_command_failing_is_reported_with_its_exit_status_and_terminal() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let failing = t.path().join("restart-failing");
    let log = t.path().join("failing.log");
    write_executable(
        &failing,
        &format!(
            "#!/bin/sh\necho ran >> '{}'\necho 'Job for containerd.service failed' >&2\nexit 1\n",
            log.display()
        ),
    );
    let (n, cfg, before) = stale_with_restart("exit1", &failing);
    let pid = n.ctrd.identity();
    let out = runtime(&cfg);
    out.expect(4, "runtime.stale", "fail")
        .mentions(
            "remedy.restart",
            &[
                "failed",
                "exit status: 1",
                "Job for containerd.service failed",
            ],
        )
        .mentions("remedy.budget", &["TERMINAL"]);
    assert_eq!(lines_in(&log), 2, "run exactly restart_budget times");
    pid.assert_still_runs("containerd");
    before.assert_nothing_lost(&n.content());
}

// ---- the volume ------------------------------------------------------------------------

/// The volume is lazily unmounted while `guard runtime` holds kubelet (the sandbox image is
/// missing): the next look finds containerd's database on a detached mount, stale, and
/// containerd's root a plain directory of the root filesystem. A restart would start
/// containerd there: it is refused and named, nothing counted, and the hold ends at its
/// timeout; the data on the volume is untouched.
#[test]
fn volume_unmounted_while_runtime_holds_is_never_restarted_onto_the_root_filesystem() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let mut n = Node::with_other_image(&format!("127.0.0.1:{}/guard/pause:umnt", dead_port()));
    let before = n.content_with_other_image();
    let corrupt = n.oci_archive(true);
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_archives(&[&corrupt])
            .sandbox_pull(false)
            .remediation_restart_budget(1)
            .hold_timeout("15s")
    });
    let running = Guard::with_config(&cfg).spawn(&["--json", "runtime"]);
    // The guard has refused the archive (recorded in its state file): it holds now.
    poll_until("the guard to hold", Duration::from_secs(20), || {
        let state = std::fs::read_to_string(n.state_file()).ok()?;
        state.contains("refused-archive").then_some(())
    });
    let pid = n.ctrd.pid();
    run("umount", &["-l", n.t.volume_path().to_str().unwrap()]);
    drop(n.vol.mount.take()); // (detached: nothing left to unmount)
    let out = running.finish(Duration::from_secs(60));
    println!(
        "unmounted under runtime: guard ended after {:?}",
        out.elapsed
    );
    assert_eq!(out.code, 1, "{}", out.dump());
    out.mentions(
        "remedy.restart",
        &["not restarting containerd (stale)", "not mounted"],
    );
    assert_eq!(n.ctrd.restarts(), 0, "{}", out.dump());
    assert_eq!(n.ctrd.pid(), pid, "{}", out.dump());
    assert!(
        recorded_restarts(&n).is_empty(),
        "a refusal spends no budget"
    );
    // The volume's data, seen through a second mount of the same device (read-write, as
    // the detached mount the running containerd holds is: the kernel shares the one
    // superblock).
    let again = n.t.path().join("volume-again");
    let _m = n.vol.device.mount(&again, "");
    before.assert_nothing_lost(&ContentSnapshot::take(&again));
}

/// The digest of the first 4 MiB of a disk image: its superblock and group descriptors,
/// which any mkfs rewrites.
fn superblocks(path: &Path) -> String {
    use std::io::Read;
    let mut head = vec![0u8; 4 << 20];
    let mut f = std::fs::File::open(path).unwrap();
    f.read_exact(&mut head).unwrap();
    sha256(&head)
}

#[test]
fn device_vanishing_during_the_wait_fails_after_the_wait_and_formats_nothing() {
    let Some(_root) = root_or_skip(&["losetup", "mkfs.ext4", "mount"]) else {
        return;
    };
    let t = TempRoot::new();
    std::fs::create_dir_all(t.volume_path()).unwrap();
    let l = unique("cg", 8);
    let img = Image::formatted(t.images().join("vanish.img"), FsKind::Ext4, &l, None, &[]);
    let lo = img.attach();
    let cfg =
        t.write_guard_config_with(|c| c.volume_device(&format!("LABEL={l}")).volume_wait("8s"));
    let sum_before = superblocks(&t.images().join("vanish.img"));
    let mut running = Guard::with_config(&cfg).spawn(&["--json", "volume"]);
    // The device is there, not mounted: the guard waits for the mount.
    running.wait_for_stderr("to be mounted at", Duration::from_secs(10));
    let sys = format!("/sys/class/block/{}/size", lo.name);
    drop(lo); // losetup -d while the guard waits
    poll_until(
        "the loop device to be detached",
        Duration::from_secs(5),
        || {
            let size = std::fs::read_to_string(&sys).unwrap_or_default();
            (size.trim() == "0" || size.is_empty()).then_some(())
        },
    );
    assert!(!running.exited(), "detached while the guard still waits");
    let out = running.finish(Duration::from_secs(30));
    println!("device vanished: guard ended after {:?}", out.elapsed);
    out.expect(1, "volume.device", "fail")
        .expect(1, "volume.mounted", "fail")
        .mentions("volume.device", &[&format!("LABEL={l}"), "not found"]);
    // the whole wait (a disk that comes back in time is taken), and not much more
    assert!(
        out.elapsed >= Duration::from_secs(8) && out.elapsed < Duration::from_secs(8 + 10),
        "{:?}",
        out.elapsed
    );
    assert!(!is_mount_point(&t.volume_path()), "nothing mounted");
    let sum_after = superblocks(&t.images().join("vanish.img"));
    assert_eq!(
        sum_before, sum_after,
        "the disk is untouched (never formatted)"
    );
}

/// How long a step of the vanishing device's test may take: a loop device detached, a
/// stopped guard seen stopped.
const PROMPT: Duration = Duration::from_secs(10);

/// `/proc/PID/stat`'s state letter (`T`: stopped).
fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// With `[volume] mount = true` the guard mounts a device the moment a look finds it, so
/// the device vanishes between that look and the mount: the guard stops itself there (the
/// debug build's `volume device found` hook), the loop device is detached, the guard goes
/// on. It formats nothing, mounts nothing, and waits on for the device until
/// `[volume] wait` (a disk that comes back in time is taken): failing then, not before.
#[test]
fn device_vanishing_before_the_guard_mounts_it_fails_after_the_wait_and_formats_nothing() {
    let Some(_root) = root_or_skip(&["losetup", "mkfs.ext4", "mount"]) else {
        return;
    };
    use containerd_guard::signals::HOOK_VAR;
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let t = TempRoot::new();
    std::fs::create_dir_all(t.volume_path()).unwrap();
    let l = unique("cg", 8);
    let path = t.images().join("vanish-mount.img");
    let img = Image::formatted(path.clone(), FsKind::Ext4, &l, None, &[]);
    let lo = img.attach();
    let wait = Duration::from_secs(3);
    let cfg = t.write_guard_config_with(|c| {
        c.volume_device(&format!("LABEL={l}"))
            .volume_wait("3s")
            .volume_mount(true)
    });
    let sum_before = superblocks(&path);
    let running = Guard::with_config(&cfg)
        .env(HOOK_VAR, "volume device found")
        .spawn(&["--json", "volume"]);
    let pid = running.pid() as i32;
    poll_until("the guard to stop at the device it found", PROMPT, || {
        (process_state(pid) == Some('T')).then_some(())
    });
    let sys = format!("/sys/class/block/{}/size", lo.name);
    drop(lo); // losetup -d between the guard's look and its mount
    poll_until("the loop device to be detached", PROMPT, || {
        let size = std::fs::read_to_string(&sys).unwrap_or_default();
        (size.trim() == "0" || size.is_empty()).then_some(())
    });
    kill(Pid::from_raw(pid), Signal::SIGCONT).expect("continue the guard");
    let out = running.finish(Duration::from_secs(30));
    out.expect(1, "volume.device", "fail")
        .expect(1, "volume.mounted", "fail")
        .mentions("volume.device", &[&format!("LABEL={l}"), "not found"]);
    // the whole wait, and not much more
    assert!(
        out.elapsed >= wait && out.elapsed < wait + Duration::from_secs(10),
        "{:?}\n{}",
        out.elapsed,
        out.dump()
    );
    // a disk that left is not reported as one without a filesystem (whose fix is mkfs)
    assert!(!has_finding(&out, "volume.mount"), "{}", out.dump());
    assert!(
        out.stderr.contains("was gone before it could be mounted"),
        "{}",
        out.dump()
    );
    assert!(!is_mount_point(&t.volume_path()), "nothing mounted");
    assert_eq!(sum_before, superblocks(&path), "the disk is untouched");
}
