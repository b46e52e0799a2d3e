//! Two real containerds side by side, as k3s or rke2 beside a system containerd: each on
//! its own root, state and socket, each running a pod sandbox, each in the cgroup of its
//! own systemd unit (cgroup v1's `name=systemd` hierarchy). A guard configured for one
//! never restarts the other.

use std::path::{Path, PathBuf};
use support::node::{Node, TOOLS};
use support::runtime::{dead_port, remove_pod_sandbox, start_pod_sandbox, PauseImage, Restartable};
use support::{
    root_or_skip, unique, write_executable, FsKind, Guard, GuardConfig, LoopVolume, TempRoot,
};
use testkit as support;

/// A cgroup named like a systemd unit in the `name=systemd` hierarchy; on drop its
/// processes go back to the hierarchy's root and it is removed.
struct UnitCgroup {
    slice: PathBuf,
    dir: PathBuf,
}

impl UnitCgroup {
    fn new(unit: &str) -> UnitCgroup {
        let slice = Path::new("/sys/fs/cgroup/systemd").join(unique("guard-test-", 8) + ".slice");
        let dir = slice.join(unit);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        UnitCgroup { slice, dir }
    }

    fn adopt(&self, pid: i32) {
        std::fs::write(self.dir.join("cgroup.procs"), pid.to_string()).unwrap();
        let line = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        let unit = self.dir.file_name().unwrap().to_str().unwrap();
        assert!(line.contains(unit), "pid {pid} is in {unit}: {line}");
    }
}

impl Drop for UnitCgroup {
    fn drop(&mut self) {
        let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
        for pid in procs.lines() {
            let _ = std::fs::write("/sys/fs/cgroup/systemd/cgroup.procs", pid);
        }
        let _ = std::fs::remove_dir(&self.dir);
        let _ = std::fs::remove_dir(&self.slice);
    }
}

/// A running pod sandbox, removed through its containerd on drop (also when a check fails).
struct PodSandbox {
    socket: PathBuf,
    id: String,
}

impl Drop for PodSandbox {
    fn drop(&mut self) {
        let _ = remove_pod_sandbox(&self.socket, &self.id);
    }
}

/// A containerd on its own tree, with the sandbox image and a running pod sandbox.
fn runtime_with_a_pod(name: &str) -> (TempRoot, Restartable, PauseImage, PathBuf, PodSandbox) {
    let t = TempRoot::new();
    let image = format!("127.0.0.1:{}/guard/pause:{name}", dead_port());
    t.write_containerd_config_with(Some(&image));
    std::fs::create_dir_all(t.volume_path()).unwrap();
    let ctrd = Restartable::start(&t);
    let img = PauseImage::new(&image);
    let archive = img.write_oci(&t.path().join("pause.oci.tar"), false);
    ctrd.ctr_import(&archive);
    let id = start_pod_sandbox(&t.socket()).expect("a running pod sandbox");
    let pod = PodSandbox {
        socket: t.socket(),
        id,
    };
    (t, ctrd, img, archive, pod)
}

#[test]
fn a_guard_for_one_of_two_containerds_never_restarts_the_other() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    // A: the guard's containerd (k3s-style unit), made stale: a volume mounted over its root.
    let (ta, ctrd_a, img, archive, pod_a) = runtime_with_a_pod("a");
    let vol = LoopVolume::new(
        &ta.images(),
        FsKind::Ext4,
        &unique("cg", 8),
        &ta.volume_path(),
    );
    let a = Node {
        ctrd: ctrd_a,
        vol,
        img,
        t: ta,
    };
    // Declared after A's containerd, so dropped (removed through it) before it stops.
    let pod_a = pod_a;
    // B: the system containerd, healthy, with its own pod.
    let (tb, ctrd_b, _img_b, _archive_b, pod_b) = runtime_with_a_pod("b");
    let k3s = UnitCgroup::new("k3s.service");
    k3s.adopt(a.ctrd.pid());
    let system = UnitCgroup::new("containerd.service");
    system.adopt(ctrd_b.pid());
    let (a_before, b_before) = (a.ctrd.identity(), ctrd_b.identity());

    // `systemctl restart containerd` names B's unit: it must never be reached.
    let bin = a.t.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let calls = a.t.path().join("systemctl.calls");
    write_executable(
        &bin.join("systemctl"),
        &format!("#!/bin/sh\necho \"$*\" >> '{}'\n", calls.display()),
    );
    let sandbox = |c: GuardConfig| c.sandbox_archives(&[&archive]).sandbox_pull(false);
    let cfg = a.t.write_guard_config_with(|c| {
        sandbox(c.containerd_wait("20s").containerd_restart(&[
            "systemctl",
            "restart",
            "containerd",
        ]))
    });
    let path = format!("{}:/usr/sbin:/usr/bin:/sbin:/bin", bin.display());
    let out = Guard::with_config(&cfg)
        .env("PATH", &path)
        .run(&["--json", "verify", "--repair", "--force"]);
    out.expect(1, "runtime.stale", "fail");
    assert_eq!(out.status("remedy.restart"), "fail", "{}", out.dump());
    out.mentions(
        "remedy.restart",
        &[
            &format!("pid {} belongs to k3s.service", a_before.pid),
            "k3s.service",
            "containerd.service",
        ],
    );
    assert!(
        !calls.exists(),
        "systemctl was reached: {:?}",
        std::fs::read_to_string(&calls)
    );
    b_before.assert_still_runs("B was not restarted");
    a_before.assert_still_runs("A was not restarted either");

    // A restart command that cannot be tied (the test's script restarting A by its pid
    // file) runs, says so, and still never touches B.
    remove_pod_sandbox(&a.t.socket(), &pod_a.id).expect("drain A's pod");
    let cfg = a.config_with(&a.ctrd.restart_program(), sandbox);
    let out = Guard::with_config(&cfg).run(&["--json", "verify", "--repair"]);
    assert_eq!(out.status("remedy.restart"), "pass", "{}", out.dump());
    out.mentions("remedy.restart", &["cannot tie it"]);
    assert_eq!(a.ctrd.restarts(), 1);
    assert!(!a_before.still_runs(), "A was restarted");
    assert_ne!(a.ctrd.identity(), a_before, "a new A runs");
    b_before.assert_still_runs("B was not restarted");
    remove_pod_sandbox(&tb.socket(), &pod_b.id).expect("B's pod is still there to remove");
    drop((pod_a, pod_b, k3s, system));
}
