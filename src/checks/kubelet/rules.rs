//! kubelet's side of its contract with containerd, judged setting by setting; each
//! finding names the FILE:LINE that set it. What cannot be known (no kubelet here, its
//! version, the host's cgroup version) is said and never fails a node on its own. Pure.

use super::facts::KubeletFacts;
use crate::host::kubelet::contract::{socket_path, Contract, Set};
use crate::host::kubelet::version::Version;
use crate::report::{Finding, Id};
use std::path::Path;

pub const IDS: [Id; 4] = [
    Id::KubeletEndpoint,
    Id::KubeletPodInfraImage,
    Id::KubeletCgroupV1,
    Id::KubeletCgroupDriver,
];

/// The first kubelet that takes its cgroup driver from CRI's `RuntimeConfig` by default
/// (`KubeletCgroupDriverFromCRI`, beta and on since 1.31); from 1.28 only where the gate
/// is turned on.
const DRIVER_FROM_CRI: Version = Version(1, 31, 0);
const DRIVER_FROM_CRI_GATE: Version = Version(1, 28, 0);

/// `endpoint_blocks`: a kubelet pointed at another socket fails (`guard verify`) or only
/// warns (`guard runtime`: two runtimes on one host may be deliberate, and kubelet is
/// never held for it).
pub fn evaluate(f: &KubeletFacts, endpoint_blocks: bool) -> Vec<Finding> {
    judge(f, endpoint_blocks, &Cgroups::of_host(f.cgroup_v1))
}

/// The rules over `f` where kubelet meets `cgroups`: a node's host (`evaluate`), or what
/// a node image leaves to the host that boots it (`guard lint`).
pub fn judge(f: &KubeletFacts, endpoint_blocks: bool, cgroups: &Cgroups) -> Vec<Finding> {
    let c = match &f.contract {
        Ok(Some(c)) => c,
        Ok(None) => {
            let why = "not judged: no kubelet.service and no kubelet configuration on this node";
            return IDS.map(|id| Finding::skip(id, why)).to_vec();
        }
        Err(e) => return unreadable(e),
    };
    vec![
        endpoint(c, &f.socket, endpoint_blocks),
        pod_infra_image(c, &f.version),
        cgroup_v1(c, &f.version, cgroups),
        cgroup_driver(c, f),
    ]
}

/// A configuration that cannot be read is a warning once; the rest is not judged.
fn unreadable(e: &str) -> Vec<Finding> {
    let mut out = vec![Finding::warn(
        Id::KubeletEndpoint,
        "cannot read kubelet's configuration: its contract with containerd is not judged",
    )
    .evidence(e)
    .remedy("fix the file, or name kubelet's configuration in [kubelet] config")];
    out.extend(IDS[1..].iter().map(|id| {
        Finding::skip(*id, "not judged: kubelet's configuration cannot be read")
    }));
    out
}

/// The socket an endpoint names, as the guard's: `/var/run` is `/run` on every systemd
/// host (a symlink), and repeated or trailing slashes mean nothing.
fn same_socket(endpoint: &str, socket: &str) -> bool {
    let norm = |p: &str| {
        let p = p.strip_prefix("/var/run/").map_or(p.to_string(), |r| format!("/run/{r}"));
        Path::new(&p).components().map(|c| c.as_os_str().to_owned()).collect::<Vec<_>>()
    };
    socket_path(endpoint).is_some_and(|p| norm(p) == norm(socket))
}

fn endpoint(c: &Contract, socket: &str, blocks: bool) -> Finding {
    let id = Id::KubeletEndpoint;
    let named = [
        ("runtime endpoint", &c.runtime_endpoint),
        // (empty: the runtime's endpoint serves images too)
        ("image endpoint", &c.image_endpoint),
    ];
    let wrong: Vec<String> = named
        .iter()
        .filter_map(|(key, set)| Some((key, (*set).as_ref()?)))
        .filter(|(_, s)| !s.value.is_empty() && !same_socket(&s.value, socket))
        .map(|(key, s)| format!("{key} {} ({})", s.value, s.at))
        .collect();
    if !wrong.is_empty() {
        let summary = format!("kubelet talks to another socket than containerd's {socket}");
        let mut f = match blocks {
            true => Finding::fail(id, summary),
            false => Finding::warn(id, summary),
        };
        for w in wrong {
            f = f.evidence(w);
        }
        return f.remedy(format!(
            "point kubelet at unix://{socket} (containerRuntimeEndpoint, or \
             --container-runtime-endpoint), or name the containerd kubelet uses in \
             [containerd] socket"
        ));
    }
    // (an empty value, as kubeadm writes it, is kubelet's default too)
    match c.runtime_endpoint.as_ref().filter(|s| !s.value.is_empty()) {
        Some(s) => Finding::pass(id, format!("kubelet talks to containerd at {socket}"))
            .evidence(format!("runtime endpoint {} ({})", s.value, s.at)),
        None => Finding::skip(
            id,
            "not judged: kubelet's default endpoint (containerRuntimeEndpoint is not set; \
             kubelet 1.27 and later want it set)",
        ),
    }
}

