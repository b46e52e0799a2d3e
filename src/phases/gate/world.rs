//! Everything phase 2 reads or changes, behind one small trait: containerd (observe,
//! tasks, restart, import, pull), the boot clock, and the state directory with its lock.
//! [`RealWorld`] is the real one; the tests use a fake.

use super::decide::{Observation, Scope};
use crate::checks::answers::facts::{self as answers, AnswerFacts};
use crate::checks::canary::facts::{self as canary, CanaryFacts, CanaryRun};
use crate::checks::leaked_tasks::facts::LeakedTaskFacts;
use crate::checks::leaked_tasks::rules::{self as leaked_rules, Leak};
use crate::checks::orphans::facts::{self as orphans, OrphanFacts, ShimRuntime};
use crate::checks::orphans::rules::{self as orphan_rules, Condemned};
use crate::checks::{workloads, Look, Stage};
use crate::config::units::format_duration;
use crate::config::Settings;
use crate::containerd::client::{self, Conn, RpcError, K8S_NS};
use crate::containerd::config::ContainerdConfig;
use crate::containerd::oci::normalize_ref;
use crate::containerd::tasks::{self, LiveTask};
use crate::host::Host;
use crate::phases::OwnMounts;
use crate::remedies::command::{run_argv, CommandError};
use crate::remedies::hygiene;
use crate::remedies::restore::{import_archive, pinned, Import};
use crate::remedies::{pull, RemedyError};
use crate::state::ledger::State;
use crate::state::lock::{LockError, RepairLock};
use crate::state::{LedgerFile, Loaded, StateDir, StateError};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

mod looks;
use crate::checks::volume::rules::Unverified;
pub use crate::checks::Target;

/// What phase 2 acts on. Async methods talk to containerd or sleep; the rest are quick
/// local reads and writes.
#[allow(async_fn_in_trait)] // used with concrete types only, never as `dyn World`
pub trait World {
    /// Time since boot: the clock restarts are spaced on and holds are bounded by.
    fn now(&self) -> Duration;
    async fn sleep(&mut self, d: Duration);

    /// One attempt at the repair lock; held until [`World::unlock`].
    fn try_lock(&mut self) -> Result<(), LockError>;
    fn unlock(&mut self);
    /// The state file as it is, without the lock.
    fn read_state(&self) -> LedgerFile;
    /// The state to count on, under the lock (a corrupt file is quarantined).
    fn load_state(&mut self) -> (State, Loaded);
    fn save_state(&mut self, state: &State) -> Result<(), StateError>;
    fn write_status(&mut self, line: &str);
    /// Phase 1's reason, when it held containerd back this boot.
    fn phase1_held(&self) -> Option<String>;
    /// Why containerd's root is not the verified volume now (phase 1's checks, as a later
    /// start of containerd judges them), asked before a remedy starts containerd or
    /// writes into it; `None` when it is.
    fn volume_unverified(&self) -> Option<Unverified>;

    /// One look at the node; waits up to `wait` for containerd to answer. A hygiene family
    /// that finds a candidate looks a second time, about 2 s later, within the call.
    async fn observe(&mut self, wait: Duration, scope: Scope) -> Observation;
    /// `Tasks.Delete` of a leaked task (never a signal), after judging it again on a fresh
    /// look: same pid, same status, still a leak.
    async fn delete_task(&mut self, leak: &Leak) -> Result<String, RemedyError>;
    /// Kills and removes an orphaned container cgroup, after checking again that its
    /// container has no live task and every pid in it is a judged orphan (same start
    /// time) still in it.
    async fn reap(&mut self, condemned: &Condemned) -> Result<String, RemedyError>;
    async fn running_tasks(&mut self) -> Result<Vec<LiveTask>, RpcError>;
    /// The PID serving containerd's socket (evidence for a restart).
    fn containerd_pid(&self) -> Option<i32>;
    /// `/proc/PID/cgroup` of a process: which systemd unit a restart would reach.
    fn process_cgroup(&self, pid: i32) -> Option<String>;
    /// Runs `[containerd] restart`, bounded.
    async fn restart(&mut self) -> Result<String, CommandError>;
    fn archive_present(&self, archive: &Path) -> bool;
    async fn import(&mut self, archive: &Path) -> Import;
    async fn pull(&mut self) -> Result<String, RemedyError>;
    /// Labels the sandbox image pinned (`Images.Update` of that one label).
    async fn pin(&mut self) -> Result<(), RemedyError>;
    /// Makes and removes a canary pod sandbox (`runtime.can-create`), touching nothing
    /// in its namespace but what `run` allows; `None` when containerd does not answer.
    async fn canary(&mut self, run: CanaryRun) -> Option<CanaryFacts>;

