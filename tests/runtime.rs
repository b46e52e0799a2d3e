//! Phase 2 on real components: Debian's containerd per test on temp paths, real
//! loop-mounted ext4 volumes, a real `docker-registry` on 127.0.0.1 and a pause image built
//! here. Each scenario ends with the kubelet's view: a CRI RunPodSandbox of a host-network
//! pod with the sandbox image succeeds, or the guard failed and restarted nothing beyond
//! its budget. Root only (`sudo scripts/test`).

use testkit as support;

use std::path::Path;
use std::time::{Duration, Instant};
use support::node::*;
use support::runtime::*;
use support::*;

#[test]
fn s01_healthy_node_passes_and_nothing_is_restarted_or_imported() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:s1", dead_port()));
    n.import_image();
    let pid = n.ctrd.pid();
    let cfg = n.config(&n.ctrd.restart_program(), "[sandbox]\npull = false\n");
    let before = n.content();
    let out = runtime(&cfg);
    out.expect(0, "runtime.answers", "pass");
    before.assert_nothing_lost(&n.content());
    for id in [
        "runtime.version",
        "runtime.plugins",
        "runtime.stale",
        "runtime.cri",
        "runtime.sandbox-image",
    ] {
        assert_eq!(out.status(id), "pass", "{id}:\n{}", out.dump());
    }
    out.mentions(
        "runtime.sandbox-image",
        &["complete and unpacked for overlayfs"],
    );
    assert_eq!(
        out.status("runtime.network"),
        "warn",
        "no CNI here; reported, not blocking"
    );
    assert_eq!(n.ctrd.restarts(), 0, "never restart a healthy containerd");
    assert_eq!(n.ctrd.pid(), pid);
    for id in ["remedy.restart", "remedy.restore-image", "remedy.pull"] {
        assert!(
            !has_finding(&out, id),
            "{id} on a healthy node:\n{}",
            out.dump()
        );
    }
    // Read-only verify agrees, and also runs phase 1.
    let v = Guard::with_config(&cfg).run(&["--json", "verify"]);
    v.expect(0, "runtime.stale", "pass");
    assert_eq!(v.status("volume.mounted"), "pass", "{}", v.dump());
    n.kubelet_can_start_a_pod();
}

#[test]
fn s02_tkgs_order_stale_detected_restarted_once_usable() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:s2", dead_port()));
    // The kubelet's view before the guard: the TKGS failure.
    let before = run_pod_sandbox(&n.t.socket());
    assert!(
        before.is_err(),
        "the stale containerd should not start pods: {before:?}"
    );
    let v = Guard::with_config(&n.config(&n.ctrd.restart_program(), "[sandbox]\npull = false\n"))
        .run(&["--json", "verify"]);
    v.expect(1, "runtime.stale", "fail")
        .mentions("runtime.stale", &["mounted over"]);
    assert_eq!(
        v.status("runtime.cri"),
        "pass",
        "RuntimeReady stays true when stale: {}",
        v.dump()
    );
    let pid = n.ctrd.pid();
    let cfg = n.config(&n.ctrd.restart_program(), "[sandbox]\npull = false\n");
    let before = n.content();
    let started = Instant::now();
    let out = runtime(&cfg);
    let took = started.elapsed();
    out.expect(0, "remedy.restart", "pass");
    before.assert_nothing_lost(&n.content());
    assert_eq!(out.status("runtime.stale"), "pass", "{}", out.dump());
    assert_eq!(n.ctrd.restarts(), 1, "exactly one restart");
    assert_ne!(n.ctrd.pid(), pid);
    assert!(
        !has_finding(&out, "remedy.restore-image"),
        "the volume had the image: {}",
        out.dump()
    );
    // a number for scripts/bench-runtime, not a timed assertion
    println!("BENCH tkgs answering-to-usable {:.2}s", took.as_secs_f64());
    n.kubelet_can_start_a_pod();
    let status = Guard::with_config(&cfg).run(&["--json", "status"]);
    assert_eq!(status.code, 0, "{}", status.dump());
    let j = status.json.expect("status --json");
    assert_eq!(
        j["state"]["restarts"].as_array().map(Vec::len),
        Some(1),
        "{j}"
    );
    assert_eq!(j["state"]["last"]["exit"], 0, "{j}");
}

#[test]
fn s03_empty_volume_over_running_containerd_restart_then_restore_from_archive() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let image = format!("127.0.0.1:{}/guard/pause:s3", dead_port());
    t.write_containerd_config_with(Some(&image));
    std::fs::create_dir_all(t.volume_path()).unwrap();
    // containerd runs on the root filesystem's directory and has the image there...
    let ctrd = Restartable::start(&t);
    let img = PauseImage::new(&image);
    let archive = img.write_oci(&t.path().join("pause.oci.tar"), false);
    ctrd.ctr_import(&archive);
    // ...then an empty volume is mounted over it.
    let vol = LoopVolume::new(
        &t.images(),
        FsKind::Ext4,
        &unique("cg", 8),
        &t.volume_path(),
    );
    let n = Node { ctrd, vol, img, t };
    let cfg = n.config(
        &n.ctrd.restart_program(),
        &format!(
            "[sandbox]\narchives = [\"{}\"]\npull = false\n",
            archive.display()
        ),
    );
    let before = n.content();
    let out = runtime(&cfg);
    out.expect(0, "remedy.restart", "pass");
    before.assert_nothing_lost(&n.content());
    assert_eq!(out.status("remedy.restore-image"), "pass", "{}", out.dump());
    assert_eq!(
        out.status("runtime.sandbox-image"),
        "pass",
        "{}",
        out.dump()
    );
    assert_eq!(n.ctrd.restarts(), 1);
    n.kubelet_can_start_a_pod();
}

