//! Leaked tasks: a task whose sandbox is gone is found, deleted and the pod can be
//! removed, by `guard hygiene` and by `guard runtime` without holding kubelet; a stopped
//! task CRI never knew is left alone; without the task bundles containerd is asked.
//!
//! The guard against the faults that break pods while a node runs, created for real
//! (testkit/src/hygiene.rs) on a real containerd with CRI, runc and kubelet's cgroupfs
//! layout. Each is found with its evidence and repaired by the guard (or left alone where it
//! must be); a healthy pod beside keeps its payload PID, containerd keeps its PID, nothing
//! restarts. Root only.
//!
//! The tests in each file run one at a time (`serial()`): a repairing guard reaps every
//! orphaned container cgroup on the host, including another test's on purpose; cargo runs
//! the test binaries one after another.

use testkit as support;

use std::path::Path;
use support::hygiene::{ctr_task, leak_again, make_leaked_task};
use support::suite::hygiene::{
    guard, guard_config, guard_config_with, running_locker, serial, show, shown, Bystander,
    CtrMadeTask, TOOLS,
};
use support::workload::{HygieneNode, Pod};
use support::{root_or_skip, Guard, NodeExporter};

#[test]
fn h01_leaked_task_is_found_deleted_and_the_pod_can_be_removed() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    let cfg = guard_config(&n);
    let bystander = Bystander::start(&n);
    let leaky = n.pod("leaky");
    let (cid, _) = running_locker(&leaky, "payload", &n.host_dir("leaky"));
    let task = make_leaked_task(&leaky, &cid);
    let containerd = n.ctrd.identity();

    show(&cfg, &["verify"]);
    let verify = guard(&cfg, &["verify"]);
    verify.expect(1, "runtime.leaked-tasks", "fail").mentions(
        "runtime.leaked-tasks",
        &[
            &cid,
            "STOPPED",
            &format!("pid {} gone", task.pid),
            "blocks RemovePodSandbox of pod guard-test/leaky",
        ],
    );

    let dry = guard(&cfg, &["hygiene", "--dry-run"]);
    dry.expect(1, "remedy.delete-task", "skip").mentions(
        "remedy.delete-task",
        &["dry run: would delete 1 leaked task", &cid],
    );
    assert_eq!(
        ctr_task(&leaky.socket, &cid).map(|t| t.status),
        Some("STOPPED".into())
    );

    hygiene_is_skipped_where_no_socket_is(&n, &leaky.socket, &cid);

    show(&cfg, &["hygiene", "--dry-run"]);
    let before_cleanup = scrape_for_alerts(&n);
    let repair = guard(&cfg, &["hygiene"]);
    shown(
        &["hygiene"],
        &repair,
        &[
            "runtime.leaked-tasks",
            "runtime.orphans",
            "remedy.delete-task",
        ],
    );
    show(&cfg, &["status"]);
    repair
        .expect(0, "remedy.delete-task", "pass")
        .expect(0, "runtime.leaked-tasks", "pass");
    assert_eq!(ctr_task(&leaky.socket, &cid), None, "the task is gone");
    cleanups_again_and_again_fire_the_alert(&n, &cfg, &leaky, &cid, &before_cleanup);
    leaky
        .remove_pod()
        .unwrap_or_else(|e| panic!("RemovePodSandbox after the guard's repair: {e:?}"));
    bystander.unchanged("after the repair");
    n.assert_never_restarted(containerd, &[&verify, &dry, &repair]);

    let status = Guard::with_config(&cfg).run(&["status"]);
    assert!(status.stdout.contains("delete-task"), "{}", status.dump());
}

/// node_exporter's scrape of the guard's textfile on the suite's own containerd (`None`
/// on the other versions: the alert rules do not depend on containerd's version, and the
/// cases below cost two hygiene runs of a second look each).
fn scrape_for_alerts(n: &HygieneNode) -> Option<String> {
    if std::env::var_os("GUARD_TEST_CONTAINERD_DIR").is_some() {
        return None;
    }
    let dir = n.t.metrics_textfile().parent().unwrap().to_path_buf();
    Some(NodeExporter::start(&dir).scrape())
}

