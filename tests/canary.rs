//! `runtime.can-create` on a real containerd and a real loop-mounted ext4 volume: the
//! canary pod is made and removed leaving nothing behind; a full volume, a volume that
//! went read-only after a filesystem error and an immutable snapshot directory fail it
//! (the last one fails nothing else); a canary of a killed guard is removed by the next
//! repairing run, one of a guard that still runs is left alone. Root only.

use testkit as support;

use containerd_guard::containerd::canary::NAMESPACE;
use std::path::Path;
use std::time::Duration;
use support::cri::sandboxes_in;
use support::node::{has_finding, runtime, Node, TOOLS};
use support::runtime::{block_on, dead_port};
use support::workload::ctr_k8s_ok;
use support::{poll_until, root_or_skip, Guard, GuardConfig, Outcome};

fn node(tag: &str) -> Node {
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:{tag}", dead_port()));
    n.import_image();
    n
}

fn config(n: &Node, adjust: impl FnOnce(GuardConfig) -> GuardConfig) -> std::path::PathBuf {
    n.config_with(&n.ctrd.restart_program(), |c| adjust(c.sandbox_pull(false)))
}

fn deep(cfg: &Path) -> Outcome {
    Guard::with_config(cfg).run(&["--json", "verify", "--deep"])
}

/// The sandbox id the finding names (an evidence line `sandbox <id>, ...`).
fn canary_id(out: &Outcome) -> String {
    let text = out.finding_text("runtime.can-create");
    let line = text.lines().find_map(|l| l.trim().strip_prefix("sandbox "));
    let id: String = line
        .unwrap_or_default()
        .chars()
        .take_while(|c| c.is_ascii_hexdigit())
        .collect();
    assert_eq!(id.len(), 64, "no sandbox id in {text}");
    id
}

/// Everything of sandbox `id` still on the node: CRI's listing, containerd's container
/// and task, a mount, a cgroup, the CRI state directory. Empty when nothing is left.
fn left_of(n: &Node, id: &str) -> Vec<String> {
    let socket = n.t.socket();
    let mut left = Vec::new();
    let listed = block_on("CRI ListPodSandbox", sandboxes_in(&socket, NAMESPACE)).unwrap();
    if listed.iter().any(|l| l == id) {
        left.push(format!("CRI lists {id}"));
    }
    for what in ["containers", "tasks"] {
        if ctr_k8s_ok(&socket, &[what, "ls"]).contains(id) {
            left.push(format!("ctr {what} ls names {id}"));
        }
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    left.extend(
        mounts
            .lines()
            .filter(|l| l.contains(id))
            .map(|l| format!("mount: {l}")),
    );
    left.extend(cgroups_named(Path::new("/sys/fs/cgroup"), id, 4));
    let state = n.t.state_path();
    if walk_names(&state, 6).iter().any(|p| p.contains(id)) {
        left.push(format!("a path named {id} under {}", state.display()));
    }
    left
}

/// Directories under `dir` (to `depth`) whose name contains `id`.
fn cgroups_named(dir: &Path, id: &str, depth: u32) -> Vec<String> {
    walk_names(dir, depth)
        .into_iter()
        .filter(|p| p.contains(id))
        .map(|p| format!("cgroup {p}"))
        .collect()
}

fn walk_names(dir: &Path, depth: u32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        out.push(e.path().display().to_string());
        if is_dir && depth > 0 {
            out.extend(walk_names(&e.path(), depth - 1));
        }
    }
    out
}

fn snapshot_count(n: &Node) -> usize {
    ctr_k8s_ok(&n.t.socket(), &["snapshots", "ls"])
        .lines()
        .count()
}

