//! The two faults the guard repairs, made for real on a containerd, and the
//! kernel's view to assert them with:
//!
//! - a **leaked task** ([`make_leaked_task`]): a STOPPED task with a dead PID that nothing
//!   reaps; CRI says EXITED, and RemovePodSandbox fails with FailedPrecondition
//!   "cannot delete running task" until containerd's `Tasks.Delete` clears it;
//! - an **orphaned payload** ([`make_orphan`]): the pod's shim and the container's bundle
//!   gone across a containerd restart, the payload alive with PPID 1 in its container
//!   cgroup, unknown to containerd (no task) while CRI says EXITED, still holding its
//!   `flock`, so a new container of the same workload cannot take it.
//!
//! Cgroups: the v1 hierarchies under /sys/fs/cgroup/<controller> and cgroup2 at
//! /sys/fs/cgroup/unified (or /sys/fs/cgroup itself on a pure cgroup2 host), all found in
//! /proc/self/mountinfo. Paths given as `cgroup_rel` are relative to each hierarchy's root,
//! e.g. `/kubepods/besteffort/pod<uid>/<id>`.

use super::locks::pid_alive;
use super::runtime::block_on;
use super::workload::{ctr_k8s_ok, ContainerInfo, Pod, LOCKER_IMAGE};
use super::{poll_until, Containerd, TempRoot};
use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::{DeleteTaskRequest, GetRequest};
use containerd_guard::containerd::client::{connect, request, K8S_NS};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// cgroups

