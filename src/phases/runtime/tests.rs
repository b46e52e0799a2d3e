//! Every transition of phase 2 against a fake world: no root, no containerd, no sleeping
//! (the fake clock jumps), so each case runs in milliseconds. Most behaviours are also
//! proven on a real containerd (`tests/runtime.rs`, `tests/faults_runtime.rs`,
//! `tests/hygiene.rs`, `tests/promises.rs`: `--force` over running tasks, a restart's dry
//! run, a live guard holding the lock past the hold, hygiene on a stale containerd). Two
//! are proven only here: a failing `Tasks.Delete` (a real containerd cannot be made to
//! fail one for a task it would delete) and restart evidence naming the kill-mode risk
//! (its facts come from `systemctl show`, and the test host has no systemd as PID 1; the
//! vm-tests' k3s scenario checks the `runtime.kill-mode` warning itself).

use super::decide::{Observation, Scope};
use super::{run, End, Mode, World};
use crate::checks::kill_mode::facts::KillModeFacts;
use crate::checks::leaked_tasks::facts::LeakedTaskFacts;
use crate::checks::leaked_tasks::rules::Leak;
use crate::checks::orphans::facts::{OrphanFacts, OrphanLook, PodProcess};
use crate::checks::orphans::rules::Condemned;
use crate::checks::runtime::facts::{Answering, Condition, RuntimeFacts};
use crate::checks::sandbox_image::facts::{ImageFacts, ImageState};
use crate::checks::stale::facts::{FileId, OpenDb, StaleFacts};
use crate::checks::workloads::Workloads;
use crate::config::Settings;
use crate::containerd::cri::{CriContainer, CriState, PodRef};
use crate::containerd::tasks::LiveTask;
use crate::containerd::tasks::{TaskInfo, TaskStatus};
use crate::host::cgroup::ContainerCgroup;
use crate::host::mountinfo::MountTable;
use crate::host::proc::ProcInfo;
use crate::remedies::restore::Import;
use crate::report::{Finding, Status};
use crate::state::lock::LockError;
use crate::state::runtime::State;
use crate::state::{Loaded, RuntimeFile};
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
    pull_ok: bool,
    phase1_held: Option<String>,
    /// `[orphans] reap`.
    reap: bool,
    /// containerd's unit kills shims by name (`runtime.kill-mode` warns).
    shim_killing_unit: bool,
    /// A leaked task (and an orphan) present until deleted (reaped).
    leak: bool,
    orphan: bool,
    delete_fails: bool,
    // What happened:
    deleted: u32,
    reaped: u32,
    restarts: u32,
    /// containerd's `/proc/PID/cgroup`.
    cgroup: String,
    imports: u32,
    pulls: u32,
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
            pull_ok: false,
            phase1_held: None,
            reap: true,
            shim_killing_unit: false,
            leak: false,
            orphan: false,
            delete_fails: false,
            deleted: 0,
            reaped: 0,
            restarts: 0,
            cgroup: "1:name=systemd:/system.slice/containerd.service\n".into(),
            imports: 0,
            pulls: 0,
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

    fn read_state(&self) -> RuntimeFile {
        match (&self.state, self.corrupt) {
            (_, true) => RuntimeFile::Corrupt("runtime.json does not parse".into()),
            (Some(s), _) => RuntimeFile::Current(s.clone()),
            (None, _) => RuntimeFile::Absent,
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

    fn save_state(&mut self, state: &State) -> Result<(), String> {
        assert!(self.locked, "state saved without the repair lock");
        if self.saves_fail {
            return Err("read-only file system".into());
        }
        self.corrupt = false;
        self.state = Some(state.clone());
        Ok(())
    }

    fn write_status(&mut self, _line: &str) {}

    fn phase1_held(&self) -> Option<String> {
        self.phase1_held.clone()
    }

    async fn observe(&mut self, wait: Duration, scope: Scope) -> Observation {
        let looks = self.current();
        if self.looks.len() > 1 {
            self.looks.pop_front();
        }
        if looks == Looks::Silent {
            self.clock += wait;
            return observation(looks);
        }
        let mut o = observation(looks);
        if scope == Scope::Hygiene {
            (o.stale, o.sandbox_image) = (None, None);
        }
        if self.leak || self.orphan {
            self.clock += Duration::from_secs(2); // the second look
        }
        if self.shim_killing_unit {
            o.kill_mode = shim_killing_unit();
        }
        o.leaked_tasks = Some(leak_facts(self.leak));
        o.orphans = Some(orphan_facts(self.orphan, self.reap));
        o
    }

    async fn delete_task(&mut self, leak: &Leak) -> Result<String, String> {
        let id = &leak.id;
        assert!(self.locked, "deleted a task without the repair lock");
        if self.delete_fails {
            return Err(format!(
                "Tasks.Delete: FailedPrecondition: task {id} must be stopped"
            ));
        }
        self.deleted += 1;
        self.leak = false;
        Ok(format!("deleted task {id}"))
    }

    async fn reap(&mut self, condemned: &Condemned) -> Result<String, String> {
        assert!(self.locked, "reaped without the repair lock");
        self.reaped += 1;
        self.orphan = false;
        Ok(format!("killed cgroup {}", condemned.cgroup))
    }

    async fn running_tasks(&mut self) -> Result<Vec<LiveTask>, String> {
        Ok(self.tasks.clone())
    }

    fn containerd_pid(&self) -> Option<i32> {
        Some(4321)
    }

    fn process_cgroup(&self, _pid: i32) -> Option<String> {
        Some(self.cgroup.clone())
    }

    async fn restart(&mut self) -> Result<String, String> {
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
        let result = self
            .archive
            .clone()
            .expect("import only of a present archive");
        if matches!(result, Import::Imported(_)) {
            self.become_(self.after_restore);
        }
        result
    }

    async fn pull(&mut self) -> Result<String, String> {
        self.pulls += 1;
        if self.pull_ok {
            self.become_(self.after_restore);
            return Ok("pulled registry.k8s.io/pause:3.6".into());
        }
        Err("CRI PullImage: Unavailable: connection refused".into())
    }

    fn image_reference(&self) -> String {
        "registry.k8s.io/pause:3.6".into()
    }

    fn snapshotter(&self) -> String {
        "overlayfs".into()
    }
}

const LEAKED: &str = "1eaked";

fn shim_killing_unit() -> KillModeFacts {
    let show = "KillMode=process\nExecStartPre={ path=/usr/bin/pkill ; argv[]=/usr/bin/pkill -9 containerd-shim ; ignore_errors=yes }\n";
    KillModeFacts::Units(vec![crate::checks::kill_mode::facts::parse_show(
        "containerd.service",
        show,
        |_| None,
    )])
}

fn leak_facts(leak: bool) -> LeakedTaskFacts {
    let mut w = Workloads::default();
    if leak {
        w.tasks.push(TaskInfo {
            id: LEAKED.into(),
            pid: 999,
            status: TaskStatus::Stopped,
            exited_unix: None,
        });
        // Only a container CRI knows as exited is kubelet's leak to clean up.
        w.containers.push(CriContainer {
            id: LEAKED.into(),
            name: "kcm".into(),
            sandbox_id: "s1".into(),
            state: CriState::Exited,
            pod: PodRef {
                name: "kcm-node1".into(),
                namespace: "kube-system".into(),
                uid: "u1".into(),
            },
        });
    }
    LeakedTaskFacts {
        first: w.clone(),
        second: leak.then_some(w),
    }
}

fn orphan_facts(orphan: bool, reap: bool) -> OrphanFacts {
    let mut look = OrphanLook::default();
    if orphan {
        look.processes.push(PodProcess {
            info: ProcInfo {
                pid: 77,
                ppid: 1,
                comm: "locker".into(),
                cmdline: "/locker /data/lock".into(),
                start_ticks: 5,
                cgroup: String::new(),
            },
            cgroup: ContainerCgroup {
                path: "/kubepods/besteffort/podu1/0rphan".into(),
                container_id: "0rphan".into(),
                pod_uid: "u1".into(),
            },
            shim: None,
            age_secs: 9,
            locks: vec!["/data/lock".into()],
            listens: Vec::new(),
            unread: None,
            root_dirs: Vec::new(),
        });
    }
    OrphanFacts {
        first: look.clone(),
        second: orphan.then_some(look),
        reap,
        runtimes: Default::default(),
        containerd_root: "/var/lib/containerd".into(),
    }
}

fn observation(looks: Looks) -> Observation {
    let runtime = |answering| RuntimeFacts {
        socket: "/run/containerd/containerd.sock".into(),
        answering,
        waited: "0s".into(),
        path_fault: None,
    };
    if looks == Looks::Silent {
        return Observation {
            runtime: runtime(Err("connect: connection refused".into())),
            stale: None,
            sandbox_image: None,
            leaked_tasks: None,
            orphans: None,
            kill_mode: KillModeFacts::NotSystemd,
        };
    }
    let ready = |kind: &str| Condition {
        kind: kind.into(),
        status: true,
        reason: String::new(),
        message: String::new(),
    };
    let answering = Answering {
        version: Ok(("1.6.20".into(), "rev".into())),
        plugins: Ok(Vec::new()),
        cri_version: Ok("containerd 1.6.20 (API v1)".into()),
        cri_conditions: Ok(vec![ready("RuntimeReady"), ready("NetworkReady")]),
    };
    Observation {
        runtime: runtime(Ok(Box::new(answering))),
        stale: Some(stale_facts(looks == Looks::Stale)),
        sandbox_image: Some(image_facts(looks == Looks::ImageMissing)),
        leaked_tasks: None,
        orphans: None,
        kill_mode: KillModeFacts::NotSystemd,
    }
}

fn stale_facts(stale: bool) -> StaleFacts {
    let root = "/var/lib/containerd";
    let db = "/var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db";
    let now = if stale { (9, 9) } else { (1, 2) };
    StaleFacts {
        pid: Ok(4321),
        comm: "containerd".into(),
        root: root.into(),
        other_root: None,
        dbs: Ok(vec![OpenDb {
            fd: 3,
            link: db.into(),
            open: Ok(FileId { dev: 1, ino: 2 }),
            expected: db.into(),
            now: Ok(FileId {
                dev: now.0,
                ino: now.1,
            }),
            mnt_id: Some(30),
            resolved: None,
        }]),
        mounts: MountTable::parse(
            "21 1 254:1 / / rw - ext4 /dev/vda1 rw\n\
             30 21 7:3 / /var/lib/containerd rw - ext4 /dev/loop3 rw\n",
        )
        .map(Into::into),
    }
}

fn image_facts(missing: bool) -> ImageFacts {
    let state = match missing {
        true => ImageState::Missing,
        false => ImageState::Usable {
            digest: "sha256:m".into(),
            chain_id: "sha256:c".into(),
        },
    };
    ImageFacts {
        reference: "registry.k8s.io/pause:3.6".into(),
        name: "registry.k8s.io/pause:3.6".into(),
        source: "(containerd default)".into(),
        snapshotter: "overlayfs".into(),
        platform: "linux/amd64".into(),
        state,
    }
}

fn settings() -> Settings {
    let mut s = Settings::default();
    s.sandbox.archives = vec![PathBuf::from("/usr/lib/containerd-guard/images/pause.tar")];
    s.sandbox.pull = true;
    s.sandbox.pull_attempts = 2;
    s
}

const RUNTIME: Mode = Mode::RUNTIME;
const VERIFY: Mode = Mode::VERIFY;
const REPAIR: Mode = Mode {
    repair: true,
    ..Mode::VERIFY
};

fn go(w: &mut Fake, s: &Settings, mode: Mode) -> (Vec<Finding>, End) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let gate = rt.block_on(run(w, s, mode, "guard runtime"));
    assert!(!w.locked, "the repair lock outlived the run");
    assert_eq!(w.slept_locked, 0, "slept while holding the repair lock");
    (gate.findings, gate.end)
}

