//! Does containerd answer, and does its CRI serve? Gathered over containerd's socket
//! (containerd API and CRI v1), each call bounded. Judged by [`super::rules`].

use crate::containerd::client::{Conn, VersionAnswer, K8S_NS};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginFact {
    pub kind: String,
    pub id: String,
    pub init_err: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub kind: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// What an answering containerd said about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answering {
    pub version: Result<(String, String), String>,
    pub plugins: Result<Vec<PluginFact>, String>,
    pub cri_version: Result<String, String>,
    pub cri_conditions: Result<Vec<Condition>, String>,
    /// The other calls kubelet makes at every start, each bounded on its own: a hang in
    /// one (CRI `Status` behind a CNI lock while `Version` answers) is named by call.
    pub kubelet_calls: Vec<KubeletCall>,
    /// CRI `ImageStatus` of the sandbox image: `pinned`, `None` when CRI does not know it
    /// (shared with the sandbox image family: asked once).
    pub sandbox_status: Result<Option<bool>, String>,
    /// CRI `RuntimeConfig`: the cgroup driver containerd gives kubelet (`systemd`,
    /// `cgroupfs`); `None` when containerd does not implement it (before 2.0: kubelet
    /// then falls back to its own `cgroupDriver`).
    pub runtime_config: Result<Option<String>, String>,
}

/// One of kubelet's start calls and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletCall {
    pub call: &'static str,
    pub outcome: Result<(), String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerFacts {
    pub socket: String,
    /// `Err` when containerd did not answer within the bound: what the last try saw.
    pub answering: Result<Box<Answering>, String>,
    /// How long was tried before giving up (evidence).
    pub waited: String,
    /// When containerd did not answer: a fault of the socket path itself, which a restart
    /// of containerd cannot be shown to fix. `None` when it answered, or when the path is
    /// simply missing, refused or hangs (containerd's own fault).
    pub path_fault: Option<PathFault>,
}

/// What is wrong with the socket path when it is not containerd that is silent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathFault {
    /// A symlink whose target does not exist (or a loop of links).
    DanglingLink { target: String, error: String },
    /// Something that is not a socket: `a regular file`, `a directory`...
    NotASocket { kind: String },
    /// The guard's user may not connect (or may not reach the path).
    Forbidden {
        error: String,
        owner: Option<u32>,
        mode: Option<u32>,
        euid: u32,
    },
}

/// Looks at the socket path after containerd did not answer on it: is the path itself at
/// fault? A non-blocking connect, so a hung containerd's full backlog cannot block it.
pub fn probe_socket(path: &std::path::Path) -> Option<PathFault> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let euid = nix::unistd::geteuid().as_raw();
    let forbidden = |error: String, meta: Option<&std::fs::Metadata>| PathFault::Forbidden {
        error,
        owner: meta.map(|m| m.uid()),
        mode: meta.map(|m| m.mode() & 0o7777),
        euid,
    };
    let link = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Some(forbidden(e.to_string(), None))
        }
        Err(_) => return None, // missing: containerd has not made its socket
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if link.file_type().is_symlink() => {
            let target = std::fs::read_link(path).map(|t| t.display().to_string());
            return Some(PathFault::DanglingLink {
                target: target.unwrap_or_default(),
                error: e.to_string(),
            });
        }
        Err(e) => return Some(forbidden(e.to_string(), None)),
    };
    let kind = meta.file_type();
    let kind = match () {
        _ if kind.is_socket() => return connect_forbidden(path).map(|e| forbidden(e, Some(&meta))),
        _ if kind.is_file() => "a regular file",
        _ if kind.is_dir() => "a directory",
        _ if kind.is_fifo() => "a FIFO",
        _ => "a device",
    };
    Some(PathFault::NotASocket { kind: kind.into() })
}

/// `Some(error)` when connecting is refused for permission (EACCES, EPERM); anything else
/// (accepted, refused, busy) is containerd's business.
fn connect_forbidden(path: &std::path::Path) -> Option<String> {
    use nix::errno::Errno;
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, UnixAddr};
    use std::os::fd::AsRawFd;
    let flags = SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC;
    let fd = socket(AddressFamily::Unix, SockType::Stream, flags, None).ok()?;
    let addr = UnixAddr::new(path).ok()?;
    match connect(fd.as_raw_fd(), &addr) {
        Err(e @ (Errno::EACCES | Errno::EPERM)) => Some(e.desc().to_string()),
        _ => None,
    }
}

/// Why a call that writes under containerd's root was not made: containerd answers
/// `Introspection.Plugins`, `Introspection.Server` and (from 1.7) CRI `Status` by creating
/// `io.containerd.grpc.v1.introspection/uuid` under its root when that is missing, and a
/// stale containerd resolves its root on the directory a detached volume left behind.
pub const NOT_ASKED: &str = "not asked: containerd is stale (runtime.stale), and it answers \
    this call by writing under its root, which is now a directory the volume left behind";

/// Asks an answering containerd (its `Version` already answered) for the rest.
/// `sandbox_image`: the reference kubelet's `ImageStatus` asks about. `stale`: whether
/// containerd would write under its root, proven stale (`Look::writes_under_root`); then
/// the calls that write there (CRI `Status`, `Introspection.Plugins`) are not made.
pub async fn gather(
    conn: &Conn,
    version: VersionAnswer,
    sandbox_image: &str,
    stale: impl std::future::Future<Output = bool>,
) -> Answering {
    let writing = async {
        match stale.await {
            true => (Err(NOT_ASKED.to_string()), Err(NOT_ASKED.to_string())),
            false => tokio::join!(cri_status(conn), plugins(conn)),
        }
    };
    // concurrently, on the one HTTP/2 connection: the slowest answer, not the sum
    let (cri_version, (cri_conditions, plugins), (kubelet_calls, sandbox_status), runtime_config) = tokio::join!(
        cri_version(conn),
        writing,
        kubelet_calls(conn, sandbox_image),
        runtime_config(conn)
    );
    Answering {
        version: version.map_err(|e| e.to_string()),
        plugins,
        cri_version,
        cri_conditions,
        kubelet_calls,
        sandbox_status,
        runtime_config,
    }
}

