//! Phase-2 additions to the harness: a pause-like image built here without network (a
//! static C binary in a one-layer image, as an OCI layout or a docker archive), a real
//! `docker-registry` on 127.0.0.1, a containerd that the guard itself can restart (through
//! a small restart program invoked as an argument vector, standing in for `systemctl
//! restart containerd`), and a CRI client to assert the kubelet's view (RunPodSandbox).

use super::containerd::{containerd_tool, path_with_containerd_dir};
use super::{poll_until, run, run_exe, which, TempRoot};
use containerd_guard::containerd::archive;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// A minimal ustar writer: (name, mode, content).
pub fn tar(entries: &[(&str, u32, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, mode, data) in entries {
        assert!(name.len() < 100, "tar name too long: {name}");
        let mut h = [0u8; 512];
        h[..name.len()].copy_from_slice(name.as_bytes());
        h[100..107].copy_from_slice(format!("{mode:07o}").as_bytes());
        h[108..115].copy_from_slice(b"0000000");
        h[116..123].copy_from_slice(b"0000000");
        h[124..135].copy_from_slice(format!("{:011o}", data.len()).as_bytes());
        h[136..147].copy_from_slice(b"00000000000");
        h[156] = b'0';
        h[257..263].copy_from_slice(b"ustar\0");
        h[263..265].copy_from_slice(b"00");
        h[148..156].copy_from_slice(b"        ");
        let sum: u32 = h.iter().map(|&b| b as u32).sum();
        h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        out.extend_from_slice(&h);
        out.extend_from_slice(data);
        out.resize(out.len().div_ceil(512) * 512, 0);
    }
    out.resize(out.len() + 1024, 0);
    out
}

/// The static pause binary, built once per test process.
pub fn pause_binary() -> &'static [u8] {
    static BIN: OnceLock<Vec<u8>> = OnceLock::new();
    BIN.get_or_init(|| {
        static_binary(
            "pause",
            "#include <signal.h>\n#include <unistd.h>\n\
             static void bye(int s) { (void)s; _exit(0); }\n\
             int main(void) { signal(SIGTERM, bye); signal(SIGINT, bye); for (;;) pause(); }\n",
        )
    })
}

/// `source` (C) compiled with `gcc -static -Os -s` into a binary named `name`, its bytes.
pub fn static_binary(name: &str, source: &str) -> Vec<u8> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("cg-{name}."))
        .tempdir()
        .expect("tempdir");
    let src = dir.path().join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.path().join(name);
    run(
        "gcc",
        &[
            "-static",
            "-Os",
            "-s",
            "-o",
            out.to_str().unwrap(),
            src.to_str().unwrap(),
        ],
    );
    std::fs::read(out).unwrap()
}

/// A one-layer image with the pause binary as `/pause`.
#[derive(Debug, Clone)]
pub struct PauseImage {
    /// containerd's name for it (normalised reference).
    pub name: String,
    pub layer: Vec<u8>,
    pub config: Vec<u8>,
    pub manifest: Vec<u8>,
}

pub const MT_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";

