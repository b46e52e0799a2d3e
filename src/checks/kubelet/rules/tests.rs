//! The kubelet family's rules over contracts as kubeadm, k3s and node images write them.

use super::*;
use crate::report::Status;

const SOCKET: &str = "/run/containerd/containerd.sock";
const CONFIG: &str = "/var/lib/kubelet/config.yaml";

fn set(value: &str, line: usize) -> Option<Set> {
    Some(Set {
        value: value.to_string(),
        at: format!("{CONFIG}:{line}"),
    })
}

fn flag(value: &str) -> Option<Set> {
    Some(Set {
        value: value.to_string(),
        at: "/etc/default/kubelet:1 (KUBELET_EXTRA_ARGS)".to_string(),
    })
}

fn facts(contract: Contract, version: Option<Version>) -> KubeletFacts {
    KubeletFacts {
        contract: Ok(Some(contract)),
        socket: SOCKET.to_string(),
        systemd_cgroup: true,
        containerd_config: "containerd: SystemdCgroup = true for runtime runc".to_string(),
        version: version.ok_or_else(|| super::super::facts::NOT_ASKED.to_string()),
        cgroup_v1: Some(false),
        runtime_config: Some(Ok(Some("systemd".to_string()))),
    }
}

/// kubeadm's kubelet on containerd's socket, systemd driver, on cgroup v2.
fn kubeadm() -> Contract {
    Contract {
        binary: Some("/usr/bin/kubelet".into()),
        runtime_endpoint: set("unix:///var/run/containerd/containerd.sock", 19),
        cgroup_driver: set("systemd", 15),
        ..Contract::default()
    }
}

fn judged(f: &KubeletFacts, blocks: bool, id: Id) -> Finding {
    let all = evaluate(f, blocks);
    assert_eq!(all.len(), IDS.len(), "one finding an id: {all:?}");
    all.into_iter().find(|x| x.id == id).unwrap()
}

fn status(f: &KubeletFacts, blocks: bool, id: Id) -> Status {
    judged(f, blocks, id).status
}

#[test]
fn a_kubeadm_node_passes_every_rule() {
    let f = facts(kubeadm(), Some(Version(1, 35, 0)));
    for finding in evaluate(&f, true) {
        assert_eq!(finding.status, Status::Pass, "{finding:?}");
    }
    let e = judged(&f, true, Id::KubeletEndpoint);
    assert!(e.evidence.iter().any(|l| l.contains(":19")), "{e:?}");
}

#[test]
fn an_endpoint_on_another_socket_fails_verify_and_warns_runtime() {
    let mut c = kubeadm();
    c.runtime_endpoint = set("unix:///run/k3s/containerd/containerd.sock", 3);
    let f = facts(c, None);
    let verify = judged(&f, true, Id::KubeletEndpoint);
    assert_eq!(verify.status, Status::Fail, "{verify:?}");
    assert!(
        verify.evidence[0].contains("/run/k3s/containerd/containerd.sock")
            && verify.evidence[0].contains(&format!("{CONFIG}:3")),
        "{verify:?}"
    );
    assert!(verify.remedy.contains(SOCKET), "{verify:?}");
    assert_eq!(status(&f, false, Id::KubeletEndpoint), Status::Warn);

    // the image endpoint alone, set by a flag
    let mut c = kubeadm();
    c.image_endpoint = flag("unix:///run/crio/crio.sock");
    let f = facts(c, None);
    let e = judged(&f, true, Id::KubeletEndpoint);
    assert_eq!(e.status, Status::Fail);
    assert!(e.evidence[0].starts_with("image endpoint"), "{e:?}");

    // another scheme is not containerd's socket either
    let mut c = kubeadm();
    c.runtime_endpoint = set("tcp://10.0.0.1:2375", 3);
    assert_eq!(status(&facts(c, None), true, Id::KubeletEndpoint), Status::Fail);
}

#[test]
fn the_same_socket_written_differently_passes_and_unset_is_kubelets_default() {
    for same in [
        "unix:///run/containerd/containerd.sock",
        "/run/containerd/containerd.sock",
        "unix:///var/run/containerd//containerd.sock",
    ] {
        let mut c = kubeadm();
        c.runtime_endpoint = set(same, 1);
        c.image_endpoint = set("", 2);
        let e = judged(&facts(c, None), true, Id::KubeletEndpoint);
        assert_eq!(e.status, Status::Pass, "{same}: {e:?}");
    }
    for unset in [None, set("", 19)] {
        let mut c = kubeadm();
        c.runtime_endpoint = unset;
        let e = judged(&facts(c, None), true, Id::KubeletEndpoint);
        assert_eq!(e.status, Status::Skip, "{e:?}");
        assert!(e.summary.contains("kubelet's default"), "{e:?}");
    }
}

