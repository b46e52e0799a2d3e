//! The guard against the two faults that break pods while a node runs, created for real
//! (testkit/src/hygiene.rs) on a real containerd with CRI, runc and kubelet's cgroupfs
//! layout: a leaked task and an orphaned payload. Each is found with its evidence,
//! repaired by the guard, and then the pod can be removed / a new container gets the lock;
//! a healthy pod beside keeps its payload PID, containerd keeps its PID, nothing restarts.
//! Root only.
//!
//! The tests in this file run one at a time (`SERIAL`): a repairing guard reaps every
//! orphaned container cgroup on the host, including another test's on purpose.

use testkit as support;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use support::hygiene::*;
use support::locks::{pid_alive, KillOnDrop};
use support::workload::*;
use support::*;

const TOOLS: &[&str] = &["containerd", "ctr", "runc", "gcc"];
const WAIT: Duration = Duration::from_secs(30);
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts a locker on `<dir>/lock` and waits until it holds the lock: (container, pid).
fn running_locker(pod: &Pod, name: &str, dir: &Path) -> (String, i32) {
    let cid = pod.start_locker(name, dir, "lock");
    let info = pod.wait_container(&cid, "RUNNING with a PID", WAIT, |i| {
        i.running() && i.pid.is_some()
    });
    let pid = info.pid.unwrap();
    poll_until("the locker to hold its lock", WAIT, || {
        lock_holders(&dir.join("lock")).contains(&pid).then_some(())
    });
    (cid, pid)
}

/// The guard's config for this node; `extra` adds tables.
fn guard_config(n: &HygieneNode, extra: &str) -> PathBuf {
    n.t.write_guard_config("", extra)
}

/// With `GUARD_TEST_SHOW=1`, prints what an operator would see (the table) for the
/// replays in docs/incidents.md. Changes nothing the test asserts.
fn show(cfg: &Path, args: &[&str]) {
    if std::env::var_os("GUARD_TEST_SHOW").is_some() {
        let out = Guard::with_config(cfg).run(args);
        eprintln!(
            "$ guard {}  # exit {}\n{}",
            args.join(" "),
            out.code,
            out.stdout
        );
    }
}

/// With `GUARD_TEST_SHOW=1`, prints findings `ids` of a run the test made itself (one that
/// repairs, so it cannot run twice), each as `id: status: summary`.
fn shown(args: &[&str], out: &Outcome, ids: &[&str]) {
    if std::env::var_os("GUARD_TEST_SHOW").is_some() {
        eprintln!("$ guard {}  # exit {}", args.join(" "), out.code);
        for id in ids {
            eprintln!("{id}: {}: {}", out.status(id), out.finding(id)["summary"]);
        }
    }
}

fn guard(cfg: &Path, args: &[&str]) -> Outcome {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    Guard::with_config(cfg).run(&all)
}

/// A healthy pod whose payload must survive everything the guard does.
struct Bystander {
    pod: Pod,
    cid: String,
    pid: i32,
}

impl Bystander {
    fn start(n: &HygieneNode) -> Bystander {
        let pod = n.pod("bystander");
        let (cid, pid) = running_locker(&pod, "payload", &n.host_dir("bystander"));
        Bystander { pod, cid, pid }
    }

    fn unchanged(&self, when: &str) {
        let i = self.pod.container_state(&self.cid).unwrap();
        assert!(
            i.running() && i.pid == Some(self.pid),
            "{when}: bystander {i:?}"
        );
        assert!(
            pid_alive(self.pid),
            "{when}: bystander payload {} died",
            self.pid
        );
    }
}

#[test]
fn h01_leaked_task_is_found_deleted_and_the_pod_can_be_removed() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    let cfg = guard_config(&n, "");
    let bystander = Bystander::start(&n);
    let leaky = n.pod("leaky");
    let (cid, _) = running_locker(&leaky, "payload", &n.host_dir("leaky"));
    let task = make_leaked_task(&leaky, &cid);
    let containerd_pid = n.ctrd.pid();

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
    assert_eq!(n.ctrd.pid(), containerd_pid, "containerd was not restarted");

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
    let cfg = n.t.write_guard_config_raw(&format!(
        "state_dir = \"{}\"\n\n[containerd]\nconfig = \"{}\"\nsocket = \"{}\"\n",
        state.display(),
        n.t.containerd_config().display(),
        missing.display()
    ));
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
    guard_config(n, "");
}

