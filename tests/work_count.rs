//! What `guard verify` costs on a healthy node does not grow with its pods: counted, not
//! timed, so it cannot flake (docs/performance.md has the times). With more pods it makes
//! the same gRPC calls (each method counted at a gRPC proxy in front of containerd's
//! socket), never `Tasks.List` (containerd asks every shim in turn), opens no `/proc/PID`
//! file of any process but the one serving that socket and no container's `cgroup.procs`
//! (kubelet's cgroup tree is listed instead, and every container in it is vouched for by
//! CRI), and not containerd's `mountinfo` when it shares the guard's mount namespace
//! (`strace`). Its own mount table (`/proc/self/mountinfo`) is opened at most once, as
//! often with a few hundred more mounts as with none. An orphaned payload's table
//! (`/proc/PID/mountinfo`, where the orphan look finds its root filesystem) is opened once
//! a run and read whole under its cap, only to its cap with thousands of mounts in the
//! payload's own mount namespace (`strace -y`: the bytes read from that file). A family
//! that adds a per-pod round trip, a read of every process or a second read of a mount
//! table fails here. Root only; a real containerd with CRI, runc and kubelet's cgroupfs
//! layout.

use testkit as support;

use containerd_guard::checks::orphans::facts::MOUNTINFO_CAP;
use containerd_guard::host::statmount;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;
use support::grpc_proxy::GrpcProxy;
use support::hygiene::CgroupPayload;
use support::suite::hygiene::serial;
use support::workload::{HygieneNode, Pod};
use support::{poll_until, root_or_skip, Guard};

const TOOLS: &[&str] = &["containerd", "ctr", "runc", "gcc", "strace"];
const WAIT: Duration = Duration::from_secs(30);
const TASKS_LIST: &str = "/containerd.services.tasks.v1.Tasks/List";
const TASKS_GET: &str = "/containerd.services.tasks.v1.Tasks/Get";
const CONTAINERS_LIST: &str = "/containerd.services.containers.v1.Containers/List";

/// What one `guard verify` did.
#[derive(Debug)]
struct Work {
    /// gRPC calls by method (`/containerd.services.tasks.v1.Tasks/List`), with how many
    /// times each reached the proxy.
    calls: BTreeMap<String, usize>,
    /// `/proc/PID/...` files opened, by PID.
    proc_opens: BTreeMap<u32, Vec<String>>,
    /// The `cgroup.procs` files opened.
    cgroup_procs: Vec<String>,
    /// The kubepods cgroup directories opened (listed).
    kubepods_dirs: usize,
    /// The report's `runtime.orphans` line (how many container cgroups the look saw).
    orphans_line: String,
}

fn work_of(cfg: &Path, proxy: &GrpcProxy, dir: &Path, label: &str) -> Work {
    let trace = dir.join(format!("strace.{label}"));
    let before = proxy.counts();
    let out = Guard::with_config(cfg)
        .tracing_opens(&trace)
        .run(&["verify"]);
    // (the tree's containerd root is not a mount: verify fails volume.mounted, as it should)
    for healthy in ["ok    runtime.orphans", "ok    runtime.leaked-tasks"] {
        assert!(out.stdout.contains(healthy), "{healthy}?\n{}", out.dump());
    }
    let calls: BTreeMap<String, usize> = proxy
        .counts()
        .into_iter()
        .filter_map(|(method, n)| {
            let this_run = n - before.get(&method).copied().unwrap_or(0);
            (this_run > 0).then_some((method, this_run))
        })
        .collect();
    let text = std::fs::read_to_string(&trace).unwrap();
    let mut proc_opens: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    let (mut cgroup_procs, mut kubepods_dirs) = (Vec::new(), 0);
    for line in text.lines() {
        let Some(path) = line.split('"').nth(1) else {
            continue;
        };
        // the path opened: the new fd's (`= 5</sys/fs/cgroup/...>`: the cgroup tree is
        // opened relative to its parent), else the argument
        let opened = line
            .rsplit_once(" = ")
            .and_then(|(_, fd)| fd.split_once('<'))
            .and_then(|(_, p)| p.strip_suffix('>'))
            .unwrap_or(path);
        if opened.ends_with("/cgroup.procs") {
            cgroup_procs.push(opened.to_string());
        } else if opened.starts_with("/sys/fs/cgroup/") && opened.contains("/kubepods") {
            kubepods_dirs += 1;
        }
        let mut parts = path.strip_prefix("/proc/").unwrap_or("").splitn(2, '/');
        if let (Some(Ok(pid)), Some(file)) = (parts.next().map(str::parse), parts.next()) {
            proc_opens.entry(pid).or_default().push(file.to_string());
        }
    }
    let orphans_line = out
        .stdout
        .lines()
        .find(|l| l.contains("runtime.orphans"))
        .unwrap_or_default()
        .to_string();
    Work {
        calls,
        proc_opens,
        cgroup_procs,
        kubepods_dirs,
        orphans_line,
    }
}

