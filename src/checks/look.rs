//! What a family's [`gather`](super::Family::gather) reads through: the host, the
//! settings, what phase 2 knows of containerd, the connection once containerd answered,
//! and the looks several families share. A shared look is computed once, by whichever
//! family asks first, and awaited by the others (the answers family's CRI answers, which
//! the sandbox image family reads too; the hygiene families' two looks at what runs;
//! kubelet's unit and configuration file, which the eviction and kubelet families read): a
//! family that needs another's reads asks for them here, so a look's work does not grow
//! with the number of families that read it.

use super::answers::facts::Answering;
use super::leaked_tasks::facts::LeakedTaskFacts;
use super::orphans::facts::OrphanFacts;
use super::stale::facts::StaleFacts;
use super::Target;
use crate::config::Settings;
use crate::containerd::client::{Conn, VersionAnswer};
use crate::host::kubelet::KubeletFiles;
use crate::host::mountinfo::MountTable;
use crate::host::Host;
use crate::state::StateDir;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// The guard's own mount table, read beside phase 2 by its caller: the call waits until
/// it is read (`None`: it could not be). A call, not the table, since it may still be
/// being read when the look begins, and only the stale family waits for it.
pub type OwnMountTable = Arc<dyn Fn() -> Option<Arc<MountTable>> + Send + Sync>;

/// When a family reads: the stage of a look it is gathered in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// From the host's files, before containerd is asked: judged even when it is silent.
    Files,
    /// From containerd, only once it answered.
    Containerd,
}

/// Where containerd keeps its uuid, under its root; containerd creates it when asked for
/// it and it is missing.
const INTROSPECTION_UUID: &str = "io.containerd.grpc.v1.introspection/uuid";

/// One look at the node, as the families read it.
pub struct Look<'a> {
    pub host: &'a Host,
    pub settings: &'a Settings,
    pub target: &'a Target,
    /// The guard's own mount table, when its caller reads it (`guard verify`).
    pub own_mounts: Option<OwnMountTable>,
    /// Where a kubelet version answered this boot is kept.
    pub state_dir: Option<&'a StateDir>,
    /// Each call's own bound (less inside a run's deadline).
    pub call_timeout: Duration,
    /// Whether this run asks kubelet's binary its version, and keeps the answer
    /// (`Some(true)`).
    pub kubelet_version: Option<bool>,
    /// When the look began: how long containerd was waited for.
    pub started: Instant,
    /// containerd, and its answer to `Version`: `None` in the files stage.
    answered: Option<(Conn, VersionAnswer)>,
    cri: OnceCell<Option<Answering>>,
    hygiene: OnceCell<Option<(LeakedTaskFacts, OrphanFacts)>>,
    stale: OnceCell<StaleFacts>,
    kubelet_files: OnceLock<KubeletFiles>,
}