#[test]
fn h02_orphaned_payload_is_found_with_its_lock_reaped_and_a_new_container_gets_the_lock() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let mut n = HygieneNode::start();
    let cfg = guard_config(&n, "");
    let bystander = Bystander::start(&n);
    let dir = n.host_dir("orphan");
    let pod = n.pod("orphan");
    let (cid, pid) = running_locker(&pod, "payload", &dir);
    let pids = n.make_orphan(&pod, &cid);
    let cgroup = pod.container_cgroup(&cid);
    let containerd_pid = n.ctrd.pid();
    let retry = n.pod("orphan");
    assert!(
        !new_container_gets_lock(&retry, "blocked", &dir, "lock"),
        "the orphan holds it"
    );

    show(&cfg, &["verify"]);
    let verify = guard(&cfg, &["verify"]);
    verify.expect(1, "runtime.orphans", "fail").mentions(
        "runtime.orphans",
        &[
            &format!("pid {pid} (/locker /data/lock) ppid 1"),
            &format!("cgroup {cgroup}"),
            // The path as the payload sees it (its hostPath is mounted at /data).
            "holds locks on /data/lock",
            "pod guard-test/orphan",
        ],
    );

    let dry = guard(&cfg, &["verify", "--repair", "--dry-run"]);
    dry.expect(1, "remedy.reap-orphans", "skip").mentions(
        "remedy.reap-orphans",
        &[
            "dry run: would kill 1 orphaned container cgroup",
            &format!("cgroup {cgroup}: pid {pid}"),
        ],
    );
    assert!(
        pids.iter().all(|p| pid_alive(*p)),
        "a dry run kills nothing"
    );

    show(&cfg, &["verify", "--repair", "--dry-run"]);
    let repair = guard(&cfg, &["hygiene"]);
    shown(
        &["hygiene"],
        &repair,
        &["runtime.orphans", "remedy.reap-orphans"],
    );
    show(&cfg, &["status"]);
    repair
        .expect(0, "remedy.reap-orphans", "pass")
        .expect(0, "runtime.orphans", "pass");
    assert!(pids.iter().all(|p| !pid_alive(*p)), "{pids:?} still alive");
    assert!(!cgroup_exists(&cgroup), "{cgroup} was removed");
    assert!(
        new_container_gets_lock(&retry, "after", &dir, "lock"),
        "the lock is free"
    );
    bystander.unchanged("after the reap");
    assert_eq!(n.ctrd.pid(), containerd_pid, "containerd was not restarted");
}

#[test]
fn h03_reap_off_only_reports() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let mut n = HygieneNode::start();
    let cfg = guard_config(&n, "[orphans]\nreap = false\n");
    let pod = n.pod("orphan");
    let (cid, _) = running_locker(&pod, "payload", &n.host_dir("orphan"));
    let pids = n.make_orphan(&pod, &cid);
    let out = guard(&cfg, &["hygiene"]);
    out.expect(1, "runtime.orphans", "fail")
        .mentions("runtime.orphans", &["[orphans] reap = false"]);
    assert!(
        out.json.as_ref().unwrap()["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["id"] != "remedy.reap-orphans"),
        "{}",
        out.dump()
    );
    assert!(pids.iter().all(|p| pid_alive(*p)), "nothing was killed");
    assert!(remove_cgroup_tree(&pod.container_cgroup(&cid)));
}

#[test]
fn h04_live_tasks_other_namespaces_and_reused_pids_are_left_alone() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    let cfg = guard_config(&n, "");
    let bystander = Bystander::start(&n);
    // A STOPPED task in a namespace that is not CRI's: not kubelet's to clean up.
    let other = CtrMadeTask::start(&n, "guard-other");
    // A leaked task whose dead PID now names another, live process.
    let leaky = n.pod("leaky");
    let (cid, _) = running_locker(&leaky, "payload", &n.host_dir("leaky"));
    let task = make_leaked_task(&leaky, &cid);
    let reuser = spawn_with_pid(task.pid)
        .unwrap_or_else(|| panic!("could not give pid {} to a new process", task.pid));

    let out = guard(&cfg, &["hygiene"]);
    out.expect(0, "remedy.delete-task", "pass")
        .mentions("remedy.delete-task", &[&cid]);
    assert!(
        !out.stdout.contains(&other.id),
        "the other namespace is ignored: {}",
        out.dump()
    );
    assert_eq!(
        other.status().as_deref(),
        Some("STOPPED"),
        "the other namespace's task is still there"
    );
    assert!(
        pid_alive(reuser.pid),
        "the process that reused pid {} was killed",
        reuser.pid
    );
    bystander.unchanged("after the repair");
}