fn pod_infra_image(c: &Contract, version: &Result<Version, String>) -> Finding {
    let id = Id::KubeletPodInfraImage;
    let Some(set) = &c.pod_infra_image else {
        return Finding::pass(id, "kubelet's flags do not set --pod-infra-container-image");
    };
    let f = match version {
        Ok(v) if *v >= Version::CONTRACT_1_35 => Finding::fail(
            id,
            format!("kubelet {v} does not start with --pod-infra-container-image (1.35 removed it)"),
        ),
        Ok(v) => Finding::warn(
            id,
            format!("kubelet {v} is given --pod-infra-container-image, which 1.35 removes: \
                     upgraded, kubelet will not start"),
        ),
        Err(why) => Finding::warn(
            id,
            "kubelet is given --pod-infra-container-image, which kubelet 1.35 removed \
             (kubelet's version is not known)",
        )
        .evidence(format!("version not known: {why}")),
    };
    f.evidence(at(set, "--pod-infra-container-image"))
        .remedy("remove the flag: containerd's sandbox image names the pause image")
}

/// The cgroup version kubelet meets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cgroups {
    /// This host mounts cgroup v1 (hybrid included).
    V1,
    V2,
    /// This host's cannot be told: not judged.
    Unknown,
    /// A node image's: the host that boots it decides. A kubelet that refuses cgroup v1 is
    /// warned of, never failed; the text says why the image does not decide it.
    Undecided(String),
    /// A node image whose own kernel command line asks for cgroup v1; the text names the
    /// FILE:LINE. Judged as a v1 host.
    ImageV1(String),
}

impl Cgroups {
    /// The host's, as [`KubeletFacts::cgroup_v1`] holds it.
    pub fn of_host(v1: Option<bool>) -> Cgroups {
        match v1 {
            Some(true) => Cgroups::V1,
            Some(false) => Cgroups::V2,
            None => Cgroups::Unknown,
        }
    }
}

/// How a finding names the cgroup v1 host kubelet meets, and what it adds: why an image
/// leaves it undecided, or where the image asks for v1.
struct V1Host<'a> {
    this_host: &'static str,
    host_is: &'static str,
    undecided: Option<&'a String>,
    said: Option<&'a String>,
}

/// The v1 host of `host`, or the finding where there is none to judge.
fn v1_host(id: Id, host: &Cgroups) -> Result<V1Host<'_>, Finding> {
    let (this_host, host_is, undecided, said) = match host {
        Cgroups::Unknown => {
            return Err(Finding::skip(id, "not judged: cannot tell the host's cgroup version"))
        }
        Cgroups::V2 => return Err(Finding::pass(id, "the host runs cgroup v2")),
        Cgroups::V1 => ("this cgroup v1 host", "this host is cgroup v1", None, None),
        Cgroups::ImageV1(at) => (
            "the cgroup v1 host this image boots",
            "this image boots its host on cgroup v1",
            None,
            Some(at),
        ),
        Cgroups::Undecided(why) => ("a cgroup v1 host", "", Some(why), None),
    };
    Ok(V1Host {
        this_host,
        host_is,
        undecided,
        said,
    })
}

/// Whether kubelet (of `version`) refuses to start on the cgroup v1 `host`: fail on a v1
/// host, warn for an image (its host decides) or an unknown version.
fn cgroup_v1(c: &Contract, version: &Result<Version, String>, host: &Cgroups) -> Finding {
    let id = Id::KubeletCgroupV1;
    let V1Host {
        this_host,
        host_is,
        undecided,
        said,
    } = match v1_host(id, host) {
        Ok(h) => h,
        Err(f) => return f,
    };
    let set = c.fail_cgroup_v1.as_ref();
    if let Some(s) = set.filter(|s| s.value.eq_ignore_ascii_case("false")) {
        return Finding::pass(id, "kubelet is let start on cgroup v1 (failCgroupV1: false)")
            .evidence(at(s, "failCgroupV1"));
    }
    let remedy = "move the host to cgroup v2, or set failCgroupV1: false in kubelet's \
                  configuration";
    let refuses = "kubelet 1.35 refuses to start on cgroup v1";
    let told = set.is_some_and(|s| s.value.eq_ignore_ascii_case("true"));
    let mut f = match version {
        // (any kubelet that reads failCgroupV1 refuses when told to)
        _ if told => Finding::fail(id, format!("kubelet refuses to start on {this_host}")),
        Ok(v) if *v >= Version::CONTRACT_1_35 => match undecided {
            None => Finding::fail(id, format!("{refuses}: {host_is}, kubelet is {v}")),
            Some(_) => Finding::fail(id, format!("{refuses}, and this image's kubelet is {v}")),
        },
        Ok(v) => {
            return Finding::pass(id, format!("kubelet {v} starts on {this_host}"))
                .evidence(format!("{refuses} unless failCgroupV1 is false"))
        }
        Err(why) if undecided.is_none() => {
            Finding::warn(id, format!("{refuses}: {host_is}"))
                .evidence(format!("kubelet's version is not known: {why}"))
        }
        // (neither kubelet's version nor the host's cgroups: nothing to say of either)
        Err(why) => {
            return Finding::skip(
                id,
                "not judged: kubelet's version is not known and the image does not decide \
                 the host's cgroup version",
            )
            .evidence(format!("kubelet's version is not known: {why}"))
        }
    };
    if let Some(why) = undecided {
        f.status = crate::report::Status::Warn;
        f = f.evidence(why.clone());
    }
    if let Some(at) = said {
        f = f.evidence(at.clone());
    }
    if let Some(s) = set {
        f = f.evidence(at(s, "failCgroupV1"));
    }
    f.remedy(remedy)
}

