//! What the gate never does: restart a containerd with running tasks, mistake a root
//! reached through a symlink for stale, restart what phase 1 holds, restart twice when
//! guards race, leave a stuck repair lock, or touch a sandbox its canary did not make.
//!
//! Phase 2 on real components: Debian's containerd per test on temp paths, real
//! loop-mounted ext4 volumes, a real `docker-registry` on 127.0.0.1 and a pause image built
//! here. Each scenario ends with the kubelet's view: a CRI RunPodSandbox of a host-network
//! pod with the sandbox image succeeds, or the guard failed and restarted nothing beyond
//! its budget. Root only (`sudo scripts/test`).

use testkit as support;

use std::path::Path;
use std::time::{Duration, Instant};
use support::node::{has_finding, lines_in, recorded_restarts, runtime, Node, TOOLS};
use support::runtime::{
    block_on, dead_port, remove_pod_sandbox, run_pod_sandbox, start_pod_sandbox, PauseImage,
    Restartable,
};
use support::{
    copy_executable, flock_holders, flock_is_free, poll_until, random_uuid, root_or_skip, unique,
    write_executable, ContentSnapshot, FsKind, Guard, KillOnDrop, LoopVolume, Outcome, Running,
    TempRoot,
};

#[test]
fn s11_stale_containerd_with_running_tasks_is_not_restarted() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let image = format!("127.0.0.1:{}/guard/pause:s11", dead_port());
    t.write_containerd_config_with(Some(&image));
    std::fs::create_dir_all(t.volume_path()).unwrap();
    // A live node, not a boot: containerd on the root filesystem's directory runs a pod...
    let ctrd = Restartable::start(&t);
    let img = PauseImage::new(&image);
    let archive = img.write_oci(&t.path().join("pause.oci.tar"), false);
    ctrd.ctr_import(&archive);
    let pod = start_pod_sandbox(&t.socket()).expect("a running pod sandbox");
    // ...when a volume is mounted over its root.
    let vol = LoopVolume::new(
        &t.images(),
        FsKind::Ext4,
        &unique("cg", 8),
        &t.volume_path(),
    );
    let n = Node { ctrd, vol, img, t };
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_archives(&[&archive]).sandbox_pull(false)
    });
    let pid = n.ctrd.identity();
    // the image data at risk is the stale containerd's, beneath the volume
    let before = n.content_beneath_volume();
    let out = runtime(&cfg);
    out.expect(1, "runtime.stale", "fail");
    out.mentions("remedy.restart", &["refused", &pod, "--force"]);
    assert_eq!(out.status("remedy.restart"), "fail");
    assert_eq!(
        n.ctrd.restarts(),
        0,
        "a restart would orphan the running pod"
    );
    pid.assert_still_runs("containerd");
    let status = Guard::with_config(&cfg).run(&["status"]);
    assert!(
        status.stdout.contains("refused-restart"),
        "{}",
        status.dump()
    );
    // The operator drains the pod; then the repair goes ahead (no --force needed).
    remove_pod_sandbox(&n.t.socket(), &pod).expect("remove the pod through the stale containerd");
    let out = Guard::with_config(&cfg).run(&["--json", "verify", "--repair"]);
    assert_eq!(out.status("remedy.restart"), "pass", "{}", out.dump());
    assert_eq!(out.status("remedy.restore-image"), "pass", "{}", out.dump());
    assert_eq!(
        out.status("runtime.sandbox-image"),
        "pass",
        "{}",
        out.dump()
    );
    assert_eq!(n.ctrd.restarts(), 1);
    before.assert_nothing_lost(&n.content_beneath_volume());
    n.kubelet_can_start_a_pod();
}