impl PauseImage {
    pub fn new(name: &str) -> PauseImage {
        let layer = tar(&[("pause", 0o755, pause_binary())]);
        let arch = containerd_guard::containerd::oci::oci_arch(std::env::consts::ARCH);
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": arch,
            "os": "linux",
            "config": {"Entrypoint": ["/pause"]},
            "rootfs": {"type": "layers", "diff_ids": [sha256(&layer)]}
        }))
        .unwrap();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": MT_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": sha256(&config), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                        "digest": sha256(&layer), "size": layer.len()}]
        }))
        .unwrap();
        PauseImage {
            name: name.to_string(),
            layer,
            config,
            manifest,
        }
    }

    pub fn manifest_digest(&self) -> String {
        sha256(&self.manifest)
    }

    fn blob_name(d: &str) -> String {
        format!("blobs/sha256/{}", d.trim_start_matches("sha256:"))
    }

    /// An OCI layout archive (what `ctr images export` writes), optionally with the layer
    /// blob corrupted (one byte flipped: same size, wrong digest).
    pub fn write_oci(&self, path: &Path, corrupt: bool) -> PathBuf {
        let tag = self.name.rsplit(':').next().unwrap_or("latest");
        let index = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{"mediaType": MT_MANIFEST, "digest": self.manifest_digest(),
                           "size": self.manifest.len(),
                           "annotations": {"io.containerd.image.name": self.name,
                                           "org.opencontainers.image.ref.name": tag}}]
        }))
        .unwrap();
        let mut layer = self.layer.clone();
        if corrupt {
            let mid = layer.len() / 2;
            layer[mid] ^= 0xff;
        }
        let (m, c, l) = (
            Self::blob_name(&self.manifest_digest()),
            Self::blob_name(&sha256(&self.config)),
            Self::blob_name(&sha256(&self.layer)),
        );
        let data = tar(&[
            ("oci-layout", 0o644, br#"{"imageLayoutVersion":"1.0.0"}"#),
            ("index.json", 0o644, &index),
            (&m, 0o644, &self.manifest),
            (&c, 0o644, &self.config),
            (&l, 0o644, &layer),
        ]);
        std::fs::write(path, data).unwrap();
        path.to_path_buf()
    }

    /// A `docker save` style archive (manifest.json, `<config>.json`, `<id>/layer.tar`).
    pub fn write_docker(&self, path: &Path) -> PathBuf {
        let chex = sha256(&self.config)
            .trim_start_matches("sha256:")
            .to_string();
        let lhex = sha256(&self.layer)
            .trim_start_matches("sha256:")
            .to_string();
        let manifest = serde_json::to_vec(&serde_json::json!([{
            "Config": format!("{chex}.json"),
            "RepoTags": [self.name],
            "Layers": [format!("{lhex}/layer.tar")]
        }]))
        .unwrap();
        let data = tar(&[
            ("manifest.json", 0o644, &manifest),
            (&format!("{chex}.json"), 0o644, &self.config),
            (&format!("{lhex}/layer.tar"), 0o644, &self.layer),
        ]);
        std::fs::write(path, data).unwrap();
        path.to_path_buf()
    }
}

/// A real `docker-registry` (distribution 2.8) on 127.0.0.1, killed on drop.
pub struct Registry {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A 127.0.0.1 port where nothing listens (a registry that is down).
pub fn dead_port() -> u16 {
    free_port()
}

/// One HTTP/1.1 request; returns (status, headers, body).
pub fn http(
    port: u16,
    method: &str,
    path: &str,
    ctype: &str,
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect registry");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\
         Content-Type: {ctype}\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut resp = Vec::new();
    let _ = s.read_to_end(&mut resp);
    let split = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(resp.len());
    let headers = String::from_utf8_lossy(&resp[..split]).into_owned();
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = resp.get(split + 4..).unwrap_or_default();
    let chunked = headers
        .lines()
        .any(|l| l.to_ascii_lowercase().replace(' ', "") == "transfer-encoding:chunked");
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_vec()
    };
    (status, headers, body)
}

/// An HTTP/1.1 chunked body as its bytes (node_exporter sends one past 2 KiB so: a chunk
/// size line can fall in the middle of a metric's line).
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = raw.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&raw[..eol]);
        let size_hex = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16).expect("a chunk size line");
        raw = &raw[eol + 2..];
        if size == 0 {
            break;
        }
        out.extend_from_slice(&raw[..size.min(raw.len())]);
        raw = raw.get(size + 2..).unwrap_or_default();
    }
    out
}

impl Registry {
    pub fn start() -> Registry {
        let exe = which("docker-registry").expect(
            "this test needs `docker-registry` (apt-get install docker-registry); \
             `sudo scripts/test` installs it",
        );
        let dir = tempfile::Builder::new()
            .prefix("cg-registry.")
            .tempdir()
            .unwrap();
        let port = free_port();
        let cfg = dir.path().join("config.yml");
        std::fs::write(
            &cfg,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
                 http:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.path().join("registry.log")).unwrap();
        let child = Command::new(exe)
            .arg("serve")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("spawn docker-registry");
        let r = Registry {
            child,
            port,
            _dir: dir,
        };
        poll_until(
            "docker-registry to answer /v2/",
            Duration::from_secs(20),
            || {
                TcpStream::connect(("127.0.0.1", port)).ok()?;
                (http(port, "GET", "/v2/", "text/plain", b"").0 == 200).then_some(())
            },
        );
        r
    }