#[test]
fn c01_a_healthy_node_makes_and_removes_the_canary_leaving_nothing() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node("c1");
    let cfg = config(&n, |c| c);
    let snapshots = snapshot_count(&n);
    let out = deep(&cfg);
    out.expect(0, "runtime.can-create", "pass")
        .mentions("runtime.can-create", &["created and removed", NAMESPACE]);
    let id = canary_id(&out);
    assert_eq!(
        left_of(&n, &id),
        Vec::<String>::new(),
        "the canary left something"
    );
    assert_eq!(
        snapshot_count(&n),
        snapshots,
        "the canary's snapshot is gone"
    );
    // plain verify: no canary, no line
    let plain = Guard::with_config(&cfg).run(&["--json", "verify"]);
    assert!(
        !has_finding(&plain, "runtime.can-create"),
        "{}",
        plain.dump()
    );
    // the runtime gate ends with it; [canary] enabled = false takes it out
    runtime(&cfg).expect(0, "runtime.can-create", "pass");
    let off = runtime(&config(&n, |c| c.canary_enabled(false)));
    assert!(!has_finding(&off, "runtime.can-create"), "{}", off.dump());
    // --deep runs it whatever `enabled` says; NPD never makes pods
    deep(&config(&n, |c| c.canary_enabled(false))).expect(0, "runtime.can-create", "pass");
    let npd = Guard::with_config(&cfg).run(&["verify", "--npd", "--deep"]);
    assert_eq!(npd.code, 2, "--npd --deep is a usage error: {}", npd.dump());
    assert_eq!(n.ctrd.restarts(), 0);
    assert_eq!(left_of(&n, &id), Vec::<String>::new());
}

#[test]
fn c02_a_full_volume_fails_the_canary_alone_with_the_default_config() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node("c2");
    let cfg = config(&n, |c| c);
    let filler = n.t.volume_path().join("filler");
    support::mounts::fill(&filler);
    // Only the canary sees it with the default config: an unnamed temporary file needs an
    // inode and no block (volume.writable), and min_free is 0 (volume.free-space).
    let out = deep(&cfg);
    out.expect(1, "runtime.can-create", "fail").mentions(
        "runtime.can-create",
        &["cannot create a pod sandbox", "no space left"],
    );
    assert_eq!(out.status("volume.writable"), "pass", "{}", out.dump());
    assert_eq!(out.status("volume.free-space"), "pass", "{}", out.dump());
    assert_eq!(n.ctrd.restarts(), 0, "a failing canary restarts nothing");
    std::fs::remove_file(&filler).unwrap();
    let again = deep(&cfg);
    again.expect(0, "runtime.can-create", "pass");
    assert_eq!(left_of(&n, &canary_id(&again)), Vec::<String>::new());
    let listed = block_on("CRI ListPodSandbox", sandboxes_in(&n.t.socket(), NAMESPACE));
    assert_eq!(listed, Ok(vec![]), "nothing of the failed canary is left");
}

#[test]
fn c03_a_volume_read_only_after_a_filesystem_error_fails_the_canary() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node("c3");
    let cfg = config(&n, |c| c);
    let volume = n.t.volume_path();
    let remount = std::process::Command::new("mount")
        .args(["-o", "remount,errors=remount-ro"])
        .arg(&volume)
        .status()
        .unwrap();
    assert!(remount.success(), "remount errors=remount-ro");
    support::mounts::trip_ext4_error(&n.vol.device, &volume);
    let out = deep(&cfg);
    out.expect(1, "runtime.can-create", "fail")
        .expect(1, "volume.writable", "fail")
        .mentions("runtime.can-create", &["read-only file system"]);
    assert_eq!(n.ctrd.restarts(), 0);
}