#[test]
fn s04_volume_lazily_unmounted_under_running_containerd_is_detected() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:s4", dead_port()));
    n.import_image();
    run("umount", &["-l", n.t.volume_path().to_str().unwrap()]);
    let cfg = n.config(&n.ctrd.restart_program(), "[sandbox]\npull = false\n");
    let out = Guard::with_config(&cfg).run(&["--json", "verify"]);
    out.expect(1, "runtime.stale", "fail");
    let text = out.finding_text("runtime.stale");
    assert!(
        text.contains("detached") || text.contains("lazily"),
        "{text}"
    );
    assert_eq!(
        n.ctrd.restarts(),
        0,
        "verify without --repair changes nothing"
    );
    assert!(!n.state_file().exists(), "read-only verify writes no state");
}

#[test]
fn s05_image_missing_archive_present_restored_without_pull() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::with_other_image(&format!("127.0.0.1:{}/guard/pause:s5", dead_port()));
    let docker = n.img.write_docker(&n.t.path().join("pause.docker.tar"));
    let cfg = n.config(
        &n.ctrd.restart_program(),
        &format!("[sandbox]\narchives = [\"{}\"]\n", docker.display()),
    );
    let v = Guard::with_config(&cfg).run(&["--json", "verify"]);
    v.expect(1, "runtime.sandbox-image", "fail")
        .mentions("runtime.sandbox-image", &["not in namespace k8s.io"]);
    let before = n.content_with_other_image();
    let out = runtime(&cfg);
    out.expect(0, "remedy.restore-image", "pass")
        .mentions("remedy.restore-image", &["Docker", "digests verified"]);
    before.assert_nothing_lost(&n.content());
    assert!(
        !has_finding(&out, "remedy.pull"),
        "no pull when an archive served:\n{}",
        out.dump()
    );
    assert_eq!(
        n.ctrd.restarts(),
        0,
        "an image problem is not a reason to restart"
    );
    n.kubelet_can_start_a_pod();
}

#[test]
fn s06_corrupt_archive_refused_then_pulled_from_registry() {
    let Some(_root) = root_or_skip(&["docker-registry"]) else {
        return;
    };
    let reg = Registry::start();
    let image = format!("127.0.0.1:{}/guard/pause:s6", reg.port);
    let n = Node::with_other_image(&image);
    reg.push(&n.img, "guard/pause", "s6");
    let bad = n.oci_archive(true);
    assert!(archive_verifies(&bad, &image).is_err());
    let cfg = n.config(
        &n.ctrd.restart_program(),
        &format!(
            "[sandbox]\narchives = [\"{}\"]\npull_timeout = \"30s\"\n",
            bad.display()
        ),
    );
    let before = n.content_with_other_image();
    let out = runtime(&cfg);
    before.assert_nothing_lost(&n.content());
    out.expect(0, "remedy.restore-image", "warn").mentions(
        "remedy.restore-image",
        &["REFUSED", bad.to_str().unwrap(), "has digest"],
    );
    assert_eq!(out.status("remedy.pull"), "pass", "{}", out.dump());
    n.kubelet_can_start_a_pod();
}

#[test]
fn s07_no_image_no_archive_registry_down_holds_then_fails_naming_everything() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let image = format!("127.0.0.1:{}/guard/pause:s7", dead_port());
    let n = Node::with_other_image(&image);
    let missing = n.t.path().join("baked/pause.tar");
    let cfg = n.config(
        &n.ctrd.restart_program(),
        &format!(
            "[sandbox]\narchives = [\"{}\"]\npull_attempts = 2\npull_timeout = \"5s\"\n\n[hold]\ntimeout = \"3s\"\n",
            missing.display()
        ),
    );
    // Under systemd: STATUS= each step and EXTEND_TIMEOUT_USEC= while holding.
    let notify_path = n.t.path().join("notify.sock");
    let notify = std::os::unix::net::UnixDatagram::bind(&notify_path).unwrap();
    // Read while the guard runs, as systemd does: a full datagram queue blocks the sender.
    notify
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut messages = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match notify.recv(&mut buf) {
                    Ok(len) => messages.push(String::from_utf8_lossy(&buf[..len]).into_owned()),
                    Err(_) if done.load(std::sync::atomic::Ordering::SeqCst) => return messages,
                    Err(_) => {}
                }
            }
        })
    };
    let before = n.content_with_other_image();
    let started = Instant::now();
    let out = Guard::with_config(&cfg)
        .env("NOTIFY_SOCKET", notify_path.to_str().unwrap())
        .run(&["--json", "runtime"]);
    let took = started.elapsed();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    let messages = reader.join().unwrap();
    let all = messages.join("\n");
    assert!(
        all.contains("STATUS=holding kubelet: runtime.sandbox-image"),
        "{all}"
    );
    assert!(all.contains("STATUS=pulling"), "{all}");
    assert!(all.contains("EXTEND_TIMEOUT_USEC="), "{all}");
    out.expect(1, "runtime.sandbox-image", "fail")
        .mentions("runtime.sandbox-image", &[&image]);
    out.mentions(
        "remedy.restore-image",
        &[missing.to_str().unwrap(), "not there"],
    );
    out.mentions(
        "remedy.pull",
        &[&image, "attempt 1", "attempt 2", "connection refused"],
    );
    assert_eq!(out.status("runtime.hold"), "fail", "{}", out.dump());
    assert!(
        took >= Duration::from_secs(3),
        "held for the hold timeout: {took:?}"
    );
    assert!(took < Duration::from_secs(30), "bounded: {took:?}");
    assert_eq!(n.ctrd.restarts(), 0);
    assert!(
        run_pod_sandbox(&n.t.socket()).is_err(),
        "nothing made the node usable"
    );
    before.assert_nothing_lost(&n.content());
    // `guard status` answers as the last phase-2 run did: not usable, exit 1.
    let status = Guard::with_config(&cfg).run(&["status"]);
    assert_eq!(status.code, 1, "{}", status.dump());
    assert!(status.stdout.contains("NOT usable"), "{}", status.dump());
}

