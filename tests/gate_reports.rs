//! What the gate tells others: node-problem-detector's answer within its timeout, and
//! the metrics node_exporter scrapes, through the shipped alert rules.
//!
//! Phase 2 on real components: Debian's containerd per test on temp paths, real
//! loop-mounted ext4 volumes, a real `docker-registry` on 127.0.0.1 and a pause image built
//! here. Each scenario ends with the kubelet's view: a CRI RunPodSandbox of a host-network
//! pod with the sandbox image succeeds, or the guard failed and restarted nothing beyond
//! its budget. Root only (`sudo scripts/test`).

use testkit as support;

use std::path::Path;
use std::time::Duration;
use support::node::{runtime, Node, TOOLS};
use support::runtime::{block_on, dead_port};
use support::{root_or_skip, which, ContentSnapshot, Guard, GuardConfig, NodeExporter, Outcome};

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
        Guard::with_config(&n.config_with(&n.ctrd.restart_program(), |c| c.sandbox_pull(false)))
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
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_pull(false).metrics_textfile(&textfile)
    });

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
    // Bounded by the timeout, not by the hung containerd, and not given up early: a slow
    // containerd gets the whole timeout before NPD is told it does not answer (at least
    // 2.5 s of the 3 s, the rest for the guard's own start and answer). The margins are
    // for a loaded 2-core machine starting a process (the timing itself is benches').
    assert!(
        hung.elapsed >= Duration::from_millis(2500) && hung.elapsed < Duration::from_secs(3 + 3),
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
    let settings = n
        .guard_config(&n.ctrd.restart_program())
        .sandbox_pull(false)
        .remediation_restart_budget(1)
        .metrics_textfile(&textfile);
    let cfg = settings.write(&n.t);
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
    let network = a_failing_verify_outlives_a_hygiene_run(&n, &settings, &exporter);
    let pulls_failed = pulls_failing_run_after_run(&n, &settings, &exporter);
    let cfg = settings.write(&n.t);

    // Stale again with the budget spent: terminal.
    n.ctrd.stop();
    let mut vol = n.vol;
    drop(vol.mount.take());
    n.ctrd.restart_by_hand();
    vol.mount = Some(vol.device.mount(&n.t.volume_path(), ""));
    let out = runtime(&cfg);
    assert_eq!(out.code, 4, "{}", out.dump());
    before.assert_nothing_lost(&ContentSnapshot::take(&n.t.volume_path()));
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
    settings: &GuardConfig,
    exporter: &NodeExporter,
) -> String {
    let cfg = settings.clone().hold_require_network(true).write(&n.t);
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
fn pulls_failing_run_after_run(
    n: &Node,
    settings: &GuardConfig,
    exporter: &NodeExporter,
) -> Vec<String> {
    let pulling = settings
        .clone()
        .sandbox_pull(true)
        .sandbox_pull_timeout("5s");
    let cfg = pulling.write(&n.t);
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