#[test]
fn c04_an_immutable_snapshot_directory_fails_the_canary_and_nothing_else() {
    let Some(_root) = root_or_skip(&[TOOLS, &["chattr"]].concat()) else {
        return;
    };
    let n = node("c4");
    let cfg = config(&n, |c| c.hold_timeout("3s"));
    let snapshots =
        n.t.volume_path()
            .join("io.containerd.snapshotter.v1.overlayfs/snapshots");
    let chattr = |flag: &str| {
        let ok = std::process::Command::new("chattr")
            .arg(flag)
            .arg(&snapshots)
            .status();
        assert!(
            ok.unwrap().success(),
            "chattr {flag} {}",
            snapshots.display()
        );
    };
    chattr("+i");
    let plain = Guard::with_config(&cfg).run(&["--json", "verify"]);
    let deep_out = deep(&cfg);
    let gate = runtime(&cfg);
    chattr("-i");
    assert_eq!(plain.code, 0, "every other check passes: {}", plain.dump());
    deep_out
        .expect(1, "runtime.can-create", "fail")
        .mentions("runtime.can-create", &["operation not permitted"]);
    gate.expect(1, "runtime.can-create", "fail")
        .expect(1, "runtime.hold", "fail");
    for id in ["remedy.restart", "remedy.restore-image", "remedy.pull"] {
        assert!(!has_finding(&gate, id), "{id}: {}", gate.dump());
    }
    assert_eq!(n.ctrd.restarts(), 0, "a failing canary restarts nothing");
    let listed = block_on("CRI ListPodSandbox", sandboxes_in(&n.t.socket(), NAMESPACE));
    assert_eq!(listed, Ok(vec![]), "nothing of the failed canaries is left");
}

/// The guard's canary records in `state_dir` (`canary.*.json`).
fn records(n: &Node) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(n.t.guard_state_dir()) else {
        return Vec::new();
    };
    let mut names: Vec<String> = dir
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("canary."))
        .collect();
    names.sort();
    names
}

/// A guard killed while its canary is in flight (its StopPodSandbox held by a proxy, then
/// SIGKILL): while it still runs, another guard leaves that canary alone and does not
/// report it; once it is dead, a read-only `verify --deep` names it and leaves it, and the
/// next `guard runtime` proves it gone by its record and removes the canary and the record.
#[test]
fn c05_a_killed_guards_canary_is_removed_by_the_next_runtime_and_a_running_ones_left_alone() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    use support::grpc_proxy::DelayProxy;
    let n = node("c5");
    let cfg = config(&n, |c| c);
    let socket = n.t.socket();
    let stop = "/runtime.v1.RuntimeService/StopPodSandbox";
    let proxy = DelayProxy::start(
        &socket,
        &n.t.path().join("held-stop.sock"),
        stop,
        Duration::from_secs(60),
    );
    let through = n.t.path().join("guard-held-stop.toml");
    let text = std::fs::read_to_string(&cfg).unwrap().replacen(
        "[containerd]\n",
        &format!("[containerd]\nsocket = \"{}\"\n", proxy.socket.display()),
        1,
    );
    std::fs::write(&through, text).unwrap();
    let stuck = Guard::with_config(&through).spawn(&["--json", "verify", "--deep"]);
    let canary = poll_until("the stuck guard's canary", Duration::from_secs(20), || {
        let listed = block_on("CRI ListPodSandbox", sandboxes_in(&socket, NAMESPACE));
        listed.ok().and_then(|l| l.first().cloned())
    });
    let recorded = records(&n);
    let meanwhile = runtime(&cfg);
    let listed_meanwhile = block_on("CRI ListPodSandbox", sandboxes_in(&socket, NAMESPACE));
    stuck.sigkill();
    drop(proxy);
    // a read-only run removes nothing but its own canary: it names the proven leftover
    let read_only = deep(&cfg);
    let listed_read_only = block_on("CRI ListPodSandbox", sandboxes_in(&socket, NAMESPACE));
    let after = runtime(&cfg);
    let listed_after = block_on("CRI ListPodSandbox", sandboxes_in(&socket, NAMESPACE));
    let left = left_of(&n, &canary);
    if !left.is_empty() {
        let _ = block_on(
            "remove the canary",
            support::cri::remove_pod(&socket, &canary),
        );
    }
    assert_eq!(
        recorded.len(),
        1,
        "recorded before it was made: {recorded:?}"
    );
    meanwhile.expect(0, "runtime.can-create", "pass");
    assert!(
        !has_finding(&meanwhile, "runtime.canary-namespace"),
        "another guard's canary in flight is not reported: {}",
        meanwhile.dump()
    );
    assert_eq!(
        listed_meanwhile,
        Ok(vec![canary.clone()]),
        "left alone while its guard runs"
    );
    read_only
        .expect(0, "runtime.canary-namespace", "warn")
        .mentions(
            "runtime.canary-namespace",
            &[
                &canary,
                "left by a guard that died",
                "not removed by a read-only run",
            ],
        );
    assert_eq!(
        listed_read_only,
        Ok(vec![canary.clone()]),
        "a read-only run sweeps nothing"
    );
    let removed = format!("removed canary {canary} (left by a guard that died");
    after
        .expect(0, "runtime.can-create", "pass")
        .mentions("runtime.can-create", &[&removed, "no longer runs"]);
    assert_eq!(listed_after, Ok(vec![]));
    assert_eq!(left, Vec::<String>::new());
    assert_eq!(records(&n), Vec::<String>::new(), "its record went with it");
}