/// CRI `RuntimeConfig`'s cgroup driver, as kubelet 1.31 and later ask it at start.
async fn runtime_config(conn: &Conn) -> Result<Option<String>, String> {
    use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
    use k8s_cri::v1::{CgroupDriver, RuntimeConfigRequest};
    let mut c = RuntimeServiceClient::new(conn.channel.clone());
    let req = RuntimeConfigRequest {};
    let call = conn.call("CRI RuntimeConfig", c.runtime_config(conn.request(req, Some(K8S_NS))));
    match call.await {
        Ok(r) => {
            let driver = r.linux.map(|l| l.cgroup_driver).unwrap_or_default();
            let driver = CgroupDriver::try_from(driver).map_err(|_| format!("cgroup driver {driver}"))?;
            Ok(Some(match driver {
                CgroupDriver::Systemd => "systemd".to_string(),
                CgroupDriver::Cgroupfs => "cgroupfs".to_string(),
            }))
        }
        // (1.6 answers "unknown method", 1.7 "not implemented": both Unimplemented)
        Err(e) if e.code() == Some(tonic::Code::Unimplemented) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// `ImageFsInfo`, `ListPodSandbox` (filtered to nothing: the call, not the pods) and the
/// sandbox image's `ImageStatus`, at the same time.
async fn kubelet_calls(
    conn: &Conn,
    sandbox_image: &str,
) -> (Vec<KubeletCall>, Result<Option<bool>, String>) {
    use k8s_cri::v1::image_service_client::ImageServiceClient;
    use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
    use k8s_cri::v1::{ImageFsInfoRequest, ListPodSandboxRequest, PodSandboxFilter};
    let mut images = ImageServiceClient::new(conn.channel.clone());
    let mut runtime = RuntimeServiceClient::new(conn.channel.clone());
    let fs_info = conn.call(
        "CRI ImageFsInfo",
        images.image_fs_info(conn.request(ImageFsInfoRequest {}, None)),
    );
    let none = PodSandboxFilter {
        label_selector: [("io.containerd-guard/probe".into(), "none".into())].into(),
        ..Default::default()
    };
    let req = ListPodSandboxRequest { filter: Some(none) };
    let sandboxes = conn.call(
        "CRI ListPodSandbox",
        runtime.list_pod_sandbox(conn.request(req, None)),
    );
    let status = crate::containerd::image::cri_pinned(conn, sandbox_image);
    let (fs_info, sandboxes, status) = tokio::join!(fs_info, sandboxes, status);
    let outcome = |call, r: Result<(), crate::containerd::client::RpcError>| KubeletCall {
        call,
        outcome: r.map_err(|e| e.to_string()),
    };
    let calls = vec![
        outcome("CRI ImageFsInfo", fs_info.map(|_| ())),
        outcome("CRI ListPodSandbox", sandboxes.map(|_| ())),
        outcome(
            "CRI ImageStatus",
            status.as_ref().map(|_| ()).map_err(Clone::clone),
        ),
    ];
    (calls, status.map_err(|e| e.to_string()))
}

async fn plugins(conn: &Conn) -> Result<Vec<PluginFact>, String> {
    use containerd_client::services::v1::introspection_client::IntrospectionClient;
    use containerd_client::services::v1::PluginsRequest;
    let mut c = IntrospectionClient::new(conn.channel.clone());
    let req = PluginsRequest { filters: vec![] };
    let r = conn
        .call("Introspection.Plugins", c.plugins(conn.request(req, None)))
        .await
        .map_err(|e| e.to_string())?;
    Ok(r.plugins
        .into_iter()
        .map(|p| PluginFact {
            kind: p.r#type,
            id: p.id,
            init_err: p.init_err.map(|s| s.message),
        })
        .collect())
}

async fn cri_version(conn: &Conn) -> Result<String, String> {
    use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
    use k8s_cri::v1::VersionRequest;
    let mut c = RuntimeServiceClient::new(conn.channel.clone());
    let req = VersionRequest {
        version: "v1".into(),
    };
    let v = conn.call("CRI Version", c.version(conn.request(req, Some(K8S_NS))));
    let v = v.await.map_err(|e| e.to_string())?;
    Ok(format!(
        "{} {} (API {})",
        v.runtime_name, v.runtime_version, v.runtime_api_version
    ))
}

async fn cri_status(conn: &Conn) -> Result<Vec<Condition>, String> {
    use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
    use k8s_cri::v1::StatusRequest;
    let mut s = RuntimeServiceClient::new(conn.channel.clone());
    let req = StatusRequest { verbose: false };
    let answer = conn.call("CRI Status", s.status(conn.request(req, Some(K8S_NS))));
    let status = answer.await.inspect(|_| crate::timing::mark_cri_answered());
    status
        .map(|s| s.status.map(|st| st.conditions).unwrap_or_default())
        .map(|conditions| conditions.into_iter().map(condition).collect())
        .map_err(|e| e.to_string())
}

fn condition(c: k8s_cri::v1::RuntimeCondition) -> Condition {
    Condition {
        kind: c.r#type,
        status: c.status,
        reason: c.reason,
        message: c.message,
    }
}