#[test]
fn s12_root_reached_through_a_symlink_is_not_mistaken_for_stale() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let image = format!("127.0.0.1:{}/guard/pause:s12", dead_port());
    t.write_containerd_config_with(Some(&image));
    // containerd's root is a symlink to where the volume is mounted.
    let real = t.path().join("data/containerd");
    let vol = LoopVolume::new(&t.images(), FsKind::Ext4, &unique("cg", 8), &real);
    std::os::unix::fs::symlink(&real, t.volume_path()).unwrap();
    let ctrd = Restartable::start(&t);
    let n = Node {
        ctrd,
        vol,
        img: PauseImage::new(&image),
        t,
    };
    n.import_image();
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| c.sandbox_pull(false));
    let before = ContentSnapshot::take(&n.t.path().join("data/containerd"));
    let out = runtime(&cfg);
    before.assert_nothing_lost(&ContentSnapshot::take(&n.t.path().join("data/containerd")));
    out.expect(0, "runtime.stale", "pass")
        .mentions("runtime.stale", &["data/containerd"]);
    assert_eq!(n.ctrd.restarts(), 0, "never restart a healthy containerd");
    n.kubelet_can_start_a_pod();
}

#[test]
fn s14_containerd_held_by_phase_1_is_not_restarted_and_status_says_why() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    t.write_containerd_config_with(None);
    std::fs::create_dir_all(t.volume_path()).unwrap();
    let log = t.path().join("restarts.log");
    let restart = t.path().join("restart-logged");
    write_executable(
        &restart,
        &format!("#!/bin/sh\necho restart >> '{}'\n", log.display()),
    );
    // Nothing is mounted at containerd's root: phase 1 fails and containerd never starts.
    let cfg = t.write_guard_config_with(|c| {
        c.containerd_wait("1s")
            .containerd_restart(&[&restart.display().to_string()])
            .volume_wait("200ms")
            .hold_timeout("30s")
    });
    Guard::with_config(&cfg)
        .run(&["--json", "volume"])
        .expect(1, "volume.mounted", "fail");
    let started = Instant::now();
    let out = runtime(&cfg);
    out.expect(1, "remedy.restart", "fail");
    out.mentions("remedy.restart", &["phase 1", "volume.mounted"]);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "does not hold for the whole timeout when phase 1 failed: {:?}",
        started.elapsed()
    );
    assert!(
        !log.exists(),
        "containerd was restarted although phase 1 held it back"
    );
    let status = Guard::with_config(&cfg).run(&["status"]);
    assert_eq!(status.code, 1, "{}", status.dump());
    assert!(
        status.stdout.contains("phase 1 (guard volume): FAILED")
            && status.stdout.contains("volume.mounted"),
        "{}",
        status.dump()
    );
}