/// Starts `n` pods, each with a running container.
fn pods(node: &HygieneNode, from: usize, n: usize) -> Vec<Pod> {
    (from..from + n)
        .map(|i| {
            let name = format!("w{i}");
            let pod = node.pod(&name);
            let cid = pod.start_locker("payload", &node.host_dir(&name), "lock");
            pod.wait_container(&cid, "RUNNING", WAIT, |i| i.running());
            pod
        })
        .collect()
}

#[test]
fn w01_verify_on_a_healthy_node_makes_the_same_calls_and_reads_no_pod_process_whatever_its_pods() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    // (not beside w03: its orphans, in the same kubepods tree, would be this node's too)
    let _serial = serial();
    let node = HygieneNode::start();
    let proxy = GrpcProxy::counting(&node.socket(), &node.t.path().join("counting.sock"));
    let cfg = node
        .t
        .write_guard_config_with(|c| c.containerd_socket(&proxy.socket));
    let mut running = pods(&node, 0, 1);
    let few = work_of(&cfg, &proxy, node.t.path(), "few");
    running.extend(pods(&node, 1, 5));
    let more = work_of(&cfg, &proxy, node.t.path(), "more");

    assert_ne!(
        few.orphans_line, more.orphans_line,
        "the second look saw more container cgroups (else this test proves nothing)"
    );
    assert!(
        !few.calls.is_empty(),
        "no gRPC call reached the proxy: {few:?}"
    );
    assert_eq!(
        few.calls, more.calls,
        "the gRPC calls of guard verify changed from 1 pod to 6: a call per pod?"
    );
    assert!(
        !more.calls.contains_key(TASKS_LIST),
        "Tasks.List asks every shim in turn: {:?}",
        more.calls
    );
    // which tasks containerd keeps comes from its runtime's bundle directories, read
    // locally; Containers.List would read every container's record on containerd's side
    assert!(
        !more.calls.contains_key(CONTAINERS_LIST) && !more.calls.contains_key(TASKS_GET),
        "a healthy node's containers are vouched for by CRI and its task bundles: {:?}",
        more.calls
    );
    // the guard knows containerd as the peer of its socket: here the proxy, which runs in
    // this test process (the real containerd behind it is not read at all)
    let containerd = std::process::id();
    let others: Vec<_> = more
        .proc_opens
        .iter()
        .filter(|(pid, _)| **pid != containerd)
        .collect();
    assert!(
        others.is_empty(),
        "a healthy node's pod processes are not read one by one (kubelet's cgroup tree is \
         listed instead): {others:?}"
    );
    assert!(
        more.cgroup_procs.is_empty(),
        "every container is vouched for by CRI: no cgroup.procs is read: {:?}",
        more.cgroup_procs
    );
    let of_containerd = more
        .proc_opens
        .get(&containerd)
        .cloned()
        .unwrap_or_default();
    assert!(
        !of_containerd.iter().any(|f| f == "mountinfo"),
        "containerd shares the guard's mount namespace here: the guard's own mount table \
         (read for the volume checks) serves the stale check, no second read: {of_containerd:?}"
    );
    assert!(
        more.kubepods_dirs > few.kubepods_dirs,
        "the look listed kubelet's tree, which grew with the pods ({} vs {} directories)",
        more.kubepods_dirs,
        few.kubepods_dirs
    );
    drop(running);
}