fn status(findings: &[Finding], id: &str) -> Status {
    findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no {id} in {findings:#?}"))
        .status
}

#[test]
fn healthy_node_is_usable_and_nothing_is_done() {
    let mut w = Fake::new(&[Looks::Healthy]);
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!((w.restarts, w.imports, w.pulls), (0, 0, 0));
    assert!(
        f.iter().all(|f| !f.id.as_str().starts_with("remedy.")),
        "{f:#?}"
    );
    assert_eq!(w.state.unwrap().last.unwrap().exit, 0);
}

#[test]
fn stale_is_restarted_once_then_usable() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.after_restart = Some(Looks::Healthy);
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!(w.restarts, 1);
    assert_eq!(status(&f, "remedy.restart"), Status::Pass);
    let state = w.state.unwrap();
    assert_eq!(
        state.restarts.len(),
        1,
        "the restart is counted in the state file"
    );
    assert!(
        state.restarts[0].outcome.starts_with("stale: "),
        "{state:?}"
    );
}

#[test]
fn stale_containerd_of_another_unit_is_refused_and_nothing_counted() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.after_restart = Some(Looks::Healthy);
    w.cgroup = "1:name=systemd:/system.slice/k3s.service\n0::/system.slice/k3s.service\n".into();
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Unusable);
    assert_eq!(
        w.restarts, 0,
        "systemctl restart containerd.service never ran"
    );
    assert_eq!(status(&f, "remedy.restart"), Status::Fail);
    let refusal = f.iter().find(|f| f.id == "remedy.restart").unwrap();
    let text = refusal.evidence.join(" ");
    assert!(
        text.contains("pid 4321 belongs to k3s.service"),
        "{refusal:?}"
    );
    let state = w.state.unwrap();
    assert!(
        state.restarts.is_empty(),
        "a refusal spends no budget: {state:?}"
    );
}

