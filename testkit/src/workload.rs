//! Workloads for the hygiene tests: a `locker` payload image (a static C program that holds
//! an exclusive `flock` on a file in a hostPath volume, from two processes), a node
//! ([`HygieneNode`]: containerd with CRI on runc/cgroupfs, the pause and locker images
//! imported) and a kubelet-like [`Pod`] driven over CRI: sandbox in
//! `/kubepods/besteffort/pod<uid>`, containers with a hostPath mount.
//!
//! Everything is released on drop, containerd alive or not: the pod is stopped and removed
//! over CRI when possible, then every process left in the pod's cgroups is killed (freeze,
//! SIGKILL, thaw), its shims are killed, its mounts under containerd's state are detached
//! and its cgroup directories removed in every hierarchy.

use super::hygiene::{kill_shims_of, remove_cgroup_tree, unmount_under};
use super::node::has_finding;
use super::process::Identity;
use super::runtime::{block_on_within, tar, PauseImage};
use super::{poll_until, unique, Containerd, FsKind, LoopVolume, Outcome, TempRoot};
use containerd_guard::containerd::client::{connect, request};
use containerd_guard::containerd::pod::HostNetworkPod;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

/// Every containerd tool (`ctr`) this module runs comes from here: one place to point at
/// another containerd build.
pub fn ctr() -> PathBuf {
    super::containerd::containerd_tool("ctr")
}

/// `ctr --address <socket> -n k8s.io <args>`, output returned whatever the exit status.
pub fn ctr_k8s(socket: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(ctr());
    cmd.arg("--address")
        .arg(socket)
        .args(["-n", "k8s.io", "--timeout", CTR_TIMEOUT])
        .args(args)
        .stdin(std::process::Stdio::null());
    super::bounded::output(&mut cmd, super::bounded::COMMAND_DEADLINE)
}

/// `ctr --timeout`: ctr gives up on its own a little before the harness would kill it.
pub const CTR_TIMEOUT: &str = "25s";

/// As [`ctr_k8s`], panicking with its output unless it succeeds; returns stdout.
#[track_caller]
pub fn ctr_k8s_ok(socket: &Path, args: &[&str]) -> String {
    let out = ctr_k8s(socket, args);
    assert!(
        out.status.success(),
        "`ctr -n k8s.io {}` failed ({}):\nstdout: {}\nstderr: {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The sandbox image the hygiene node's containerd is configured with.
pub const PAUSE_IMAGE: &str = "localhost/guard-test/pause:1";
/// The payload image.
pub const LOCKER_IMAGE: &str = "localhost/guard-test/locker:1";

const LOCKER_C: &str = r#"#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>
static void bye(int s) { (void)s; _exit(0); }
int main(int argc, char **argv) {
  signal(SIGTERM, bye);
  signal(SIGINT, bye);
  if (argc < 2) { fprintf(stderr, "usage: locker PATH\n"); return 2; }
  int fd = open(argv[1], O_CREAT | O_RDWR, 0644);
  if (fd < 0) {
    fprintf(stderr, "cannot open %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    fprintf(stderr, "cannot acquire lock %s: %s\n", argv[1], strerror(errno));
    return 1;
  }
  printf("locked %s\n", argv[1]);
  fflush(stdout);
  if (fork() < 0) { fprintf(stderr, "fork: %s\n", strerror(errno)); return 1; }
  for (;;) pause();
}
"#;

/// The static `locker` binary, built once per test process with `gcc -static`.
pub fn locker_binary() -> &'static [u8] {
    static BIN: OnceLock<Vec<u8>> = OnceLock::new();
    BIN.get_or_init(|| super::runtime::static_binary("locker", LOCKER_C))
}

/// A one-layer image with `locker` as `/locker` (the entrypoint; the lock path is its
/// argument). Same shape as [`PauseImage`], whose archive writer it reuses.
#[derive(Debug, Clone)]
pub struct LockerImage {
    pub image: PauseImage,
}

impl LockerImage {
    pub fn new(name: &str) -> LockerImage {
        let mut image = PauseImage::new(name);
        let layer = tar(&[("locker", 0o755, locker_binary())]);
        let arch = containerd_guard::containerd::oci::oci_arch(std::env::consts::ARCH);
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": arch,
            "os": "linux",
            "config": {"Entrypoint": ["/locker"]},
            "rootfs": {"type": "layers", "diff_ids": [super::runtime::sha256(&layer)]}
        }))
        .unwrap();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": super::runtime::MT_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": super::runtime::sha256(&config), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": super::runtime::sha256(&layer), "size": layer.len()}]
        }))
        .unwrap();
        image.layer = layer;
        image.config = config;
        image.manifest = manifest;
        LockerImage { image }
    }

    pub fn name(&self) -> &str {
        &self.image.name
    }
}

