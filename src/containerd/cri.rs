//! What CRI (kubelet's view) says about containers and pod sandboxes.

use super::client::{Conn, RpcError, K8S_NS};
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::{ListContainersRequest, ListPodSandboxRequest};

/// A container's CRI state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CriState {
    Created,
    Running,
    Exited,
    Unknown,
}

impl CriState {
    fn from_proto(v: i32) -> CriState {
        match v {
            0 => CriState::Created,
            1 => CriState::Running,
            2 => CriState::Exited,
            _ => CriState::Unknown,
        }
    }
}

/// Which pod something belongs to, as kubelet named it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodRef {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

impl std::fmt::Display for PodRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} (uid {})", self.namespace, self.name, self.uid)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriContainer {
    pub id: String,
    pub name: String,
    pub sandbox_id: String,
    pub state: CriState,
    pub pod: PodRef,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriSandbox {
    pub id: String,
    pub ready: bool,
    pub pod: PodRef,
}

/// Every container CRI knows, in any state.
pub async fn containers(conn: &Conn) -> Result<Vec<CriContainer>, RpcError> {
    let mut c = RuntimeServiceClient::new(conn.channel.clone());
    let req = ListContainersRequest { filter: None };
    let r = conn
        .call(
            "CRI ListContainers",
            c.list_containers(conn.request(req, Some(K8S_NS))),
        )
        .await?;
    Ok(r.containers
        .into_iter()
        .map(|c| {
            let label = |k: &str| c.labels.get(k).cloned().unwrap_or_default();
            CriContainer {
                pod: PodRef {
                    name: label("io.kubernetes.pod.name"),
                    namespace: label("io.kubernetes.pod.namespace"),
                    uid: label("io.kubernetes.pod.uid"),
                },
                name: c.metadata.map(|m| m.name).unwrap_or_default(),
                id: c.id,
                sandbox_id: c.pod_sandbox_id,
                state: CriState::from_proto(c.state),
            }
        })
        .collect())
}

/// Every pod sandbox CRI knows, ready or not.
pub async fn sandboxes(conn: &Conn) -> Result<Vec<CriSandbox>, RpcError> {
    let mut c = RuntimeServiceClient::new(conn.channel.clone());
    let req = ListPodSandboxRequest { filter: None };
    let r = conn
        .call(
            "CRI ListPodSandbox",
            c.list_pod_sandbox(conn.request(req, Some(K8S_NS))),
        )
        .await?;
    Ok(r.items
        .into_iter()
        .map(|s| {
            let m = s.metadata.unwrap_or_default();
            CriSandbox {
                id: s.id,
                ready: s.state == 0,
                pod: PodRef {
                    name: m.name,
                    namespace: m.namespace,
                    uid: m.uid,
                },
            }
        })
        .collect())
}