#[test]
fn s08_restart_that_does_not_help_spends_the_budget_then_terminal() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:s8", dead_port()));
    let extra = "[sandbox]\npull = false\n\n[remediation]\nrestart_budget = 2\nbackoff = \"100ms\"\n\n[hold]\ntimeout = \"3s\"\n";
    let cfg = n.config(&n.ctrd.noop_program(), extra);
    let before = n.content();
    let mut codes = Vec::new();
    for _ in 0..3 {
        let out = runtime(&cfg);
        codes.push(out.code);
        if out.code == 4 {
            out.mentions("remedy.budget", &["TERMINAL"]);
            assert!(
                out.stderr.contains("TERMINAL"),
                "loud on stderr too:\n{}",
                out.dump()
            );
            break;
        }
    }
    assert_eq!(codes.last(), Some(&4), "{codes:?}");
    assert_eq!(n.ctrd.restarts(), 2, "exactly restart_budget restarts");
    for i in 0..5 {
        let out = runtime(&cfg);
        assert_eq!(
            out.code,
            4,
            "invocation {i} after terminal:\n{}",
            out.dump()
        );
    }
    assert_eq!(n.ctrd.restarts(), 2, "no restart after terminal");
    // The operator fixes the cause by hand (containerd restarted on the volume) but has not
    // run `guard reset`: every check passes, and still every command gives the one answer
    // of a terminal boot, as kubelet's next start does (exit 4 at once).
    n.ctrd.restart_by_hand();
    terminal_is_the_one_answer(&cfg);
    let reset = Guard::with_config(&cfg).run(&["reset"]);
    assert_eq!(reset.code, 0, "{}", reset.dump());
    let cfg = n.config(&n.ctrd.restart_program(), extra);
    runtime(&cfg).expect(0, "runtime.stale", "pass");
    assert_eq!(n.ctrd.restarts(), 2, "the cause was fixed by hand");
    before.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

/// `verify` (table and JSON) and `status` exit 4 with a FAIL row naming the terminal
/// state, `verify --npd` is NonOK with a line that starts `terminal:`, though every check
/// of the node passes.
#[track_caller]
fn terminal_is_the_one_answer(cfg: &Path) {
    let g = Guard::with_config(cfg);
    let v = g.run(&["--json", "verify"]);
    v.expect(4, "remedy.budget", "fail")
        .mentions("remedy.budget", &["TERMINAL", "guard reset"]);
    for id in ["runtime.answers", "runtime.stale", "runtime.sandbox-image"] {
        assert_eq!(v.status(id), "pass", "{id}:\n{}", v.dump());
    }
    let table = g.run(&["verify"]);
    assert_eq!(table.code, 4, "{}", table.dump());
    let first = table.stdout.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("FAIL") && first.contains("remedy.budget"),
        "the terminal state heads the table:\n{}",
        table.dump()
    );
    let npd = g.run(&["verify", "--npd"]);
    assert_eq!(npd.code, 1, "NPD knows only 0/1/2:\n{}", npd.dump());
    assert!(npd.stdout.starts_with("terminal:"), "{}", npd.dump());
    let status = g.run(&["status"]);
    assert_eq!(status.code, 4, "{}", status.dump());
    assert!(
        status.stdout.contains("FAIL remedy.budget: TERMINAL")
            && status.stdout.contains("restarts this boot: 2 of 2"),
        "{}",
        status.dump()
    );
}

