//! The real node's looks that take more than one read, which [`Look`] holds for the
//! families: the hygiene families' (CRI's view, then the pod cgroups, then a second look
//! that confirms), and kubelet's (its files, then its binary's version).

use super::*;
use crate::checks::kubelet::facts::{self as kubelet, KubeletFacts};
use crate::checks::Look;
use crate::host::kubelet::version::{self, Cached, Version};

/// `kubelet --version` answers at once; a binary that does not is not waited for.
const KUBELET_VERSION_TIMEOUT: Duration = Duration::from_secs(2);

impl Look<'_> {
    /// kubelet's contract, and its version where this run asks the binary.
    pub(crate) async fn kubelet(&self) -> KubeletFacts {
        let containerd = kubelet::Containerd {
            socket: &self.target.socket,
            systemd_cgroup: self.target.systemd_cgroup,
            said: &self.target.systemd_cgroup_said,
        };
        let mut facts = kubelet::gather(self.host, self.kubelet_files(), containerd);
        if let (Some(cache), Ok(Some(contract))) = (self.kubelet_version, &facts.contract) {
            facts.version = self
                .kubelet_version(contract.binary.as_deref(), cache)
                .await;
        }
        facts
    }

    /// `kubelet --version` of the unit's binary, bounded, from this boot's record when it
    /// answers for the binary as it is now; a new answer is kept where `cache` allows. A
    /// run that writes nothing (`--npd`, which NPD runs all day) executes nothing: the
    /// record, else dpkg's record of the kubelet package, else the version string in the
    /// binary ([`version::from_binary`], bounded).
    async fn kubelet_version(&self, binary: Option<&str>, cache: bool) -> Result<Version, String> {
        let binary = binary.ok_or("kubelet's unit names no binary")?;
        let path = self.host.os_file(binary);
        let meta = std::fs::metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let key = Cached::key_of(&meta);
        let dir = self.state_dir;
        let kept = dir.and_then(|d| Some((d, d.read_kubelet_version()?)));
        if let Some((d, kept)) = kept {
            if kept.answers(d.boot_id(), binary, key) {
                return Ok(kept.version);
            }
        }
        if !cache {
            return self.kubelet_version_unrun(&path);
        }
        let argv = [path.display().to_string(), "--version".to_string()];
        // (within a run's deadline, as every call: `guard verify --npd --timeout`)
        let bound = KUBELET_VERSION_TIMEOUT.min(self.call_timeout);
        let said = run_argv(&argv, bound).await.map_err(|e| e.to_string())?;
        let version =
            version::from_version_output(&said).ok_or_else(|| format!("no version in {said}"))?;
        if let (true, Some(d)) = (cache, dir) {
            let (dev, ino, mtime_ns) = key;
            let record = Cached {
                boot_id: d.boot_id().to_string(),
                binary: binary.to_string(),
                dev,
                ino,
                mtime_ns,
                version,
            };
            // (a cache: a record not written costs one more run next time, nothing else)
            let _ = d.save_kubelet_version(&record);
        }
        Ok(version)
    }

    /// kubelet's version without running it: dpkg's record, else its binary's string.
    fn kubelet_version_unrun(&self, binary: &std::path::Path) -> Result<Version, String> {
        use crate::host::proc::{open_regular, read_bounded, Links};
        let status = self.host.os_file(version::DPKG_STATUS);
        let record = read_bounded(&status, version::DPKG_STATUS_CAP, Links::Follow).ok();
        let text = record.map(|b| String::from_utf8_lossy(&b).into_owned());
        if let Some(v) = text.as_deref().and_then(version::from_dpkg_status) {
            return Ok(v);
        }
        // (never blocking on what the unit names: a FIFO there is no binary)
        let (file, _) = open_regular(binary, Links::Follow).map_err(|e| e.text().to_string())?;
        version::from_binary(file, version::BINARY_CAP).ok_or_else(|| {
            format!(
                "not run (a run that writes nothing executes nothing), and neither dpkg's record \
                 nor {} names kubelet's version",
                binary.display()
            )
        })
    }

    /// The hygiene families' looks: a second one only when the first found a candidate.
    pub(crate) async fn hygiene_looks(&self) -> Option<(LeakedTaskFacts, OrphanFacts)> {
        let conn = self.conn()?;
        let first = workloads::gather(self.host, conn, &self.target.state)
            .await
            .ok()
            .map(std::sync::Arc::new)?;
        let first_look = tracing::debug_span!("orphan look")
            .in_scope(|| orphans::look(self.host, first.clone()));
        let mut orphans = OrphanFacts {
            first: first_look,
            second: None,
            reap: self.settings.orphans.reap,
            runtimes: Default::default(),
            containerd_root: resolved(&self.host.path(&self.target.root)),
        };
        let mut leaks = LeakedTaskFacts {
            first,
            second: None,
        };
        let suspicious = !leaked_rules::candidates(&leaks.first).is_empty()
            || !orphan_rules::candidates(&orphans.first).is_empty();
        if suspicious {
            tokio::time::sleep(SECOND_LOOK).await;
            let again = workloads::gather(self.host, conn, &self.target.state).await;
            if let Ok(second) = again.map(std::sync::Arc::new) {
                let again = orphans::look_again(self.host, second.clone(), &orphans.first);
                orphans.second = Some(again);
                leaks.second = Some(second);
            }
            let confirmed = orphan_rules::confirmed(&orphans);
            let pids: Vec<i32> = confirmed.iter().map(|p| p.info.pid).collect();
            let ids: BTreeSet<String> = confirmed
                .iter()
                .map(|p| p.cgroup.container_id.clone())
                .collect();
            orphans.runtimes = runtimes(conn, ids).await;
            orphans::describe(self.host, &mut orphans.first, &pids).await;
        }
        Some((leaks, orphans))
    }
}

/// The runtime containerd records for each container id (asked only for confirmed
/// orphans' containers).
async fn runtimes(conn: &Conn, ids: BTreeSet<String>) -> BTreeMap<String, ShimRuntime> {
    let mut out = BTreeMap::new();
    for id in ids {
        let runtime = match tasks::runtime_of(conn, K8S_NS, &id).await {
            Ok(Some(name)) => ShimRuntime::Named(name),
            Ok(None) => ShimRuntime::Gone,
            Err(e) => ShimRuntime::Unreadable(e.to_string()),
        };
        out.insert(id, runtime);
    }
    out
}