/// Imports an image into namespace k8s.io (an OCI archive written under `dir`).
pub fn ctr_import(socket: &Path, image: &PauseImage, dir: &Path) {
    let file = dir.join(format!("{}.oci.tar", unique("img-", 8)));
    image.write_oci(&file, false);
    ctr_k8s_ok(socket, &["images", "import", file.to_str().unwrap()]);
    let _ = std::fs::remove_file(file);
}

/// containerd's config for the hygiene tests: CRI on, sandbox image [`PAUSE_IMAGE`], runc
/// v2 with the cgroupfs driver (`SystemdCgroup = false`, containerd's default) and runc's
/// state root under the tree (not the host's `/run/containerd/runc`). Version 2 for
/// containerd 1.x, version 3 (the CRI plugin split in two) for 2.x.
pub fn write_hygiene_config(t: &TempRoot) -> PathBuf {
    let (version, runtime, pin) = match super::temproot::containerd_config_version() {
        3 => (
            3,
            "io.containerd.cri.v1.runtime",
            format!("[plugins.\"io.containerd.cri.v1.images\".pinned_images]\n  sandbox = \"{PAUSE_IMAGE}\"\n"),
        ),
        _ => (2, "io.containerd.grpc.v1.cri", String::new()),
    };
    let sandbox = match version {
        3 => String::new(),
        _ => format!("  sandbox_image = \"{PAUSE_IMAGE}\"\n"),
    };
    let cri = format!(
        "[plugins.\"{runtime}\"]\n  restrict_oom_score_adj = true\n{sandbox}\
         [plugins.\"{runtime}\".containerd]\n  default_runtime_name = \"runc\"\n\
         [plugins.\"{runtime}\".containerd.runtimes.runc]\n  runtime_type = \"io.containerd.runc.v2\"\n\
         [plugins.\"{runtime}\".containerd.runtimes.runc.options]\n  SystemdCgroup = false\n  Root = \"{}\"\n{pin}",
        runc_root(t).display()
    );
    t.write_containerd_config_text(version, &cri)
}

/// runc's state root for the hygiene node's containers (`<t>/run/runc`).
pub fn runc_root(t: &TempRoot) -> PathBuf {
    t.path().join("run/runc")
}

/// A node for the hygiene tests: the tree, containerd on it, both images imported, and a
/// hostPath directory for lock files. Declare it before the [`Pod`]s so they drop first.
pub struct HygieneNode {
    pub ctrd: Containerd,
    /// The volume at containerd's root, when there is one (dropped after containerd).
    pub vol: Option<LoopVolume>,
    pub locker: LockerImage,
    pub t: TempRoot,
}

impl HygieneNode {
    /// containerd's root a plain directory of the tree: enough for every hygiene fault,
    /// not for a remedy that writes into containerd ([`HygieneNode::on_a_volume`]).
    pub fn start() -> HygieneNode {
        HygieneNode::start_with(false)
    }

    /// As [`HygieneNode::start`], a loop-mounted ext4 volume at containerd's root: the
    /// guard restores or pins the sandbox image only into a containerd on the verified
    /// volume.
    pub fn on_a_volume() -> HygieneNode {
        HygieneNode::start_with(true)
    }