#[test]
fn silent_containerd_is_restarted() {
    let mut w = Fake::new(&[Looks::Silent]);
    w.after_restart = Some(Looks::Healthy);
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!(w.restarts, 1);
    let restart = f.iter().find(|f| f.id == "remedy.restart").unwrap();
    assert!(restart.summary.contains("not answering"), "{restart:?}");
}

#[test]
fn stale_with_running_tasks_is_refused_unless_forced() {
    let task = LiveTask {
        namespace: "k8s.io".into(),
        id: "abc".into(),
        pid: 77,
    };
    let mut w = Fake::new(&[Looks::Stale]);
    w.tasks = vec![task.clone()];
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.restarts, 0);
    assert_eq!(status(&f, "remedy.restart"), Status::Fail);
    let refusal = f.iter().find(|f| f.id == "remedy.restart").unwrap();
    assert_eq!(refusal.evidence, vec!["k8s.io/abc (pid 77)".to_string()]);

    let mut w = Fake::new(&[Looks::Stale]);
    w.tasks = vec![task];
    w.after_restart = Some(Looks::Healthy);
    let forced = Mode {
        force: true,
        ..RUNTIME
    };
    assert_eq!(go(&mut w, &settings(), forced).1, End::Usable);
    assert_eq!(w.restarts, 1);
}

