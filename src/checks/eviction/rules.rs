//! `volume.eviction`: with containerd on its own volume, kubelet evicts for that volume
//! only through its `imagefs.*` thresholds. A kubelet config that sets `evictionHard`
//! without them (kubelet then drops its defaults) leaves the volume uncovered: the node
//! never reports DiskPressure while it fills. A warning: nothing breaks yet. Pure.

use super::facts::EvictionFacts;
use crate::host::kubelet::{Eviction, DEFAULTS};
use crate::report::{Finding, Id};

const ID: Id = Id::VolumeEviction;
/// The signals that cover containerd's volume.
const SIGNALS: [&str; 2] = ["imagefs.available", "imagefs.inodesFree"];

pub fn evaluate(f: &EvictionFacts) -> Finding {
    let e = match f {
        Ok(Some(e)) => e,
        Ok(None) => {
            return Finding::skip(
                ID,
                "kubelet has no configuration on this node yet (kubeadm writes it when the \
                 node joins)",
            )
        }
        Err(e) => {
            return Finding::warn(ID, "cannot read kubelet's eviction settings")
                .evidence(e.clone())
                .remedy("fix the file, or name kubelet's configuration in [kubelet] config")
        }
    };
    let from = source(e);
    let found: Vec<String> = SIGNALS.iter().filter_map(|s| covered(e, s)).collect();
    if found.len() == SIGNALS.len() {
        return Finding::pass(
            ID,
            format!("kubelet evicts for the image volume: {}", found.join(", ")),
        )
        .evidence(from);
    }
    let missing: Vec<&str> = SIGNALS
        .iter()
        .copied()
        .filter(|s| covered(e, s).is_none())
        .collect();
    let lines: Vec<String> = DEFAULTS
        .iter()
        .filter(|(s, _)| missing.contains(s))
        .map(|(s, v)| format!("  {s}: \"{v}\""))
        .collect();
    let mut finding = Finding::warn(
        ID,
        format!(
            "kubelet's eviction thresholds leave containerd's volume uncovered: no {}",
            missing.join(", no ")
        ),
    )
    .evidence(format!(
        "{from}; setting evictionHard replaces kubelet's defaults, so the node never reports \
         DiskPressure while the image volume fills"
    ))
    .remedy(format!(
        "add to evictionHard (kubelet's own defaults; or set mergeDefaultEvictionSettings: \
         true):\n{}",
        lines.join("\n")
    ));
    for c in found {
        finding = finding.evidence(format!("covered: {c}"));
    }
    finding
}

/// `signal<threshold (where)` when a hard or soft threshold covers `signal`.
fn covered(e: &Eviction, signal: &str) -> Option<String> {
    e.threshold(signal)
        .map(|(v, from)| format!("{signal}<{v} ({from})"))
}

fn source(e: &Eviction) -> String {
    match (&e.file, e.set_by.is_empty()) {
        (_, false) => format!("set by {}", e.set_by.join(", ")),
        (Some(file), true) => format!("{} sets no eviction thresholds", file.display()),
        (None, true) => "kubelet has no configuration file".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::kubelet::parse;
    use crate::report::Status;

    fn judge(yaml: &str) -> Finding {
        evaluate(&Ok(Some(parse(yaml).unwrap())))
    }

    #[test]
    fn table() {
        let f = judge("kind: KubeletConfiguration\n");
        assert_eq!(f.status, Status::Pass, "{f:?}");
        assert!(
            f.summary
                .contains("imagefs.available<15% (kubelet's default)"),
            "{f:?}"
        );

        let f = judge("evictionHard:\n  memory.available: 200Mi\n  nodefs.available: 10%\n");
        assert_eq!(f.status, Status::Warn, "{f:?}");
        assert!(
            f.summary
                .ends_with("no imagefs.available, no imagefs.inodesFree"),
            "{f:?}"
        );
        assert!(
            f.remedy
                .contains("  imagefs.available: \"15%\"\n  imagefs.inodesFree: \"5%\""),
            "{f:?}"
        );

        let f = judge(
            "evictionHard:\n  imagefs.available: 10%\nevictionSoft:\n  imagefs.inodesFree: 10%\n",
        );
        assert_eq!(f.status, Status::Pass, "a soft threshold covers too: {f:?}");

        let f = judge("evictionHard:\n  imagefs.available: 10%\n");
        assert_eq!(f.status, Status::Warn);
        assert!(f.summary.ends_with("no imagefs.inodesFree"), "{f:?}");
        assert!(!f.remedy.contains("imagefs.available:"), "{f:?}");

        let f =
            judge("mergeDefaultEvictionSettings: true\nevictionHard:\n  memory.available: 1Gi\n");
        assert_eq!(f.status, Status::Pass, "{f:?}");

        assert_eq!(evaluate(&Ok(None)).status, Status::Skip);
        assert_eq!(evaluate(&Err("x: not YAML".into())).status, Status::Warn);
    }
}