    /// Pushes `img` as `<repo>:<tag>` through the registry's HTTP API.
    pub fn push(&self, img: &PauseImage, repo: &str, tag: &str) {
        for blob in [&img.config, &img.layer] {
            let (status, headers, _) = http(
                self.port,
                "POST",
                &format!("/v2/{repo}/blobs/uploads/"),
                "text/plain",
                b"",
            );
            assert_eq!(status, 202, "upload start: {headers}");
            let location = headers
                .lines()
                .find_map(|l| {
                    l.strip_prefix("Location: ")
                        .or_else(|| l.strip_prefix("location: "))
                })
                .expect("Location header")
                .trim()
                .to_string();
            let path = location
                .strip_prefix(&format!("http://127.0.0.1:{}", self.port))
                .unwrap_or(&location)
                .to_string();
            let sep = if path.contains('?') { '&' } else { '?' };
            let (status, headers, _) = http(
                self.port,
                "PUT",
                &format!("{path}{sep}digest={}", sha256(blob)),
                "application/octet-stream",
                blob,
            );
            assert_eq!(status, 201, "blob upload: {headers}");
        }
        let (status, headers, body) = http(
            self.port,
            "PUT",
            &format!("/v2/{repo}/manifests/{tag}"),
            MT_MANIFEST,
            &img.manifest,
        );
        assert_eq!(
            status,
            201,
            "manifest: {headers} {}",
            String::from_utf8_lossy(&body)
        );
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A containerd started (and restartable) through a restart program in the test's tree,
/// invoked by the guard as `[containerd] restart = ["<t>/restart-containerd"]`, as
/// `systemctl restart containerd` would be on a node. Its PID is in `<t>/containerd.pid`;
/// every run of the program appends a line to `<t>/restarts.log`.
pub struct Restartable {
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub config: PathBuf,
}

/// How long containerd may take to answer after (re)start.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            s.rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next())
                != Some("Z")
        }
        Err(_) => false,
    }
}

impl Restartable {
    /// Writes the restart program (and a do-nothing one) and starts containerd with it.
    pub fn start(t: &TempRoot) -> Restartable {
        let exe = containerd_tool("containerd");
        // containerd finds its shim on PATH: the selected containerd's directory first,
        // whoever runs this program (the guard, or the test as setup).
        let path = path_with_containerd_dir(None);
        let dir = t.path().to_path_buf();
        let script = format!(
            "#!/bin/sh\n\
             # Stands in for `systemctl restart containerd`: stop the test's containerd\n\
             # (by its PID file, bounded), start it again with the same arguments.\n\
             set -u\n\
             d='{dir}'\n\
             PATH='{path}'\n\
             export PATH\n\
             [ -n \"${{GUARD_TEST_SETUP:-}}\" ] || echo \"restart $(date +%s.%N)\" >> \"$d/restarts.log\"\n\
             if [ -s \"$d/containerd.pid\" ]; then\n\
               pid=$(cat \"$d/containerd.pid\")\n\
               kill \"$pid\" 2>/dev/null\n\
               n=0\n\
               while [ -d /proc/$pid ] && [ \"$(cut -d' ' -f3 /proc/$pid/stat 2>/dev/null)\" != Z ] && [ $n -lt 200 ]; do\n\
                 sleep 0.05; n=$((n+1))\n\
               done\n\
               kill -9 \"$pid\" 2>/dev/null\n\
             fi\n\
             setsid '{exe}' --config '{cfg}' >> \"$d/containerd.log\" 2>&1 < /dev/null &\n\
             echo $! > \"$d/containerd.pid\"\n",
            dir = dir.display(),
            exe = exe.display(),
            cfg = t.containerd_config().display(),
            path = path.to_string_lossy()
        );
        for (name, body) in [
            ("restart-containerd", script.as_str()),
            (
                "restart-noop",
                &format!(
                    "#!/bin/sh\n# A restart command that does not help.\necho \"noop $(date +%s.%N)\" >> '{}/restarts.log'\n",
                    dir.display()
                ),
            ),
        ] {
            super::write_executable(&dir.join(name), body);
        }
        let r = Restartable {
            dir,
            socket: t.socket(),
            config: t.containerd_config(),
        };
        r.restart_by_hand();
        r
    }

    pub fn restart_program(&self) -> PathBuf {
        self.dir.join("restart-containerd")
    }

    pub fn noop_program(&self) -> PathBuf {
        self.dir.join("restart-noop")
    }

    /// How many times a restart program ran (as the guard's restart command).
    pub fn restarts(&self) -> usize {
        std::fs::read_to_string(self.dir.join("restarts.log"))
            .map(|t| t.lines().count())
            .unwrap_or(0)
    }

    /// This containerd as /proc knows it now: compare it later with
    /// [`Identity::assert_still_runs`](super::process::Identity::assert_still_runs), never
    /// [`Self::pid`] (the pid file changes only when the restart program runs).
    pub fn identity(&self) -> super::process::Identity {
        super::process::Identity::of(self.pid())
    }

