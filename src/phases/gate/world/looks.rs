//! The real node's looks that take more than one read: the stale check's (beside the
//! guard's own mount table), the hygiene families' (CRI's view, then the pod cgroups,
//! then a second look that confirms), and those of files only (units, kubelet's config).

use super::*;

/// `look`, when the run covers `family`; otherwise it is never started.
pub(super) async fn when_covered<T>(
    scope: Scope,
    family: FamilyId,
    look: impl std::future::Future<Output = T>,
) -> Option<T> {
    match scope.looks_at(family) {
        true => Some(look.await),
        false => None,
    }
}

impl RealWorld<'_> {
    /// The families read from files only (systemd units, kubelet's configuration), before
    /// containerd is asked anything.
    pub(super) fn unit_and_kubelet_looks(
        &self,
        scope: Scope,
    ) -> (Option<KillModeFacts>, Option<EvictionFacts>) {
        let kill_mode = scope.looks_at(FamilyId::KillMode).then(|| {
            tracing::debug_span!("kill_mode facts").in_scope(|| kill_mode::gather(self.host))
        });
        let eviction = scope
            .looks_at(FamilyId::Eviction)
            .then(|| eviction::gather(self.host, self.settings));
        (kill_mode, eviction)
    }

    /// The stale check's facts of the containerd behind `socket`, read on the thread for
    /// host reads; the guard's own mount table (when its caller reads one) stands in for
    /// containerd's in the same mount namespace.
    pub(super) async fn stale_look(&self, socket: &Path) -> stale::StaleFacts {
        let (socket, root) = (socket.to_path_buf(), self.target.root.clone());
        let own_mounts = self.own_mounts.clone();
        crate::checks::off_the_loop("stale facts", self.host, move |host| {
            let own = || own_mounts.as_ref().and_then(|m| m.get().cloned());
            stale::gather(host, &socket, &root, own)
        })
        .await
    }

    /// The hygiene families' looks: a second one only when the first found a candidate.
    pub(super) async fn hygiene_looks(
        &self,
        conn: &Conn,
    ) -> (Option<LeakedTaskFacts>, Option<OrphanFacts>) {
        let Ok(first) = workloads::gather(self.host, conn, &self.target.state).await else {
            return (None, None);
        };
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
            if let Ok(second) = workloads::gather(self.host, conn, &self.target.state).await {
                orphans.second = Some(orphans::look(self.host, second.clone()));
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
        (Some(leaks), Some(orphans))
    }
}

/// The runtime containerd records for each container id (asked only for confirmed
/// orphans' containers).
pub(super) async fn runtimes(conn: &Conn, ids: BTreeSet<String>) -> BTreeMap<String, ShimRuntime> {
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