#[test]
fn h05_guard_runtime_deletes_a_leaked_task_without_holding_kubelet() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    let cfg = guard_config(&n, "[hold]\ntimeout = \"30s\"\n");
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
    let cfg = guard_config(&n, "");
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

/// Where the guard cannot read containerd's task bundles (its config names another state
/// directory than the running containerd's), it asks containerd instead: the containers
/// CRI did not make (`Containers.List`, filtered) and each container CRI does not vouch
/// for. The same leak is deleted and the same stranger left alone as in h06.
#[test]
fn h12_a_sandbox_image_removed_while_the_node_runs_is_restored_by_hygiene_without_a_restart() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    use support::cri::{image_pinned, remove_image};
    use support::runtime::{block_on, PauseImage};
    let _serial = serial();
    let n = HygieneNode::start();
    // The registry (localhost:80) is unreachable, and pulls are off: only the archive can
    // bring the image back.
    let archive = PauseImage::new(PAUSE_IMAGE).write_oci(&n.t.path().join("pause.oci.tar"), false);
    let sandbox = format!(
        "[sandbox]\narchives = [\"{}\"]\npull = false\n",
        archive.display()
    );
    let cfg = guard_config(&n, &sandbox);
    let containerd_pid = n.ctrd.pid();
    guard(&cfg, &["hygiene"]).expect(0, "runtime.sandbox-image", "pass");

    // What kubelet's image GC or `crictl rmi` does.
    block_on("CRI RemoveImage", remove_image(&n.socket(), PAUSE_IMAGE))
        .unwrap_or_else(|e| panic!("RemoveImage {PAUSE_IMAGE}: {e}"));
    let gone = block_on("CRI ImageStatus", image_pinned(&n.socket(), PAUSE_IMAGE));
    assert_eq!(gone, Ok(None), "the sandbox image is gone");
    guard(&cfg, &["verify"]).expect(1, "runtime.sandbox-image", "fail");

    let out = guard(&cfg, &["hygiene"]);
    shown(
        &["hygiene"],
        &out,
        &["runtime.sandbox-image", "remedy.restore-image"],
    );
    out.expect(0, "runtime.sandbox-image", "pass")
        .expect(0, "remedy.restore-image", "pass");
    assert!(
        !support::node::has_finding(&out, "remedy.restart"),
        "{}",
        out.dump()
    );
    assert_eq!(n.ctrd.pid(), containerd_pid, "containerd was not restarted");
    // Pinned as containerd pins its own sandbox image, so kubelet's image GC leaves it
    // alone: CRI reports it from 1.7 on; 1.6 knows no pinning (the label is only a label).
    out.mentions("remedy.restore-image", &["io.cri-containerd.pinned=pinned"]);
    let back = block_on("CRI ImageStatus", image_pinned(&n.socket(), PAUSE_IMAGE));
    let pins = containerd_major_minor() >= (1, 7);
    assert_eq!(
        back,
        Ok(Some(pins)),
        "CRI knows the image again, pinned from 1.7 on"
    );
    // A real RunPodSandbox with the restored image (panics with CRI's error otherwise).
    n.pod("after-restore");
    let status = Guard::with_config(&cfg).run(&["status"]);
    assert!(status.stdout.contains("import"), "{}", status.dump());
    // the finding reads CRI: pinned from 1.7 on, and on 1.6 no pinning at all (verify
    // exits 1 on this node: its containerd root is a directory, not a volume)
    let pinned = if pins { "pass" } else { "skip" };
    guard(&cfg, &["verify"]).expect(1, "runtime.sandbox-pinned", pinned);
}

