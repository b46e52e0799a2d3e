//! The canary pod's CRI calls: run a host-network pod sandbox, stop and remove it, and
//! list the sandboxes in the canary's pod namespace (which of them are the guard's own is
//! decided by its records, `checks::canary`). Each call is bounded by the time the caller
//! gives it. What the canary proves and when it runs: `checks::canary`.

use super::client::{Conn, RpcError};
use super::pod::HostNetworkPod;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use std::time::Duration;

/// The canary's pod namespace. It is a valid Kubernetes namespace name: kubelet may run
/// pods there too, so a sandbox in it is not the guard's for that (see [`Listed`]).
pub const NAMESPACE: &str = "containerd-guard-canary";
/// The label every canary carries, its value the pid of the guard that made it: for
/// people only. Anyone can set it; what proves a canary is the guard's own is its record
/// (`state::canary`).
pub const LABEL: &str = "io.containerd-guard.canary-pid";

/// A sandbox in the canary's pod namespace, as CRI lists it: maybe a canary, maybe not
/// (anyone with the socket can make a pod there, with any labels).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub id: String,
    /// Its pod name and uid (CRI's metadata).
    pub name: String,
    pub uid: String,
    /// It carries a label of kubelet's (`io.kubernetes.*`): kubelet made it.
    pub kubelet: bool,
}

/// The prefix of every label kubelet puts on the sandboxes it makes.
const KUBELET_LABELS: &str = "io.kubernetes.";

/// `conn` with every call bounded by `within` (at least 1 ms).
fn within(conn: &Conn, within: Duration) -> Conn {
    Conn {
        timeout: within.max(Duration::from_millis(1)),
        ..conn.clone()
    }
}

/// RunPodSandbox of this guard's canary; its sandbox id.
pub async fn run(
    conn: &Conn,
    left: Duration,
    uid: &str,
    cgroup_parent: &str,
) -> Result<String, RpcError> {
    let pid = std::process::id().to_string();
    let name = format!("canary-{pid}");
    let labels = [(LABEL, pid.as_str())];
    let config = HostNetworkPod {
        name: &name,
        uid,
        namespace: NAMESPACE,
        labels: &labels,
        cgroup_parent,
        ..Default::default()
    }
    .config();
    let conn = within(conn, left);
    let mut c = RuntimeServiceClient::new(conn.channel.clone());
    let req = RunPodSandboxRequest {
        config: Some(config),
        runtime_handler: String::new(),
    };
    let call = c.run_pod_sandbox(conn.request(req, None));
    Ok(conn.call("CRI RunPodSandbox", call).await?.pod_sandbox_id)
}

/// StopPodSandbox, then RemovePodSandbox: the sandbox, its task, snapshot and cgroup go.
pub async fn remove(conn: &Conn, left: Duration, id: &str) -> Result<(), RpcError> {
    let deadline = tokio::time::Instant::now() + left;
    let remaining = || deadline.saturating_duration_since(tokio::time::Instant::now());
    let stop_conn = within(conn, remaining());
    let mut c = RuntimeServiceClient::new(conn.channel.clone());
    let stop = StopPodSandboxRequest {
        pod_sandbox_id: id.to_string(),
    };
    let call = c.stop_pod_sandbox(stop_conn.request(stop, None));
    stop_conn.call("CRI StopPodSandbox", call).await?;
    let remove_conn = within(conn, remaining());
    let remove = RemovePodSandboxRequest {
        pod_sandbox_id: id.to_string(),
    };
    let call = c.remove_pod_sandbox(remove_conn.request(remove, None));
    remove_conn.call("CRI RemovePodSandbox", call).await?;
    Ok(())
}

/// Every sandbox CRI knows in the canary's pod namespace, in any state, whoever made it.
pub async fn list(conn: &Conn, left: Duration) -> Result<Vec<Listed>, RpcError> {
    let conn = within(conn, left);
    let mut c = RuntimeServiceClient::new(conn.channel.clone());
    let req = ListPodSandboxRequest { filter: None };
    let call = c.list_pod_sandbox(conn.request(req, None));
    let items = conn.call("CRI ListPodSandbox", call).await?.items;
    Ok(items
        .into_iter()
        .filter_map(|s| {
            let m = s.metadata.filter(|m| m.namespace == NAMESPACE)?;
            Some(Listed {
                kubelet: s.labels.keys().any(|k| k.starts_with(KUBELET_LABELS)),
                id: s.id,
                name: m.name,
                uid: m.uid,
            })
        })
        .collect())
}
