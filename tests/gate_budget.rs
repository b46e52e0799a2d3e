//! The gate's restarts are bounded: a restart that does not help spends the budget and
//! ends terminal, the backoff holds across invocations, a socket that never answers is
//! bounded, and no restart happens without a durable record of it.
//!
//! Phase 2 on real components: Debian's containerd per test on temp paths, real
//! loop-mounted ext4 volumes, a real `docker-registry` on 127.0.0.1 and a pause image built
//! here. Each scenario ends with the kubelet's view: a CRI RunPodSandbox of a host-network
//! pod with the sandbox image succeeds, or the guard failed and restarted nothing beyond
//! its budget. Root only (`sudo scripts/test`).

use testkit as support;

use std::path::Path;
use std::time::{Duration, Instant};
use support::node::{runtime, Node, TOOLS};
use support::runtime::dead_port;
use support::{root_or_skip, write_executable, Guard, GuardConfig, Mount, TempRoot};

#[test]
fn s08_restart_that_does_not_help_spends_the_budget_then_terminal() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:s8", dead_port()));
    let settings = |c: GuardConfig| {
        c.sandbox_pull(false)
            .remediation_restart_budget(2)
            .remediation_backoff("100ms")
            .hold_timeout("3s")
    };
    let cfg = n.config_with(&n.ctrd.noop_program(), settings);
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
    let cfg = n.config_with(&n.ctrd.restart_program(), settings);
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
    let cfg = n.config_with(&n.ctrd.noop_program(), |c| {
        c.sandbox_pull(false)
            .remediation_restart_budget(3)
            .remediation_backoff("1h")
            .hold_timeout("1s")
    });
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
    // (the volume at containerd's root: a restart is a remedy only onto the verified volume)
    let _vol = t.mount_volume();
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
    let cfg = t.write_guard_config_with(|c| {
        c.containerd_socket(&sock)
            .containerd_wait("1s")
            .containerd_restart(&[&noop.display().to_string()])
            .remediation_restart_budget(1)
            .remediation_backoff("1h")
            .hold_timeout("2s")
    });
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
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| c.sandbox_pull(false));
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
fn s13_no_restart_without_a_durable_record() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:s13", dead_port()));
    // state_dir on a read-only filesystem: readable (empty), not writable.
    let ro = n.t.path().join("ro-state");
    let _ro = Mount::fs("tmpfs", "cg-ro-state", &ro, "ro,size=1m");
    let cfg = n.t.write_guard_config_with(|c| {
        c.state_dir(&ro)
            .containerd_restart(&[&n.ctrd.restart_program().display().to_string()])
            .sandbox_pull(false)
            .hold_timeout("1s")
    });
    let before = n.content();
    let out = runtime(&cfg);
    out.expect(1, "remedy.budget", "fail")
        .mentions("remedy.budget", &["cannot be recorded"]);
    assert_eq!(n.ctrd.restarts(), 0);
    before.assert_nothing_lost(&n.content());
}
