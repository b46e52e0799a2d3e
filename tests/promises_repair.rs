//! Promises about repairs: `verify --repair` (forced, dry run) on a stale containerd,
//! the fix a silent containerd is told, the repair lock, the backoff cap, hygiene never
//! restarting, and every dry run changing nothing.
//!
//! Promises of README.md and docs/ that only the fake world (`src/phases/gate/tests/`)
//! or nothing proved, on real components: Debian's containerd on temp paths, a real
//! loop-mounted ext4 volume, the built `guard`. Root only.

use testkit as support;

use std::path::Path;
use std::time::Duration;
use support::node::{has_finding, recorded_restarts, runtime, Node, TOOLS};
use support::runtime::{block_on, dead_port, start_pod_sandbox};
use support::{
    containerd_major_minor, flock_holders, is_mount_point, poll_until, root_or_skip,
    write_executable, Guard, KillOnDrop, TempRoot,
};

/// A pod left running by a containerd the test then replaced (the stale one `--force`
/// restarted away): nothing will ever remove it, so on drop its shim and the shim's
/// children (the pause process) are killed and its mounts below `dir` detached.
struct StrandedPod {
    id: String,
    dir: std::path::PathBuf,
}

impl Drop for StrandedPod {
    fn drop(&mut self) {
        let ids = [self.id.clone()];
        for (shim, _) in support::hygiene::shims_of(&ids) {
            let children = std::fs::read_dir("/proc").into_iter().flatten().flatten();
            let children = children
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .filter(|pid| support::hygiene::ppid(*pid) == Some(shim));
            for pid in children {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
        support::hygiene::kill_shims_of(&ids);
        support::hygiene::unmount_under(&self.dir, &ids);
    }
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
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let (n, pod, on_volume) = stale_with_running_pod("force");
    let _stranded = StrandedPod {
        id: pod.clone(),
        dir: n.t.path().to_path_buf(),
    };
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| c.sandbox_pull(false));
    let stale_pid = n.ctrd.identity();

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
    stale_pid.assert_still_runs("containerd");

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
    assert!(!stale_pid.still_runs(), "containerd was restarted");
    on_volume.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

#[test]
fn verify_repair_dry_run_on_a_stale_containerd_names_the_restart_and_changes_nothing() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:dry", dead_port()));
    let restart = n.ctrd.restart_program();
    let cfg = n.config_with(&restart, |c| c.sandbox_pull(false));
    let containerd = n.ctrd.identity();
    let before = n.content();

    // README: "--repair --dry-run prints each action it would take and changes nothing".
    let out = Guard::with_config(&cfg).run(&["--json", "verify", "--repair", "--dry-run"]);
    assert_eq!(
        n.ctrd.restarts(),
        0,
        "a dry run restarts nothing: {}",
        out.dump()
    );
    containerd.assert_still_runs(&out.dump());
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

/// A silent containerd (its socket there, nobody listening): each command's fix line says
/// what fits that command, and the dry run's plan what would really run on this host with
/// the default `systemctl restart`.
#[test]
fn a_silent_containerds_fix_fits_the_command_that_prints_it() {
    let Some(_root) = root_or_skip(&["mkfs.ext4", "losetup", "mount"]) else {
        return;
    };
    let t = TempRoot::new();
    t.write_containerd_config_with(Some("127.0.0.1:1/guard/pause:silent"));
    // (on the verified volume: elsewhere the fix says to mount it first)
    let _volume = t.mount_volume();
    drop(std::os::unix::net::UnixListener::bind(t.socket()).unwrap());
    let cfg = t.write_guard_config_with(|c| {
        c.containerd_wait("300ms")
            .containerd_restart(&["systemctl", "restart", "containerd"])
    });
    let g = Guard::with_config(&cfg);
    let fix = |args: &[&str]| {
        let out = g.run(&[&["--json"], args].concat());
        assert_eq!(out.status("runtime.answers"), "fail", "{}", out.dump());
        out.finding("runtime.answers")["remedy"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let verify = fix(&["verify"]);
    assert!(
        verify.contains("`guard verify --repair` restarts it")
            && verify.contains("`systemctl restart containerd`")
            && !verify.contains("the guard restarts"),
        "{verify}"
    );
    let hygiene = fix(&["hygiene"]);
    assert!(
        hygiene.contains("hygiene never restarts containerd"),
        "{hygiene}"
    );
    let dry = g.run(&["--json", "verify", "--repair", "--dry-run"]);
    let plan = dry.finding_text("remedy.restart");
    match Path::new("/run/systemd/system").is_dir() {
        false => {
            assert_eq!(dry.status("runtime.kill-mode"), "skip", "{}", dry.dump());
            dry.mentions("runtime.kill-mode", &["not a systemd host"]);
            assert!(
                plan.contains("no restart is possible")
                    && plan.contains("not a systemd host")
                    && !plan.contains("would restart"),
                "{plan}"
            );
        }
        true => assert!(
            plan.contains(
                "would restart containerd (not answering) with `systemctl restart containerd`"
            ),
            "{plan}"
        ),
    }
}

#[test]
fn a_guard_waiting_on_a_live_holder_of_the_repair_lock_ends_within_its_hold_restarting_nothing() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:lock", dead_port()));
    let stale_pid = n.ctrd.identity();
    let marker = n.t.path().join("restart-started");
    let hanging = n.t.path().join("restart-hangs");
    // The first guard's restart command hangs (a `systemctl restart` stuck on a stop job),
    // so that guard lives on holding the repair lock.
    write_executable(
        &hanging,
        &format!(
            "#!/bin/sh\necho $$ > '{m}.tmp' && mv '{m}.tmp' '{m}'\nexec sleep 600\n",
            m = marker.display()
        ),
    );
    let holder_cfg = n.config_with(&hanging, |c| c.sandbox_pull(false).hold_timeout("60s"));
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
    // docs/configuration.md: repairs serialise on the lock, "so one fault costs one restart
    // however many guards see it"; `[hold] timeout`: "guard runtime blocks at most this long".
    let hold = Duration::from_secs(3);
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_pull(false).hold_timeout("3s")
    });
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
    stale_pid.assert_still_runs("containerd");
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

#[test]
fn backoff_max_caps_the_wait_before_the_next_restart() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    // docs/configuration.md: `backoff = "10s"  # doubles after each restart`,
    // `backoff_max = "5m"`: the wait between two restarts is the doubled backoff, capped at
    // backoff_max. Here the backoff alone would be an hour; the cap makes it 2 s, well
    // within the 10 s hold.
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:bmax", dead_port()));
    let cap = Duration::from_secs(2);
    let cfg = n.config_with(&n.ctrd.noop_program(), |c| {
        c.sandbox_pull(false)
            .remediation_restart_budget(2)
            .remediation_backoff("1h")
            .remediation_backoff_max("2s")
            .hold_timeout("10s")
    });
    let before = n.content();
    // The restart command does not help (containerd stays stale): the guard restarts,
    // waits, restarts again within the one run, then the budget is spent.
    let out = runtime(&cfg);
    out.expect(4, "remedy.budget", "fail");
    assert_eq!(
        n.ctrd.restarts(),
        2,
        "two restarts in one run: {}",
        out.dump()
    );
    let at: Vec<u64> = recorded_restarts(&n)
        .iter()
        .map(|r| r["uptime_ms"].as_u64().expect("uptime_ms"))
        .collect();
    assert_eq!(at.len(), 2, "{at:?}");
    let gap = Duration::from_millis(at[1] - at[0]);
    assert!(
        gap >= cap && gap <= cap + Duration::from_secs(3),
        "the second restart {gap:?} after the first: backoff_max {cap:?} (+3 s margin)\n{}",
        out.dump()
    );
    println!(
        "BENCH backoff_max gap {:.2}s, run {:.2}s",
        gap.as_secs_f64(),
        out.elapsed.as_secs_f64()
    );
    before.assert_nothing_lost(&n.content());
}

#[test]
fn hygiene_on_a_stale_containerd_never_restarts_it() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    // README: `guard hygiene` "... restores the sandbox image from the archive ...; never
    // restarts containerd" - not even a stale one (that is the boot's `guard runtime` or an
    // operator's `verify --repair`), and restores nothing into it.
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:hyg", dead_port()));
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| c.sandbox_pull(false));
    let containerd = n.ctrd.identity();
    let before = n.content();
    let out = Guard::with_config(&cfg).run(&["--json", "hygiene"]);
    assert_eq!(
        n.ctrd.restarts(),
        0,
        "hygiene restarted containerd: {}",
        out.dump()
    );
    containerd.assert_still_runs(&out.dump());
    assert!(
        !has_finding(&out, "remedy.restart") && !has_finding(&out, "remedy.restore-image"),
        "{}",
        out.dump()
    );
    // The sandbox image is hygiene's too, but a stale containerd's images describe the
    // wrong filesystem: nothing is restored into it, and the finding says why.
    out.expect(1, "runtime.sandbox-image", "fail").mentions(
        "runtime.sandbox-image",
        &["containerd is stale", "guard verify --repair"],
    );
    assert!(!has_finding(&out, "runtime.stale"), "{}", out.dump());
    before.assert_nothing_lost(&n.content());
}

