//! The canary pod's CRI calls: run a host-network pod sandbox, stop and remove it, and
//! find the canaries a guard left behind. Each call is bounded by the time the caller
//! gives it. What the canary proves and when it runs: `checks::canary`.

use super::client::{Conn, RpcError};
use super::pod::HostNetworkPod;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use std::time::Duration;

/// The canary's pod namespace: no Kubernetes namespace can be named so (a DNS label of at
/// most 63 characters is allowed, but kubelet only starts pods of namespaces the API
/// server has, and the guard's pods carry [`LABEL`] too).
pub const NAMESPACE: &str = "containerd-guard-canary";
/// The label every canary carries, its value the pid of the guard that made it.
pub const LABEL: &str = "io.containerd-guard.canary-pid";

/// A canary sandbox as CRI lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Canary {
    pub id: String,
    /// The pid of the guard that made it (its label), if it parses.
    pub pid: Option<u32>,
}

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

/// Every canary sandbox CRI knows (of any guard), in any state.
pub async fn list(conn: &Conn, left: Duration) -> Result<Vec<Canary>, RpcError> {
    let conn = within(conn, left);
    let mut c = RuntimeServiceClient::new(conn.channel.clone());
    let req = ListPodSandboxRequest { filter: None };
    let call = c.list_pod_sandbox(conn.request(req, None));
    let items = conn.call("CRI ListPodSandbox", call).await?.items;
    Ok(items
        .into_iter()
        .filter(|s| {
            s.metadata
                .as_ref()
                .is_some_and(|m| m.namespace == NAMESPACE)
        })
        .filter_map(|s| {
            let label = s.labels.get(LABEL)?;
            Some(Canary {
                pid: label.parse().ok(),
                id: s.id,
            })
        })
        .collect())
}
