//! `guard lint --root DIR`: the hazards behind a node that runs containerd on the wrong
//! filesystem, or kubelet on a broken runtime, found in the node image before any node
//! boots it. The image is a directory (a mounted image, a build chroot): it is read, never
//! executed or written, and nothing of the host the lint runs on is read with it: every
//! path goes through [`Tree`], which resolves links inside DIR.
//!
//! Adding a rule: a pure `fn(&Image) -> Finding` in [`rules`] (containerd's ordering),
//! [`kubelet`] (kubelet's and kubeadm's) or [`content`]
//! (what the image carries), the facts it needs in [`facts`], a `lint.*` id in
//! `report::id` with its README row, and an entry in [`RULES`]. Each rule gives exactly
//! one finding, `ok` when the image is fine, with `FILE:LINE` evidence and the fix.
//! kubelet's contract with containerd is the kubelet family's rules over the image's
//! files ([`contract`]): four findings, listed after kubelet's own unit's.

mod boot_mount;
mod budget;
mod cloud_init;
mod content;
mod contract;
mod facts;
mod kubelet;
mod order;
mod rules;
mod timeouts;
mod user_data;

pub use facts::Image;

use crate::host::tree::Tree;
use crate::host::units;
use crate::report::{Finding, Id, Report};
use std::path::Path;

/// The rules, in the order the report lists them.
const RULES: &[fn(&Image) -> Finding] = &[
    rules::guard_dropin,
    rules::containerd_order,
    rules::volume_mount,
    rules::volume_nofail,
    cloud_init::cloud_init,
    kubelet::kubelet_gate,
    kubelet::kubelet_order,
    rules::kill_mode,
    content::sandbox_archive,
    content::containerd_deprecations,
    content::config,
    budget::budget,
];

/// Why an image could not be linted at all (exit 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotAnImage(pub String);

/// Lints the image at `dir`; `user_data` is `(name, text)` of `--user-data`.
pub fn run(dir: &Path, user_data: Option<(String, String)>) -> Result<Report, NotAnImage> {
    let tree = Tree::open(dir).map_err(|e| NotAnImage(format!("cannot open the image: {e}")))?;
    if units::units_named(&tree, |_| true).is_empty() {
        return Err(NotAnImage(format!(
            "{}: no systemd unit under etc/systemd, usr/lib/systemd or lib/systemd; not a \
             node image (give --root the image's top directory)",
            dir.display()
        )));
    }
    let image = tracing::debug_span!("read").in_scope(|| facts::gather(&tree, user_data));
    let kubelet = tracing::debug_span!("kubelet").in_scope(|| contract::gather(&tree, &image));
    let mut findings: Vec<Finding> = RULES.iter().map(|rule| rule(&image)).collect();
    // kubelet's contract after the rules of kubelet's own unit
    let at = findings
        .iter()
        .position(|f| f.id == Id::LintKubeletOrder)
        .map_or(findings.len(), |i| i + 1);
    findings.splice(at..at, contract::judge(&kubelet));
    Ok(Report::new(findings))
}

#[cfg(test)]
mod tests {
    use crate::checks::volume::facts::{ContainerdSeen, Listener, VolumeFacts};
    use crate::checks::volume::rules::{evaluate, Phase};
    use crate::config::Settings;
    use crate::host::mountinfo::MountTable;
    use crate::report::Id;

    /// `guard verify`'s `volume.device` and `guard lint`'s `lint.config` judge an unset
    /// `[volume] device` with one function: the same status, summary and remedy.
    #[test]
    fn verify_and_lint_agree_on_an_unset_device() {
        let settings = Settings::default();
        assert_eq!(settings.volume.device, None);
        let facts = VolumeFacts {
            path: "/var/lib/containerd".into(),
            mounts: Ok(MountTable::default().into()),
            device: None,
            btrfs: None,
            stats: None,
            write_probe: None,
            hidden: None,
            containerd: ContainerdSeen {
                listener: Listener::Absent,
                socket: "/run/containerd/containerd.sock".into(),
                processes: Vec::new(),
                not_counted: Vec::new(),
            },
            kubelet: None,
            missing: false,
        };
        let verify = evaluate(&settings.volume, &facts, Phase::Verify);
        let verify = verify.iter().find(|f| f.id == Id::VolumeDevice).unwrap();
        let guard = super::facts::GuardConfig {
            settings,
            ..Default::default()
        };
        let lint = super::content::config_of(&guard, |_| None);
        assert_eq!(lint.id, Id::LintConfig);
        assert_eq!(
            (&lint.status, &lint.summary, &lint.remedy),
            (&verify.status, &verify.summary, &verify.remedy)
        );
    }
}