#[test]
fn budget_spent_is_terminal_and_stays_terminal() {
    let mut s = settings();
    s.remediation.restart_budget = 2;
    s.remediation.backoff = Duration::from_secs(1);
    let mut w = Fake::new(&[Looks::Stale]); // restarts do not help
    let (f, end) = go(&mut w, &s, RUNTIME);
    assert_eq!(end, End::Terminal);
    assert_eq!(w.restarts, 2, "exactly the budget");
    assert_eq!(status(&f, "remedy.budget"), Status::Fail);
    assert!(
        w.slept.contains(&Duration::from_secs(1)),
        "backoff between: {:?}",
        w.slept
    );
    assert!(w.state.as_ref().unwrap().terminal.is_some());

    // The next run is terminal at once: no lock, no restart, exit 4.
    w.busy_for = u32::MAX;
    let (f, end) = go(&mut w, &s, RUNTIME);
    assert_eq!(end, End::Terminal);
    assert_eq!(w.restarts, 2);
    assert!(
        f.iter().any(|f| f.summary.starts_with("TERMINAL")),
        "{f:#?}"
    );
}

#[test]
fn corrupt_state_means_no_restart_budget() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.corrupt = true;
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Terminal);
    assert_eq!(w.restarts, 0);
    let budget: Vec<&Finding> = f.iter().filter(|f| f.id == "remedy.budget").collect();
    assert_eq!(budget.len(), 1, "one line per remedy id: {budget:#?}");
    assert!(budget[0]
        .evidence
        .iter()
        .any(|e| e.contains("cannot be trusted")));
}

#[test]
fn restart_that_cannot_be_recorded_is_not_run() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.saves_fail = true;
    let (f, end) = go(&mut w, &settings(), REPAIR);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.restarts, 0);
    let budget = f.iter().find(|f| f.id == "remedy.budget").unwrap();
    assert!(budget.summary.contains("cannot be recorded"), "{budget:?}");
}

