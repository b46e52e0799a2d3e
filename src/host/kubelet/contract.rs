//! kubelet's side of its contract with containerd, as its configuration file and its
//! unit's flags set it (a flag wins over the file, as in kubelet): the sockets it talks
//! to, the sandbox image flag 1.35 removed, its cgroup driver and whether it refuses a
//! cgroup v1 host. Each setting keeps where it was written, for evidence.

use super::flags::Flags;
use super::yaml::FileSettings;

/// One setting and where it was written (`FILE:LINE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Set {
    pub value: String,
    pub at: String,
}

/// The settings of kubelet's contract with the runtime that kubelet runs with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Contract {
    /// kubelet's binary (its unit's `ExecStart=`), for its version.
    pub binary: Option<String>,
    /// `containerRuntimeEndpoint` / `--container-runtime-endpoint`.
    pub runtime_endpoint: Option<Set>,
    /// `imageServiceEndpoint` / `--image-service-endpoint` (empty: the runtime's).
    pub image_endpoint: Option<Set>,
    /// `--pod-infra-container-image` (removed in kubelet 1.35: kubelet fails to start).
    pub pod_infra_image: Option<Set>,
    /// `cgroupDriver` / `--cgroup-driver` (kubelet's default: cgroupfs).
    pub cgroup_driver: Option<Set>,
    /// `failCgroupV1` (true by default from kubelet 1.35).
    pub fail_cgroup_v1: Option<Set>,
    /// The `KubeletCgroupDriverFromCRI` feature gate (file or `--feature-gates`).
    pub driver_from_cri_gate: Option<Set>,
}

/// The contract from the configuration file `file` (its settings, `None` when there is
/// none) and the unit's flags.
pub fn contract(file: Option<(&str, &FileSettings)>, flags: &Flags) -> Contract {
    let from_file = |key: &str| {
        let (name, settings) = file?;
        let l = settings.plain.get(key)?;
        Some(Set {
            value: l.value.clone(),
            at: format!("{name}:{}", l.line),
        })
    };
    let from_flag = |name: &str| {
        flags.get(name).map(|f| Set {
            value: f.value.clone(),
            at: f.at.clone(),
        })
    };
    let either = |flag: &str, key: &str| from_flag(flag).or_else(|| from_file(key));
    Contract {
        binary: flags.binary.clone(),
        runtime_endpoint: either("container-runtime-endpoint", "containerRuntimeEndpoint"),
        image_endpoint: either("image-service-endpoint", "imageServiceEndpoint"),
        pod_infra_image: from_flag("pod-infra-container-image"),
        cgroup_driver: either("cgroup-driver", "cgroupDriver"),
        fail_cgroup_v1: from_file("failCgroupV1"),
        driver_from_cri_gate: gate(file, flags, "KubeletCgroupDriverFromCRI"),
    }
}

/// A feature gate: `--feature-gates=A=true,B=false` wins over the file's `featureGates`;
/// repeated `--feature-gates` merge, as kubelet merges them (the last that names it wins).
fn gate(file: Option<(&str, &FileSettings)>, flags: &Flags, name: &str) -> Option<Set> {
    let gates = flags.merged("feature-gates", '=');
    let flag = gates.and_then(|g| g.get(name).cloned());
    let flag = flag.map(|(value, at)| Set { value, at });
    flag.or_else(|| {
        let (file_name, settings) = file?;
        let l = settings.feature_gates.get(name)?;
        Some(Set {
            value: l.value.clone(),
            at: format!("{file_name}:{}", l.line),
        })
    })
}

/// A CRI endpoint as kubelet writes it (`unix:///run/x.sock`, or a bare path) as a path;
/// `None` for another scheme (kubelet on Linux takes unix sockets only).
pub fn socket_path(endpoint: &str) -> Option<&str> {
    match endpoint.strip_prefix("unix://") {
        Some(path) => Some(path),
        None if endpoint.starts_with('/') => Some(endpoint),
        None => None,
    }
}
