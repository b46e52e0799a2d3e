//! What CRI (kubelet's view) says about containers and pod sandboxes.

use super::client::{Conn, RpcError, K8S_NS};
use k8s_cri::v1::{ListContainersRequest, ListPodSandboxRequest};
use std::time::Duration;

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
    let req = conn.request(ListContainersRequest { filter: None }, Some(K8S_NS));
    let answer = lean::call::<_, lean::Containers>(conn, lean::LIST_CONTAINERS, req);
    let r = conn.call("CRI ListContainers", answer).await?;
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
    let req = conn.request(ListPodSandboxRequest { filter: None }, Some(K8S_NS));
    let answer = lean::call::<_, lean::Sandboxes>(conn, lean::LIST_POD_SANDBOX, req);
    let r = conn.call("CRI ListPodSandbox", answer).await?;
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

/// CRI's two listings, decoded into only the fields the guard reads. A node's answer
/// grows with its pods, and each container and sandbox carries kubelet's labels and
/// annotations (hashes, termination paths, ports; a pod's own annotations, such as a
/// `last-applied-configuration`, on its sandbox): prost skips a field its message does not
/// declare without copying it, where k8s-cri's full messages would build a map of each.
/// The field numbers are CRI v1's (`runtime.v1`, api.proto), which never renumbers.
mod lean {
    use super::Conn;
    use k8s_cri::v1::{ContainerMetadata, PodSandboxMetadata};
    use std::collections::HashMap;

    pub const LIST_CONTAINERS: &str = "/runtime.v1.RuntimeService/ListContainers";
    pub const LIST_POD_SANDBOX: &str = "/runtime.v1.RuntimeService/ListPodSandbox";

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Containers {
        #[prost(message, repeated, tag = "1")]
        pub containers: Vec<Container>,
    }

    /// CRI's `Container` without its image, creation time and annotations.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Container {
        #[prost(string, tag = "1")]
        pub id: String,
        #[prost(string, tag = "2")]
        pub pod_sandbox_id: String,
        #[prost(message, optional, tag = "3")]
        pub metadata: Option<ContainerMetadata>,
        #[prost(int32, tag = "6")]
        pub state: i32,
        #[prost(map = "string, string", tag = "8")]
        pub labels: HashMap<String, String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sandboxes {
        #[prost(message, repeated, tag = "1")]
        pub items: Vec<Sandbox>,
    }

    /// CRI's `PodSandbox` without its creation time, labels, annotations and handler.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sandbox {
        #[prost(string, tag = "1")]
        pub id: String,
        #[prost(message, optional, tag = "2")]
        pub metadata: Option<PodSandboxMetadata>,
        #[prost(int32, tag = "3")]
        pub state: i32,
    }

    /// One unary call of `method` (a CRI path), its answer decoded as `Resp`.
    pub async fn call<Req, Resp>(
        conn: &Conn,
        method: &'static str,
        req: tonic::Request<Req>,
    ) -> Result<tonic::Response<Resp>, tonic::Status>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let mut grpc = tonic::client::Grpc::new(conn.channel.clone());
        grpc.ready()
            .await
            .map_err(|e| tonic::Status::unknown(format!("service was not ready: {e}")))?;
        let codec = tonic_prost::ProstCodec::<Req, Resp>::default();
        let path = tonic::codegen::http::uri::PathAndQuery::from_static(method);
        grpc.unary(req, path, codec).await
    }
}

/// Waits, until `deadline`, while containerd's CRI plugin says it is still starting
/// ("server is not initialized yet": it answers so for a while after every start, as it
/// loads its state): a containerd that has just started, or that the guard has just
/// restarted, is still starting, and kubelet waits for it the same way. Any other answer
/// ends the wait at once, whatever it is: the look judges it.
pub async fn started(conn: &Conn, deadline: std::time::Instant) {
    use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
    use k8s_cri::v1::VersionRequest;
    let mut pause =
        crate::backoff::Backoff::new(Duration::from_millis(50), Duration::from_millis(500));
    loop {
        let mut c = RuntimeServiceClient::new(conn.channel.clone());
        let req = VersionRequest {
            version: "v1".into(),
        };
        let asked = conn.call("CRI Version", c.version(conn.request(req, Some(K8S_NS))));
        let starting = match asked.await {
            Err(RpcError {
                kind: super::client::RpcErrorKind::Status { message, .. },
                ..
            }) => message.contains("not initialized yet"),
            _ => false,
        };
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if !starting || left.is_zero() {
            return;
        }
        tracing::debug!("containerd's CRI is still starting (server is not initialized yet)");
        tokio::time::sleep(pause.next().min(left)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::lean;
    use k8s_cri::v1 as cri;
    use prost::Message;
    use std::collections::HashMap;

    fn map(kv: &[(&str, &str)]) -> HashMap<String, String> {
        kv.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The lean messages read CRI's own encoding (k8s-cri's messages, built from the
    /// proto) field for field, and skip the rest.
    #[test]
    fn the_lean_listings_decode_what_cris_own_messages_encode() {
        let labels = map(&[("io.kubernetes.pod.uid", "u-1")]);
        let full = cri::ListContainersResponse {
            containers: vec![cri::Container {
                id: "c1".into(),
                pod_sandbox_id: "s1".into(),
                metadata: Some(cri::ContainerMetadata {
                    name: "app".into(),
                    attempt: 2,
                }),
                image: Some(cri::ImageSpec {
                    image: "registry.k8s.io/app:1".into(),
                    ..Default::default()
                }),
                image_ref: "sha256:ab".into(),
                state: cri::ContainerState::ContainerExited as i32,
                created_at: 42,
                labels: labels.clone(),
                annotations: map(&[("io.kubernetes.container.hash", "6a5a9c5d")]),
                image_id: "sha256:cd".into(),
            }],
        };
        let lean = lean::Containers::decode(full.encode_to_vec().as_slice()).unwrap();
        let c = &lean.containers[0];
        assert_eq!((c.id.as_str(), c.pod_sandbox_id.as_str()), ("c1", "s1"));
        assert_eq!(c.metadata.as_ref().map(|m| m.name.as_str()), Some("app"));
        assert_eq!(c.state, cri::ContainerState::ContainerExited as i32);
        assert_eq!(c.labels, labels);

        let full = cri::ListPodSandboxResponse {
            items: vec![cri::PodSandbox {
                id: "s1".into(),
                metadata: Some(cri::PodSandboxMetadata {
                    name: "web".into(),
                    uid: "u-1".into(),
                    namespace: "default".into(),
                    attempt: 0,
                }),
                state: cri::PodSandboxState::SandboxNotready as i32,
                created_at: 7,
                labels,
                annotations: map(&[("kubernetes.io/config.source", "api")]),
                runtime_handler: "runc".into(),
            }],
        };
        let lean = lean::Sandboxes::decode(full.encode_to_vec().as_slice()).unwrap();
        let s = &lean.items[0];
        assert_eq!(s.id, "s1");
        assert_eq!(s.metadata.as_ref().map(|m| m.uid.as_str()), Some("u-1"));
        assert_eq!(s.state, cri::PodSandboxState::SandboxNotready as i32);
    }
}