/// Shell lines that mount one tmpfs on `dir` and bind it into itself `doublings` times:
/// each `--rbind` copies every mount made so far, so the mount namespace they run in holds
/// `2^doublings` more mounts (a node's table grows the same way, with each pod's mounts),
/// with few processes started.
fn doubled_mounts(dir: &Path, doublings: u32) -> String {
    format!(
        "d='{dir}'; mount -t tmpfs -o size=64k guard-test-mounts \"$d\"
         i=0; while [ $i -lt {doublings} ]; do mkdir \"$d/$i\"; i=$((i + 1)); done
         i=0; while [ $i -lt {doublings} ]; do mount --rbind \"$d\" \"$d/$i\"; i=$((i + 1)); done",
        dir = dir.display(),
    )
}

/// The `openat`s of `/proc/self/mountinfo` (or `/proc/<the guard's pid>/mountinfo`) in
/// one `guard verify` run in a mount namespace of its own with `2^doublings` more mounts
/// than the host's: the guard's own view of the mount table, whatever its size. There,
/// containerd's root `volume` is a mount point (bound onto itself: the volume look's
/// healthy path; the checks judge the bind mount, which does not matter here).
fn own_mountinfo_opens(cfg: &Path, dir: &Path, volume: &Path, doublings: u32) -> (usize, usize) {
    let trace = dir.join(format!("strace.mounts.{doublings}"));
    let extra = dir.join(format!("extra-mounts.{doublings}"));
    std::fs::create_dir_all(&extra).unwrap();
    // (the doubled mounts go with the namespace)
    let script = format!(
        "set -e; mount --bind '{volume}' '{volume}'
         {mounts}
         wc -l </proc/self/mountinfo >'{extra}.count'
         exec strace -f -qq -e trace=openat -o '{trace}' \"$0\" \"$@\"",
        mounts = doubled_mounts(&extra, doublings),
        extra = extra.display(),
        trace = trace.display(),
        volume = volume.display(),
    );
    let out = Guard::with_config(cfg)
        .wrapped_in(&[
            "unshare",
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
        ])
        .run(&["verify"]);
    assert!(
        out.stdout.contains("ok    runtime.leaked-tasks"),
        "guard verify did not look at the node:\n{}",
        out.dump()
    );
    let mounts = std::fs::read_to_string(format!("{}.count", extra.display()))
        .unwrap_or_else(|e| panic!("the wrapper did not count its mounts: {e}\n{}", out.dump()));
    let text = std::fs::read_to_string(&trace).unwrap();
    // strace -f starts each line with the caller's id: the first is the guard's own pid
    let guard = text.split_whitespace().next().unwrap_or_default();
    let own = [
        "/proc/self/mountinfo".to_string(),
        "/proc/thread-self/mountinfo".to_string(),
        format!("/proc/{guard}/mountinfo"),
    ];
    let opens = text
        .lines()
        .filter_map(|line| line.split('"').nth(1))
        .filter(|path| own.iter().any(|o| o == path))
        .count();
    (opens, mounts.trim().parse().unwrap())
}

