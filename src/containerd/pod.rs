//! The host-network pod as kubelet asks for one (CRI `RunPodSandbox` with an empty
//! hostname and the node's network): the one pod shape every CRI client of this project
//! builds, so the demo, the tests, the VM tests' kubelet stand-in (all in `testkit/`) ask
//! containerd the same question.

use k8s_cri::v1::*;

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
    pub labels: &'a [(&'a str, &'a str)],
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
            // Host-network sandboxes need an empty hostname, as containerd 1.6 expects.
            hostname: String::new(),
            labels: self
                .labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
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