fn cgroup_driver(c: &Contract, facts: &KubeletFacts) -> Finding {
    let id = Id::KubeletCgroupDriver;
    let (kubelet, from) = match &c.cgroup_driver {
        Some(s) => (s.value.as_str(), at(s, "cgroupDriver")),
        None => ("cgroupfs", "cgroupDriver not set: kubelet's default, cgroupfs".into()),
    };
    let containerd = super::facts::driver_name(facts.systemd_cgroup);
    if kubelet == containerd {
        let summary = format!("kubelet and containerd both use the {containerd} cgroup driver");
        return Finding::pass(id, summary).evidence(from);
    }
    let asks = facts.version.as_ref().ok().and_then(|v| from_cri(c, *v));
    if let Some(why) = &asks {
        match &facts.runtime_config {
            Some(Ok(Some(driver))) => {
                return Finding::pass(id, "kubelet asks containerd for the cgroup driver")
                    .evidence(why.clone())
                    .evidence(format!("containerd answers CRI RuntimeConfig: {driver}"))
                    .evidence(format!("{from} (not used: containerd answers)"))
            }
            Some(Ok(None)) => {} // containerd has no RuntimeConfig: kubelet takes its own
            Some(Err(e)) => {
                let summary = format!(
                    "kubelet's cgroup driver is {kubelet}, containerd's is {containerd}, and \
                     whether containerd gives kubelet its own is not known"
                );
                return Finding::warn(id, summary)
                    .evidence(why.clone())
                    .evidence(format!("CRI RuntimeConfig: {e}"))
                    .evidence(from);
            }
            None => {
                return Finding::warn(id, "kubelet asks containerd for the cgroup driver, which did not answer")
                    .evidence(why.clone())
                    .evidence(format!("{from}: kubelet uses it where containerd does not answer RuntimeConfig (before 2.0)"))
                    .evidence(facts.containerd_config.clone())
            }
        }
    }
    let summary = format!("kubelet's cgroup driver is {kubelet}, containerd's is {containerd}");
    let fallback = asks.map(|why| {
        format!("{why}, but containerd does not implement CRI RuntimeConfig (before 2.0): kubelet takes its own cgroupDriver")
    });
    let finding = match &facts.version {
        Ok(_) => fallback.into_iter().fold(Finding::fail(id, summary), Finding::evidence),
        Err(why) => Finding::warn(id, summary).evidence(format!(
            "kubelet 1.31 and later may ask containerd for the driver; its version is not known: {why}"
        )),
    };
    finding
        .evidence(from)
        .evidence(facts.containerd_config.clone())
        .remedy(format!(
            "set cgroupDriver: {containerd} in kubelet's configuration (or change SystemdCgroup in \
             containerd's to match kubelet's)"
        ))
}

/// Why kubelet `v` takes its driver from CRI's `RuntimeConfig`, if it does: on by default
/// from 1.31 unless the gate is turned off, from 1.28 where it is turned on.
fn from_cri(c: &Contract, v: Version) -> Option<String> {
    let gate = c.driver_from_cri_gate.as_ref();
    let is = |word: &str| gate.is_some_and(|g| g.value.trim().eq_ignore_ascii_case(word));
    let on = match (v >= DRIVER_FROM_CRI, v >= DRIVER_FROM_CRI_GATE) {
        (true, _) => !is("false"),
        (false, true) => is("true"),
        (false, false) => false,
    };
    let said = gate.map_or("on by default".to_string(), |g| at(g, "KubeletCgroupDriverFromCRI"));
    on.then(|| format!("kubelet {v}: KubeletCgroupDriverFromCRI {said}"))
}

/// `name=value (FILE:LINE)`.
fn at(set: &Set, name: &str) -> String {
    format!("{name}={} ({})", set.value, set.at)
}

#[cfg(test)]
mod tests;
