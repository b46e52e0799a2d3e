//! Whether containerd's root is the verified volume *now*, for the remedies that act on a
//! running node (phase 2: a restart, a restore, a pull, a pin). A restart starts a new
//! containerd on whatever is mounted at its root; an import writes into whatever that
//! containerd's root is. When phase 1's checks fail there (the volume detached under a
//! running containerd after a failover, the wrong disk, the root filesystem's directory),
//! each of those would make the outage worse: the guard refuses them and says why.

use super::{evaluate, Phase};
use crate::checks::volume::facts::VolumeFacts;
use crate::config::VolumeSettings;
use crate::report::{Id, Status};

/// Why containerd's root is not the verified volume, in the words the refusals use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unverified {
    /// What is wrong ("the volume is not mounted at /var/lib/containerd").
    pub condition: String,
    /// Where a new containerd, or an import, would land ("the root filesystem").
    pub lands_on: String,
    /// The operator's next step: mend the volume first, then repair.
    pub fix: String,
    /// The volume checks that failed, as `id: summary` (evidence).
    pub failed: Vec<String>,
}

impl Unverified {
    /// Why containerd is not restarted.
    pub fn restart_refusal(&self) -> String {
        format!(
            "{}: a restart would start containerd on {}",
            self.condition, self.lands_on
        )
    }

    /// Why `what` (an import, a pull, a label) is not written into containerd.
    pub fn write_refusal(&self, what: &str) -> String {
        format!(
            "{}: {what} would write into {}",
            self.condition, self.lands_on
        )
    }
}

/// Phase 1's verdict on containerd's root as a later start of containerd would judge it
/// (its own pre-start: low space only warns), or `None` when it passes. Never stricter
/// than that pre-start: a restart it would allow is allowed here.
pub fn unverified(settings: &VolumeSettings, facts: &VolumeFacts) -> Option<Unverified> {
    let findings = evaluate(settings, facts, Phase::LaterStart);
    let failed: Vec<_> = findings
        .iter()
        .filter(|f| f.status == Status::Fail && f.id != Id::VolumeContainerdNotStarted)
        .collect();
    let first = failed.first()?;
    let path = facts.path.display();
    let (condition, lands_on, fix) = match facts
        .mounts
        .as_ref()
        .ok()
        .map(|t| t.containing(&facts.path))
    {
        _ if facts.mount().is_some() => (
            format!(
                "{path} is not the verified volume ({}: {})",
                first.id, first.summary
            ),
            match failed.iter().any(|f| f.id == Id::VolumeNotRoot) {
                true => "the root filesystem's device".to_string(),
                false => "a filesystem containerd's pre-start refuses".to_string(),
            },
            "fix the volume first".to_string(),
        ),
        Some(Some(under)) => (
            format!("the volume is not mounted at {path}"),
            match under.mount_point.as_os_str() == "/" {
                true => "the root filesystem".to_string(),
                false => format!(
                    "the filesystem mounted at {} ({})",
                    under.mount_point.display(),
                    under.source
                ),
            },
            format!("mount the volume at {path} first"),
        ),
        _ => (
            format!("the volume is not mounted at {path}"),
            "whatever filesystem holds that directory".to_string(),
            format!("mount the volume at {path} first"),
        ),
    };
    Some(Unverified {
        condition,
        lands_on,
        fix: format!(
            "{fix} (the volume.* checks of `guard verify` say what is wrong), then run \
             `guard verify --repair`"
        ),
        failed: failed
            .iter()
            .map(|f| format!("{}: {}", f.id, f.summary))
            .collect(),
    })
}