#[test]
fn a_healthy_node_with_an_unwritable_state_dir_is_usable_and_says_so() {
    let mut w = Fake::new(&[Looks::Healthy]);
    w.saves_fail = true;
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable, "the verdict is containerd's: {f:#?}");
    assert_eq!(w.restarts, 0);
    let budget = f.iter().find(|f| f.id == "remedy.budget").unwrap();
    assert_eq!(budget.status, Status::Warn);
    assert!(budget.summary.contains("cannot be written"), "{budget:?}");
    assert!(
        budget.evidence.iter().any(|e| e.contains("read-only")),
        "{budget:?}"
    );
}

#[test]
fn phase_one_held_containerd_is_not_restarted() {
    let mut w = Fake::new(&[Looks::Silent]);
    w.phase1_held = Some("volume.mounted: /var/lib/containerd is not a mount point".into());
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.restarts, 0);
    assert_eq!(status(&f, "remedy.restart"), Status::Fail);
}

#[test]
fn image_missing_is_restored_from_the_archive_without_a_pull() {
    let mut w = Fake::new(&[Looks::ImageMissing]);
    w.archive = Some(Import::Imported("imported pause.tar".into()));
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!((w.imports, w.pulls, w.restarts), (1, 0, 0));
    assert_eq!(status(&f, "remedy.restore-image"), Status::Pass);
}

#[test]
fn refused_archive_falls_back_to_a_pull() {
    let mut w = Fake::new(&[Looks::ImageMissing]);
    w.archive = Some(Import::Refused("sha256:x: content does not match".into()));
    w.pull_ok = true;
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!((w.imports, w.pulls), (1, 1));
    assert_eq!(status(&f, "remedy.restore-image"), Status::Warn);
    assert_eq!(status(&f, "remedy.pull"), Status::Pass);
}

#[test]
fn hold_times_out_with_every_pull_attempt_named() {
    let mut s = settings();
    s.hold.timeout = Duration::from_secs(30);
    let mut w = Fake::new(&[Looks::ImageMissing]); // no archive, registry down
    let started = w.clock;
    let (f, end) = go(&mut w, &s, RUNTIME);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.pulls, 2, "exactly [sandbox] pull_attempts");
    assert_eq!(status(&f, "runtime.hold"), Status::Fail);
    let pull = f.iter().find(|f| f.id == "remedy.pull").unwrap();
    assert_eq!(pull.evidence.len(), 2, "{pull:?}");
    let held = w.clock - started;
    assert!(
        held >= s.hold.timeout && held <= s.hold.timeout + Duration::from_secs(5),
        "{held:?}"
    );
}

#[test]
fn read_only_verify_changes_nothing_and_takes_no_lock() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.busy_for = u32::MAX;
    let (f, end) = go(&mut w, &settings(), VERIFY);
    assert_eq!(end, End::Unusable);
    assert_eq!((w.restarts, w.imports, w.pulls), (0, 0, 0));
    assert!(w.state.is_none(), "a read-only run writes no state");
    assert_eq!(status(&f, "runtime.stale"), Status::Fail);
}

#[test]
fn a_fault_fixed_by_another_guard_while_waiting_for_the_lock_is_not_acted_on() {
    // Another guard holds the lock for three tries and fixes the node meanwhile: this
    // run looks only after it has the lock, so it sees a healthy node and does nothing.
    let mut w = Fake::new(&[Looks::Healthy]);
    w.busy_for = 3;
    let (_, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!(w.restarts, 0);
    assert_eq!(
        w.slept.len(),
        3,
        "waited for the lock with backoff: {:?}",
        w.slept
    );
}

#[test]
fn a_lock_held_past_the_hold_is_reported_not_waited_on_forever() {
    let mut s = settings();
    s.hold.timeout = Duration::from_secs(10);
    let mut w = Fake::new(&[Looks::Stale]);
    w.busy_for = u32::MAX;
    let (f, end) = go(&mut w, &s, RUNTIME);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.restarts, 0);
    let budget = f.iter().find(|f| f.id == "remedy.budget").unwrap();
    assert!(budget.evidence[0].contains("pid 4242"), "{budget:?}");
}

