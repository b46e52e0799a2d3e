//! Finding ids: the guard's public contract. Scripts, alerts and `journalctl` queries match
//! on these strings, so an id is never renamed or reused; a new check adds a new one here
//! and a row in README.md's "Finding ids" table (a test compares the two).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! ids {
    ($($variant:ident => $text:literal,)*) => {
        /// Every finding id the guard can report.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Id {
            $($variant,)*
        }

        impl Id {
            /// All ids, in the order a report lists their findings.
            pub const ALL: &'static [Id] = &[$(Id::$variant,)*];

            /// The id as scripts see it, e.g. `runtime.stale`.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Id::$variant => $text,)*
                }
            }
        }
    };
}

ids! {
    VolumeMount => "volume.mount",
    VolumeMounted => "volume.mounted",
    VolumeDevice => "volume.device",
    VolumeFstype => "volume.fstype",
    VolumeNotRoot => "volume.not-root",
    VolumeBacking => "volume.backing",
    VolumeWritable => "volume.writable",
    VolumeFreeSpace => "volume.free-space",
    VolumeFreeInodes => "volume.free-inodes",
    VolumeHiddenData => "volume.hidden-data",
    VolumeContainerdNotStarted => "volume.containerd-not-started",
    RuntimeAnswers => "runtime.answers",
    RuntimeVersion => "runtime.version",
    RuntimePlugins => "runtime.plugins",
    RuntimeStale => "runtime.stale",
    RuntimeCri => "runtime.cri",
    RuntimeNetwork => "runtime.network",
    RuntimeSandboxImage => "runtime.sandbox-image",
    RuntimeSandboxPinned => "runtime.sandbox-pinned",
    RuntimeHold => "runtime.hold",
    RuntimeLeakedTasks => "runtime.leaked-tasks",
    RuntimeOrphans => "runtime.orphans",
    RuntimeKillMode => "runtime.kill-mode",
    RuntimeDeprecations => "runtime.deprecations",
    // (a phase-2 family: reported after the looks that ask containerd)
    VolumeEviction => "volume.eviction",
    KubeletEndpoint => "kubelet.endpoint",
    KubeletPodInfraImage => "kubelet.pod-infra-image",
    KubeletCgroupV1 => "kubelet.cgroup-v1",
    KubeletCgroupDriver => "kubelet.cgroup-driver",
    RuntimeCanCreate => "runtime.can-create",
    RuntimeCanaryNamespace => "runtime.canary-namespace",
    RemedyRestart => "remedy.restart",
    RemedyRestoreImage => "remedy.restore-image",
    RemedyPinImage => "remedy.pin-image",
    RemedyPull => "remedy.pull",
    RemedyBudget => "remedy.budget",
    RemedyDeleteTask => "remedy.delete-task",
    RemedyReapOrphans => "remedy.reap-orphans",
    MetricsTextfile => "metrics.textfile",
    LintGuardDropin => "lint.guard-dropin",
    LintContainerdOrder => "lint.containerd-order",
    LintVolumeMount => "lint.volume-mount",
    LintVolumeNofail => "lint.volume-nofail",
    LintCloudInit => "lint.cloud-init",
    LintKubeletGate => "lint.kubelet-gate",
    LintKubeletOrder => "lint.kubelet-order",
    LintKubeletEndpoint => "lint.kubelet-endpoint",
    LintKubeletPodInfraImage => "lint.kubelet-pod-infra-image",
    LintKubeletCgroupV1 => "lint.kubelet-cgroup-v1",
    LintKubeletCgroupDriver => "lint.kubelet-cgroup-driver",
    LintKillMode => "lint.kill-mode",
    LintSandboxArchive => "lint.sandbox-archive",
    LintContainerdDeprecations => "lint.containerd-deprecations",
    LintConfig => "lint.config",
    LintBudget => "lint.budget",
}

impl std::fmt::Display for Id {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Id {
    type Err = String;
    fn from_str(s: &str) -> Result<Id, String> {
        Id::ALL
            .iter()
            .copied()
            .find(|id| id.as_str() == s)
            .ok_or_else(|| format!("unknown finding id {s:?}"))
    }
}

/// Tests and scripts compare ids with their text.
impl PartialEq<&str> for Id {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl Serialize for Id {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Id, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::Id;
    use std::collections::BTreeSet;

    /// The ids in README.md's "Finding ids" table: every `area.name` in its first column.
    fn readme_ids() -> BTreeSet<String> {
        let readme = include_str!("../../README.md");
        let section = readme
            .split("\n## Finding ids")
            .nth(1)
            .expect("README.md has a '## Finding ids' section");
        let table = section.split("\n## ").next().unwrap_or_default();
        table
            .lines()
            .filter_map(|l| l.strip_prefix("| "))
            .filter_map(|l| l.split(" |").next())
            .flat_map(|cell| cell.split('`').skip(1).step_by(2).map(str::to_string))
            .filter(|id| id.contains('.'))
            .collect()
    }

    #[test]
    fn readme_table_lists_exactly_the_ids_the_guard_reports() {
        let code: BTreeSet<String> = Id::ALL.iter().map(|i| i.as_str().to_string()).collect();
        let readme = readme_ids();
        let missing: Vec<_> = code.difference(&readme).collect();
        let extra: Vec<_> = readme.difference(&code).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "README.md's finding id table and report::Id differ: not in README {missing:?}, \
             not in the code {extra:?}"
        );
    }

    #[test]
    fn ids_round_trip_through_text_and_json() {
        for id in Id::ALL {
            assert_eq!(id.as_str().parse::<Id>(), Ok(*id));
            let json = serde_json::to_string(id).unwrap();
            assert_eq!(serde_json::from_str::<Id>(&json).unwrap(), *id);
        }
        assert!("runtime.nope".parse::<Id>().is_err());
    }
}
