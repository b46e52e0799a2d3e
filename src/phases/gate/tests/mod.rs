//! Every transition of phase 2 against a fake world: no root, no containerd, no sleeping
//! (the fake clock jumps), so each case runs in milliseconds. Most behaviours are also
//! proven on a real containerd (`tests/gate_*.rs`, `tests/faults_containerd.rs`,
//! `tests/hygiene_*.rs`, `tests/promises_repair.rs`: `--force` over running tasks, a restart's dry
//! run, a live guard holding the lock past the hold, hygiene on a stale containerd; a failing
//! `Tasks.Delete` through a gRPC proxy, `tests/hygiene_rechecks.rs`). Proven only here:
//! restart evidence naming the kill-mode risk (the test host has no systemd to restart
//! containerd through; `checks::kill_mode`'s tests read real unit trees, and the vm-tests'
//! k3s scenario checks the warning itself), and an import cut off by containerd's death
//! tried again once it answers (a real one: the chaos boot of seed 14267).

mod canary;
mod facts;
pub(super) mod golden;
mod history;
mod hygiene;
mod image;
mod kubelet;
mod restart;
mod volume;

use super::decide::{Observation, Scope};
use super::{run, End, FamilyId, Mode, World};
use crate::checks::answers::facts::{AnswerFacts, Answering, Condition};
use crate::checks::canary::facts::{CanaryFacts, CanaryOutcome, CanaryRun};
use crate::checks::kill_mode::facts::KillModeFacts;
use crate::checks::kubelet::facts::KubeletFacts;
use crate::checks::leaked_tasks::facts::LeakedTaskFacts;
use crate::checks::leaked_tasks::rules::Leak;
use crate::checks::orphans::facts::{OrphanFacts, OrphanLook, PodProcess};
use crate::checks::orphans::rules::Condemned;
use crate::checks::sandbox_image::facts::{ImageFacts, ImageState, Pin};
use crate::checks::stale::facts::{FileId, OpenDb, StaleFacts};
use crate::checks::workloads::Workloads;
use crate::config::Settings;
use crate::containerd::client::RpcError;
use crate::containerd::cri::{CriContainer, CriState, PodRef};
use crate::containerd::tasks::{LiveTask, TaskInfo, TaskStatus};
use crate::host::cgroup::ContainerCgroup;
use crate::host::mountinfo::MountTable;
use crate::host::proc::ProcInfo;
use crate::remedies::command::CommandError;
use crate::remedies::restore::Import;
use crate::remedies::RemedyError;
use crate::report::{status_of as status, Finding, Status};
use crate::state::ledger::{Action, Outcome, State};
use crate::state::lock::LockError;
use crate::state::{LedgerFile, Loaded, Op, StateError};
use facts::*;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What containerd looks like to one observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Looks {
    Healthy,
    Stale,
    Silent,
    ImageMissing,
}

struct Fake {
    clock: Duration,
    /// The node as each observation sees it; the last one repeats.
    looks: VecDeque<Looks>,
    /// What a restart turns the node into.
    after_restart: Option<Looks>,
    /// What an import or a pull turns the node into.
    after_restore: Looks,
    tasks: Vec<LiveTask>,
    state: Option<State>,
    corrupt: bool,
    saves_fail: bool,
    /// How many more `try_lock` calls find the lock busy.
    busy_for: u32,
    locked: bool,
    archive: Option<Import>,
    /// What the first import gives instead, when set (then `archive`).
    first_import: Option<Import>,
    pull_ok: bool,
    phase1_held: Option<String>,
    /// What the volume looks like when a remedy asks (`None`: verified).
    volume: Option<crate::checks::volume::rules::Unverified>,
    /// How many times a remedy asked.
    volume_asks: std::cell::Cell<u32>,
    /// The volume is mounted again from this ask on (1: the first).
    volume_back_after: Option<u32>,
    reap: bool,
    /// containerd's unit kills shims by name (`runtime.kill-mode` warns).
    shim_killing_unit: bool,
    /// What kubelet's files say (`None`: as in every scenario that is not about kubelet).
    kubelet: Option<KubeletFacts>,
    /// A leaked task (and an orphan) present until deleted (reaped).
    leak: bool,
    orphan: bool,
    delete_fails: bool,
    /// The sandbox image is missing too, whatever the looks.
    stale_image_missing: bool,
    /// The present sandbox image is not labelled pinned, and CRI reports it unpinned.
    unpinned: bool,
    /// What each canary pod does (the last one repeats); `None`: created and removed.
    canary_fails: VecDeque<bool>,
    /// How each canary step was asked to run.
    canary_runs: Vec<CanaryRun>,
    // What happened:
    deleted: u32,
    reaped: u32,
    restarts: u32,
    /// containerd's `/proc/PID/cgroup`.
    cgroup: String,
    imports: u32,
    pulls: u32,
    pins: u32,
    canaries: u32,
    slept: Vec<Duration>,
    /// Sleeps taken while holding the lock (must be none).
    slept_locked: u32,
}