#[test]
fn runtime_deletes_a_leaked_task_without_holding_kubelet_or_restarting() {
    let mut w = Fake::new(&[Looks::Healthy]);
    w.leak = true;
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable, "kubelet is never held for a leaked task");
    assert_eq!((w.deleted, w.restarts), (1, 0));
    assert_eq!(status(&f, "remedy.delete-task"), Status::Pass);
    assert_eq!(
        status(&f, "runtime.leaked-tasks"),
        Status::Pass,
        "looked again: gone"
    );
    let history = &w.state.unwrap().history;
    assert!(
        history
            .iter()
            .any(|r| r.action == "delete-task" && r.item == LEAKED),
        "{history:?}"
    );
}

#[test]
fn a_leaked_task_that_cannot_be_deleted_warns_in_runtime_and_fails_verify() {
    let mut w = Fake::new(&[Looks::Healthy]);
    (w.leak, w.delete_fails) = (true, true);
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!(status(&f, "runtime.leaked-tasks"), Status::Warn);
    assert_eq!(status(&f, "remedy.delete-task"), Status::Warn);
    let (f, end) = go(&mut w, &settings(), VERIFY);
    assert_eq!(end, End::Unusable, "verify fails on it (exit 1)");
    assert_eq!(status(&f, "runtime.leaked-tasks"), Status::Fail);
}

#[test]
fn hygiene_reaps_orphans_and_never_restarts_or_touches_images() {
    let mut w = Fake::new(&[Looks::Stale]); // even a stale containerd is not hygiene's business
    (w.leak, w.orphan) = (true, true);
    let (f, end) = go(&mut w, &settings(), Mode::HYGIENE);
    assert_eq!(end, End::Usable);
    assert_eq!(
        (w.deleted, w.reaped, w.restarts, w.imports, w.pulls),
        (1, 1, 0, 0, 0)
    );
    let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
    assert!(
        !ids.contains(&"runtime.stale") && !ids.contains(&"runtime.sandbox-image"),
        "{ids:?}"
    );
    assert_eq!(status(&f, "remedy.reap-orphans"), Status::Pass);
}

#[test]
fn reap_off_only_reports_orphans() {
    let mut w = Fake::new(&[Looks::Healthy]);
    (w.orphan, w.reap) = (true, false);
    let (f, end) = go(&mut w, &settings(), Mode::HYGIENE);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.reaped, 0);
    assert_eq!(status(&f, "runtime.orphans"), Status::Fail);
}

#[test]
fn dry_run_names_every_action_and_changes_nothing() {
    let mut w = Fake::new(&[Looks::Stale]);
    (w.leak, w.orphan) = (true, true);
    w.busy_for = u32::MAX; // a dry run never takes the lock
    let dry = Mode {
        repair: true,
        dry_run: true,
        ..Mode::VERIFY
    };
    let (f, end) = go(&mut w, &settings(), dry);
    assert_eq!(end, End::Unusable);
    assert_eq!((w.restarts, w.deleted, w.reaped), (0, 0, 0));
    assert!(w.state.is_none(), "a dry run writes no state");
    for id in [
        "remedy.restart",
        "remedy.delete-task",
        "remedy.reap-orphans",
    ] {
        let would = f
            .iter()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("no {id}"));
        assert!(would.summary.starts_with("dry run: would "), "{would:?}");
    }
    let reap = f.iter().find(|f| f.id == "remedy.reap-orphans").unwrap();
    assert_eq!(
        reap.evidence,
        vec!["cgroup /kubepods/besteffort/podu1/0rphan: pid 77".to_string()]
    );
    let delete = f.iter().find(|f| f.id == "remedy.delete-task").unwrap();
    assert_eq!(delete.evidence, vec![LEAKED.to_string()]);
}

#[test]
fn a_restart_names_the_risk_of_a_shim_killing_unit() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.after_restart = Some(Looks::Healthy);
    w.shim_killing_unit = true;
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!(status(&f, "runtime.kill-mode"), Status::Warn);
    let restart = f.iter().find(|f| f.id == "remedy.restart").unwrap();
    assert!(
        restart.evidence.iter().any(|e| e.starts_with("risk (runtime.kill-mode): containerd.service: ExecStartPre=/usr/bin/pkill -9 containerd-shim")),
        "{restart:?}"
    );
}
