//! kubelet's side of its contract: read from its files, judged beside containerd's
//! answer (or its silence), never acted on.

use super::*;
use crate::checks::kubelet::facts::NOT_ASKED;
use crate::host::kubelet::version::Version;

#[test]
fn kubelets_faults_fail_verify_and_only_warn_runtime_which_is_never_held_for_them() {
    let mut w = Fake::new(&[Looks::Healthy]);
    w.kubelet = Some(kubelet_facts(Ok(Version(1, 35, 0))));
    let (f, end) = go(&mut w, &settings(), VERIFY);
    assert_eq!(end, End::Unusable, "verify fails on them (exit 1)");
    assert_eq!(status(&f, "kubelet.endpoint"), Status::Fail);
    assert_eq!(status(&f, "kubelet.pod-infra-image"), Status::Fail);
    assert_eq!(status(&f, "kubelet.cgroup-driver"), Status::Pass);
    // guard runtime never runs kubelet: its version is unknown, and kubelet is not held
    w.kubelet = Some(kubelet_facts(Err(NOT_ASKED.into())));
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!(status(&f, "kubelet.endpoint"), Status::Warn);
    assert_eq!(status(&f, "kubelet.pod-infra-image"), Status::Warn);
    assert_eq!(
        (w.restarts, w.canaries),
        (0, 1),
        "nothing is done about them"
    );
}

#[test]
fn kubelets_contract_is_judged_while_containerd_is_silent() {
    let mut w = Fake::new(&[Looks::Silent]);
    w.kubelet = Some(kubelet_facts(Ok(Version(1, 35, 0))));
    let (f, end) = go(&mut w, &settings(), VERIFY);
    assert_eq!(end, End::Unusable);
    assert_eq!(status(&f, "runtime.answers"), Status::Fail);
    assert_eq!(status(&f, "kubelet.endpoint"), Status::Fail);
}
