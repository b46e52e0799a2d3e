//! The rules on kubelet's side: kubelet runs the runtime gate (`guard runtime`), and
//! nothing that joins the node (kubelet, a kubeadm unit, kubeadm in cloud-init's
//! `runcmd`) starts before containerd. Pure, over the image's facts.

use super::facts::{kubeadm_exec, Image};
use super::order;
use super::rules::{gate, unit};
use super::timeouts;
use crate::report::{Finding, Id, Status};

const KUBELET_DROPIN: &str = "kubelet.service.d/10-containerd-guard.conf";

pub fn kubelet_gate(image: &Image) -> Finding {
    let id = Id::LintKubeletGate;
    let kubelet = match unit(&image.kubelet, id, "kubelet.service") {
        Ok(Some(u)) => u,
        Ok(None) => return Finding::skip(id, "no kubelet.service in the image"),
        Err(f) => return f,
    };
    let f = gate(
        id,
        kubelet,
        ("runtime", "runtime", KUBELET_DROPIN),
        "kubelet starts without waiting for a usable runtime",
    );
    match f.status {
        Status::Pass => timeouts::judge(f, kubelet, &timeouts::runtime_need(&image.guard.settings)),
        _ => f,
    }
}

pub fn kubelet_order(image: &Image) -> Finding {
    let id = Id::LintKubeletOrder;
    let mut racing = Vec::new();
    let mut seen = Vec::new();
    if let Ok(Some(k)) = &image.kubelet {
        seen.push(k.name.clone());
        if !k.masked && order::names_unit(k, "After", "containerd.service").is_none() {
            racing.push(format!(
                "kubelet.service has no After=containerd.service ({})",
                order::files_of(k)
            ));
        }
    }
    for u in &image.kubeadm_units {
        let Some(exec) = kubeadm_exec(u) else {
            continue;
        };
        seen.push(u.name.clone());
        if order::names_unit(u, "After", "containerd.service").is_none()
            && order::names_unit(u, "After", "kubelet.service").is_none()
        {
            racing.push(format!(
                "{} runs kubeadm ({}) without After=containerd.service",
                u.name,
                exec.place()
            ));
        }
    }
    if !racing.is_empty() {
        let mut f = Finding::fail(id, "kubelet or kubeadm can start before containerd")
            .remedy("add After=containerd.service (and Wants=containerd.service) to those units");
        for r in racing {
            f = f.evidence(r);
        }
        return f;
    }
    if let Some(w) = runcmd_race(image) {
        return w;
    }
    match seen.is_empty() {
        true => Finding::skip(id, "no kubelet or kubeadm unit in the image"),
        false => Finding::pass(
            id,
            format!("{} ordered after containerd.service", seen.join(", ")),
        ),
    }
}

/// kubeadm in a cloud config's `runcmd` runs in cloud-final.service.
fn runcmd_race(image: &Image) -> Option<Finding> {
    let (file, line) = image
        .all_clouds()
        .find_map(|(file, c)| c.kubeadm.map(|l| (file, l)))?;
    let ordered = matches!(&image.cloud_final, Ok(Some(u)) if order::names_unit(u, "After", "containerd.service").is_some());
    (!ordered).then(|| {
        Finding::warn(Id::LintKubeletOrder, "kubeadm runs from cloud-init, which does not wait for containerd")
            .evidence(format!("{file}:{line}: kubeadm in runcmd/bootcmd; cloud-final.service has no After=containerd.service"))
            .remedy("add a cloud-final.service drop-in with After=containerd.service, or wait for the CRI socket before kubeadm")
    })
}