#[test]
fn c06_a_canary_cut_off_by_its_timeout_leaves_nothing_after_the_cleanup() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = node("c6");
    let out = deep(&config(&n, |c| c.canary_timeout("1ms")));
    out.expect(1, "runtime.can-create", "fail")
        .mentions("runtime.can-create", &["within 1ms"]);
    // containerd may finish the sandbox after the guard stopped waiting: the cleanup, or
    // the next repairing run's sweep (its record proves it), removes it and the record
    let next = runtime(&config(&n, |c| c));
    next.expect(0, "runtime.can-create", "pass");
    let listed = block_on("CRI ListPodSandbox", sandboxes_in(&n.t.socket(), NAMESPACE));
    assert_eq!(listed, Ok(vec![]), "{}", next.dump());
    assert_eq!(records(&n), Vec::<String>::new(), "{}", next.dump());
    assert_eq!(n.ctrd.restarts(), 0);
}

/// A sandbox of kubelet's in the canary's namespace whose pod uid a dead guard's record
/// names (a uid anyone may set): kubelet's labels alone rule it out. Neither `guard
/// runtime` nor `verify --repair --deep` stops or removes it, and each says why.
#[test]
fn c07_a_kubelet_sandbox_a_dead_guards_record_names_is_never_removed() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    use containerd_guard::host::Host;
    use containerd_guard::state::{canary::CanaryRecord, StateDir};
    let n = node("c7");
    let cfg = config(&n, |c| c);
    let socket = n.t.socket();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let state = StateDir::open(&Host::live(), &n.t.guard_state_dir()).unwrap();
    let uid = support::random_uuid().replace('-', "");
    let record = CanaryRecord::new(&uid, gone.id(), 1, state.boot_id());
    state.write_canary(&record).unwrap();
    let labels = [
        ("io.kubernetes.pod.name", "kubelets"),
        ("io.kubernetes.pod.namespace", NAMESPACE),
        ("io.kubernetes.pod.uid", uid.as_str()),
    ];
    let started =
        support::cri::start_labelled_pod_of_uid(&socket, "kubelets", NAMESPACE, &uid, &labels);
    let planted = block_on("RunPodSandbox", started).unwrap();
    let runs = [
        ("runtime", runtime(&cfg)),
        (
            "verify --repair --deep",
            Guard::with_config(&cfg).run(&["--json", "verify", "--repair", "--deep"]),
        ),
    ];
    let state_after = block_on(
        "PodSandboxStatus",
        support::cri::sandbox_state(&socket, &planted),
    );
    let _ = block_on("remove a pod", support::cri::remove_pod(&socket, &planted));
    assert_eq!(state_after.as_deref(), Ok("SANDBOX_READY"));
    for (command, out) in &runs {
        out.expect(0, "runtime.canary-namespace", "warn").mentions(
            "runtime.canary-namespace",
            &[&planted, "carries kubelet's labels"],
        );
        assert!(
            !out.finding_text("runtime.can-create").contains(&planted),
            "{command} named it as its own: {}",
            out.dump()
        );
    }
}
