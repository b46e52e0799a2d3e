//! The kubelet family's facts: kubelet's contract as its files set it
//! ([`crate::host::kubelet::contract`]), the containerd the guard verifies, the host's
//! cgroup version, and kubelet's version where the run may know it (the world runs
//! `kubelet --version`, in `guard verify` only, and hands the answer in).

use crate::host::kubelet::contract::Contract;
use crate::host::kubelet::version::Version;
use crate::host::kubelet::KubeletFiles;
use crate::host::Host;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletFacts {
    /// `Ok(None)`: no kubelet unit and no kubelet configuration on this node.
    pub contract: Result<Option<Contract>, String>,
    /// The containerd socket the guard verifies (a path).
    pub socket: String,
    /// containerd's cgroup driver for the sandbox's runtime: `SystemdCgroup = true`.
    pub systemd_cgroup: bool,
    /// Where containerd's driver is set, for evidence.
    pub containerd_config: String,
    /// kubelet's version, or why it is not known.
    pub version: Result<Version, String>,
    /// `Some(true)`: the host mounts cgroup v1; `None`: cannot tell.
    pub cgroup_v1: Option<bool>,
    /// What containerd answers kubelet's CRI `RuntimeConfig`: its cgroup driver, or
    /// `Ok(None)` where it does not implement the call (before 2.0); `None` where it was
    /// not asked (containerd silent).
    pub runtime_config: Option<Result<Option<String>, String>>,
}

/// The cgroup driver of a runtime whose `SystemdCgroup` is `systemd_cgroup`, as kubelet
/// names drivers.
pub fn driver_name(systemd_cgroup: bool) -> &'static str {
    match systemd_cgroup {
        true => "systemd",
        false => "cgroupfs",
    }
}

/// containerd's side, from its config (the gate's target).
pub struct Containerd<'a> {
    pub socket: &'a std::path::Path,
    pub systemd_cgroup: bool,
    pub said: &'a str,
}

/// Why kubelet's version is unknown where no one asked the binary: `guard runtime` runs
/// on kubelet's start path and never runs kubelet itself.
pub const NOT_ASKED: &str = "only guard verify runs `kubelet --version`";

/// Everything but the version ([`NOT_ASKED`]), which the caller asks the binary for
/// (bounded, cached) or not.
pub fn gather(host: &Host, files: &KubeletFiles, cd: Containerd) -> KubeletFacts {
    let contract = files
        .contract()
        .map(|c| (c != Contract::default()).then_some(c));
    KubeletFacts {
        contract,
        socket: cd.socket.display().to_string(),
        systemd_cgroup: cd.systemd_cgroup,
        containerd_config: cd.said.to_string(),
        version: Err(NOT_ASKED.to_string()),
        cgroup_v1: crate::host::cgroup::is_v1(host),
        runtime_config: None,
    }
}