#[test]
fn s08b_backoff_holds_across_invocations() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:s8b", dead_port()));
    let cfg = n.config(
        &n.ctrd.noop_program(),
        "[sandbox]\npull = false\n\n[remediation]\nrestart_budget = 3\nbackoff = \"1h\"\n\n[hold]\ntimeout = \"1s\"\n",
    );
    let before = n.content();
    let first = runtime(&cfg);
    assert_eq!(first.code, 1, "{}", first.dump());
    for _ in 0..3 {
        let out = runtime(&cfg);
        out.expect(1, "remedy.budget", "fail")
            .mentions("remedy.budget", &["backoff"]);
    }
    assert_eq!(
        n.ctrd.restarts(),
        1,
        "kubelet's Restart= re-running the gate cannot shorten the backoff"
    );
    // The backoff runs on CLOCK_BOOTTIME (the wall clock cannot be moved on a shared host;
    // a time namespace moves the others): a day later on the monotonic clock only, it
    // still holds; a day later on the boot clock, it is over and the guard restarts.
    let a_day_later = |clock: &str| {
        Guard::with_config(&cfg)
            .wrapped_in(&["unshare", "--time", clock, "86400"])
            .run(&["--json", "runtime"])
    };
    a_day_later("--monotonic")
        .expect(1, "remedy.budget", "fail")
        .mentions("remedy.budget", &["backoff"]);
    assert_eq!(
        n.ctrd.restarts(),
        1,
        "the monotonic clock is not the backoff's"
    );
    let later = a_day_later("--boottime");
    assert_eq!(
        n.ctrd.restarts(),
        2,
        "a day later on the boot clock the backoff is over:\n{}",
        later.dump()
    );
    later.mentions("remedy.restart", &["restart 2 of 3"]);
    before.assert_nothing_lost(&n.content());
}

#[test]
fn s09_socket_that_accepts_but_never_answers_is_bounded_and_reported() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let sock = t.path().join("silent.sock");
    // The kernel accepts connections into the backlog; nothing ever answers.
    let _listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let noop = t.path().join("restart-noop");
    write_executable(
        &noop,
        &format!(
            "#!/bin/sh\necho noop >> '{}/restarts.log'\n",
            t.path().display()
        ),
    );
    let cfg = t.write_guard_config_raw(&format!(
        "state_dir = \"{}\"\n\n[containerd]\nconfig = \"{}\"\nsocket = \"{}\"\nwait = \"1s\"\nrestart = [\"{}\"]\n\n\
         [remediation]\nrestart_budget = 1\nbackoff = \"1h\"\n\n[hold]\ntimeout = \"2s\"\n",
        t.guard_state_dir().display(),
        t.containerd_config().display(),
        sock.display(),
        noop.display()
    ));
    let started = Instant::now();
    let v = Guard::with_config(&cfg).run(&["--json", "verify"]);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "verify is bounded: {:?}",
        started.elapsed()
    );
    v.expect(1, "runtime.answers", "fail")
        .mentions("runtime.answers", &["does not answer", "silent.sock"]);
    let started = Instant::now();
    let out = runtime(&cfg);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "runtime is bounded: {:?}",
        started.elapsed()
    );
    // One restart (the budget), then terminal: a silent socket is not waited on forever.
    out.expect(4, "runtime.answers", "fail")
        .mentions("remedy.budget", &["TERMINAL"]);
    let restarts = std::fs::read_to_string(t.path().join("restarts.log"))
        .map(|s| s.lines().count())
        .unwrap_or(0);
    assert_eq!(
        restarts, 1,
        "a silent containerd is restarted, within the budget"
    );
}

#[test]
fn s10_corrupt_state_file_means_no_budget_until_reset() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:s10", dead_port()));
    let cfg = n.config(&n.ctrd.restart_program(), "[sandbox]\npull = false\n");
    std::fs::create_dir_all(n.t.guard_state_dir()).unwrap();
    std::fs::write(n.state_file(), b"{\"format\": 1, \"boot_id\": tru").unwrap();
    let before = n.content();
    let out = runtime(&cfg);
    out.expect(4, "remedy.budget", "fail");
    assert!(
        out.stdout.contains("corrupt"),
        "the corruption is reported:\n{}",
        out.dump()
    );
    assert_eq!(
        n.ctrd.restarts(),
        0,
        "corrupt is 'no budget left', never 'fresh'"
    );
    assert!(n.t.guard_state_dir().join("runtime.json.corrupt").exists());
    let status = Guard::with_config(&cfg).run(&["status"]);
    assert!(status.stdout.contains("corrupt"), "{}", status.dump());
    assert_eq!(Guard::with_config(&cfg).run(&["reset"]).code, 0);
    runtime(&cfg).expect(0, "remedy.restart", "pass");
    assert_eq!(n.ctrd.restarts(), 1);
    before.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

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
    let cfg = n.config(
        &n.ctrd.restart_program(),
        &format!(
            "[sandbox]\narchives = [\"{}\"]\npull = false\n",
            archive.display()
        ),
    );
    let pid = n.ctrd.pid();
    let before = n.content();
    let out = runtime(&cfg);
    out.expect(1, "runtime.stale", "fail");
    out.mentions("remedy.restart", &["refused", &pod, "--force"]);
    assert_eq!(out.status("remedy.restart"), "fail");
    assert_eq!(
        n.ctrd.restarts(),
        0,
        "a restart would orphan the running pod"
    );
    assert_eq!(n.ctrd.pid(), pid);
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
    before.assert_nothing_lost(&n.content());
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
    let cfg = n.config(&n.ctrd.restart_program(), "[sandbox]\npull = false\n");
    let before = ContentSnapshot::take(&n.t.path().join("data/containerd"), Some(&n.t.socket()));
    let out = runtime(&cfg);
    before.assert_nothing_lost(&ContentSnapshot::take(
        &n.t.path().join("data/containerd"),
        Some(&n.t.socket()),
    ));
    out.expect(0, "runtime.stale", "pass")
        .mentions("runtime.stale", &["data/containerd"]);
    assert_eq!(n.ctrd.restarts(), 0, "never restart a healthy containerd");
    n.kubelet_can_start_a_pod();
}