/// The leak comes back twice more and hygiene deletes it each time: three cleanups in a
/// few minutes, which `ContainerdGuardRecurringCleanup` pages on, and two, which it does
/// not. Its promtool cases from node_exporter's scrapes of this real guard.
fn cleanups_again_and_again_fire_the_alert(
    n: &HygieneNode,
    cfg: &Path,
    leaky: &Pod,
    cid: &str,
    before: &Option<String>,
) {
    use support::alert_rules::{firing, input_series, Cases, Target};
    let Some(before) = before else { return };
    let mut scrapes = vec![before.clone(), scrape_for_alerts(n).unwrap()];
    for cleanups in 2..=3 {
        leak_again(leaky, cid);
        guard(cfg, &["hygiene"]).expect(0, "remedy.delete-task", "pass");
        let scraped = scrape_for_alerts(n).unwrap();
        let line = format!(
            "containerd_guard_remedies_total{{kind=\"delete-task\",outcome=\"ok\"}} {cleanups}"
        );
        assert!(
            scraped.lines().any(|l| l == line),
            "no {line:?} in\n{scraped}"
        );
        scrapes.push(scraped);
    }
    let series = |steps: &[(&str, u32)]| {
        input_series(&[Target {
            cluster: "x",
            instance: "node-1:9100",
            nodename: "node-1",
            steps: steps.to_vec(),
        }])
    };
    let [s0, s1, s2, s3] = [0, 1, 2, 3].map(|i| scrapes[i].as_str());
    let recurring = firing("ContainerdGuardRecurringCleanup", "kind=\"delete-task\"");
    let mut cases = Cases::default();
    let three = series(&[(s0, 2), (s1, 2), (s2, 2), (s3, 60)]);
    cases.case("three cleanups in minutes", &three, &recurring, 10, 1);
    let two = series(&[(s0, 2), (s1, 2), (s2, 60)]);
    cases.case("two cleanups", &two, &recurring, 10, 0);
    cases.run(n.t.path());
}

/// This node's socket is not containerd's default, and hygiene ran where the config puts it
/// (above and below this call: it finds the leak and deletes it). The shipped unit makes
/// no condition of one fixed socket path, which skipped it silently on such a node; where
/// no socket exists at the configured path, the guard itself says it skipped, exit 0, and
/// touches nothing (the leak stays, no state, no metrics).
#[track_caller]
fn hygiene_is_skipped_where_no_socket_is(n: &HygieneNode, socket: &Path, cid: &str) {
    assert_ne!(socket, Path::new("/run/containerd/containerd.sock"));
    let unit =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/containerd-guard-hygiene.service");
    let unit = std::fs::read_to_string(&unit).unwrap();
    assert!(
        !unit.lines().any(|l| l.starts_with("ConditionPathExists=")),
        "the unit must not be skipped on a fixed socket path:\n{unit}"
    );
    let missing = n.t.path().join("no-containerd-here.sock");
    let state = n.t.guard_state_dir();
    let listing = || std::fs::read_dir(&state).map(|d| d.count()).unwrap_or(0);
    let (files, metrics) = (listing(), std::fs::read(n.t.metrics_textfile()).ok());
    let cfg =
        n.t.write_guard_config_with(|c| c.containerd_socket(&missing));
    for args in [&["hygiene"][..], &["hygiene", "--dry-run"]] {
        let out = Guard::with_config(&cfg).run(args);
        assert_eq!(out.code, 0, "{}", out.dump());
        let said = format!("skipped: no containerd socket at {}\n", missing.display());
        assert_eq!(out.stdout, said, "{}", out.dump());
        assert!(out.stderr.is_empty(), "one line only:\n{}", out.dump());
    }
    let json = Guard::with_config(&cfg).run(&["--json", "hygiene"]);
    assert_eq!(json.code, 0, "{}", json.dump());
    assert_eq!(json.verdict(), "skipped", "{}", json.dump());
    assert_eq!(
        ctr_task(socket, cid).map(|t| t.status),
        Some("STOPPED".into()),
        "the leak is left for a run that reaches containerd"
    );
    assert_eq!(listing(), files, "nothing written to {}", state.display());
    assert_eq!(std::fs::read(n.t.metrics_textfile()).ok(), metrics);
    // the tree has one config file: back to the node's own for the runs that follow
    guard_config(n);
}