    /// The pid the restart program last wrote (0 before it ran).
    pub fn pid(&self) -> i32 {
        std::fs::read_to_string(self.dir.join("containerd.pid"))
            .ok()
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Runs the restart program (test setup, not the guard) and waits until it answers.
    pub fn restart_by_hand(&self) {
        let mut cmd = Command::new(self.restart_program());
        cmd.env("GUARD_TEST_SETUP", "1").stdin(Stdio::null());
        let out = super::bounded::output(&mut cmd, super::bounded::COMMAND_DEADLINE);
        assert!(
            out.status.success(),
            "restart program failed: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        self.wait_answering();
    }

    pub fn wait_answering(&self) {
        poll_until("containerd to answer on its socket", ANSWER_TIMEOUT, || {
            let pid = self.pid();
            assert!(
                pid == 0 || alive(pid),
                "containerd exited:\n{}",
                self.log_tail()
            );
            block_on("containerd Version", async {
                let conn = containerd_guard::containerd::client::connect(
                    &self.socket,
                    Duration::from_secs(2),
                )
                .await
                .ok()?;
                containerd_guard::containerd::client::version(&conn)
                    .await
                    .ok()
            })
        });
    }

    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("containerd.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Stops containerd (SIGTERM, bounded, then SIGKILL).
    pub fn stop(&self) {
        let pid = self.pid();
        if pid <= 0 {
            return;
        }
        let p = nix::unistd::Pid::from_raw(pid);
        let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = nix::sys::signal::kill(p, nix::sys::signal::Signal::SIGKILL);
        let _ = std::fs::remove_file(self.dir.join("containerd.pid"));
    }

    /// Imports an archive into namespace k8s.io with `ctr` (test setup).
    pub fn ctr_import(&self, archive: &Path) {
        run_exe(
            &containerd_tool("ctr"),
            &[
                "--address",
                self.socket.to_str().unwrap(),
                "--timeout",
                super::workload::CTR_TIMEOUT,
                "-n",
                "k8s.io",
                "images",
                "import",
                archive.to_str().unwrap(),
            ],
        );
    }
}

impl Drop for Restartable {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs a future on a fresh current-thread runtime.
/// Runs one gRPC exchange (`what`, for the failure message) to completion, bounded by
/// [`super::bounded::COMMAND_DEADLINE`] like every command: a gRPC deadline alone does not
/// bound a peer that never answers (a SIGSTOPped containerd).
#[track_caller]
pub fn block_on<F: std::future::Future>(what: &str, f: F) -> F::Output {
    block_on_within(what, super::bounded::COMMAND_DEADLINE, f)
}

/// As [`block_on`] with another deadline (a CRI call has its own, longer bound).
#[track_caller]
pub fn block_on_within<F: std::future::Future>(what: &str, deadline: Duration, f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { tokio::time::timeout(deadline, f).await })
        .unwrap_or_else(|_| panic!("`{what}` did not finish within its deadline of {deadline:?}"))
}

/// The kubelet's view: RunPodSandbox of a host-network pod (empty hostname) with the
/// configured sandbox image, then StopPodSandbox and RemovePodSandbox so nothing is left.
/// Returns the sandbox ID or the CRI error text.
pub fn run_pod_sandbox(socket: &Path) -> Result<String, String> {
    let id = start_pod_sandbox(socket)?;
    remove_pod_sandbox(socket, &id)?;
    Ok(id)
}

/// RunPodSandbox only: the sandbox (a running task) stays until [`remove_pod_sandbox`].
pub fn start_pod_sandbox(socket: &Path) -> Result<String, String> {
    let name = super::unique("guard-test-", 8);
    let uid = super::random_uuid();
    block_on(
        "CRI RunPodSandbox",
        crate::cri::start_host_network_pod(socket, &name, &uid, "guard-test"),
    )
}

/// StopPodSandbox and RemovePodSandbox.
pub fn remove_pod_sandbox(socket: &Path, id: &str) -> Result<(), String> {
    block_on(
        "CRI StopPodSandbox/RemovePodSandbox",
        crate::cri::remove_pod(socket, id),
    )
}

/// Verifies an archive the way the guard does (for fixtures' sanity).
pub fn archive_verifies(path: &Path, name: &str) -> Result<(), String> {
    let files = archive::read_tar(path)?;
    let arch = containerd_guard::containerd::oci::oci_arch(std::env::consts::ARCH);
    archive::verify(&files, name, "linux", arch).map(|_| ())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_chunked_body_is_joined() {
        assert_eq!(
            super::dechunk(b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"),
            b"abcde"
        );
    }
}