impl Fake {
    fn new(looks: &[Looks]) -> Fake {
        Fake {
            clock: Duration::from_secs(100),
            looks: looks.iter().copied().collect(),
            after_restart: None,
            after_restore: Looks::Healthy,
            tasks: Vec::new(),
            state: None,
            corrupt: false,
            saves_fail: false,
            busy_for: 0,
            locked: false,
            archive: None,
            first_import: None,
            pull_ok: false,
            phase1_held: None,
            volume: None,
            volume_asks: std::cell::Cell::new(0),
            volume_back_after: None,
            reap: true,
            shim_killing_unit: false,
            kubelet: None,
            leak: false,
            orphan: false,
            delete_fails: false,
            stale_image_missing: false,
            unpinned: false,
            canary_fails: VecDeque::new(),
            canary_runs: Vec::new(),
            deleted: 0,
            reaped: 0,
            restarts: 0,
            cgroup: "1:name=systemd:/system.slice/containerd.service\n".into(),
            imports: 0,
            pulls: 0,
            pins: 0,
            canaries: 0,
            slept: Vec::new(),
            slept_locked: 0,
        }
    }

    fn current(&self) -> Looks {
        *self.looks.front().expect("at least one look")
    }

    /// From now on the node looks like `l`.
    fn become_(&mut self, l: Looks) {
        self.looks = VecDeque::from([l]);
    }
}

impl World for Fake {
    fn now(&self) -> Duration {
        self.clock
    }

    async fn sleep(&mut self, d: Duration) {
        if self.locked {
            self.slept_locked += 1;
        }
        self.slept.push(d);
        self.clock += d;
    }

    fn try_lock(&mut self) -> Result<(), LockError> {
        if self.busy_for > 0 {
            self.busy_for -= 1;
            return Err(LockError::Busy(Some("4242".into())));
        }
        assert!(!self.locked, "the machine took a lock it already holds");
        self.locked = true;
        Ok(())
    }

    fn unlock(&mut self) {
        self.locked = false;
    }

    fn read_state(&self) -> LedgerFile {
        match (&self.state, self.corrupt) {
            (_, true) => LedgerFile::Corrupt("runtime.json does not parse".into()),
            (Some(s), _) => LedgerFile::Current(s.clone()),
            (None, _) => LedgerFile::Absent,
        }
    }

    fn load_state(&mut self) -> (State, Loaded) {
        assert!(self.locked, "state loaded without the repair lock");
        if self.corrupt {
            let mut s = State::fresh("boot");
            s.void = Some("the state file cannot be trusted".into());
            return (
                s,
                Loaded::Corrupt {
                    problem: "does not parse".into(),
                    kept: PathBuf::from("runtime.json.corrupt"),
                },
            );
        }
        match &self.state {
            Some(s) => (s.clone(), Loaded::Current),
            None => (State::fresh("boot"), Loaded::Fresh(None)),
        }
    }

    fn save_state(&mut self, state: &State) -> Result<(), StateError> {
        assert!(self.locked, "state saved without the repair lock");
        if self.saves_fail {
            return Err(StateError::Io {
                op: Op::Write,
                path: PathBuf::from("/run/containerd-guard/runtime.json"),
                source: std::io::Error::from(std::io::ErrorKind::ReadOnlyFilesystem).into(),
            });
        }
        self.corrupt = false;
        self.state = Some(state.clone());
        Ok(())
    }

    fn write_status(&mut self, _line: &str) {}

    fn phase1_held(&self) -> Option<String> {
        self.phase1_held.clone()
    }

    fn volume_unverified(&self) -> Option<crate::checks::volume::rules::Unverified> {
        self.volume_asks.set(self.volume_asks.get() + 1);
        let back = (self.volume_back_after).is_some_and(|n| self.volume_asks.get() >= n);
        self.volume.clone().filter(|_| !back)
    }