    fn start_with(volume: bool) -> HygieneNode {
        let t = TempRoot::new();
        write_hygiene_config(&t);
        std::fs::create_dir_all(t.volume_path()).unwrap();
        let vol = volume.then(|| {
            LoopVolume::new(
                &t.images(),
                FsKind::Ext4,
                &unique("cg", 8),
                &t.volume_path(),
            )
        });
        std::fs::create_dir_all(runc_root(&t)).unwrap();
        std::fs::create_dir_all(t.path().join("host")).unwrap();
        let ctrd = Containerd::start(&t);
        wait_cri(&t.socket());
        let locker = LockerImage::new(LOCKER_IMAGE);
        ctr_import(&t.socket(), &PauseImage::new(PAUSE_IMAGE), t.path());
        ctr_import(&t.socket(), &locker.image, t.path());
        HygieneNode {
            ctrd,
            vol,
            locker,
            t,
        }
    }

    pub fn socket(&self) -> PathBuf {
        self.t.socket()
    }

    /// The guard restarted nothing: `containerd` (identified before) still runs, the
    /// config's restart program never ran, and no report in `outs` has `remedy.restart`.
    #[track_caller]
    pub fn assert_never_restarted(&self, containerd: Identity, outs: &[&Outcome]) {
        containerd.assert_still_runs("containerd was not restarted");
        assert_eq!(
            self.t.unasked_restarts(),
            0,
            "the guard ran its restart program"
        );
        for out in outs {
            assert!(!has_finding(out, "remedy.restart"), "{}", out.dump());
        }
    }

    /// Restarts containerd (SIGTERM, shims live on) and waits until CRI has recovered.
    pub fn restart_containerd(&mut self) {
        self.ctrd.restart();
        wait_cri(&self.t.socket());
    }

    /// A fresh hostPath directory under the tree (for one pod's `/data`).
    pub fn host_dir(&self, name: &str) -> PathBuf {
        let d = self.t.path().join("host").join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A running pod named `name` (see [`Pod::run`]).
    pub fn pod(&self, name: &str) -> Pod {
        Pod::run(&self.t, name)
    }

    /// [`make_orphan`](super::hygiene::make_orphan) on this node's containerd.
    pub fn make_orphan(&mut self, pod: &Pod, cid: &str) -> Vec<i32> {
        super::hygiene::make_orphan(&mut self.ctrd, &self.t, pod, cid)
    }
}

/// One CRI call may take this long: generous, since a 2-core machine under heavy load
/// (load average 9) slows every CRI call down.
pub const CRI_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// One CRI call over a fresh connection (containerd may have restarted since the last).
macro_rules! cri {
    ($socket:expr, $timeout:expr, |$c:ident| $call:expr) => {
        // The call's own bound answers first (an error the caller judges); the outer one
        // only catches a connect or runtime that hangs past both.
        block_on_within(
            "CRI call",
            $timeout + CONNECT_TIMEOUT + Duration::from_secs(5),
            async {
                let conn = connect($socket, CONNECT_TIMEOUT)
                    .await
                    .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
                let mut $c = RuntimeServiceClient::new(conn.channel.clone());
                let t: Duration = $timeout;
                match tokio::time::timeout(t, $call).await {
                    Ok(r) => r.map(|r| r.into_inner()),
                    Err(_) => Err(tonic::Status::deadline_exceeded(format!(
                        "no answer within {t:?}"
                    ))),
                }
            },
        )
    };
}

/// Polls until containerd's CRI plugin answers `ListPodSandbox` (after a (re)start it says
/// "server is not initialized yet" while it recovers its pods); panics after 30 s.
pub fn wait_cri(socket: &Path) {
    poll_until("CRI to be initialized", CRI_TIMEOUT, || {
        let req = ListPodSandboxRequest { filter: None };
        let r: Result<_, tonic::Status> = cri!(socket, CONNECT_TIMEOUT, |c| c
            .list_pod_sandbox(request(req, None, CONNECT_TIMEOUT)));
        r.ok().map(|_| ())
    });
}

/// A CRI error as tests assert on it: the gRPC code and containerd's message.
pub type CriError = (tonic::Code, String);

fn cri_err(s: tonic::Status) -> CriError {
    (s.code(), s.message().to_string())
}

/// What CRI ContainerStatus says about one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInfo {
    /// `CONTAINER_CREATED`, `CONTAINER_RUNNING`, `CONTAINER_EXITED`, `CONTAINER_UNKNOWN`.
    pub state: String,
    pub exit_code: i32,
    pub reason: String,
    pub message: String,
    /// The task's PID from the verbose info, when CRI reports one (0 is None).
    pub pid: Option<i32>,
}