/// Removes `io.cri-containerd.pinned` from every image record whose target is `digest`
/// (`ctr images label REF KEY=` removes a label).
fn unpin_everywhere(n: &HygieneNode, digest: &str) {
    let ls = support::workload::ctr_k8s(&n.socket(), &["images", "ls"]);
    let listing = String::from_utf8_lossy(&ls.stdout).into_owned();
    let refs: Vec<&str> = listing
        .lines()
        .filter(|l| l.split_whitespace().nth(2) == Some(digest))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(!refs.is_empty(), "no record of {digest} in\n{listing}");
    for r in refs {
        let unlabel = ["images", "label", r, "io.cri-containerd.pinned="];
        let out = support::workload::ctr_k8s(&n.socket(), &unlabel);
        assert!(out.status.success(), "unlabel {r}: {out:?}");
    }
}

/// A sandbox image without the pin label is reported unpinned by
/// a plain `verify`, whatever the version; `verify --repair` labels it as containerd
/// labels its own, and from then on CRI reports it pinned (1.7 and later) or the finding
/// says this containerd has no pinning (1.6).
#[test]
fn h13_repair_pins_a_present_but_unpinned_sandbox_image() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    use support::cri::image_pinned;
    use support::runtime::{block_on, PauseImage};
    let _serial = serial();
    let n = HygieneNode::start();
    let cfg = guard_config(&n, "[sandbox]\npull = false\n");
    // containerd 1.7 and 2.1 label their configured sandbox image pinned themselves when
    // it is imported (its name and its sha256: id); to stand for one that is not (an
    // older 1.7, a label someone removed), the label is removed from every record. 1.6
    // never labels: nothing to remove.
    unpin_everywhere(&n, &PauseImage::new(PAUSE_IMAGE).manifest_digest());
    let before = block_on("CRI ImageStatus", image_pinned(&n.socket(), PAUSE_IMAGE));
    if containerd_major_minor() >= (2, 0) {
        // containerd 2 pins its configured sandbox image by its config (`pinned_images`),
        // label or not: nothing to repair
        assert_eq!(before, Ok(Some(true)), "containerd 2 pins it by config");
        let repair = guard(&cfg, &["verify", "--repair"]);
        repair.expect(1, "runtime.sandbox-pinned", "pass");
        assert!(
            !support::node::has_finding(&repair, "remedy.pin-image"),
            "{}",
            repair.dump()
        );
        return;
    }
    assert_eq!(before, Ok(Some(false)), "the image is unpinned");
    // (verify exits 1 on this node: its containerd root is a directory, not a volume)
    guard(&cfg, &["verify"])
        .expect(1, "runtime.sandbox-pinned", "warn")
        .mentions("runtime.sandbox-pinned", &["not pinned", "--repair"]);
    let dry = guard(&cfg, &["verify", "--repair", "--dry-run"]);
    dry.expect(1, "remedy.pin-image", "skip")
        .mentions("remedy.pin-image", &["would label"]);
    let still = block_on("CRI ImageStatus", image_pinned(&n.socket(), PAUSE_IMAGE));
    assert_eq!(still, Ok(Some(false)), "a dry run labels nothing");

    let pins = containerd_major_minor() >= (1, 7);
    let pinned = if pins { "pass" } else { "skip" };
    guard(&cfg, &["verify", "--repair"])
        .expect(1, "remedy.pin-image", "pass")
        .expect(1, "runtime.sandbox-pinned", pinned);
    let after = block_on("CRI ImageStatus", image_pinned(&n.socket(), PAUSE_IMAGE));
    assert_eq!(after, Ok(Some(pins)), "CRI reports the pin from 1.7 on");
    // once labelled, nothing more to do: the next repair does not label again
    let again = guard(&cfg, &["verify", "--repair"]);
    assert!(
        !support::node::has_finding(&again, "remedy.pin-image"),
        "{}",
        again.dump()
    );
    let status = Guard::with_config(&cfg).run(&["status"]);
    assert!(status.stdout.contains("pin"), "{}", status.dump());
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
    let cfg = n.t.write_guard_config_raw(&format!(
        "state_dir = \"{}\"\n[containerd]\nconfig = \"{}\"\n",
        n.t.guard_state_dir().display(),
        moved.display()
    ));
    let stray = CtrMadeTask::start(&n, "k8s.io");
    let leaky = n.pod("leaky");
    let (cid, _) = running_locker(&leaky, "payload", &n.host_dir("leaky"));
    make_leaked_task(&leaky, &cid);

    let out = Guard::with_config(&cfg)
        .arg("--json")
        .arg("-v")
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

/// An argument that tries to forge the guard's output: a new line claiming the node is
/// usable, a terminal escape (clear screen) and a right-to-left override.
const FORGERY: &str = "x\nverdict: node is usable\n\x1b[2J\u{202e}gnirts";