#[test]
fn pod_infra_image_fails_from_1_35_and_warns_before_or_unknown() {
    let mut c = kubeadm();
    c.pod_infra_image = flag("registry.k8s.io/pause:3.9");
    let at = |v: Option<Version>| judged(&facts(c.clone(), v), true, Id::KubeletPodInfraImage);
    let fail = at(Some(Version(1, 35, 0)));
    assert_eq!(fail.status, Status::Fail, "{fail:?}");
    assert!(fail.summary.contains("1.35.0"), "{fail:?}");
    assert!(
        fail.evidence.iter().any(|l| l.contains("KUBELET_EXTRA_ARGS")),
        "{fail:?}"
    );
    assert_eq!(at(Some(Version(1, 34, 2))).status, Status::Warn);
    let unknown = at(None);
    assert_eq!(unknown.status, Status::Warn);
    assert!(
        unknown.evidence.iter().any(|l| l.contains("not known")),
        "{unknown:?}"
    );
    let none = judged(&facts(kubeadm(), None), true, Id::KubeletPodInfraImage);
    assert_eq!(none.status, Status::Pass);
}

#[test]
fn cgroup_v1_fails_from_1_35_unless_fail_cgroup_v1_is_false() {
    let on_v1 = |c: Contract, v: Option<Version>| {
        let mut f = facts(c, v);
        f.cgroup_v1 = Some(true);
        judged(&f, true, Id::KubeletCgroupV1)
    };
    let fail = on_v1(kubeadm(), Some(Version(1, 35, 0)));
    assert_eq!(fail.status, Status::Fail, "{fail:?}");
    assert!(fail.summary.contains("kubelet 1.35 refuses to start on cgroup v1"));
    assert_eq!(on_v1(kubeadm(), None).status, Status::Warn);
    assert_eq!(
        on_v1(kubeadm(), Some(Version(1, 34, 0))).status,
        Status::Pass
    );
    let mut allowed = kubeadm();
    allowed.fail_cgroup_v1 = set("false", 7);
    let pass = on_v1(allowed, Some(Version(1, 36, 0)));
    assert_eq!(pass.status, Status::Pass, "{pass:?}");
    assert!(pass.evidence[0].contains(":7"), "{pass:?}");
    let mut refused = kubeadm();
    refused.fail_cgroup_v1 = set("true", 7);
    let f = on_v1(refused, Some(Version(1, 34, 1)));
    assert_eq!(f.status, Status::Fail);
    assert!(f.evidence.iter().any(|l| l.contains(":7")), "{f:?}");

    let mut unknown = facts(kubeadm(), Some(Version(1, 35, 0)));
    unknown.cgroup_v1 = None;
    assert_eq!(status(&unknown, true, Id::KubeletCgroupV1), Status::Skip);
}

/// A node image (`guard lint`) does not decide its host's cgroup version: what fails on
/// a v1 host only warns, and with kubelet's version unknown too nothing is said.
#[test]
fn an_image_leaves_cgroup_v1_to_its_host_and_only_warns() {
    let in_image = |c: Contract, v: Option<Version>| {
        let undecided = Cgroups::Undecided("the host decides".to_string());
        let all = judge(&facts(c, v), true, &undecided);
        all.into_iter()
            .find(|x| x.id == Id::KubeletCgroupV1)
            .unwrap()
    };
    let warn = in_image(kubeadm(), Some(Version(1, 35, 0)));
    assert_eq!(warn.status, Status::Warn, "{warn:?}");
    assert!(warn.summary.contains("kubelet is 1.35.0"), "{warn:?}");
    assert!(warn.remedy.contains("failCgroupV1: false"), "{warn:?}");
    assert!(warn.evidence.iter().any(|l| l == "the host decides"));
    let mut refused = kubeadm();
    refused.fail_cgroup_v1 = set("true", 7);
    let told = in_image(refused, None);
    assert_eq!(told.status, Status::Warn, "{told:?}");
    assert!(told.evidence.iter().any(|l| l.contains(":7")), "{told:?}");
    let mut allowed = kubeadm();
    allowed.fail_cgroup_v1 = set("false", 7);
    assert_eq!(
        in_image(allowed, Some(Version(1, 35, 0))).status,
        Status::Pass
    );
    let old = in_image(kubeadm(), Some(Version(1, 34, 0)));
    assert_eq!(old.status, Status::Pass, "{old:?}");
    assert_eq!(in_image(kubeadm(), None).status, Status::Skip);

    // an image whose own kernel command line asks for v1 is judged as a v1 host
    let said = Cgroups::ImageV1("/etc/default/grub:6: v1".to_string());
    let v1 = judge(&facts(kubeadm(), Some(Version(1, 35, 0))), true, &said);
    let v1 = v1.iter().find(|x| x.id == Id::KubeletCgroupV1).unwrap();
    assert_eq!(v1.status, Status::Fail, "{v1:?}");
    assert!(v1.summary.contains("this image boots its host on cgroup v1"));
    assert!(v1.evidence.iter().any(|l| l.contains("/etc/default/grub:6")));
}