#[test]
fn s13_no_restart_without_a_durable_record() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:s13", dead_port()));
    // state_dir on a read-only filesystem: readable (empty), not writable.
    let ro = n.t.path().join("ro-state");
    let _ro = Mount::fs("tmpfs", "cg-ro-state", &ro, "ro,size=1m");
    let cfg = n.t.write_guard_config_raw(&format!(
        "state_dir = \"{}\"\n\n[containerd]\nconfig = \"{}\"\nrestart = [\"{}\"]\n\n[sandbox]\npull = false\n\n[hold]\ntimeout = \"1s\"\n",
        ro.display(),
        n.t.containerd_config().display(),
        n.ctrd.restart_program().display()
    ));
    let before = n.content();
    let out = runtime(&cfg);
    out.expect(1, "remedy.budget", "fail")
        .mentions("remedy.budget", &["cannot be recorded"]);
    assert_eq!(n.ctrd.restarts(), 0);
    before.assert_nothing_lost(&n.content());
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
    let cfg = t.write_guard_config_raw(&format!(
        "state_dir = \"{}\"\n\n[containerd]\nconfig = \"{}\"\nwait = \"1s\"\nrestart = [\"{}\"]\n\n\
         [volume]\nwait = \"200ms\"\n\n[hold]\ntimeout = \"30s\"\n",
        t.guard_state_dir().display(),
        t.containerd_config().display(),
        restart.display()
    ));
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
    let cfg = n.config(
        &slow,
        "[sandbox]\npull = false\n\n[remediation]\nrestart_budget = 3\n\n[hold]\ntimeout = \"60s\"\n",
    );
    let pid = n.ctrd.pid();
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
    assert_ne!(n.ctrd.pid(), pid);
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
    let stale_pid = n.ctrd.pid();
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
    let cfg = n.config(
        &script,
        "[sandbox]\npull = false\n\n[remediation]\nrestart_budget = 3\nbackoff = \"200ms\"\n\n\
         [hold]\ntimeout = \"60s\"\n",
    );
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
    assert_ne!(n.ctrd.pid(), stale_pid);
    assert_eq!(recorded_restarts(&n).len(), 2);
    assert!(flock_holders(&lock_file).is_empty(), "released at exit");
    before.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

/// `guard verify --npd` with its timeout; returns (exit code, stdout, elapsed).
fn npd(cfg: &Path, timeout: &str, journal: &support::journal::JournalTrap) -> Outcome {
    Guard::with_config(cfg)
        .wrapped_in(&journal.wrapper())
        .run(&["verify", "--npd", "--timeout", timeout])
}

#[test]
fn s17_npd_mode_answers_in_npd_terms_within_its_timeout_and_writes_nothing() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:s17", dead_port()));
    // The trap works: without --npd, the missing sandbox image is journaled through it.
    let journal = support::journal::JournalTrap::new(&n.t.path().join("journal-control"));
    let control =
        Guard::with_config(&n.config(&n.ctrd.restart_program(), "[sandbox]\npull = false\n"))
            .wrapped_in(&journal.wrapper())
            .run(&["--json", "verify"]);
    control.expect(1, "runtime.sandbox-image", "fail");
    let sent = journal.received();
    assert!(
        sent.iter()
            .any(|m| m.contains("GUARD_FINDING=runtime.sandbox-image")),
        "without --npd the failure reaches the test's journal socket: {sent:?}\n{}",
        control.dump()
    );
    let journal = support::journal::JournalTrap::new(&n.t.path().join("journal"));
    n.import_image();
    let textfile = n.t.path().join("prom/containerd-guard.prom");
    std::fs::create_dir_all(textfile.parent().unwrap()).unwrap();
    let extra = format!(
        "[sandbox]\npull = false\n[metrics]\ntextfile = \"{}\"\n",
        textfile.display()
    );
    let cfg = n.config(&n.ctrd.restart_program(), &extra);

    let ok = npd(&cfg, "3s", &journal);
    assert_eq!(ok.code, 0, "{}", ok.dump());
    assert_eq!(ok.stdout.lines().count(), 1, "{}", ok.dump());
    assert!(ok.stdout.trim_end().len() <= 80, "{}", ok.dump());

    // containerd hangs: stopped, its socket still accepts connections.
    let pid = nix::unistd::Pid::from_raw(n.ctrd.pid());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let hung = npd(&cfg, "3s", &journal);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    assert_eq!(hung.code, 1, "{}", hung.dump());
    assert!(
        hung.stdout
            .starts_with("runtime.answers: containerd does not answer"),
        "{}",
        hung.dump()
    );
    assert!(hung.stdout.trim_end().len() <= 80, "{}", hung.dump());
    // Bounded by the timeout, not by the hung containerd; the margin is for a loaded
    // 2-core machine starting a process (the timing itself is benches' business).
    assert!(
        hung.elapsed < Duration::from_secs(3 + 3),
        "answered after {:?}",
        hung.elapsed
    );

    // The guard itself cannot decide: Unknown.
    let bad = n.t.path().join("bad.toml");
    std::fs::write(&bad, "[volume]\nwiat = \"90s\"\n").unwrap();
    let unknown = npd(&bad, "3s", &journal);
    assert_eq!(unknown.code, 2, "{}", unknown.dump());
    assert!(
        unknown.stdout.starts_with("guard: configuration error"),
        "{}",
        unknown.dump()
    );

    let sent = journal.received();
    assert!(
        sent.is_empty(),
        "--npd sends nothing to the journal: {sent:?}"
    );
    assert!(!textfile.exists(), "--npd writes no metrics");
    assert!(!n.state_file().exists(), "--npd writes no state");
}