/// No line of `out` but the real last one starts with `verdict:`, and no raw ESC byte or
/// bidi override is printed.
#[track_caller]
fn assert_not_forged(what: &str, out: &Outcome) {
    let text = &out.stdout;
    let verdicts: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with("verdict:"))
        .collect();
    let real = match text.lines().last() {
        Some(l) if l.starts_with("verdict: node is") && verdicts.len() == 1 => 1,
        _ => 0,
    };
    assert_eq!(
        verdicts.len(),
        real,
        "{what}: forged verdict line\n{}",
        out.dump()
    );
    assert!(!text.contains('\x1b'), "{what}: raw ESC\n{}", out.dump());
    assert!(
        !text.contains('\u{202e}'),
        "{what}: raw bidi override\n{}",
        out.dump()
    );
}

#[test]
fn h07_an_orphans_command_line_cannot_forge_a_line_of_the_output() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let mut n = HygieneNode::start();
    let cfg = guard_config(&n, "");
    let dir = n.host_dir("forger");
    let pod = n.pod("forger");
    // The locker ignores every argument after the lock path: they are only its cmdline.
    let cid = pod.start_container("payload", LOCKER_IMAGE, &["/data/lock", FORGERY], &dir);
    let info = pod.wait_container(&cid, "RUNNING with a PID", WAIT, |i| {
        i.running() && i.pid.is_some()
    });
    let pid = info.pid.unwrap();
    assert!(
        cmdline(pid).iter().any(|a| a == FORGERY),
        "{:?}",
        cmdline(pid)
    );
    let pids = n.make_orphan(&pod, &cid);

    let table = Guard::with_config(&cfg).run(&["verify"]);
    assert_eq!(table.code, 1, "{}", table.dump());
    assert!(
        table
            .stdout
            .contains("x\\nverdict: node is usable\\n\\x1b[2J\\u{202e}gnirts"),
        "the table shows the argument escaped:\n{}",
        table.dump()
    );
    assert_not_forged("verify (table)", &table);
    let json = guard(&cfg, &["verify"]);
    json.expect(1, "runtime.orphans", "fail");
    assert_not_forged("verify --json", &json);
    let npd = Guard::with_config(&cfg).run(&["verify", "--npd"]);
    assert_not_forged("verify --npd", &npd);
    assert_eq!(npd.stdout.lines().count(), 1, "{}", npd.dump());

    let repair = Guard::with_config(&cfg).run(&["hygiene"]);
    assert_not_forged("hygiene (table)", &repair);
    assert_eq!(repair.code, 0, "{}", repair.dump());
    assert!(pids.iter().all(|p| !pid_alive(*p)), "{pids:?} still alive");
}

/// A real `sleep` in a container cgroup laid out as kubelet's cgroupfs driver lays it out
/// (`/kubepods/besteffort/pod<uid>/<64 hex>`, every hierarchy), with no task and no shim:
/// what an orphan looks like to the rules. Killed and removed on drop.
struct CgroupPayload {
    container_id: String,
    /// Its pod's cgroup, made for it alone: removed whole when it is dropped.
    pod: String,
    cgroup: String,
    pid: i32,
    child: std::process::Child,
}

impl CgroupPayload {
    fn start() -> CgroupPayload {
        let container_id = format!("{}{}", unique("", 32), unique("", 32));
        let pod = pod_cgroup(&random_uuid());
        let cgroup = format!("{pod}/{container_id}");
        let child = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id() as i32;
        // cpuset needs its cpus and mems copied down each level; the others suffice.
        for h in cgroup_hierarchies()
            .into_iter()
            .filter(|h| !h.ends_with("cpuset"))
        {
            let dir = h.join(cgroup.trim_start_matches('/'));
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
            std::fs::write(dir.join("cgroup.procs"), pid.to_string())
                .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        }
        CgroupPayload {
            container_id,
            pod,
            cgroup,
            pid,
            child,
        }
    }
}

impl Drop for CgroupPayload {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_cgroup_tree(&self.pod);
    }
}