#[test]
fn h05_guard_runtime_deletes_a_leaked_task_without_holding_kubelet() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    let cfg = guard_config_with(&n, |c| c.hold_timeout("30s"));
    let leaky = n.pod("leaky");
    let (cid, _) = running_locker(&leaky, "payload", &n.host_dir("leaky"));
    make_leaked_task(&leaky, &cid);
    let out = guard(&cfg, &["runtime"]);
    out.expect(0, "remedy.delete-task", "pass");
    assert_eq!(ctr_task(&leaky.socket, &cid), None);
    leaky
        .remove_pod()
        .expect("RemovePodSandbox after guard runtime");
}

#[test]
fn h06_a_stopped_task_cri_never_knew_is_reported_and_left_alone() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    let cfg = guard_config(&n);
    // Made by `ctr` in CRI's own namespace (as nerdctl does): STOPPED, unknown to CRI.
    let stray = CtrMadeTask::start(&n, "k8s.io");
    let leaky = n.pod("leaky");
    let (cid, _) = running_locker(&leaky, "payload", &n.host_dir("leaky"));
    make_leaked_task(&leaky, &cid);

    let out = guard(&cfg, &["hygiene"]);
    out.expect(0, "remedy.delete-task", "pass")
        .mentions("remedy.delete-task", &[&cid]);
    assert_eq!(
        ctr_task(&leaky.socket, &cid),
        None,
        "the leaked task is gone"
    );
    assert_eq!(
        stray.status().as_deref(),
        Some("STOPPED"),
        "the task CRI never knew was deleted: {}",
        out.dump()
    );
    assert!(
        !out.finding_text("remedy.delete-task").contains(&stray.id),
        "{}",
        out.dump()
    );
    out.expect(0, "runtime.leaked-tasks", "warn").mentions(
        "runtime.leaked-tasks",
        &[&stray.id, "unknown to CRI", "left alone"],
    );
}

#[test]
fn h11_without_the_task_bundles_containerd_is_asked_and_the_verdicts_are_the_same() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    // the same config with another `state` (its socket's address stays)
    let real = std::fs::read_to_string(n.t.containerd_config()).unwrap();
    let other: Vec<String> = real
        .lines()
        .map(|l| match l.trim_start().starts_with("state =") {
            true => "state = \"/nonexistent/containerd-state\"".to_string(),
            false => l.to_string(),
        })
        .collect();
    assert_ne!(
        other.join("\n"),
        real.trim_end(),
        "the tree's config names a state: {real}"
    );
    let moved = n.t.path().join("containerd-other-state.toml");
    std::fs::write(&moved, other.join("\n")).unwrap();
    let cfg = n.t.write_guard_config_with(|c| c.containerd_config(&moved));
    let stray = CtrMadeTask::start(&n, "k8s.io");
    let leaky = n.pod("leaky");
    let (cid, _) = running_locker(&leaky, "payload", &n.host_dir("leaky"));
    make_leaked_task(&leaky, &cid);

    let out = Guard::with_config(&cfg)
        .arg("--json")
        .arg("-vv")
        .run(&["hygiene"]);
    assert!(
        out.stderr.contains("grpc{call=\"Containers.List\"}"),
        "the fallback asked containerd for the containers CRI did not make:\n{}",
        out.dump()
    );
    out.expect(0, "remedy.delete-task", "pass")
        .mentions("remedy.delete-task", &[&cid]);
    assert_eq!(
        ctr_task(&leaky.socket, &cid),
        None,
        "the leaked task is gone"
    );
    assert_eq!(stray.status().as_deref(), Some("STOPPED"), "{}", out.dump());
    out.expect(0, "runtime.leaked-tasks", "warn").mentions(
        "runtime.leaked-tasks",
        &[&stray.id, "unknown to CRI", "left alone"],
    );
}