#[test]
fn s18_metrics_reach_prometheus_through_node_exporter() {
    let Some(_root) = root_or_skip(&[TOOLS, &["prometheus-node-exporter", "promtool"]].concat())
    else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:s18", dead_port()));
    let dir = n.t.path().join("textfile");
    std::fs::create_dir_all(&dir).unwrap();
    let textfile = dir.join("containerd-guard.prom");
    let extra = format!(
        "[sandbox]\npull = false\n[remediation]\nrestart_budget = 1\n[metrics]\ntextfile = \"{}\"\n",
        textfile.display()
    );
    let cfg = n.config(&n.ctrd.restart_program(), &extra);
    let exporter = NodeExporter::start(&dir);
    let before = n.content();
    // This boot's history already full (100 records, as an older guard wrote them; the
    // budget counts `restarts`, which is empty): the counter goes on from 100.
    write_full_history(&n.state_file());

    // A stale containerd seen by a read-only verify.
    Guard::with_config(&cfg).run(&["verify"]);
    let scraped = exporter.scrape();
    for line in [
        "containerd_guard_usable 0",
        "containerd_guard_check{id=\"runtime.stale\",status=\"fail\"} 1",
        "containerd_guard_restarts_total 0",
        "containerd_guard_remedies_total{kind=\"restart\",outcome=\"ok\"} 100",
    ] {
        assert!(
            scraped.lines().any(|l| l == line),
            "no {line:?} in\n{scraped}"
        );
    }
    promtool_check(&textfile);
    let held = scraped;

    // guard runtime repairs it: usable, one restart, the stale series now pass; the
    // verify's run series persists beside the runtime's.
    runtime(&cfg).expect(0, "remedy.restart", "pass");
    let scraped = exporter.scrape();
    for line in [
        "containerd_guard_usable 1",
        "containerd_guard_terminal 0",
        "containerd_guard_check{id=\"runtime.stale\",status=\"pass\"} 1",
        "containerd_guard_restarts_total 1",
        // one more than the 100 before, though the oldest record left the history
        "containerd_guard_remedies_total{kind=\"restart\",outcome=\"ok\"} 101",
    ] {
        assert!(
            scraped.lines().any(|l| l == line),
            "no {line:?} in\n{scraped}"
        );
    }
    for command in ["verify", "runtime"] {
        let series =
            format!("containerd_guard_last_run_timestamp_seconds{{command=\"{command}\"}}");
        assert!(scraped.contains(&series), "no {series} in\n{scraped}");
    }
    assert!(
        scraped.contains("containerd_guard_build_info{version=\""),
        "{scraped}"
    );
    promtool_check(&textfile);
    let repaired = scraped;
    let network = a_failing_verify_outlives_a_hygiene_run(&n, &extra, &exporter);
    let pulls_failed = pulls_failing_run_after_run(&n, &extra, &exporter);
    let cfg = n.config(&n.ctrd.restart_program(), &extra);

    // Stale again with the budget spent: terminal.
    n.ctrd.stop();
    let mut vol = n.vol;
    drop(vol.mount.take());
    n.ctrd.restart_by_hand();
    vol.mount = Some(vol.device.mount(&n.t.volume_path(), ""));
    let out = runtime(&cfg);
    assert_eq!(out.code, 4, "{}", out.dump());
    before.assert_nothing_lost(&ContentSnapshot::take(
        &n.t.volume_path(),
        Some(&n.t.socket()),
    ));
    let scraped = exporter.scrape();
    for line in [
        "containerd_guard_terminal 1",
        "containerd_guard_remedies_total{kind=\"restart\",outcome=\"ok\"} 101",
    ] {
        assert!(
            scraped.lines().any(|l| l == line),
            "no {line:?} in\n{scraped}"
        );
    }
    promtool_check(&textfile);
    let scrapes = Scrapes {
        held,
        repaired,
        network,
        pulls_failed,
        terminal: scraped,
    };
    shipped_alerts_fire_on_these_scrapes(n.t.path(), &scrapes);

    // A metrics write that fails is a warning, never a change of the verdict.
    std::fs::remove_file(&textfile).unwrap();
    std::fs::remove_dir(&dir).unwrap();
    std::fs::write(&dir, b"not a directory").unwrap();
    let v = Guard::with_config(&cfg).run(&["--json", "verify"]);
    assert_eq!(v.status("metrics.textfile"), "warn", "{}", v.dump());
    assert_eq!(
        v.code,
        4,
        "the verdict is the run's (terminal this boot): {}",
        v.dump()
    );
}