#[test]
fn h08_a_pid_whose_start_time_differs_from_the_judged_orphans_is_not_killed() {
    use containerd_guard::checks::orphans::{facts, rules};
    use containerd_guard::host::{
        cgroup::{kill_cgroup, CgroupError},
        proc::read_proc,
        Host,
    };
    let Some(_root) = root_or_skip(&["sleep"]) else {
        return;
    };
    let _serial = serial();
    let host = Host::live();
    let payload = CgroupPayload::start();
    let pid = payload.pid;
    let start = read_proc(&host, pid).expect("read the payload").start_ticks;
    let judged_at = |ticks: u64| rules::Condemned {
        cgroup: payload.cgroup.clone(),
        processes: vec![(pid, ticks)],
    };
    let kill = |judged: &rules::Condemned| {
        let recheck =
            |pids: &[i32]| rules::still_condemned(judged, &facts::as_they_are(&host, pids));
        kill_cgroup(&host, &payload.cgroup, &recheck, WAIT)
    };

    // The pid judged orphaned named a process that started one tick earlier: not this one.
    let err = kill(&judged_at(start - 1)).expect_err("killed a process it never judged");
    let CgroupError::Refused(why) = &err else {
        panic!("not refused by the re-check: {err:?}");
    };
    assert!(why.contains("another process, nothing killed"), "{err}");
    assert!(pid_alive(payload.pid), "pid {pid} was killed");
    assert!(cgroup_exists(&payload.cgroup));

    let killed = kill(&judged_at(start)).expect("the judged process is killed");
    assert_eq!(killed, vec![pid]);
    poll_until("the payload to die", WAIT, || {
        (!pid_alive(pid)).then_some(())
    });
    assert!(
        !cgroup_exists(&payload.cgroup),
        "{} was removed",
        payload.cgroup
    );
}

#[test]
fn h09_a_vm_runtimes_container_is_named_and_left_alone_and_a_runc_one_beside_is_reaped() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let n = HygieneNode::start();
    let cfg = guard_config(&n, "");
    // containerd's own record of each container says which runtime runs it, as CRI
    // records it for a pod of RuntimeClass kata; no Kata shim or VM is started.
    let kata = CgroupPayload::start();
    let runc = CgroupPayload::start();
    for (p, runtime) in [
        (&kata, "io.containerd.kata.v2"),
        (&runc, "io.containerd.runc.v2"),
    ] {
        let args = [
            "containers",
            "create",
            "--runtime",
            runtime,
            LOCKER_IMAGE,
            &p.container_id,
        ];
        ctr_k8s_ok(&n.socket(), &args);
    }

    let out = guard(&cfg, &["hygiene"]);
    out.expect(0, "remedy.reap-orphans", "pass")
        .mentions("remedy.reap-orphans", &[&runc.cgroup]);
    assert!(
        !out.finding_text("remedy.reap-orphans")
            .contains(&kata.cgroup),
        "{}",
        out.dump()
    );
    assert!(
        pid_alive(kata.pid),
        "the Kata container's process was killed: {}",
        out.dump()
    );
    assert!(
        !pid_alive(runc.pid),
        "the runc orphan lives: {}",
        out.dump()
    );
    out.mentions(
        "runtime.orphans",
        &[
            &format!("pid {}", kata.pid),
            "runtime io.containerd.kata.v2 is not runc-type",
            "left alone",
        ],
    );
    for p in [&kata, &runc] {
        ctr_k8s(&n.socket(), &["containers", "delete", &p.container_id]);
    }
}