impl ContainerInfo {
    pub fn running(&self) -> bool {
        self.state == "CONTAINER_RUNNING"
    }

    pub fn exited(&self) -> bool {
        self.state == "CONTAINER_EXITED"
    }
}

/// A pod as kubelet (cgroupfs driver) would run it: metadata {name, namespace
/// `guard-test`, random uid}, host network, cgroup parent `/kubepods/besteffort/pod<uid>`,
/// logs under the tree. Stopped, removed and cleaned (cgroups, shims, mounts) on drop.
#[derive(Debug)]
pub struct Pod {
    pub socket: PathBuf,
    /// containerd's `state` directory (bundles live under it).
    pub state: PathBuf,
    pub name: String,
    pub uid: String,
    pub sandbox_id: String,
    pub log_dir: PathBuf,
    /// Every container this pod created (for cleanup).
    containers: std::cell::RefCell<Vec<String>>,
    config: PodSandboxConfig,
}

impl Pod {
    /// RunPodSandbox; panics with CRI's error and containerd's log on failure.
    pub fn run(t: &TempRoot, name: &str) -> Pod {
        let uid = super::random_uuid();
        let log_dir = t.path().join("logs").join(&uid);
        std::fs::create_dir_all(&log_dir).unwrap();
        let config = HostNetworkPod {
            name,
            uid: &uid,
            namespace: "guard-test",
            log_directory: &log_dir.display().to_string(),
            cgroup_parent: &pod_cgroup(&uid),
            labels: &[],
        }
        .config();
        LIVE_PODS.fetch_add(1, Ordering::SeqCst);
        let mut pod = Pod {
            socket: t.socket(),
            state: t.state_path(),
            name: name.to_string(),
            uid,
            sandbox_id: String::new(),
            log_dir,
            containers: Default::default(),
            config,
        };
        let req = RunPodSandboxRequest {
            config: Some(pod.config.clone()),
            runtime_handler: String::new(),
        };
        let r: Result<_, tonic::Status> = cri!(&pod.socket, CRI_TIMEOUT, |c| c
            .run_pod_sandbox(request(req, None, CRI_TIMEOUT)));
        match r {
            Ok(r) => pod.sandbox_id = r.pod_sandbox_id,
            Err(e) => {
                let log = log_tail(&t.path().join("containerd.log"));
                panic!("RunPodSandbox {name}: {e:?}\ncontainerd log:\n{log}");
            }
        }
        pod
    }

    /// The pod's cgroup, `/kubepods/besteffort/pod<uid>`.
    pub fn cgroup(&self) -> String {
        pod_cgroup(&self.uid)
    }

    /// A container's cgroup, `/kubepods/besteffort/pod<uid>/<id>` (cgroupfs driver).
    pub fn container_cgroup(&self, id: &str) -> String {
        format!("{}/{id}", self.cgroup())
    }