#[test]
fn s15_concurrent_guards_restart_a_stale_containerd_exactly_once() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:s15", dead_port()));
    assert!(run_pod_sandbox(&n.t.socket()).is_err(), "stale before");
    let log = n.t.path().join("s15-restarts.log");
    let slow = n.t.path().join("restart-slow");
    // The sleep widens the race window on purpose: the restart (and so the repair lock)
    // lasts a second more while containerd is still the stale one, so every other guard is
    // surely started and trying meanwhile. Without the lock (or without re-probing after
    // taking it) they would all see a stale containerd and restart it again.
    write_executable(
        &slow,
        &format!(
            "#!/bin/sh\necho \"restart $$ $(date +%s.%N)\" >> '{}'\nsleep 1\nexec '{}'\n",
            log.display(),
            n.ctrd.restart_program().display()
        ),
    );
    let cfg = n.config_with(&slow, |c| {
        c.sandbox_pull(false)
            .remediation_restart_budget(3)
            .hold_timeout("60s")
    });
    let pid = n.ctrd.identity();
    let before = n.content();
    // -v: a guard that finds the repair lock busy logs so ("another guard (pid N) is
    // repairing; waiting"), the evidence that they overlapped.
    let g = Guard::with_config(&cfg).arg("-v");
    let started = Instant::now();
    // Spawned back to back: they all start within a few milliseconds of each other.
    let mut running: Vec<(&str, Running)> = Vec::new();
    for _ in 0..4 {
        running.push(("runtime", g.spawn(&["--json", "runtime"])));
    }
    for _ in 0..2 {
        running.push((
            "verify --repair",
            g.spawn(&["--json", "verify", "--repair"]),
        ));
    }
    let pids: Vec<u32> = running.iter().map(|(_, r)| r.pid()).collect();
    let outs: Vec<(&str, Outcome)> = running
        .into_iter()
        .map(|(what, r)| (what, r.finish(Duration::from_secs(90))))
        .collect();
    let took = started.elapsed();
    let all = outs
        .iter()
        .map(|(w, o)| format!("=== {w}\n{}", o.dump()))
        .collect::<Vec<_>>()
        .join("\n");
    println!(
        "BENCH s15 six concurrent guards to all exited {:.2}s",
        took.as_secs_f64()
    );
    for (what, o) in &outs {
        println!(
            "  {what}: exit {} after {:.2}s",
            o.code,
            o.elapsed.as_secs_f64()
        );
    }
    assert_eq!(lines_in(&log), 1, "the restart command ran once:\n{all}");
    assert_eq!(n.ctrd.restarts(), 1, "containerd restarted once:\n{all}");
    assert!(!pid.still_runs(), "containerd was restarted");
    for (what, o) in &outs {
        assert_eq!(o.code, 0, "`guard {what}` exit code:\n{all}");
        assert_eq!(o.status("runtime.stale"), "pass", "{what}:\n{all}");
    }
    // Exactly one of them restarted; the others saw the repaired node under the lock.
    let restarted: Vec<&str> = outs
        .iter()
        .filter(|(_, o)| has_finding(o, "remedy.restart"))
        .map(|(w, _)| *w)
        .collect();
    assert_eq!(restarted.len(), 1, "who restarted: {restarted:?}\n{all}");
    let (_, who) = outs
        .iter()
        .find(|(_, o)| has_finding(o, "remedy.restart"))
        .unwrap();
    who.mentions("remedy.restart", &["restart 1 of 3"]);
    // They overlapped: others tried the lock while the one that restarted held it (else
    // "restarted once" would only show that they ran one after another).
    let holder = pids[outs.iter().position(|(_, o)| std::ptr::eq(o, who)).unwrap()];
    let busy = format!("another guard (pid {holder}) is repairing; waiting");
    let waited = outs
        .iter()
        .filter(|(_, o)| o.stderr.contains(&busy))
        .count();
    println!("  {waited} of 5 others found the lock held by {holder}");
    assert!(
        waited >= 1,
        "no guard found the lock held ({busy:?}):\n{all}"
    );
    let restarts = recorded_restarts(&n);
    assert_eq!(restarts.len(), 1, "{restarts:?}");
    // The one restart's record carries the command's outcome, not just "running".
    let outcome = restarts[0]["outcome"].as_str().unwrap_or("");
    assert!(outcome.contains("exited 0"), "{restarts:?}");
    assert!(took < Duration::from_secs(30), "bounded: {took:?}\n{all}");
    before.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