    /// The sandbox image as configured, and as containerd names it.
    fn image_reference(&self) -> String;
    fn image_name(&self) -> String {
        normalize_ref(&self.image_reference())
    }
    fn snapshotter(&self) -> String;
}

/// Every call to containerd is bounded by this.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// The hygiene families confirm a candidate with a second look this much later: CRI
/// still says RUNNING for ~1.5 s after a shim dies (containerd 1.7).
const SECOND_LOOK: Duration = Duration::from_secs(2);

/// The real node.
pub struct RealWorld<'a> {
    host: &'a Host,
    settings: &'a Settings,
    target: Target,
    state_dir: Result<StateDir, StateError>,
    conn: Option<Conn>,
    lock: Option<RepairLock>,
    /// The guard's own mount table, when its caller reads it (`guard verify`).
    own_mounts: Option<std::sync::Arc<OwnMounts>>,
    /// Each call's own bound ([`CALL_TIMEOUT`], less inside a run's deadline).
    call_timeout: Duration,
    /// Whether this run asks kubelet's binary its version (`guard verify` only, never on
    /// kubelet's start path), and keeps the answer for the boot (`Some(true)`: the run
    /// writes).
    kubelet_version: Option<bool>,
    /// containerd's version as it last answered: it decides the snapshotter a remedy
    /// unpacks the sandbox image for
    /// ([`crate::checks::sandbox_image::facts::Wanted::judged`]).
    version: Option<String>,
}

impl<'a> RealWorld<'a> {
    pub fn new(host: &'a Host, settings: &'a Settings, cd: &ContainerdConfig) -> RealWorld<'a> {
        RealWorld {
            host,
            settings,
            target: Target::new(settings, cd),
            state_dir: StateDir::open(host, &settings.state_dir),
            conn: None,
            lock: None,
            own_mounts: None,
            call_timeout: CALL_TIMEOUT,
            kubelet_version: None,
            version: None,
        }
    }

    /// Inside a whole run's `deadline` (`guard verify --npd --timeout`), each call gets
    /// half of it at most: a call that hangs while the others answer is reported by name
    /// before the run's deadline cuts everything off (the other half is for the rest of
    /// the run on a loaded node).
    pub fn within(mut self, deadline: Option<Duration>) -> Self {
        if let Some(deadline) = deadline {
            self.call_timeout = CALL_TIMEOUT.min(deadline / 2);
        }
        self
    }

    /// The guard's own mount table, read by the caller (maybe still being read): the
    /// stale check's for a containerd in the same mount namespace.
    pub fn with_own_mounts(mut self, mounts: Option<OwnMounts>) -> Self {
        self.own_mounts = mounts.map(std::sync::Arc::new);
        self
    }

    /// Asks kubelet's binary its version (bounded), keeping the answer for this boot when
    /// `cache` (a run that writes nothing keeps nothing).
    pub fn asking_kubelet_version(mut self, cache: bool) -> Self {
        self.kubelet_version = Some(cache);
        self
    }

    /// A look at the node through this world's host, settings and target.
    fn look(&self) -> Look<'_> {
        let mut look = Look::new(self.host, self.settings, &self.target);
        look.own_mounts = self.own_mounts.clone().map(|later| {
            let read = move || later.get().cloned();
            std::sync::Arc::new(read) as crate::checks::look::OwnMountTable
        });
        look.state_dir = self.state_dir.as_ref().ok();
        look.call_timeout = self.call_timeout;
        look.kubelet_version = self.kubelet_version;
        look
    }

    fn socket(&self) -> PathBuf {
        self.host.path(&self.target.socket)
    }

    fn conn(&self) -> Result<&Conn, RemedyError> {
        self.conn.as_ref().ok_or(RemedyError::NotAnswering)
    }
}