    /// CreateContainer + StartContainer of `image` with `args`, `host_dir` mounted at
    /// `/data`, log `<log_dir>/<name>.log`; returns the container id.
    pub fn try_start_container(
        &self,
        name: &str,
        image: &str,
        args: &[&str],
        host_dir: &Path,
    ) -> Result<String, CriError> {
        let config = ContainerConfig {
            args: args.iter().map(|a| a.to_string()).collect(),
            mounts: vec![Mount {
                container_path: "/data".into(),
                host_path: host_dir.display().to_string(),
                ..Default::default()
            }],
            log_path: format!("{name}.log"),
            ..crate::cri::container_config(name, image)
        };
        let req = CreateContainerRequest {
            pod_sandbox_id: self.sandbox_id.clone(),
            config: Some(config),
            sandbox_config: Some(self.config.clone()),
        };
        let id = cri!(&self.socket, CRI_TIMEOUT, |c| c.create_container(request(
            req,
            None,
            CRI_TIMEOUT
        )))
        .map_err(cri_err)?
        .container_id;
        self.containers.borrow_mut().push(id.clone());
        let req = StartContainerRequest {
            container_id: id.clone(),
        };
        cri!(&self.socket, CRI_TIMEOUT, |c| c.start_container(request(
            req,
            None,
            CRI_TIMEOUT
        )))
        .map_err(cri_err)?;
        Ok(id)
    }

    /// As [`Pod::try_start_container`], panicking on a CRI error.
    #[track_caller]
    pub fn start_container(
        &self,
        name: &str,
        image: &str,
        args: &[&str],
        host_dir: &Path,
    ) -> String {
        self.try_start_container(name, image, args, host_dir)
            .unwrap_or_else(|e| panic!("start container {name} in pod {}: {e:?}", self.name))
    }

    /// A locker container on `<host_dir>/<file>` (as `/data/<file>`); returns its id once
    /// it runs.
    #[track_caller]
    pub fn start_locker(&self, name: &str, host_dir: &Path, file: &str) -> String {
        let path = format!("/data/{file}");
        self.start_container(name, LOCKER_IMAGE, &[&path], host_dir)
    }

    /// CRI StopContainer with a grace period of `timeout_s` seconds.
    pub fn stop_container(&self, id: &str, timeout_s: i64) -> Result<(), CriError> {
        let req = StopContainerRequest {
            container_id: id.to_string(),
            timeout: timeout_s,
        };
        cri!(&self.socket, CRI_TIMEOUT, |c| c.stop_container(request(
            req,
            None,
            CRI_TIMEOUT
        )))
        .map(|_| ())
        .map_err(cri_err)
    }

    /// CRI RemoveContainer.
    pub fn remove_container(&self, id: &str) -> Result<(), CriError> {
        let req = RemoveContainerRequest {
            container_id: id.to_string(),
        };
        cri!(&self.socket, CRI_TIMEOUT, |c| c.remove_container(request(
            req,
            None,
            CRI_TIMEOUT
        )))
        .map(|_| ())
        .map_err(cri_err)
    }

    /// CRI ContainerStatus (verbose, for the PID).
    pub fn container_state(&self, id: &str) -> Result<ContainerInfo, CriError> {
        let req = ContainerStatusRequest {
            container_id: id.to_string(),
            verbose: true,
        };
        let r = cri!(&self.socket, CRI_TIMEOUT, |c| c.container_status(request(
            req,
            None,
            CRI_TIMEOUT
        )))
        .map_err(cri_err)?;
        let s = r
            .status
            .ok_or((tonic::Code::Internal, "no status".to_string()))?;
        let pid = r
            .info
            .get("info")
            .and_then(|i| serde_json::from_str::<serde_json::Value>(i).ok())
            .and_then(|v| v["pid"].as_i64())
            .filter(|p| *p > 0)
            .map(|p| p as i32);
        Ok(ContainerInfo {
            state: ContainerState::try_from(s.state)
                .map(|s| s.as_str_name().to_string())
                .unwrap_or_else(|_| format!("state {}", s.state)),
            exit_code: s.exit_code,
            reason: s.reason,
            message: s.message,
            pid,
        })
    }

    /// PodSandboxStatus's state name (`SANDBOX_READY`, `SANDBOX_NOTREADY`).
    pub fn sandbox_state(&self) -> Result<String, CriError> {
        let req = PodSandboxStatusRequest {
            pod_sandbox_id: self.sandbox_id.clone(),
            verbose: false,
        };
        let r = cri!(&self.socket, CRI_TIMEOUT, |c| c
            .pod_sandbox_status(request(req, None, CRI_TIMEOUT)))
        .map_err(cri_err)?;
        let s = r.status.map(|s| s.state).unwrap_or(-1);
        Ok(PodSandboxState::try_from(s)
            .map(|s| s.as_str_name().to_string())
            .unwrap_or_else(|_| format!("state {s}")))
    }

