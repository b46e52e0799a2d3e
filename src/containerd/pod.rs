//! What kubelet does first on a node, and what the guard's promise is about: CRI
//! RunPodSandbox of a host-network pod (empty hostname) with the configured sandbox image.
//! The guard itself never starts pods; this is the kubelet's view for the demo
//! (`examples/run-pod-sandbox.rs`), the integration tests and the VM tests' kubelet
//! stand-in, so all three ask the question the same way.

use super::client::{connect, request, status_text};
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use std::path::Path;
use std::time::Duration;

/// One CRI call may take this long: RunPodSandbox pulls the sandbox image when missing.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A host-network pod, the one pod shape every CRI client of this crate uses (the demo,
/// the integration tests, the VM tests' kubelet stand-in and workloads). The fields are
/// what differs per pod; empty `log_directory` and `cgroup_parent` are left unset, as
/// kubelet leaves them when it has none.
#[derive(Default)]
pub struct HostNetworkPod<'a> {
    pub name: &'a str,
    pub uid: &'a str,
    pub namespace: &'a str,
    pub log_directory: &'a str,
    pub cgroup_parent: &'a str,
}

impl HostNetworkPod<'_> {
    /// The sandbox config kubelet sends for it, in [`host_network_namespaces`].
    pub fn config(&self) -> PodSandboxConfig {
        PodSandboxConfig {
            metadata: Some(PodSandboxMetadata {
                name: self.name.to_string(),
                uid: self.uid.to_string(),
                namespace: self.namespace.to_string(),
                attempt: 0,
            }),
            // Host-network sandboxes need an empty hostname (measured on containerd 1.6).
            hostname: String::new(),
            log_directory: self.log_directory.to_string(),
            linux: Some(LinuxPodSandboxConfig {
                cgroup_parent: self.cgroup_parent.to_string(),
                security_context: Some(LinuxSandboxSecurityContext {
                    namespace_options: Some(host_network_namespaces()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }
}

/// The namespaces of a host-network pod's sandbox and of each of its containers: the
/// node's network, a PID namespace of its own (kubelet's default, a pod without
/// shareProcessNamespace), the pod's IPC namespace.
pub fn host_network_namespaces() -> NamespaceOption {
    NamespaceOption {
        network: NamespaceMode::Node as i32,
        pid: NamespaceMode::Container as i32,
        ipc: NamespaceMode::Pod as i32,
        ..Default::default()
    }
}

/// Starts a host-network sandbox named `name` in pod namespace `namespace`; returns its ID
/// or CRI's error text (the text kubelet would put in a `FailedCreatePodSandBox` event).
pub async fn start_host_network_pod(
    socket: &Path,
    name: &str,
    uid: &str,
    namespace: &str,
) -> Result<String, String> {
    let conn = connect(socket, CONNECT_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    let mut c = RuntimeServiceClient::new(conn.channel.clone());
    let config = HostNetworkPod {
        name,
        uid,
        namespace,
        ..Default::default()
    }
    .config();
    let req = RunPodSandboxRequest {
        config: Some(config),
        runtime_handler: String::new(),
    };
    Ok(c.run_pod_sandbox(request(req, None, CALL_TIMEOUT))
        .await
        .map_err(|s| status_text(&s))?
        .into_inner()
        .pod_sandbox_id)
}

/// StopPodSandbox then RemovePodSandbox, so nothing is left behind.
pub async fn remove_pod(socket: &Path, id: &str) -> Result<(), String> {
    let conn = connect(socket, CONNECT_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    let mut c = RuntimeServiceClient::new(conn.channel.clone());
    let stop = StopPodSandboxRequest {
        pod_sandbox_id: id.to_string(),
    };
    c.stop_pod_sandbox(request(stop, None, CALL_TIMEOUT))
        .await
        .map_err(|s| status_text(&s))?;
    let remove = RemovePodSandboxRequest {
        pod_sandbox_id: id.to_string(),
    };
    c.remove_pod_sandbox(request(remove, None, CALL_TIMEOUT))
        .await
        .map_err(|s| status_text(&s))?;
    Ok(())
}

/// PodSandboxStatus's state name (`SANDBOX_READY` when the pause process runs).
pub async fn sandbox_state(socket: &Path, id: &str) -> Result<String, String> {
    let conn = connect(socket, CONNECT_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    let mut c = RuntimeServiceClient::new(conn.channel.clone());
    let req = PodSandboxStatusRequest {
        pod_sandbox_id: id.to_string(),
        verbose: false,
    };
    let status = c
        .pod_sandbox_status(request(req, None, CALL_TIMEOUT))
        .await
        .map_err(|s| status_text(&s))?
        .into_inner()
        .status
        .ok_or("PodSandboxStatus: no status in the answer")?;
    Ok(PodSandboxState::try_from(status.state)
        .map(|s| s.as_str_name().to_string())
        .unwrap_or_else(|_| format!("state {}", status.state)))
}