#[test]
fn h10_beside_a_second_containerd_its_orphaned_and_leaked_pods_are_left_alone() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let _serial = serial();
    let mut ours = HygieneNode::start();
    // k3s-style: its own root, state and socket; its shims are started with `-address` its
    // socket. The guard is configured for `ours` only.
    let mut theirs = HygieneNode::start();
    let cfg = guard_config(&ours, "");
    let their_pod = theirs.pod("k3s-orphan");
    let (their_cid, _) = running_locker(&their_pod, "payload", &theirs.host_dir("k3s"));
    let their_shims = shims_of(std::slice::from_ref(&their_pod.sandbox_id));
    let address = format!("-address {}", theirs.socket().display());
    let shim_argv: Vec<String> = their_shims
        .iter()
        .map(|(p, _)| cmdline(*p).join(" "))
        .collect();
    assert!(
        !shim_argv.is_empty() && shim_argv.iter().all(|c| c.contains(&address)),
        "{shim_argv:?}"
    );
    // To the naive rules both look like ours to clean up: an orphan (no task here, shim
    // killed) and a leaked task.
    let their_pids = theirs.make_orphan(&their_pod, &their_cid);
    let their_cgroup = their_pod.container_cgroup(&their_cid);
    let their_leaky = theirs.pod("k3s-leaky");
    let (leaky_cid, _) = running_locker(&their_leaky, "payload", &theirs.host_dir("k3s-leaky"));
    make_leaked_task(&their_leaky, &leaky_cid);
    // One orphan of our own, so the guard does act.
    let our_pod = ours.pod("orphan");
    let (our_cid, _) = running_locker(&our_pod, "payload", &ours.host_dir("orphan"));
    let our_pids = ours.make_orphan(&our_pod, &our_cid);

    let out = guard(&cfg, &["hygiene"]);
    out.expect(0, "remedy.reap-orphans", "pass").mentions(
        "remedy.reap-orphans",
        &["1 of 1", &our_pod.container_cgroup(&our_cid)],
    );
    assert!(our_pids.iter().all(|p| !pid_alive(*p)), "{our_pids:?} live");
    assert!(
        their_pids.iter().all(|p| pid_alive(*p)),
        "the other runtime's payload {their_pids:?} was killed:\n{}",
        out.dump()
    );
    assert!(cgroup_exists(&their_cgroup), "{their_cgroup} was removed");
    assert_eq!(
        ctr_task(&their_leaky.socket, &leaky_cid).map(|t| t.status),
        Some("STOPPED".into()),
        "the other runtime's leaked task was deleted"
    );
    out.mentions(
        "runtime.orphans",
        &[
            &format!("pid {}", their_pids[0]),
            "another runtime's container",
            "left alone",
        ],
    );
    assert!(remove_cgroup_tree(&their_cgroup));
}

/// A task made by `ctr` (not CRI) in namespace `ns` whose process is gone: `ctr run` of
/// the locker with a path it cannot open, so it exits at once and its task stays STOPPED.
/// Removed again on drop.
struct CtrMadeTask {
    socket: PathBuf,
    ns: &'static str,
    id: String,
}

impl CtrMadeTask {
    fn start(n: &HygieneNode, ns: &'static str) -> CtrMadeTask {
        let t = CtrMadeTask {
            socket: n.socket(),
            ns,
            id: unique("ctr", 8),
        };
        let archive = n
            .locker
            .image
            .write_oci(&n.t.path().join("other.tar"), false);
        t.ctr(&["images", "import", archive.to_str().unwrap()]);
        t.ctr(&[
            "run",
            "-d",
            "--null-io",
            LOCKER_IMAGE,
            &t.id,
            "/locker",
            "/no/such/dir/lock",
        ]);
        poll_until("the ctr-made task to stop", WAIT, || {
            (t.status().as_deref() == Some("STOPPED")).then_some(())
        });
        t
    }

    fn ctr(&self, args: &[&str]) -> String {
        let mut all = vec!["--address", self.socket.to_str().unwrap(), "-n", self.ns];
        all.extend_from_slice(args);
        run(ctr().to_str().unwrap(), &all)
    }

    fn status(&self) -> Option<String> {
        ctr_task_in(&self.socket, self.ns, &self.id)
    }
}

impl Drop for CtrMadeTask {
    fn drop(&mut self) {
        let sock = self.socket.to_str().unwrap_or_default();
        let ctr = ctr();
        for args in [["tasks", "delete"], ["containers", "delete"]] {
            let mut all = vec!["--address", sock, "-n", self.ns];
            all.extend_from_slice(&args);
            all.push(&self.id);
            let _ = run_quiet(ctr.to_str().unwrap_or("ctr"), &all);
        }
    }
}

fn ctr_task_in(sock: &Path, ns: &str, id: &str) -> Option<String> {
    let out = run(
        ctr().to_str().unwrap(),
        &["--address", sock.to_str().unwrap(), "-n", ns, "tasks", "ls"],
    );
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(id))
        .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
}

/// A process on purpose given `pid` (through `ns_last_pid`), standing for a reused PID;
/// `None` when the kernel handed out another one (the pid was taken meanwhile).
fn spawn_with_pid(pid: i32) -> Option<KillOnDrop> {
    std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).ok()?;
    let child = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .ok()?;
    let got = child.id() as i32;
    let guard = KillOnDrop { pid: got };
    (got == pid).then_some(guard)
}