/// A verify that fails a check hygiene does not cover (`runtime.network`, required),
/// then hygiene, which passes: the node stays not usable, the failing series stays.
fn a_failing_verify_outlives_a_hygiene_run(
    n: &Node,
    extra: &str,
    exporter: &NodeExporter,
) -> String {
    let strict = format!("{extra}[hold]\nrequire_network = true\n");
    let cfg = n.config(&n.ctrd.restart_program(), &strict);
    Guard::with_config(&cfg)
        .run(&["--json", "verify"])
        .expect(1, "runtime.network", "fail");
    let hygiene = Guard::with_config(&cfg).run(&["hygiene"]);
    assert_eq!(hygiene.code, 0, "{}", hygiene.dump());
    let scraped = exporter.scrape();
    for line in [
        "containerd_guard_usable 0",
        "containerd_guard_check{id=\"runtime.network\",status=\"fail\"} 1",
    ] {
        assert!(
            scraped.lines().any(|l| l == line),
            "no {line:?} after hygiene in\n{scraped}"
        );
    }
    scraped
}

/// The sandbox image removed while the node runs (image GC), pulls allowed from a
/// registry that is down: each hygiene run (the 2-minute timer) tries one pull, which
/// fails. The history is full, so each failure pushes the oldest record out; the counter
/// of failed pulls still counts 1, 2, 3. Node_exporter's scrape after each run. The image
/// is imported again at the end.
fn pulls_failing_run_after_run(n: &Node, extra: &str, exporter: &NodeExporter) -> Vec<String> {
    let pulling = format!("{extra}[sandbox]\npull = true\npull_timeout = \"5s\"\n");
    let pulling = pulling.replacen("[sandbox]\npull = false\n", "", 1);
    let cfg = n.config(&n.ctrd.restart_program(), &pulling);
    block_on(
        "CRI RemoveImage",
        support::cri::remove_image(&n.t.socket(), &n.img.name),
    )
    .unwrap();
    let scrapes: Vec<String> = (1..=3)
        .map(|failed| {
            let out = Guard::with_config(&cfg).run(&["--json", "hygiene"]);
            out.expect(1, "remedy.pull", "warn");
            let scraped = exporter.scrape();
            let line = format!(
                "containerd_guard_remedies_total{{kind=\"pull\",outcome=\"failed\"}} {failed}"
            );
            assert!(
                scraped.lines().any(|l| l == line),
                "no {line:?} in\n{scraped}"
            );
            scraped
        })
        .collect();
    n.import_image();
    scrapes
}

/// `runtime.json` of this boot with a full history (100 successful restarts, written as
/// guard 0.2.0 did: no counters) and no restart in the budget's list.
fn write_full_history(state_file: &Path) {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let record = r#"{"uptime_ms":1,"unix":1,"item":"containerd","action":"restart","outcome":"stale: exited 0"}"#;
    let history = vec![record; 100].join(",");
    let text = format!(
        r#"{{"format":1,"boot_id":"{}","restarts":[],"history":[{history}],"terminal":null,"void":null,"last":null}}"#,
        boot.trim()
    );
    std::fs::create_dir_all(state_file.parent().unwrap()).unwrap();
    std::fs::write(state_file, text).unwrap();
}

/// node_exporter's scrapes of s18's node: a read-only verify of the stale containerd
/// (the only run this boot, as after a fresh install), after `guard runtime` repaired it,
/// after a verify that failed `runtime.network` and a hygiene run, and terminal.
struct Scrapes {
    held: String,
    repaired: String,
    network: String,
    /// After each of three hygiene runs whose pull failed.
    pulls_failed: Vec<String>,
    terminal: String,
}

/// The package's alert rules over what this guard wrote, as node_exporter served it
/// (`alert_rules`): each alert firing and its near misses, on nodes of one or two
/// clusters, across a change of node_exporter's `instance`; and every series the rules
/// select is one the guard writes.
fn shipped_alerts_fire_on_these_scrapes(dir: &Path, s: &Scrapes) {
    use support::alert_rules::{selectors_without_series, Cases};
    let all = format!("{}\n{}\n{}", s.held, s.repaired, s.terminal);
    let missing = selectors_without_series(&all);
    assert!(
        missing.is_empty(),
        "the rules select series the guard does not write: {missing:?}\n{all}"
    );
    let mut cases = Cases::default();
    one_node_alerts(&mut cases, s);
    fleet_alerts(&mut cases, s);
    cases.run(dir);
}

/// The series of `node` in `cluster` serving `steps`; with `moved_at` (minutes),
/// node_exporter's pod is replaced then: the same node under a new `instance`.
fn node_series(node: &str, cluster: &str, steps: &[(&str, u32)], moved_at: Option<u32>) -> String {
    use support::alert_rules::{input_series, Target};
    let target = |instance, steps| Target {
        cluster,
        instance,
        nodename: node,
        steps,
    };
    let (first, second) = (format!("{node}-pod-1:9100"), format!("{node}-pod-2:9100"));
    let Some(at) = moved_at else {
        return input_series(&[target(&first, steps.to_vec())]);
    };
    let total: u32 = steps.iter().map(|(_, m)| m).sum();
    let (mut before, mut after, mut t) = (Vec::new(), vec![("", at)], 0);
    for &(text, minutes) in steps {
        let (end, cut) = (t + minutes, at.clamp(t, t + minutes));
        if cut > t {
            before.push((text, cut - t));
        }
        if end > cut {
            after.push((text, end - cut));
        }
        t = end;
    }
    before.push(("", total - at));
    input_series(&[target(&first, before), target(&second, after)])
}