/// The `openat`s of `mountinfo` (any process's) in one `guard hygiene`, and whether it
/// looked at containerd's open files (the stale facts: the look happened).
fn hygiene_mountinfo_opens(cfg: &Path, dir: &Path, containerd: u32) -> (Vec<String>, bool) {
    let trace = dir.join("strace.hygiene");
    // (the node's first run labels the sandbox image pinned, then looks again: the one
    // measured is the next, a healthy node's)
    Guard::with_config(cfg).run(&["hygiene"]);
    let out = Guard::with_config(cfg)
        .tracing_opens(&trace)
        .run(&["hygiene"]);
    assert!(
        out.stdout.contains("ok    runtime.leaked-tasks"),
        "guard hygiene did not look at the node:\n{}",
        out.dump()
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    let opened: Vec<&str> = text.lines().filter_map(|l| l.split('"').nth(1)).collect();
    let fds = format!("/proc/{containerd}/fd");
    (
        opened
            .iter()
            .filter(|p| p.ends_with("/mountinfo"))
            .map(|p| p.to_string())
            .collect(),
        opened.iter().any(|p| p.starts_with(&fds)),
    )
}

#[test]
fn w02_verify_and_hygiene_read_a_mount_table_at_most_once_whatever_its_size() {
    let Some(_root) = root_or_skip(&[TOOLS, &["unshare", "mount"]].concat()) else {
        return;
    };
    // (on a volume: the first hygiene run pins the sandbox image, which it does only onto
    // the verified volume)
    let node = HygieneNode::on_a_volume();
    let cfg = node.t.write_guard_config_with(|c| c);
    let (dir, volume) = (node.t.path(), node.t.volume_path());
    let (few, few_mounts) = own_mountinfo_opens(&cfg, dir, &volume, 0);
    let (many, many_mounts) = own_mountinfo_opens(&cfg, dir, &volume, 9);
    assert!(
        many_mounts >= few_mounts + 500,
        "the second run's table was not larger ({few_mounts} vs {many_mounts} mounts): \
         this test proves nothing"
    );
    assert!(
        few <= 1 && few == many,
        "guard verify opened its own mountinfo {few} time(s) with {few_mounts} mounts and \
         {many} time(s) with {many_mounts}: at most once, whatever the table's size"
    );
    // `guard hygiene` has no volume look: containerd's databases are located on their
    // mounts by the kernel, one by one, where it can (else containerd's table, once)
    let (hygiene, looked) = hygiene_mountinfo_opens(&cfg, dir, node.ctrd.pid());
    assert!(
        looked,
        "guard hygiene did not look at containerd's open files"
    );
    assert!(
        hygiene.len() <= 1,
        "guard hygiene read a mount table {} times: {hygiene:?}",
        hygiene.len()
    );
    // where the kernel describes one mount by its path (statmount with the mount's
    // source), a healthy volume and containerd's databases are judged without the table
    if statmount::mount_holding(Path::new("/"), false).is_some() {
        assert_eq!(
            many, 0,
            "this kernel describes the volume's mount by its path: the healthy look needs \
             no mount table"
        );
        assert!(
            hygiene.is_empty(),
            "this kernel describes the databases' mounts: guard hygiene needs no mount \
             table, and read {hygiene:?}"
        );
    }
}

/// A process in a container cgroup of its own with no task and no shim (what an orphan is
/// to the look), in a mount namespace of its own with `2^doublings` more mounts than the
/// host's: `unshare -m`, then [`doubled_mounts`], then
/// `exec sleep`. Its mounts go with it when it is killed (on drop).
fn payload_with_mounts(dir: &Path, doublings: u32) -> CgroupPayload {
    let extra = dir.join(format!("payload-mounts.{doublings}"));
    std::fs::create_dir_all(&extra).unwrap();
    let script = format!(
        "set -e; {mounts}
         exec sleep 600",
        mounts = doubled_mounts(&extra, doublings),
    );
    let payload = CgroupPayload::spawn(
        Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c"])
            .arg(&script),
    );
    // ready once it runs `sleep`; a zombie (the script failed) never will
    let stat = format!("/proc/{}/stat", payload.pid);
    let ready = poll_until("the payload to make its mounts", WAIT, || {
        let stat = std::fs::read_to_string(&stat).unwrap_or_default();
        match stat.rsplit_once(") ") {
            Some((_, state)) if state.starts_with('Z') => Some(false),
            Some((name, _)) => name.ends_with("(sleep").then_some(true),
            None => Some(false),
        }
    });
    assert!(ready, "the payload's script failed (its stderr is above)");
    payload
}

/// How often one traced run opened `/proc/<pid>/mountinfo`, and the bytes it read from it,
/// from `strace -ff -y`: one file per thread (no call split across lines), each fd shown
/// with its path (`read(7</proc/42/mountinfo>, ...) = 4096`).
fn mountinfo_reads(trace: &Path, pid: i32) -> (usize, u64) {
    let file = format!("/proc/{pid}/mountinfo");
    let (path_arg, fd_arg) = (format!("\"{file}\""), format!("<{file}>,"));
    let prefix = format!("{}.", trace.file_name().unwrap().to_string_lossy());
    let (mut opens, mut bytes) = (0, 0);
    for entry in std::fs::read_dir(trace.parent().unwrap())
        .unwrap()
        .flatten()
    {
        if !entry.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        for line in std::fs::read_to_string(entry.path()).unwrap().lines() {
            let Some((call, args)) = line.split_once('(') else {
                continue;
            };
            let first_arg = args.split_once(' ').map_or(args, |(a, _)| a);
            if call == "openat" && args.contains(&path_arg) {
                opens += 1;
            } else if READS.contains(&call) && first_arg.ends_with(&fd_arg) {
                // (an error returns `-1 EAGAIN (...)`, no byte)
                let returned = line.rsplit_once(") = ").map(|(_, n)| n.trim());
                bytes += returned.and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
            }
        }
    }
    (opens, bytes)
}

/// The calls that read a file through its fd, all traced.
const READS: [&str; 4] = ["read", "pread64", "readv", "preadv"];

/// The slack past the cap: one read's buffer, for a reader that stops after the read that
/// reached the cap rather than at the cap.
const ONE_READ: u64 = 64 << 10;

#[test]
fn w03_the_orphan_look_reads_each_payloads_mount_table_once_and_only_to_its_cap() {
    let Some(_root) = root_or_skip(&[TOOLS, &["unshare", "mount", "sleep"]].concat()) else {
        return;
    };
    if support::containerd::containerd_dir().is_some() {
        // how a payload's mount table is read does not depend on containerd's version:
        // the suite's own containerd proves it; the other versions' runs skip it
        return;
    }
    // (not beside w01, whose healthy node has no orphan)
    let _serial = serial();
    let node = HygieneNode::start();
    let cfg = node.t.write_guard_config_with(|c| c);
    let dir = node.t.path();
    let (small, large) = (payload_with_mounts(dir, 0), payload_with_mounts(dir, 13));
    let trace = dir.join("strace.payloads");
    let out = Guard::with_config(&cfg)
        .wrapped_in(&[
            "strace",
            "-ff",
            "-qq",
            "-y",
            "-e",
            &format!("trace=openat,{}", READS.join(",")),
            "-o",
            &trace.display().to_string(),
        ])
        .run(&["verify", "--json"]);
    // both were looked at: confirmed orphans, named by pid
    out.expect(1, "runtime.orphans", "fail").mentions(
        "runtime.orphans",
        &[
            &format!("pid {} (", small.pid),
            &format!("pid {} (", large.pid),
        ],
    );
    let table_size = |p: &CgroupPayload| {
        let table = std::fs::read(format!("/proc/{}/mountinfo", p.pid)).unwrap();
        table.len() as u64
    };
    let (small_size, large_size) = (table_size(&small), table_size(&large));
    assert!(
        small_size < MOUNTINFO_CAP && large_size > 2 * MOUNTINFO_CAP,
        "the payloads' mount tables are {small_size} and {large_size} bytes, not one under \
         the cap ({MOUNTINFO_CAP}) and one well over it: this test proves nothing"
    );
    let (small_opens, small_read) = mountinfo_reads(&trace, small.pid);
    let (large_opens, large_read) = mountinfo_reads(&trace, large.pid);
    assert_eq!(
        (small_opens, small_read),
        (1, small_size),
        "a payload's mount table under the cap is opened once a run and read whole \
         ({small_size} bytes)"
    );
    assert!(
        large_opens <= 1 && large_read <= MOUNTINFO_CAP + ONE_READ,
        "guard verify opened the {large_size}-byte mount table of pid {} {large_opens} \
         time(s) and read {large_read} bytes of it: at most once a run and to its cap \
         ({MOUNTINFO_CAP} bytes), whatever its size",
        large.pid
    );
}
