//! Helpers shared by the hygiene scenario files (tests/hygiene_*.rs): one test at a time,
//! the guard's config and runs on a [`HygieneNode`], a bystander pod, tasks made by `ctr`.

use crate as support;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;
use support::hygiene::lock_holders;
use support::locks::pid_alive;
use support::workload::{ctr, HygieneNode, Pod, LOCKER_IMAGE};
use support::{poll_until, run, run_quiet, unique, Guard, GuardConfig, Outcome};

pub const TOOLS: &[&str] = &["containerd", "ctr", "runc", "gcc"];

pub const WAIT: Duration = Duration::from_secs(30);

pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts a locker on `<dir>/lock` and waits until it holds the lock: (container, pid).
pub fn running_locker(pod: &Pod, name: &str, dir: &Path) -> (String, i32) {
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

/// The guard's config for this node ([`TempRoot::write_guard_config`](support::TempRoot)).
pub fn guard_config(n: &HygieneNode) -> PathBuf {
    n.t.write_guard_config()
}

/// [`guard_config`] with the keys `adjust` sets.
pub fn guard_config_with(
    n: &HygieneNode,
    adjust: impl FnOnce(GuardConfig) -> GuardConfig,
) -> PathBuf {
    n.t.write_guard_config_with(adjust)
}

/// With `GUARD_TEST_SHOW=1`, prints what an operator would see (the table) for the
/// replays in docs/incidents.md. Changes nothing the test asserts.
pub fn show(cfg: &Path, args: &[&str]) {
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
pub fn shown(args: &[&str], out: &Outcome, ids: &[&str]) {
    if std::env::var_os("GUARD_TEST_SHOW").is_some() {
        eprintln!("$ guard {}  # exit {}", args.join(" "), out.code);
        for id in ids {
            eprintln!("{id}: {}: {}", out.status(id), out.finding(id)["summary"]);
        }
    }
}

pub fn guard(cfg: &Path, args: &[&str]) -> Outcome {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    Guard::with_config(cfg).run(&all)
}

/// A healthy pod whose payload must survive everything the guard does.
pub struct Bystander {
    pub pod: Pod,
    pub cid: String,
    pub pid: i32,
}

impl Bystander {
    pub fn start(n: &HygieneNode) -> Bystander {
        let pod = n.pod("bystander");
        let (cid, pid) = running_locker(&pod, "payload", &n.host_dir("bystander"));
        Bystander { pod, cid, pid }
    }

    pub fn unchanged(&self, when: &str) {
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

/// A task made by `ctr` (not CRI) in namespace `ns` whose process is gone: `ctr run` of
/// the locker with a path it cannot open, so it exits at once and its task stays STOPPED.
/// Removed again on drop.
pub struct CtrMadeTask {
    pub socket: PathBuf,
    pub ns: &'static str,
    pub id: String,
}

impl CtrMadeTask {
    pub fn start(n: &HygieneNode, ns: &'static str) -> CtrMadeTask {
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

    pub fn ctr(&self, args: &[&str]) -> String {
        let mut all = vec!["--address", self.socket.to_str().unwrap(), "-n", self.ns];
        all.extend_from_slice(args);
        run(ctr().to_str().unwrap(), &all)
    }

    pub fn status(&self) -> Option<String> {
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

pub fn ctr_task_in(sock: &Path, ns: &str, id: &str) -> Option<String> {
    let out = run(
        ctr().to_str().unwrap(),
        &["--address", sock.to_str().unwrap(), "-n", ns, "tasks", "ls"],
    );
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(id))
        .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
}