fn one_node_alerts(cases: &mut support::alert_rules::Cases, s: &Scrapes) {
    use support::alert_rules::firing;
    let one = |steps: &[(&str, u32)]| node_series("node-1", "x", steps, None);
    let not_usable = |id: &str| firing("ContainerdGuardNodeNotUsable", &format!("id=\"{id}\""));
    let stale = not_usable("runtime.stale");
    cases.case(
        "a hold shorter than for:",
        &one(&[(&s.held, 30)]),
        &stale,
        9,
        0,
    );
    cases.case("a hold that lasts", &one(&[(&s.held, 30)]), &stale, 20, 1);
    let moved = node_series("node-1", "x", &[(&s.held, 30)], Some(6));
    cases.case("a hold across a new instance", &moved, &stale, 12, 1);
    let network = not_usable("runtime.network");
    let verify_then_hygiene = one(&[(&s.network, 30)]);
    cases.case(
        "verify failed, hygiene since",
        &verify_then_hygiene,
        &network,
        12,
        1,
    );
    let quiet = "count(ALERTS) or vector(0)";
    cases.case("repaired: silent", &one(&[(&s.repaired, 30)]), quiet, 20, 0);
    let terminal = firing("ContainerdGuardTerminal", "nodename=\"node-1\"");
    cases.case("terminal", &one(&[(&s.terminal, 10)]), &terminal, 5, 1);
    let stale_guard = firing("ContainerdGuardStale", "");
    let fresh_install = one(&[(&s.repaired, 60)]);
    cases.case(
        "no hygiene run this boot",
        &fresh_install,
        &stale_guard,
        59,
        0,
    );
    let stopped = one(&[(&s.terminal, 30)]);
    cases.case("hygiene stopped: not yet", &stopped, &stale_guard, 14, 0);
    cases.case("hygiene stopped", &stopped, &stale_guard, 17, 1);
    let failing = firing("ContainerdGuardRemedyFailing", "kind=\"pull\"");
    let [first, second, third] = [0, 1, 2].map(|i| s.pulls_failed[i].as_str());
    let every_run = one(&[(&s.repaired, 10), (first, 2), (second, 2), (third, 30)]);
    cases.case("a pull failing every run", &every_run, &failing, 20, 1);
    let once = one(&[(&s.repaired, 10), (first, 50)]);
    cases.case("one failed pull in an hour", &once, &failing, 30, 0);
    let counters = one(&[(&s.held, 10), (&s.repaired, 10), (&s.terminal, 10)]);
    let resets = "sum(resets(containerd_guard_remedies_total[1h]))";
    cases.case(
        "records leave the history, no counter resets",
        &counters,
        resets,
        29,
        0,
    );
}

fn fleet_alerts(cases: &mut support::alert_rules::Cases, s: &Scrapes) {
    use support::alert_rules::firing;
    let restarted: &[(&str, u32)] = &[(&s.held, 10), (&s.repaired, 80)];
    let fleet = |nodes: &[(&str, &str)], moved_at| {
        nodes
            .iter()
            .map(|(node, cluster)| node_series(node, cluster, restarted, moved_at))
            .collect::<String>()
    };
    let across = |cluster: &str| {
        firing(
            "ContainerdGuardRestartsAcrossFleet",
            &format!("cluster=\"{cluster}\""),
        )
    };
    let three = [("a", "x"), ("b", "x"), ("c", "x")];
    cases.case("three nodes", &fleet(&three, None), &across("x"), 20, 1);
    cases.case(
        "three nodes, 40 minutes on",
        &fleet(&three, None),
        &across("x"),
        50,
        0,
    );
    let two = [("a", "x"), ("b", "x")];
    cases.case("two nodes", &fleet(&two, None), &across("x"), 20, 0);
    let split = [("a", "x"), ("b", "x"), ("c", "y")];
    let all = firing("ContainerdGuardRestartsAcrossFleet", "");
    cases.case(
        "two clusters, 2 + 1 nodes",
        &fleet(&split, None),
        &all,
        20,
        0,
    );
    let rollout = fleet(&three, Some(40));
    cases.case("node_exporter rolled out after", &rollout, &all, 50, 0);
    cases.case(
        "node_exporter rolled out, before",
        &rollout,
        &across("x"),
        20,
        1,
    );
}

fn promtool_check(textfile: &Path) {
    let out = support::bounded::output(
        std::process::Command::new(which("promtool").unwrap())
            .args(["check", "metrics"])
            .stdin(std::fs::File::open(textfile).unwrap()),
        support::bounded::COMMAND_DEADLINE,
    );
    assert!(
        out.status.success(),
        "promtool check metrics {}:\n{}{}",
        textfile.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
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
    let cfg = n.config(&n.ctrd.restart_program(), "[sandbox]\npull = false\n");
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