/// Everything a dry run could change: CRI's view (pods, images with pinned), containerd's
/// records (containers, tasks, images with their labels, snapshots, the content its images
/// reach), every file of state_dir and the metrics textfile.
fn everything(n: &Node) -> Vec<String> {
    use support::workload::ctr_k8s_ok;
    let socket = n.t.socket();
    let mut all = block_on("CRI lists", support::cri::cri_view(&socket)).unwrap();
    for what in [
        &["containers", "ls"][..],
        &["tasks", "ls"],
        &["images", "ls"],
        &["snapshots", "ls"],
    ] {
        all.push(format!(
            "ctr {}:\n{}",
            what.join(" "),
            ctr_k8s_ok(&socket, what)
        ));
    }
    all.push(format!(
        "content an image reaches: {:?}",
        n.content().reached()
    ));
    let state = n.t.guard_state_dir();
    let mut files: Vec<_> = std::fs::read_dir(&state)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    for f in files.iter().chain([&n.t.metrics_textfile()]) {
        let text = std::fs::read(f).map(|b| String::from_utf8_lossy(&b).into_owned());
        all.push(format!("{}: {text:?}", f.display()));
    }
    all
}

/// README: "--repair --dry-run prints each action it would take and changes nothing";
/// `hygiene --dry-run` too. On a node where the pin, the restore and the canary's sweep
/// would each apply, every dry-run command leaves CRI, containerd, state_dir and the
/// textfile exactly as they were, and names what it would do.
#[test]
fn every_dry_run_changes_nothing_anywhere_and_names_what_would_run() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    use containerd_guard::containerd::canary::{LABEL, NAMESPACE};
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:dry", dead_port()));
    n.import_image();
    let archive = n.oci_archive(false);
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_pull(false).sandbox_archives(&[&archive])
    });
    let socket = n.t.socket();
    // a sandbox forging the canary's label (a guard that swept by label removed it)
    let forged = support::cri::start_labelled_pod(&socket, "forged", NAMESPACE, &[(LABEL, "1")]);
    let forged = block_on("RunPodSandbox", forged).unwrap();
    Guard::with_config(&cfg).run(&["verify"]); // state_dir and the textfile as a node has them
    let dry_runs: [&[&str]; 3] = [
        &["--json", "verify", "--repair", "--dry-run"],
        &["--json", "verify", "--repair", "--dry-run", "--deep"],
        &["--json", "hygiene", "--dry-run"],
    ];
    let mut changed = Vec::new();
    let mut outs = Vec::new();
    for stage in ["unpinned", "image removed"] {
        if stage == "image removed" {
            let removed = support::cri::remove_image(&socket, &n.img.name);
            block_on("CRI RemoveImage", removed).unwrap();
        }
        // (each command's "after" is the next one's "before")
        let mut before = everything(&n);
        for args in dry_runs {
            let out = Guard::with_config(&cfg).run(args);
            let after = everything(&n);
            if before != after {
                // (the start of each changed line: the file or the listing that changed)
                let diff: Vec<String> = after
                    .iter()
                    .filter(|l| !before.contains(l))
                    .map(|l| l.chars().take(160).collect())
                    .collect();
                changed.push(format!("{stage}: guard {}: {diff:#?}", args.join(" ")));
            }
            outs.push((stage, args, out));
            before = after;
        }
    }
    let _ = block_on(
        "remove the forged pod",
        support::cri::remove_pod(&socket, &forged),
    );
    assert_eq!(changed, Vec::<String>::new(), "a dry run changed the node");
    for (stage, args, out) in &outs {
        let deep = args.contains(&"--deep");
        let would = match *stage {
            "unpinned" if containerd_major_minor() < (1, 7) => {
                Some(("remedy.pin-image", "dry run: would label"))
            }
            "unpinned" => None,
            _ => Some(("remedy.restore-image", "dry run: would restore")),
        };
        if let Some((id, said)) = would {
            assert_eq!(out.status(id), "skip", "{stage}: {}", out.dump());
            out.mentions(id, &[said]);
        }
        if deep && *stage == "unpinned" {
            out.mentions(
                "runtime.can-create",
                &["dry run: would create and remove a canary"],
            )
            .mentions("runtime.canary-namespace", &[&forged, "left alone"]);
        }
    }
}