    /// Polls ContainerStatus until `want` holds; panics after `timeout` with the last state.
    #[track_caller]
    pub fn wait_container(
        &self,
        id: &str,
        what: &str,
        timeout: Duration,
        want: impl Fn(&ContainerInfo) -> bool,
    ) -> ContainerInfo {
        poll_until(&format!("container {id} to be {what}"), timeout, || {
            self.container_state(id).ok().filter(|i| want(i))
        })
    }

    /// The CRI log of container `name` (the kubelet's `kubectl logs`).
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.log_dir.join(format!("{name}.log"))).unwrap_or_default()
    }

    /// StopPodSandbox then RemovePodSandbox; the error of the first that fails.
    pub fn remove_pod(&self) -> Result<(), CriError> {
        let req = StopPodSandboxRequest {
            pod_sandbox_id: self.sandbox_id.clone(),
        };
        cri!(&self.socket, CRI_TIMEOUT, |c| c.stop_pod_sandbox(request(
            req,
            None,
            CRI_TIMEOUT
        )))
        .map_err(cri_err)?;
        let req = RemovePodSandboxRequest {
            pod_sandbox_id: self.sandbox_id.clone(),
        };
        cri!(&self.socket, CRI_TIMEOUT, |c| c
            .remove_pod_sandbox(request(req, None, CRI_TIMEOUT)))
        .map_err(cri_err)?;
        Ok(())
    }

    /// Container ids this pod created.
    pub fn containers(&self) -> Vec<String> {
        self.containers.borrow().clone()
    }

    /// Best-effort teardown, never panics: CRI (bounded; a leaked task is deleted through
    /// containerd's Tasks API and removal retried), then the kernel view: processes in the
    /// pod's cgroups killed, shims killed, mounts detached, cgroup dirs removed.
    pub fn cleanup(&self) {
        let quick = Duration::from_secs(10);
        let try_remove = || -> Result<(), tonic::Status> {
            let req = StopPodSandboxRequest {
                pod_sandbox_id: self.sandbox_id.clone(),
            };
            cri!(&self.socket, quick, |c| c
                .stop_pod_sandbox(request(req, None, quick)))?;
            let req = RemovePodSandboxRequest {
                pod_sandbox_id: self.sandbox_id.clone(),
            };
            cri!(&self.socket, quick, |c| c
                .remove_pod_sandbox(request(req, None, quick)))?;
            Ok(())
        };
        if !self.sandbox_id.is_empty() {
            if let Err(e) = try_remove() {
                if e.code() != tonic::Code::Unavailable {
                    for id in self.containers() {
                        let _ = super::hygiene::task_delete(&self.socket, &id);
                    }
                    let _ = try_remove();
                }
            }
        }
        let mut ids = self.containers();
        ids.push(self.sandbox_id.clone());
        ids.retain(|i| !i.is_empty());
        remove_cgroup_tree(&self.cgroup());
        kill_shims_of(&ids);
        unmount_under(&self.state, &ids);
    }
}

/// Pods alive in this test process: the shared parents `/kubepods/besteffort` and
/// `/kubepods` are removed (when empty) only by the last one, so that a parallel test's
/// runc never finds them gone between its mkdirs.
static LIVE_PODS: AtomicUsize = AtomicUsize::new(0);

impl Drop for Pod {
    fn drop(&mut self) {
        self.cleanup();
        if LIVE_PODS.fetch_sub(1, Ordering::SeqCst) == 1 {
            for parent in ["/kubepods/besteffort", "/kubepods"] {
                super::hygiene::rmdir_cgroup(parent);
            }
        }
    }
}

/// `/kubepods/besteffort/pod<uid>`, kubelet's cgroupfs name for a BestEffort pod.
pub fn pod_cgroup(uid: &str) -> String {
    format!("/kubepods/besteffort/pod{uid}")
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