impl World for RealWorld<'_> {
    fn now(&self) -> Duration {
        boot_clock()
    }

    async fn sleep(&mut self, d: Duration) {
        tokio::time::sleep(d).await
    }

    fn try_lock(&mut self) -> Result<(), LockError> {
        let dir = self
            .state_dir
            .as_ref()
            .map_err(|e| LockError::Unavailable(e.clone()))?;
        self.lock = Some(dir.try_lock()?);
        Ok(())
    }

    fn unlock(&mut self) {
        self.lock = None;
    }

    fn read_state(&self) -> LedgerFile {
        match &self.state_dir {
            Ok(dir) => dir.read_ledger(),
            Err(_) => LedgerFile::Absent,
        }
    }

    fn load_state(&mut self) -> (State, Loaded) {
        match &self.state_dir {
            Ok(dir) => dir.load_ledger(),
            Err(e) => {
                let mut s = State::fresh("");
                s.void = Some(format!("no state file: cannot count restarts ({e})"));
                (s, Loaded::Fresh(None))
            }
        }
    }

    fn save_state(&mut self, state: &State) -> Result<(), StateError> {
        self.state_dir
            .as_ref()
            .map_err(Clone::clone)?
            .save_ledger(state)
    }

    fn write_status(&mut self, line: &str) {
        if let Ok(dir) = &self.state_dir {
            let _ = dir.write_status(line);
        }
    }

    fn phase1_held(&self) -> Option<String> {
        self.state_dir.as_ref().ok()?.read_volume()?.held_by()
    }

    fn volume_unverified(&self) -> Option<Unverified> {
        let (root, socket) = (&self.target.root, &self.target.socket);
        crate::phases::volume::unverified(self.host, self.settings, root, socket)
    }

    async fn observe(&mut self, wait: Duration, scope: Scope) -> Observation {
        use tracing::Instrument;
        let looked_at = |family| scope.looks_at(family);
        self.conn = None;
        let look = self.look();
        // (the files first: judged whether containerd answers or not)
        let files = Observation::gather(&look, Stage::Files, looked_at).await;
        let socket = self.socket();
        let connected = client::connect_answering(&socket, wait, self.call_timeout)
            .instrument(tracing::debug_span!("connect"))
            .await;
        let look = match connected {
            Ok((conn, version)) => look.answered(conn, version),
            Err(e) => {
                let waited = look.started.elapsed().as_millis() as u64;
                let silent = AnswerFacts {
                    socket: self.target.socket.display().to_string(),
                    answering: Err(e.to_string()),
                    waited: format_duration(Duration::from_millis(waited)),
                    path_fault: answers::probe_socket(&socket),
                };
                let answers = Observation {
                    answers: Some(silent),
                    ..Observation::default()
                };
                return answers.or(files);
            }
        };
        let answered = Observation::gather(&look, Stage::Containerd, looked_at).await;
        let version = look.containerd_version().map(String::from);
        self.conn = look.into_conn();
        self.version = version;
        with_runtime_config(answered.or(files))
    }

    async fn delete_task(&mut self, leak: &Leak) -> Result<String, RemedyError> {
        let conn = self.conn()?;
        hygiene::delete_task(self.host, conn, &self.target.state, leak).await
    }

    async fn reap(&mut self, condemned: &Condemned) -> Result<String, RemedyError> {
        let conn = self.conn()?;
        hygiene::reap(self.host, conn, &self.target.state, condemned).await
    }

    async fn running_tasks(&mut self) -> Result<Vec<LiveTask>, RpcError> {
        match &self.conn {
            Some(c) => tasks::running(c).await,
            None => Ok(Vec::new()),
        }
    }

    fn containerd_pid(&self) -> Option<i32> {
        client::peer_pid(&self.socket()).ok()
    }

    fn process_cgroup(&self, pid: i32) -> Option<String> {
        use crate::host::proc::{read_proc_file, CGROUP_CAP};
        read_proc_file(self.host, pid, "cgroup", CGROUP_CAP).ok()
    }

    async fn restart(&mut self) -> Result<String, CommandError> {
        self.conn = None;
        let c = &self.settings.containerd;
        run_argv(&c.restart, c.restart_timeout).await
    }

    fn archive_present(&self, archive: &Path) -> bool {
        self.host.path(archive).is_file()
    }

    async fn import(&mut self, archive: &Path) -> Import {
        let conn = match self.conn() {
            Ok(c) => c,
            Err(e) => return Import::Failed(e.to_string()),
        };
        let on_host = self.host.path(archive);
        let timeout = self.settings.sandbox.pull_timeout;
        let (wanted, snapshotter) = (self.image_name(), self.snapshotter());
        import_archive(
            conn,
            &self.socket(),
            &on_host,
            &wanted,
            &snapshotter,
            timeout,
        )
        .await
    }

    async fn pull(&mut self) -> Result<String, RemedyError> {
        let conn = self.conn()?;
        let image = &self.target.image;
        // the runtime named, where its own snapshotter is judged, so that containerd
        // unpacks the image there and not in CRI's
        let judged = image.judged(self.version.as_deref()).0;
        let handler = (judged != &image.cri_snapshotter).then_some(image.runtime.as_str());
        let timeout = self.settings.sandbox.pull_timeout;
        let pulled = pull::pull(conn, &image.reference, handler, timeout).await?;
        Ok(format!(
            "{pulled}; {}",
            pinned(conn, &self.image_name()).await
        ))
    }

    async fn canary(&mut self, run: CanaryRun) -> Option<CanaryFacts> {
        let (conn, parent) = (self.conn().ok()?, self.target.cgroup_parent);
        // A SIGTERM or SIGINT waits until the canary is removed (bounded: its timeout,
        // then the cleanup's): a guard that dies mid-canary leaves a pod sandbox behind.
        let _removed_first = crate::signals::critical();
        let (state, timeout) = (self.state_dir.as_ref(), self.settings.canary.timeout);
        let gather = canary::gather(conn, self.host, state, timeout, parent, run);
        Some(tracing::Instrument::instrument(gather, tracing::debug_span!("canary")).await)
    }

    async fn pin(&mut self) -> Result<(), RemedyError> {
        let conn = self.conn()?;
        Ok(crate::containerd::image::pin(conn, &self.image_name()).await?)
    }

    fn image_reference(&self) -> String {
        self.target.image.reference.clone()
    }

    fn snapshotter(&self) -> String {
        let judged = self.target.image.judged(self.version.as_deref()).0;
        judged.name.clone()
    }
}

/// kubelet's facts (read from files, judged even when containerd is silent) take what
/// containerd answered kubelet's CRI `RuntimeConfig` in the answers family's look.
fn with_runtime_config(mut obs: Observation) -> Observation {
    let answered = obs.answers.as_ref().and_then(|a| a.answering.as_ref().ok());
    let runtime_config = answered.map(|a| a.runtime_config.clone());
    if let (Some(kubelet), Some(answer)) = (obs.kubelet.as_mut(), runtime_config) {
        kubelet.runtime_config = Some(answer);
    }
    obs
}

/// `path` with its symlinks resolved, as `mountinfo` shows it; as given when it cannot be.
fn resolved(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// CLOCK_BOOTTIME: keeps counting through suspend and never jumps with the wall clock, so
/// a backoff recorded by one guard is honoured by the next.
fn boot_clock() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map(|t| Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
        .unwrap_or_default()
}