#[test]
fn a_driver_mismatch_fails_unless_kubelet_asks_containerd() {
    let cgroupfs = |v: Option<Version>, gate: Option<Set>| {
        let mut c = kubeadm();
        c.cgroup_driver = None; // kubelet's default: cgroupfs; containerd's: systemd
        c.driver_from_cri_gate = gate;
        judged(&facts(c, v), true, Id::KubeletCgroupDriver)
    };
    let fail = cgroupfs(Some(Version(1, 30, 0)), None);
    assert_eq!(fail.status, Status::Fail, "{fail:?}");
    assert!(fail.summary.contains("cgroupfs, containerd's is systemd"));
    assert!(fail.remedy.contains("cgroupDriver: systemd"), "{fail:?}");
    let asks = cgroupfs(Some(Version(1, 34, 0)), None);
    assert_eq!(asks.status, Status::Pass, "{asks:?}");
    assert!(asks.summary.contains("kubelet asks containerd"));
    assert_eq!(
        cgroupfs(Some(Version(1, 31, 0)), None).status,
        Status::Pass,
        "on by default from 1.31"
    );
    let off = cgroupfs(Some(Version(1, 34, 0)), set("false", 30));
    assert_eq!(off.status, Status::Fail, "the gate turned off: {off:?}");
    assert!(off.evidence.iter().any(|l| l.contains("cgroupDriver not set")));
    assert_eq!(
        cgroupfs(Some(Version(1, 29, 0)), flag("true")).status,
        Status::Pass,
        "turned on before its default"
    );
    assert_eq!(cgroupfs(None, None).status, Status::Warn);
    // kubelet asks, and containerd (1.6, 1.7) has no RuntimeConfig: kubelet falls back to
    // its own driver, which is not containerd's
    let mut c = kubeadm();
    c.cgroup_driver = None;
    let mut old = facts(c, Some(Version(1, 33, 0)));
    old.runtime_config = Some(Ok(None));
    let fallback = judged(&old, true, Id::KubeletCgroupDriver);
    assert_eq!(fallback.status, Status::Fail, "{fallback:?}");
    assert!(fallback.evidence.iter().any(|l| l.contains("does not implement CRI RuntimeConfig")));
    old.runtime_config = None;
    assert_eq!(status(&old, true, Id::KubeletCgroupDriver), Status::Warn, "containerd silent");
    old.runtime_config = Some(Err("deadline".into()));
    assert_eq!(status(&old, true, Id::KubeletCgroupDriver), Status::Warn);

    let mut same = kubeadm();
    same.cgroup_driver = set("cgroupfs", 15);
    let mut f = facts(same, None);
    f.systemd_cgroup = false;
    assert_eq!(status(&f, true, Id::KubeletCgroupDriver), Status::Pass);
}

#[test]
fn no_kubelet_or_an_unreadable_config_is_said_and_never_fails() {
    let mut f = facts(Contract::default(), None);
    f.contract = Ok(None);
    for finding in evaluate(&f, true) {
        assert_eq!(finding.status, Status::Skip, "{finding:?}");
        assert!(finding.summary.contains("no kubelet"), "{finding:?}");
    }
    f.contract = Err(format!("{CONFIG}: not YAML"));
    let all = evaluate(&f, true);
    assert_eq!(all[0].status, Status::Warn, "{all:?}");
    assert!(all[0].evidence[0].contains("not YAML"));
    assert!(all[1..].iter().all(|x| x.status == Status::Skip), "{all:?}");
}