#[test]
fn s16_guard_killed_while_holding_the_repair_lock_leaves_no_stuck_lock() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:s16", dead_port()));
    let stale_pid = n.ctrd.identity();
    let marker = n.t.path().join("s16-restart-started");
    let script = n.t.path().join("restart-s16");
    // A restart command that hangs (like a `systemctl restart` stuck on a stop job): it
    // says it started, with its PID (kept by `exec`), then blocks.
    write_executable(
        &script,
        &format!(
            "#!/bin/sh\necho $$ > '{m}.tmp' && mv '{m}.tmp' '{m}'\nexec sleep 600\n",
            m = marker.display()
        ),
    );
    let cfg = n.config_with(&script, |c| {
        c.sandbox_pull(false)
            .remediation_restart_budget(3)
            .remediation_backoff("200ms")
            .hold_timeout("60s")
    });
    let lock_file = n.t.guard_state_dir().join("repair.lock");
    let before = n.content();
    let mut first = Guard::with_config(&cfg).spawn(&["--json", "runtime"]);
    let guard_pid = first.pid() as i32;
    let hung = KillOnDrop {
        pid: poll_until(
            "the restart command to start",
            Duration::from_secs(30),
            || {
                std::fs::read_to_string(&marker)
                    .ok()
                    .and_then(|s| s.trim().parse::<i32>().ok())
            },
        ),
    };
    // The guard is inside the restart, holding the lock: the kernel says so, and the file
    // names it.
    assert!(!first.exited(), "the guard waits for its restart command");
    assert_eq!(flock_holders(&lock_file), vec![guard_pid]);
    assert_eq!(
        std::fs::read_to_string(&lock_file).unwrap().trim(),
        guard_pid.to_string()
    );
    assert!(!flock_is_free(&lock_file));
    // Read-only runs never wait on the lock.
    let status = Guard::with_config(&cfg).run(&["--json", "status"]);
    assert_eq!(status.code, 0, "{}", status.dump());
    assert!(status.elapsed < Duration::from_secs(5), "{}", status.dump());
    let v = Guard::with_config(&cfg).run(&["--json", "verify"]);
    v.expect(1, "runtime.stale", "fail");
    assert!(v.elapsed < Duration::from_secs(10), "{}", v.dump());
    // The restart was recorded before the command ran.
    let restarts = recorded_restarts(&n);
    assert_eq!(restarts.len(), 1, "{restarts:?}");
    assert!(
        restarts[0]["outcome"]
            .as_str()
            .unwrap_or("")
            .contains("running"),
        "{restarts:?}"
    );

    let killed = first.sigkill();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&killed),
        Some(9)
    );
    // The restart command outlives the guard; it must not have inherited the lock (the
    // lock file is close-on-exec): the lock is free while it still runs.
    assert!(hung.alive(), "the hung restart command outlived the guard");
    assert!(
        flock_holders(&lock_file).is_empty(),
        "{:?}",
        flock_holders(&lock_file)
    );
    assert!(
        flock_is_free(&lock_file),
        "the lock is stuck after the holder died"
    );
    let status = Guard::with_config(&cfg).run(&["--json", "status"]);
    assert_eq!(status.code, 0, "{}", status.dump());
    assert!(status.elapsed < Duration::from_secs(5), "{}", status.dump());
    let j = status.json.as_ref().expect("status --json");
    assert_eq!(
        j["state"]["restarts"].as_array().map(Vec::len),
        Some(1),
        "{j}"
    );
    hung.kill();
    drop(hung);

    // The operator fixes the restart command; the next guard takes the lock at once.
    write_executable(
        &script,
        &format!("#!/bin/sh\nexec '{}'\n", n.ctrd.restart_program().display()),
    );
    let started = Instant::now();
    let out = runtime(&cfg);
    let took = started.elapsed();
    println!(
        "BENCH s16 guard after a killed holder: {:.2}s",
        took.as_secs_f64()
    );
    out.expect(0, "remedy.restart", "pass")
        .mentions("remedy.restart", &["restart 2 of 3"]);
    assert_eq!(out.status("runtime.stale"), "pass", "{}", out.dump());
    assert!(
        took < Duration::from_secs(20),
        "well before the 60s hold timeout: {took:?}\n{}",
        out.dump()
    );
    assert_eq!(n.ctrd.restarts(), 1, "the working restart ran once");
    assert!(!stale_pid.still_runs(), "containerd was restarted");
    assert_eq!(recorded_restarts(&n).len(), 2);
    assert!(flock_holders(&lock_file).is_empty(), "released at exit");
    before.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