impl<'a> Look<'a> {
    pub fn new(host: &'a Host, settings: &'a Settings, target: &'a Target) -> Look<'a> {
        Look {
            host,
            settings,
            target,
            own_mounts: None,
            state_dir: None,
            call_timeout: Duration::MAX,
            kubelet_version: None,
            started: Instant::now(),
            answered: None,
            cri: OnceCell::new(),
            hygiene: OnceCell::new(),
            stale: OnceCell::new(),
            kubelet_files: OnceLock::new(),
        }
    }

    /// The look once containerd answered: its families' stage can be gathered.
    pub fn answered(mut self, conn: Conn, version: VersionAnswer) -> Self {
        self.answered = Some((conn, version));
        self
    }

    /// The connection to containerd; `None` before it answered.
    pub fn conn(&self) -> Option<&Conn> {
        self.answered.as_ref().map(|(conn, _)| conn)
    }

    /// containerd's version as its `Version` answered; `None` before it answered, or
    /// when it did not say.
    pub fn containerd_version(&self) -> Option<&str> {
        let (_, version) = self.answered.as_ref()?;
        version.as_ref().ok().map(|(v, _)| v.as_str())
    }

    /// The connection, for what the run does after the look (remedies).
    pub fn into_conn(self) -> Option<Conn> {
        self.answered.map(|(conn, _)| conn)
    }

    /// The answers family's CRI answers, asked once: the sandbox image family reads
    /// CRI's `ImageStatus` of its image from them. `None` before containerd answered.
    pub async fn cri(&self) -> Option<&Answering> {
        use tracing::Instrument;
        // (made and boxed only by the family that asks first: every family that awaits
        // this look would otherwise hold room for the whole ask, 58 KiB)
        let ask = || {
            let ask = async {
                let (conn, version) = self.answered.as_ref()?;
                let reference = &self.target.image.reference;
                let answers = super::answers::facts::gather(
                    conn,
                    version.clone(),
                    reference,
                    self.writes_under_root(),
                );
                Some(answers.await)
            };
            Box::pin(ask.instrument(tracing::debug_span!("runtime facts")))
        };
        self.cri.get_or_init(ask).await.as_ref()
    }

    /// The hygiene families' looks at what runs, taken once for both: the first, and a
    /// second about 2 s later when the first found a candidate of either family.
    pub async fn hygiene(&self) -> Option<&(LeakedTaskFacts, OrphanFacts)> {
        use tracing::Instrument;
        let span = tracing::debug_span!("hygiene looks");
        // (boxed, as the CRI answers above: made only by the family that asks first)
        let looks = || Box::pin(self.hygiene_looks().instrument(span));
        self.hygiene.get_or_init(looks).await.as_ref()
    }

    /// containerd's mounts beside the filesystem at its root, read once on the thread for
    /// host reads: the stale family judges them, and nothing that writes under containerd's
    /// root is asked of a containerd they prove stale (`answers::facts::NOT_ASKED`). The
    /// guard's own mount table (when its caller reads one) stands in for containerd's in
    /// the same mount namespace.
    pub async fn stale(&self) -> &StaleFacts {
        let read = || async {
            // The one thread for host reads goes to the hygiene looks' pass over the
            // cgroups first (queued on their first poll, after the stale family's in
            // registry order): this read may wait there for `guard verify`'s mount table.
            tokio::task::yield_now().await;
            let socket = self.host.path(&self.target.socket);
            let (root, own_mounts) = (self.target.root.clone(), self.own_mounts.clone());
            super::off_the_loop("stale facts", self.host, move |host| {
                let own = || own_mounts.as_ref().and_then(|read| read());
                super::stale::facts::gather(host, &socket, &root, own)
            })
            .await
        };
        self.stale.get_or_init(read).await
    }

    /// Whether containerd would write under its root if asked what makes it read its uuid
    /// (CRI `Status`, `Introspection.Plugins` and `Server`): only where that file is
    /// missing there (kubelet's first `Status` writes it on every node) and the stale
    /// facts prove containerd stale. A cheap look first: the stale facts wait behind the
    /// hygiene looks on the thread for host reads, and would hold up every look's `Status`.
    pub async fn writes_under_root(&self) -> bool {
        let uuid = self.host.path(&self.target.root).join(INTROSPECTION_UUID);
        if std::fs::symlink_metadata(uuid).is_ok() {
            return false;
        }
        super::stale::rules::proven_stale(self.stale().await)
    }

    /// kubelet's unit and configuration file, read once for the families that judge them.
    pub fn kubelet_files(&self) -> &KubeletFiles {
        let configured = self.settings.kubelet.config.as_deref();
        self.kubelet_files
            .get_or_init(|| KubeletFiles::read(self.host, configured))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::containerd::config::ContainerdConfig;
    use std::mem::size_of_val;

    /// Whoever awaits a shared look holds room for the wait, not for the look: the look is
    /// made and boxed by the family that asks first. (Held inline, the CRI ask (58 KiB)
    /// sat in both families that read it and the hygiene looks in both theirs: the gate's
    /// future grew to 222 KiB and the guard's peak memory by 0.7 MiB.)
    #[test]
    fn awaiting_a_shared_look_holds_no_room_for_the_look() {
        let host = Host::at("/nonexistent");
        let settings = Settings::default();
        let target = Target::new(&settings, &ContainerdConfig::defaults());
        let look = Look::new(&host, &settings, &target);
        let (cri, hygiene) = (size_of_val(&look.cri()), size_of_val(&look.hygiene()));
        assert!(cri <= 1024, "awaiting the CRI answers takes {cri} bytes");
        assert!(
            hygiene <= 1024,
            "awaiting the hygiene looks takes {hygiene} bytes"
        );
    }
}