    async fn observe(&mut self, wait: Duration, scope: Scope) -> Observation {
        let looks = self.current();
        if self.looks.len() > 1 {
            self.looks.pop_front();
        }
        // (read from files: there whether containerd answers or not, where covered)
        let kubelet = (self.kubelet.clone()).filter(|_| scope.looks_at(FamilyId::Kubelet));
        if looks == Looks::Silent {
            self.clock += wait;
            return Observation {
                kubelet,
                ..observation(looks)
            };
        }
        let mut o = observation(looks);
        o.kubelet = kubelet;
        if self.stale_image_missing {
            o.sandbox_image = Some(image_facts(true));
        }
        if self.leak || self.orphan {
            self.clock += Duration::from_secs(2); // the second look
        }
        if self.shim_killing_unit {
            o.kill_mode = Some(shim_killing_unit());
        }
        if let Some(pin) = o.sandbox_image.as_mut().and_then(|i| i.pin.as_mut()) {
            if self.unpinned {
                pin.labelled = false;
                pin.reported = Ok(Some(false));
            }
        }
        o.leaked_tasks = Some(leak_facts(self.leak));
        o.orphans = Some(orphan_facts(self.orphan, self.reap));
        o.only(|family| scope.looks_at(family))
    }

    async fn delete_task(&mut self, leak: &Leak) -> Result<String, RemedyError> {
        let id = &leak.id;
        assert!(self.locked, "deleted a task without the repair lock");
        if self.delete_fails {
            let refusal = tonic::Status::failed_precondition(format!("task {id} must be stopped"));
            return Err(RpcError::status("Tasks.Delete", &refusal).into());
        }
        self.deleted += 1;
        self.leak = false;
        Ok(format!("deleted task {id}"))
    }

    async fn reap(&mut self, condemned: &Condemned) -> Result<String, RemedyError> {
        assert!(self.locked, "reaped without the repair lock");
        self.reaped += 1;
        self.orphan = false;
        Ok(format!("killed cgroup {}", condemned.cgroup))
    }

    async fn running_tasks(&mut self) -> Result<Vec<LiveTask>, RpcError> {
        Ok(self.tasks.clone())
    }

    fn containerd_pid(&self) -> Option<i32> {
        Some(4321)
    }

    fn process_cgroup(&self, _pid: i32) -> Option<String> {
        Some(self.cgroup.clone())
    }

    async fn restart(&mut self) -> Result<String, CommandError> {
        self.restarts += 1;
        if let Some(l) = self.after_restart {
            self.become_(l);
        }
        Ok("`systemctl restart containerd.service` exited 0".into())
    }

    fn archive_present(&self, _archive: &Path) -> bool {
        self.archive.is_some()
    }

    async fn import(&mut self, _archive: &Path) -> Import {
        self.imports += 1;
        let result = (self.first_import.take())
            .or(self.archive.clone())
            .expect("import only of a present archive");
        if matches!(result, Import::Imported(_)) {
            self.become_(self.after_restore);
        }
        result
    }

    async fn pull(&mut self) -> Result<String, RemedyError> {
        self.pulls += 1;
        if self.pull_ok {
            self.become_(self.after_restore);
            return Ok("pulled registry.k8s.io/pause:3.6".into());
        }
        let refused = tonic::Status::unavailable("connection refused");
        Err(RpcError::status("CRI PullImage", &refused).into())
    }

    async fn pin(&mut self) -> Result<(), RemedyError> {
        assert!(self.locked, "pinned without the repair lock");
        self.pins += 1;
        self.unpinned = false;
        Ok(())
    }

    async fn canary(&mut self, run: CanaryRun) -> Option<CanaryFacts> {
        assert!(
            run != CanaryRun::Repair || self.locked,
            "swept the canary's namespace without the repair lock"
        );
        self.canary_runs.push(run);
        if run == CanaryRun::DryRun {
            return Some(CanaryFacts {
                outcome: CanaryOutcome::DryRun,
                ..canary_facts(false)
            });
        }
        self.canaries += 1;
        let fails = match self.canary_fails.len() {
            0 => false,
            1 => self.canary_fails[0],
            _ => self.canary_fails.pop_front().unwrap_or(false),
        };
        self.clock += Duration::from_millis(300);
        Some(canary_facts(fails))
    }

    fn image_reference(&self) -> String {
        "registry.k8s.io/pause:3.6".into()
    }

    fn snapshotter(&self) -> String {
        "overlayfs".into()
    }
}

fn go(w: &mut Fake, s: &Settings, mode: Mode) -> (Vec<Finding>, End) {
    let mut rt = tokio::runtime::Builder::new_current_thread();
    let rt = rt.enable_time().build().unwrap(); // (time: the progress reporter's timer)
    let gate = rt.block_on(run(w, s, mode, crate::command::Command::Runtime));
    assert!(!w.locked, "the repair lock outlived the run");
    assert_eq!(w.slept_locked, 0, "slept while holding the repair lock");
    golden::check(&gate.findings);
    (gate.findings, gate.end)
}