/// Mount points of every cgroup hierarchy (v1 controllers and cgroup2), from mountinfo.
pub fn cgroup_hierarchies() -> Vec<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut out: Vec<PathBuf> = text
        .lines()
        .filter_map(|l| {
            let (pre, post) = l.split_once(" - ")?;
            let fstype = post.split(' ').next()?;
            let mp = pre.split(' ').nth(4)?;
            matches!(fstype, "cgroup" | "cgroup2").then(|| PathBuf::from(super::decode_octal(mp)))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The v1 hierarchy holding `controller` (e.g. `freezer`), if mounted.
pub fn v1_hierarchy(controller: &str) -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    text.lines().find_map(|l| {
        let (pre, post) = l.split_once(" - ")?;
        let mut f = post.split(' ');
        if f.next()? != "cgroup" {
            return None;
        }
        let opts = f.nth(1)?;
        let mp = pre.split(' ').nth(4)?;
        opts.split(',')
            .any(|o| o == controller)
            .then(|| PathBuf::from(super::decode_octal(mp)))
    })
}

fn join_rel(h: &Path, rel: &str) -> PathBuf {
    h.join(rel.trim_start_matches('/'))
}

fn read_pids(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// PIDs in `cgroup_rel` (its own `cgroup.procs`, not its children's), the union over the
/// v1 hierarchies and cgroup2, sorted.
pub fn cgroup_procs(cgroup_rel: &str) -> Vec<i32> {
    let mut out: Vec<i32> = cgroup_hierarchies()
        .iter()
        .flat_map(|h| read_pids(&join_rel(h, cgroup_rel).join("cgroup.procs")))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether the directory `cgroup_rel` exists in any hierarchy.
pub fn cgroup_exists(cgroup_rel: &str) -> bool {
    cgroup_hierarchies()
        .iter()
        .any(|h| join_rel(h, cgroup_rel).is_dir())
}

/// Every directory at or below `cgroup_rel` in hierarchy `h`, deepest first.
fn subtree(h: &Path, cgroup_rel: &str) -> Vec<PathBuf> {
    fn walk(d: &Path, out: &mut Vec<PathBuf>) {
        if let Ok(rd) = std::fs::read_dir(d) {
            for e in rd.flatten() {
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    walk(&e.path(), out);
                }
            }
        }
        out.push(d.to_path_buf());
    }
    let mut out = Vec::new();
    let top = join_rel(h, cgroup_rel);
    if top.is_dir() {
        walk(&top, &mut out);
    }
    out
}

/// PIDs anywhere in the subtree `cgroup_rel`, all hierarchies.
pub fn cgroup_tree_procs(cgroup_rel: &str) -> Vec<i32> {
    let mut out: Vec<i32> = cgroup_hierarchies()
        .iter()
        .flat_map(|h| subtree(h, cgroup_rel))
        .flat_map(|d| read_pids(&d.join("cgroup.procs")))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Kills every process in the subtree `cgroup_rel` the way a clean teardown must (a
/// process cannot fork away meanwhile): v1 freezer FROZEN, SIGKILL each PID, THAWED, then
/// waits (bounded, 10 s) until no hierarchy lists a PID. Never panics; returns whether the
/// subtree ended empty.
pub fn kill_cgroup_tree(cgroup_rel: &str) -> bool {
    let freezer = v1_hierarchy("freezer").map(|h| join_rel(&h, cgroup_rel));
    let state = freezer.as_ref().map(|f| f.join("freezer.state"));
    if let Some(state) = state.as_ref().filter(|s| s.exists()) {
        let _ = std::fs::write(state, "FROZEN");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline
            && std::fs::read_to_string(state).unwrap_or_default().trim() == "FREEZING"
        {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut empty = false;
    while Instant::now() < deadline {
        let pids = cgroup_tree_procs(cgroup_rel);
        if pids.is_empty() {
            empty = true;
            break;
        }
        for pid in pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        if let Some(state) = state.as_ref().filter(|s| s.exists()) {
            let _ = std::fs::write(state, "THAWED");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if let Some(state) = state.as_ref().filter(|s| s.exists()) {
        let _ = std::fs::write(state, "THAWED");
    }
    empty
}

/// rmdir of `cgroup_rel` in every hierarchy where it is an empty cgroup; errors ignored.
pub fn rmdir_cgroup(cgroup_rel: &str) {
    for h in cgroup_hierarchies() {
        let _ = std::fs::remove_dir(join_rel(&h, cgroup_rel));
    }
}

/// [`kill_cgroup_tree`] then rmdir of the subtree in every hierarchy, deepest first
/// (bounded retries: a cgroup whose last process just died may still be busy). Never
/// panics; returns whether nothing of the subtree is left.
pub fn remove_cgroup_tree(cgroup_rel: &str) -> bool {
    kill_cgroup_tree(cgroup_rel);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for h in cgroup_hierarchies() {
            for d in subtree(&h, cgroup_rel) {
                let _ = std::fs::remove_dir(&d);
            }
        }
        if !cgroup_exists(cgroup_rel) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------------------
// processes, locks, mounts

/// The parent PID of `pid` (from /proc/<pid>/stat), if it exists.
pub fn ppid(pid: i32) -> Option<i32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// `/proc/<pid>/cmdline` split at NULs.
pub fn cmdline(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// Live `containerd-shim-runc-v2` processes whose `-id` is one of `ids`, as (pid, id).
pub fn shims_of(ids: &[String]) -> Vec<(i32, String)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let argv = cmdline(pid);
            if !argv.first()?.ends_with("containerd-shim-runc-v2") {
                return None;
            }
            let id = argv.windows(2).find(|w| w[0] == "-id")?[1].clone();
            (ids.contains(&id) && pid_alive(pid)).then_some((pid, id))
        })
        .collect()
}

/// SIGKILLs the shims serving `ids` and waits (bounded) until they are gone. Never panics.
pub fn kill_shims_of(ids: &[String]) {
    let shims = shims_of(ids);
    for (pid, _) in &shims {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while shims.iter().any(|(p, _)| pid_alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Detaches (MNT_DETACH) every mount below `dir` whose path names one of `ids`, deepest
/// first. Never panics.
pub fn unmount_under(dir: &Path, ids: &[String]) {
    let text = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let base = dir.to_string_lossy().into_owned();
    let mut mps: Vec<String> = text
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(super::decode_octal))
        .filter(|mp| mp.starts_with(&base) && ids.iter().any(|id| mp.contains(id.as_str())))
        .collect();
    mps.sort_by_key(|m| std::cmp::Reverse(m.len()));
    for mp in mps {
        let _ = nix::mount::umount2(mp.as_str(), nix::mount::MntFlags::MNT_DETACH);
    }
}

/// PIDs holding a granted `flock`/POSIX lock on `path`, from /proc/locks (matched by the
/// file's device and inode). The PID is the process that took the lock.
pub fn lock_holders(path: &Path) -> Vec<i32> {
    let mut out = super::locks::holders_of(path, &["FLOCK", "POSIX", "OFDLCK"]);
    out.sort();
    out.dedup();
    out
}

// ---------------------------------------------------------------------------------------
// containerd's view

/// One row of `ctr -n k8s.io tasks ls`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtrTask {
    pub id: String,
    pub pid: i32,
    /// `RUNNING`, `STOPPED`, `CREATED`, `PAUSED`, `UNKNOWN`.
    pub status: String,
}

/// `ctr -n k8s.io tasks ls`, parsed.
pub fn ctr_tasks(socket: &Path) -> Vec<CtrTask> {
    ctr_k8s_ok(socket, &["tasks", "ls"])
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some(CtrTask {
                id: f.first()?.to_string(),
                pid: f.get(1)?.parse().ok()?,
                status: f.get(2)?.to_string(),
            })
        })
        .collect()
}

/// The `ctr tasks ls` row of task `id`, if listed.
pub fn ctr_task(socket: &Path, id: &str) -> Option<CtrTask> {
    ctr_tasks(socket).into_iter().find(|t| t.id == id)
}

/// containerd `Tasks.Get` in k8s.io: (pid, status code) or the gRPC code (`NotFound` when
/// containerd has no task for the container).
pub fn task_get(socket: &Path, id: &str) -> Result<(u32, i32), tonic::Code> {
    block_on(&format!("containerd Tasks.Get {id}"), async {
        let conn = connect(socket, Duration::from_secs(3))
            .await
            .map_err(|_| tonic::Code::Unavailable)?;
        let mut c = TasksClient::new(conn.channel.clone());
        let req = GetRequest {
            container_id: id.to_string(),
            exec_id: String::new(),
        };
        let r = c
            .get(request(req, Some(K8S_NS), Duration::from_secs(10)))
            .await
            .map_err(|s| s.code())?
            .into_inner();
        let p = r.process.ok_or(tonic::Code::Internal)?;
        Ok((p.pid, p.status))
    })
}

/// containerd `Tasks.Delete{container_id}` in k8s.io (what clears a leaked task).
pub fn task_delete(socket: &Path, id: &str) -> Result<(), tonic::Code> {
    block_on(&format!("containerd Tasks.Delete {id}"), async {
        let conn = connect(socket, Duration::from_secs(3))
            .await
            .map_err(|_| tonic::Code::Unavailable)?;
        let mut c = TasksClient::new(conn.channel.clone());
        let req = DeleteTaskRequest {
            container_id: id.to_string(),
        };
        c.delete(request(req, Some(K8S_NS), Duration::from_secs(10)))
            .await
            .map(|_| ())
            .map_err(|s| s.code())
    })
}

// ---------------------------------------------------------------------------------------
// the faults

const FAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A leaked task for container `cid` of `pod` (running): CRI StopContainer (CRI reaps its
/// own task), `ctr tasks start -d --null-io` (a new task for the same container, unknown
/// to CRI), `ctr tasks kill -s SIGKILL`, then polls until `ctr tasks ls` lists it STOPPED.
/// Returns that row (its PID is dead).
pub fn make_leaked_task(pod: &Pod, cid: &str) -> CtrTask {
    pod.stop_container(cid, 10)
        .unwrap_or_else(|e| panic!("StopContainer {cid}: {e:?}"));
    pod.wait_container(cid, "EXITED", FAULT_TIMEOUT, |i| i.exited());
    poll_until("CRI to delete its task", FAULT_TIMEOUT, || {
        (task_get(&pod.socket, cid) == Err(tonic::Code::NotFound)).then_some(())
    });
    leak_again(pod, cid)
}

/// Container `cid`, EXITED with no task (CRI reaped it, or the guard deleted the leak),
/// gets a leaked task again: one started by hand, which CRI never reaps, then killed.
pub fn leak_again(pod: &Pod, cid: &str) -> CtrTask {
    ctr_k8s_ok(&pod.socket, &["tasks", "start", "-d", "--null-io", cid]);
    ctr_k8s_ok(&pod.socket, &["tasks", "kill", "-s", "SIGKILL", cid]);
    poll_until(
        &format!("`ctr tasks ls` to show {cid} STOPPED"),
        FAULT_TIMEOUT,
        || ctr_task(&pod.socket, cid).filter(|t| t.status == "STOPPED"),
    )
}

/// The bundle (state) directory of a task: `<state>/io.containerd.runtime.v2.task/k8s.io/<id>`.
pub fn bundle_dir(state: &Path, id: &str) -> PathBuf {
    state.join("io.containerd.runtime.v2.task/k8s.io").join(id)
}

/// An orphaned payload from container `cid` of `pod` (running): stops containerd
/// (SIGTERM; shims live on), SIGKILLs the pod's shim (`-id <sandbox id>`), detaches the
/// container's rootfs and removes its bundle directory, starts containerd again and waits
/// until CRI reports the container EXITED. Returns the payload's PIDs (the container
/// cgroup's `cgroup.procs`), asserted unchanged and alive across the fault.
pub fn make_orphan(ctrd: &mut Containerd, t: &TempRoot, pod: &Pod, cid: &str) -> Vec<i32> {
    let cg = pod.container_cgroup(cid);
    let before = cgroup_procs(&cg);
    assert!(!before.is_empty(), "no process in {cg} before the fault");
    let shims = shims_of(std::slice::from_ref(&pod.sandbox_id));
    assert_eq!(
        shims.len(),
        1,
        "one shim for pod {}: {shims:?}",
        pod.sandbox_id
    );
    ctrd.stop();
    kill_shims_of(std::slice::from_ref(&pod.sandbox_id));
    let bundle = bundle_dir(&t.state_path(), cid);
    assert!(bundle.is_dir(), "no bundle at {}", bundle.display());
    unmount_under(&bundle, &[cid.to_string()]);
    std::fs::remove_dir_all(&bundle).unwrap_or_else(|e| panic!("remove {}: {e}", bundle.display()));
    ctrd.start_again();
    super::workload::wait_cri(&pod.socket);
    let info = poll_until(
        &format!("CRI to report {cid} EXITED after the restart"),
        FAULT_TIMEOUT,
        || pod.container_state(cid).ok().filter(|i| i.exited()),
    );
    let after = cgroup_procs(&cg);
    assert_eq!(
        after,
        before,
        "the payload's PIDs changed across the fault (CRI: {info:?})\ncontainerd log:\n{}",
        ctrd.log_tail()
    );
    after
}

/// What a new locker container on the same file did.
#[derive(Debug, Clone)]
pub struct LockProbe {
    pub got_lock: bool,
    /// CRI's view of the probe when decided.
    pub info: ContainerInfo,
    pub log: String,
    pub elapsed: Duration,
}

/// Starts a new locker container named `name` in `pod` on `<host_dir>/<file>` and polls
/// until it either runs with "locked" in its log (true) or exits (false: expected exit 1
/// "cannot acquire lock ... Resource temporarily unavailable"); then removes it.
pub fn probe_lock(pod: &Pod, name: &str, host_dir: &Path, file: &str) -> LockProbe {
    let start = Instant::now();
    let path = format!("/data/{file}");
    let cid = pod.start_container(name, LOCKER_IMAGE, &[&path], host_dir);
    let (got_lock, info) = poll_until(
        &format!("probe {name} to lock or exit"),
        FAULT_TIMEOUT,
        || {
            let i = pod.container_state(&cid).ok()?;
            if i.exited() {
                return Some((false, i));
            }
            (i.running() && pod.log(name).contains("locked")).then_some((true, i))
        },
    );
    let elapsed = start.elapsed();
    let log = pod.log(name);
    let _ = pod.stop_container(&cid, 0);
    let _ = pod.remove_container(&cid);
    LockProbe {
        got_lock,
        info,
        log,
        elapsed,
    }
}

/// Whether a new locker container in `pod` gets the lock on `<host_dir>/<file>`.
pub fn new_container_gets_lock(pod: &Pod, name: &str, host_dir: &Path, file: &str) -> bool {
    probe_lock(pod, name, host_dir, file).got_lock
}

/// A real `sleep` in a container cgroup laid out as kubelet's cgroupfs driver lays it out
/// (`/kubepods/besteffort/pod<uid>/<64 hex>`, every hierarchy), with no task and no shim:
/// what an orphan looks like to the rules. Killed and removed on drop.
pub struct CgroupPayload {
    pub container_id: String,
    /// Its pod's cgroup, made for it alone: removed whole when it is dropped.
    pub pod: String,
    pub cgroup: String,
    pub pid: i32,
    child: std::process::Child,
}

impl CgroupPayload {
    pub fn start() -> CgroupPayload {
        CgroupPayload::spawn(std::process::Command::new("sleep").arg("600"))
    }

    /// As [`CgroupPayload::start`], the payload being `payload` (which may prepare itself,
    /// then `exec sleep`): it is moved into the cgroup once spawned.
    pub fn spawn(payload: &mut std::process::Command) -> CgroupPayload {
        let container_id = format!("{}{}", super::unique("", 32), super::unique("", 32));
        let pod = super::workload::pod_cgroup(&super::random_uuid());
        let cgroup = format!("{pod}/{container_id}");
        let child = payload
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {payload:?}: {e}"));
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

impl CgroupPayload {
    /// Another `sleep`, put into this payload's cgroup (every hierarchy): a process the
    /// rules never judged. The caller kills and reaps it.
    pub fn join_another(&self) -> std::process::Child {
        let child = std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id();
        for h in cgroup_hierarchies()
            .into_iter()
            .filter(|h| !h.ends_with("cpuset"))
        {
            let procs = h
                .join(self.cgroup.trim_start_matches('/'))
                .join("cgroup.procs");
            std::fs::write(&procs, pid.to_string())
                .unwrap_or_else(|e| panic!("{}: {e}", procs.display()));
        }
        child
    }
}

impl Drop for CgroupPayload {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        remove_cgroup_tree(&self.pod);
    }
}