/// Plants `(name, pid label, kubelet's labels?)` in the canary's pod namespace; the ids.
fn plant_in_canary_namespace(socket: &Path, pods: &[(&str, String, bool)]) -> Vec<String> {
    use containerd_guard::containerd::canary::{LABEL, NAMESPACE};
    use support::cri::start_labelled_pod;
    let plant = |(name, pid, kubelet): &(&str, String, bool)| {
        let uid = random_uuid();
        let mut labels = vec![(LABEL, pid.as_str())];
        if *kubelet {
            labels.extend([
                ("io.kubernetes.pod.name", *name),
                ("io.kubernetes.pod.namespace", NAMESPACE),
                ("io.kubernetes.pod.uid", uid.as_str()),
            ]);
        }
        let started = start_labelled_pod(socket, name, NAMESPACE, &labels);
        block_on("RunPodSandbox", started).unwrap()
    };
    // (all at once: containerd makes them in parallel)
    std::thread::scope(|s| {
        let planting: Vec<_> = pods.iter().map(|p| s.spawn(move || plant(p))).collect();
        planting.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// Sandboxes in the canary's pod namespace that no guard recorded making: two of
/// kubelet's (with `canary-pid` labels) and four that forge the canary's label (a pid of
/// 1, `v1`, a pid that is gone, the pid of a running process named `guard`). No command
/// stops or removes one; each that looks at the canary names every one.
#[test]
fn s19_the_canary_never_touches_a_sandbox_it_did_not_make() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:s19", dead_port()));
    n.import_image();
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| c.sandbox_pull(false));
    let socket = n.t.socket();
    let running = n.t.path().join("guard");
    copy_executable(Path::new("/bin/sleep"), &running);
    let mut live = std::process::Command::new(&running)
        .arg("60")
        .spawn()
        .unwrap();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let planted = plant_in_canary_namespace(
        &socket,
        &[
            ("kubelet-pid-1", "1".into(), true),
            ("kubelet-pid-v1", "v1".into(), true),
            ("forged-pid-1", "1".into(), false),
            ("forged-pid-v1", "v1".into(), false),
            ("forged-dead-pid", gone.id().to_string(), false),
            ("forged-live-guard", live.id().to_string(), false),
        ],
    );
    let guard = |args: &[&str]| Guard::with_config(&cfg).run(args);
    let runs = [
        ("verify --deep", guard(&["--json", "verify", "--deep"])),
        ("runtime", runtime(&cfg)),
        ("hygiene", guard(&["--json", "hygiene"])),
        (
            "verify --repair --dry-run --deep",
            guard(&["--json", "verify", "--repair", "--dry-run", "--deep"]),
        ),
    ];
    let states: Vec<_> = planted
        .iter()
        .map(|id| block_on("PodSandboxStatus", support::cri::sandbox_state(&socket, id)))
        .collect();
    // (cleaned up before any assertion: a failed test leaves no pod behind)
    live.kill().unwrap();
    live.wait().unwrap();
    std::thread::scope(|s| {
        for id in &planted {
            let socket = &socket;
            s.spawn(move || block_on("remove a pod", support::cri::remove_pod(socket, id)));
        }
    });
    for (id, state) in planted.iter().zip(&states) {
        assert_eq!(state.as_deref(), Ok("SANDBOX_READY"), "{id}");
    }
    for (command, out) in &runs {
        assert_eq!(out.code, 0, "{command}: {}", out.dump());
        if *command == "hygiene" {
            continue; // (it does not look at the canary)
        }
        out.expect(0, "runtime.canary-namespace", "warn");
        let named: Vec<&str> = planted.iter().map(String::as_str).collect();
        out.mentions("runtime.canary-namespace", &named).mentions(
            "runtime.canary-namespace",
            &["not made by this guard", "left alone"],
        );
        assert_eq!(
            out.status("runtime.can-create"),
            match *command {
                "verify --repair --dry-run --deep" => "skip",
                _ => "pass",
            },
            "{command}: {}",
            out.dump()
        );
    }
    runs[3].1.mentions(
        "runtime.can-create",
        &["dry run: would create and remove a canary"],
    );
}
