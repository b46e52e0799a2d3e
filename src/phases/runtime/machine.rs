//! The transitions of phase 2 (see the diagram in `mod.rs`). Each step is one function that
//! returns the next step; only [`World`] touches the outside.

use super::decide::{first_failure, judge, Observation, Plan, RestartReason, Scope};
use super::world::World;
use super::{End, Gate, Mode};
use crate::backoff::Backoff;
use crate::checks::orphans::rules::Condemned;
use crate::checks::runtime::rules::Knobs;
use crate::config::units::format_duration;
use crate::config::Settings;
use crate::remedies::budget::{self, Decision};
use crate::remedies::command::{tie_restart, RestartTie};
use crate::remedies::restore::Import;
use crate::report::{escape, Finding, Id};
use crate::state::lock::LockError;
use crate::state::runtime::{Outcome, Record, State, Terminal};
use crate::state::{Loaded, RuntimeFile};
use std::time::Duration;

/// Read-only `guard verify` does not wait long for a silent containerd.
const VERIFY_WAIT: Duration = Duration::from_secs(5);
/// A terminal guard only looks, briefly, to show the checks: exit 4 stays immediate.
const TERMINAL_WAIT: Duration = Duration::from_secs(1);
/// The longest pause between two tries of a busy repair lock.
const LOCK_POLL_MAX: Duration = Duration::from_millis(100);

enum Step {
    Begin,
    Observe,
    Decide(Box<Observation>),
    Restart(RestartReason),
    Hygiene(Box<Plan>),
    Restore,
    Pull,
    Hold,
    Finish(End),
}

struct Machine<'a, W: World> {
    w: &'a mut W,
    s: &'a Settings,
    knobs: Knobs,
    mode: Mode,
    command: &'a str,
    /// Boot-clock time when a holding run gives up.
    deadline: Duration,
    /// The checks of the last observation.
    checks: Vec<Finding>,
    /// One finding per remedy id; the latest wins.
    remedies: Vec<Finding>,
    /// This boot's state, as loaded under the repair lock (repairing runs only).
    state: Option<State>,
    locked: bool,
    terminal: Option<Terminal>,
    failure: String,
    archives_tried: bool,
    /// Leaked tasks and orphans are cleaned up once per run.
    hygiene_done: bool,
    /// What a restart would risk (`runtime.kill-mode`), named by the restart remedy.
    restart_risks: Vec<String>,
    pulls: u32,
    pull_errors: Vec<String>,
    poll: Backoff,
    pull_pause: Backoff,
}

/// The findings `guard hygiene` reports.
fn in_hygiene_scope(f: &Finding) -> bool {
    matches!(
        f.id,
        Id::RuntimeAnswers | Id::RuntimeLeakedTasks | Id::RuntimeOrphans
    )
}

/// Runs phase 2 to its end. `command` names the run in the state file.
pub async fn run<W: World>(w: &mut W, s: &Settings, mode: Mode, command: &str) -> Gate {
    let mut m = Machine::new(w, s, mode, command);
    let mut step = Step::Begin;
    loop {
        step = match step {
            Step::Begin => m.begin(),
            Step::Observe => m.observe().await,
            Step::Decide(obs) => m.decide(&obs),
            Step::Restart(reason) => m.restart(reason).await,
            Step::Hygiene(plan) => m.hygiene(&plan).await,
            Step::Restore => m.restore().await,
            Step::Pull => m.pull().await,
            Step::Hold => m.hold().await,
            Step::Finish(end) => return m.finish(end).await,
        }
    }
}

impl<'a, W: World> Machine<'a, W> {
    fn new(w: &'a mut W, s: &'a Settings, mode: Mode, command: &'a str) -> Self {
        let hold = if mode.hold {
            s.hold.timeout
        } else {
            Duration::ZERO
        };
        let deadline = w.now() + hold;
        let knobs = Knobs {
            require_network: s.hold.require_network,
            snapshotter: w.snapshotter(),
        };
        Machine {
            w,
            s,
            knobs,
            mode,
            command,
            deadline,
            checks: Vec::new(),
            remedies: Vec::new(),
            state: None,
            locked: false,
            terminal: None,
            failure: String::new(),
            archives_tried: false,
            hygiene_done: false,
            restart_risks: Vec::new(),
            pulls: 0,
            pull_errors: Vec::new(),
            poll: Backoff::new(Duration::from_millis(200), Duration::from_secs(5)),
            pull_pause: Backoff::new(Duration::from_secs(1), Duration::from_secs(10)),
        }
    }

    fn set(&mut self, f: Finding) {
        self.remedies.retain(|old| old.id != f.id);
        self.remedies.push(f);
    }

    fn left(&self) -> Duration {
        self.deadline.saturating_sub(self.w.now())
    }

    /// Reads the state file without the lock: a terminal boot is reported at once, and a
    /// read-only run only reports what the file says.
    fn begin(&mut self) -> Step {
        match self.w.read_state() {
            RuntimeFile::Current(s) if s.terminal.is_some() => {
                if self.mode.acts() {
                    self.terminal = s.terminal;
                } else {
                    let reason = s.terminal.map(|t| t.reason).unwrap_or_default();
                    self.set(
                        Finding::warn(Id::RemedyBudget, "the guard is terminal for this boot")
                            .evidence(reason)
                            .remedy("fix the cause, then `guard reset`"),
                    );
                }
            }
            RuntimeFile::Corrupt(problem) if !self.mode.acts() => self.set(
                Finding::warn(
                    Id::RemedyBudget,
                    "the state file is corrupt (no restart budget left this boot)",
                )
                .evidence(problem),
            ),
            _ => {}
        }
        Step::Observe
    }

    async fn observe(&mut self) -> Step {
        if self.mode.acts() && self.terminal.is_none() && !self.locked {
            if let Err(end) = self.lock().await {
                return Step::Finish(end);
            }
        }
        crate::notify::status("checking containerd");
        let obs = self.w.observe(self.wait(), self.mode.scope).await;
        Step::Decide(Box::new(obs))
    }

    /// How long this look waits for containerd to answer: never past the hold, but at
    /// least 1 s.
    fn wait(&self) -> Duration {
        let wait = match (self.terminal.is_some(), self.mode.repair) {
            (true, _) => TERMINAL_WAIT,
            (false, true) => self.s.containerd.wait,
            (false, false) => self.s.containerd.wait.min(VERIFY_WAIT),
        };
        match self.mode.hold {
            true => wait.min(self.left()).max(Duration::from_secs(1)),
            false => wait,
        }
    }

    /// The longest one restart may take: its command, then containerd's wait to answer.
    fn one_restart(&self) -> Duration {
        self.s.containerd.restart_timeout + self.s.containerd.wait
    }

    /// Takes the repair lock, waiting (unlocked, with backoff) while another guard holds
    /// it, then loads the state that guard may have changed.
    async fn lock(&mut self) -> Result<(), End> {
        let bound = match self.mode.hold {
            true => self.left(),
            false => self.one_restart(),
        };
        let give_up = self.w.now() + bound;
        // A short cap: waiters that started together would otherwise be let through one
        // per cap once the holder is done (measured: 1 s per waiter with a 1 s cap).
        let mut pause = Backoff::new(Duration::from_millis(10), LOCK_POLL_MAX);
        loop {
            match self.w.try_lock() {
                Ok(()) => break,
                Err(LockError::Unavailable(e)) => {
                    // No lock means no state file either: saving fails, so nothing restarts.
                    tracing::warn!("{e}");
                    self.state_unusable(format!("cannot open the repair lock: {e}"));
                    break;
                }
                Err(busy) if self.w.now() >= give_up => {
                    self.set(
                        Finding::fail(Id::RemedyBudget, "not repairing: the repair lock is held")
                            .evidence(format!("{busy} for longer than {}", format_duration(bound)))
                            .remedy("wait for the other guard to finish, then run again"),
                    );
                    return Err(End::Unusable);
                }
                Err(busy) => {
                    tracing::debug!("{busy}; waiting");
                    let left = give_up.saturating_sub(self.w.now());
                    self.w.sleep(pause.next().min(left)).await;
                }
            }
        }
        self.locked = true;
        self.load_state();
        Ok(())
    }

    fn load_state(&mut self) {
        let (state, how) = self.w.load_state();
        if let Loaded::Corrupt { problem, kept } = how {
            self.set(
                Finding::warn(
                    Id::RemedyBudget,
                    "the state file was corrupt: no restart budget left this boot",
                )
                .evidence(problem)
                .evidence(format!("kept as {}", kept.display()))
                .remedy("inspect it, then `guard reset` to allow restarts again"),
            );
        }
        self.state = Some(state);
    }

    fn unlock(&mut self) {
        if self.locked {
            self.w.unlock();
            self.locked = false;
        }
    }

    fn decide(&mut self, obs: &Observation) -> Step {
        // Leaked tasks and orphans hold kubelet only where nothing else will: a holding
        // run (kubelet's gate) reports them as warnings and cleans them up.
        let (checks, plan) = judge(&self.knobs, !self.mode.hold, obs);
        self.checks = match self.mode.scope {
            Scope::Full => checks,
            Scope::Hygiene => checks.into_iter().filter(in_hygiene_scope).collect(),
        };
        self.restart_risks = plan.restart_risks.clone();
        if let Some(t) = &self.terminal {
            self.set(
                Finding::fail(
                    Id::RemedyBudget,
                    "TERMINAL: the guard will not act again this boot",
                )
                .evidence(t.reason.clone())
                .remedy("fix the cause, then run `guard reset` (or reboot)"),
            );
            return Step::Finish(End::Terminal);
        }
        let failure = first_failure(&self.checks);
        self.failure = failure.clone().unwrap_or_default();
        if self.mode.dry_run {
            self.dry_run(&plan);
        }
        if !self.mode.acts() {
            return Step::Finish(if failure.is_some() {
                End::Unusable
            } else {
                End::Usable
            });
        }
        self.next_remedy(failure.is_some(), plan)
    }

    /// The remedy for this cycle: a restart first (a stale containerd's answers about
    /// anything else describe the wrong filesystem), then hygiene once, then the image.
    fn next_remedy(&mut self, failing: bool, plan: Plan) -> Step {
        let full = self.mode.scope == Scope::Full;
        if let (true, true, Some(reason)) = (failing, full, plan.restart) {
            return Step::Restart(reason);
        }
        if plan.has_hygiene() && !self.hygiene_done {
            return Step::Hygiene(Box::new(plan));
        }
        match (failing, full, plan.restore_image) {
            (false, _, _) => Step::Finish(End::Usable),
            (true, true, true) => Step::Restore,
            (true, true, false) => Step::Hold,
            (true, false, _) => Step::Finish(End::Unusable),
        }
    }

    /// `--dry-run`: one finding per remedy the plan calls for, saying exactly what would be
    /// done; nothing is done.
    fn dry_run(&mut self, plan: &Plan) {
        let would = |id: Id, what: String, items: &[String]| {
            items.iter().fold(
                Finding::skip(id, format!("dry run: would {what}")),
                |f, i| f.evidence(i.clone()),
            )
        };
        if let Some(reason) = plan.restart {
            let argv = self.s.containerd.restart.join(" ");
            let what = format!(
                "restart containerd ({}) with `{argv}`, within the budget",
                reason.text()
            );
            self.set(would(Id::RemedyRestart, what, &self.restart_risks.clone()));
        }
        if plan.restore_image {
            let what = format!(
                "restore {} from [sandbox] archives, then pull it",
                self.w.image_reference()
            );
            self.set(would(Id::RemedyRestoreImage, what, &[]));
        }
        if !plan.delete_tasks.is_empty() {
            let what = format!(
                "delete {} leaked task(s) (Tasks.Delete)",
                plan.delete_tasks.len()
            );
            let ids: Vec<String> = plan.delete_tasks.iter().map(|l| l.id.clone()).collect();
            self.set(would(Id::RemedyDeleteTask, what, &ids));
        }
        if !plan.reap.is_empty() {
            let what = format!(
                "kill {} orphaned container cgroup(s) and every pid in them",
                plan.reap.len()
            );
            let pids: Vec<String> = plan.reap.iter().map(condemned_text).collect();
            self.set(would(Id::RemedyReapOrphans, what, &pids));
        }
    }

    /// Deletes the leaked tasks and kills the orphaned cgroups the plan names, each on its
    /// own, each recorded; then looks again. Never restarts containerd.
    async fn hygiene(&mut self, plan: &Plan) -> Step {
        self.hygiene_done = true;
        let mut outcomes = Vec::new();
        for leak in &plan.delete_tasks {
            let outcome = self.w.delete_task(leak).await;
            outcomes.push(self.note(Id::RemedyDeleteTask, "delete-task", &leak.id, outcome));
        }
        for condemned in &plan.reap {
            let outcome = self.w.reap(condemned).await;
            let cgroup = &condemned.cgroup;
            outcomes.push(self.note(Id::RemedyReapOrphans, "reap-orphans", cgroup, outcome));
        }
        for f in Self::group(outcomes) {
            self.set(f);
        }
        let _ = self.save();
        Step::Observe
    }

    /// Records one remedy outcome; returns it as (id, ok, line).
    fn note(
        &mut self,
        id: Id,
        action: &str,
        item: &str,
        outcome: Result<String, String>,
    ) -> (Id, bool, String) {
        let (ok, text) = match outcome {
            Ok(t) => (true, t),
            Err(e) => (false, format!("failed: {e}")),
        };
        self.record(item, action, &text);
        (id, ok, format!("{item}: {text}"))
    }

    /// One finding per remedy id: pass when every item worked, else warn, every item named.
    fn group(outcomes: Vec<(Id, bool, String)>) -> Vec<Finding> {
        let mut out = Vec::new();
        for id in [Id::RemedyDeleteTask, Id::RemedyReapOrphans] {
            let mine: Vec<&(Id, bool, String)> = outcomes.iter().filter(|o| o.0 == id).collect();
            if mine.is_empty() {
                continue;
            }
            let failed = mine.iter().filter(|o| !o.1).count();
            let what = match id {
                Id::RemedyDeleteTask => "leaked task(s) deleted",
                _ => "orphaned cgroup(s) killed",
            };
            let summary = format!("{} of {} {what}", mine.len() - failed, mine.len());
            let f = match failed {
                0 => Finding::pass(id, summary),
                _ => Finding::warn(id, summary)
                    .remedy("see the evidence; `guard status` keeps the history"),
            };
            out.push(mine.iter().fold(f, |f, o| f.evidence(o.2.clone())));
        }
        out
    }

    fn record(&mut self, item: &str, action: &str, outcome: &str) {
        let (shown, said) = (escape(item), escape(outcome));
        tracing::info!("{action} {shown}: {said}");
        let uptime_ms = self.w.now().as_millis() as u64;
        if let Some(s) = self.state.as_mut() {
            s.record(Record {
                uptime_ms,
                unix: crate::state::unix_now(),
                item: item.to_string(),
                action: action.to_string(),
                outcome: outcome.to_string(),
            });
        }
    }

    fn save(&mut self) -> Result<(), String> {
        let saved = match &self.state {
            Some(state) => self.w.save_state(state),
            None => Err("no state loaded".into()),
        };
        saved.inspect_err(|e| {
            tracing::warn!("cannot save the state file: {e}");
            self.state_unusable(e.clone());
        })
    }

    /// state_dir cannot be used: said once, as a warning (the node's verdict is
    /// containerd's, not the guard's bookkeeping), unless a budget finding already says
    /// more (a refused restart, terminal).
    fn state_unusable(&mut self, e: String) {
        if self.remedies.iter().any(|f| f.id == Id::RemedyBudget) {
            return;
        }
        let dir = self.s.state_dir.display();
        self.set(
            Finding::warn(
                Id::RemedyBudget,
                format!("state_dir {dir} cannot be written: containerd will not be restarted"),
            )
            .evidence(e)
            .remedy("a restart needs a durable record first; fix state_dir as the evidence says"),
        );
    }

    async fn restart(&mut self, reason: RestartReason) -> Step {
        // A containerd that phase 1 held back this boot is down on purpose: restarting it
        // would only run the failing volume check again and spend the budget.
        if let Some(held) = self.w.phase1_held() {
            self.set(
                Finding::fail(
                    Id::RemedyRestart,
                    "not restarting containerd: phase 1 held it back this boot",
                )
                .evidence(held)
                .remedy(
                    "fix the volume (`guard status` says how): containerd's own Restart= \
                     starts it again, or `systemctl restart containerd` at once",
                ),
            );
            // Not a restart: the budget counts only `restart` records.
            self.record("containerd", "refused-restart", "phase 1 failed this boot");
            return Step::Finish(End::Unusable);
        }
        let now = self.w.now();
        let decision = match &self.state {
            Some(s) => budget::decide(&self.s.remediation, s, now),
            None => Decision::Terminal {
                reason: "no state file: cannot count restarts".into(),
            },
        };
        match decision {
            Decision::Terminal { reason: why } => self.go_terminal(why),
            Decision::Wait { left, attempt } => self.back_off(left, attempt).await,
            Decision::Allowed { attempt } => self.restart_now(reason, attempt).await,
        }
    }

    fn go_terminal(&mut self, why: String) -> Step {
        let void = self.state.as_ref().and_then(|s| s.void.clone());
        let mut f = match void {
            // Not spent: never known. The budget cannot be counted, so none is left.
            Some(_) => Finding::fail(
                Id::RemedyBudget,
                "TERMINAL: the state file cannot be trusted, so no restart budget is left this boot",
            )
            .remedy(
                "inspect the kept copy named above (it was not written by this guard as it \
                 is), then `guard reset` to allow restarts again",
            ),
            None => Finding::fail(
                Id::RemedyBudget,
                "TERMINAL: restart budget spent; containerd will not be restarted again this boot",
            )
            .remedy(
                "find out why restarts do not help (see the history in `guard status`), fix \
                 it, then `guard reset`",
            ),
        }
        .evidence(why.clone());
        if let Some(s) = self.state.as_mut() {
            for r in &s.restarts {
                let line = format!("restart at uptime {}s: {}", r.uptime_ms / 1000, r.outcome);
                f = f.evidence(line);
            }
            s.terminal = Some(Terminal {
                unix: crate::state::unix_now(),
                reason: why.clone(),
            });
        }
        tracing::error!("TERMINAL: {why}");
        self.set(f);
        let _ = self.save();
        Step::Finish(End::Terminal)
    }

    async fn back_off(&mut self, left: Duration, attempt: u32) -> Step {
        let msg = format!(
            "restart {attempt} of {} allowed in {} (backoff)",
            self.s.remediation.restart_budget,
            format_duration(Duration::from_millis(left.as_millis() as u64))
        );
        if self.mode.hold && left < self.left() {
            crate::notify::status(&format!("holding: {}; {msg}", self.failure));
            crate::notify::extend_timeout(left + Duration::from_secs(30));
            tracing::info!("{msg}");
            self.unlock();
            self.w.sleep(left).await;
            return Step::Observe;
        }
        self.set(
            Finding::fail(
                Id::RemedyBudget,
                format!("containerd needs a restart but {msg}"),
            )
            .remedy("wait, or run the guard again later; it will not restart sooner"),
        );
        Step::Finish(End::Unusable)
    }

    async fn restart_now(&mut self, reason: RestartReason, attempt: u32) -> Step {
        let old_pid = self.w.containerd_pid();
        let tie = match self.tie(old_pid) {
            Ok(tie) => tie,
            Err(refusal) => {
                self.set(refusal);
                return Step::Finish(End::Unusable);
            }
        };
        if reason == RestartReason::Stale && !self.mode.force {
            if let Some(refusal) = self.tasks_refusal().await {
                self.set(refusal);
                return Step::Finish(End::Unusable);
            }
        }
        let why = reason.text();
        let budget = self.s.remediation.restart_budget;
        crate::notify::status(&format!(
            "restarting containerd ({why}), attempt {attempt} of {budget}"
        ));
        crate::notify::extend_timeout(self.one_restart());
        // Counted before it runs: a crash mid-restart must not refund the budget. A restart
        // the state file does not remember would not count: without a record, no restart.
        let argv = self.s.containerd.restart.join(" ");
        self.record("containerd", "restart", &format!("{why}: running `{argv}`"));
        if let Err(e) = self.save() {
            self.set(
                Finding::fail(
                    Id::RemedyBudget,
                    "refused to restart containerd: the restart cannot be recorded",
                )
                .evidence(e)
                .remedy("make state_dir writable (it is /run/containerd-guard by default)"),
            );
            return Step::Finish(End::Unusable);
        }
        let outcome = self.w.restart().await;
        self.note_restart_outcome(why, attempt, outcome, old_pid, tie);
        Step::Observe
    }

    /// The restart command must reach the containerd proven stale and no other runtime
    /// (`remedies::command::tie_restart`). `Ok` carries the evidence line of a command
    /// that may run; `Err` the refusal (never a restart, not counted in the budget).
    fn tie(&mut self, pid: Option<i32>) -> Result<String, Finding> {
        let cgroup = pid.and_then(|p| self.w.process_cgroup(p));
        match tie_restart(&self.s.containerd.restart, pid, cgroup.as_deref()) {
            RestartTie::Tied(line) | RestartTie::Untied(line) => Ok(line),
            RestartTie::Refused(line) => {
                self.record("containerd", "refused-restart", &line);
                Err(Finding::fail(
                    Id::RemedyRestart,
                    "refused to restart containerd: the restart command does not reach the \
                     containerd proven stale",
                )
                .evidence(line)
                .remedy(
                    "set [containerd] restart to restart the unit this containerd runs in \
                     (the evidence names its cgroup), or restart it by hand",
                ))
            }
        }
    }

    /// A stale containerd that still runs tasks is not restarted (they would be orphaned)
    /// unless `--force`; the refusal lists them.
    async fn tasks_refusal(&mut self) -> Option<Finding> {
        let blocking: Vec<String> = match self.w.running_tasks().await {
            Ok(tasks) => tasks.iter().map(ToString::to_string).collect(),
            Err(e) => vec![format!("cannot list tasks: {e}")],
        };
        if blocking.is_empty() {
            return None;
        }
        let mut f = Finding::fail(
            Id::RemedyRestart,
            format!(
                "refused to restart the stale containerd: it still runs {} task(s)",
                blocking.len()
            ),
        )
        .remedy(
            "a restarted containerd would orphan them: drain the node, stop them, or rerun \
             with --force",
        );
        for b in &blocking {
            f = f.evidence(b.clone());
        }
        let f = self.with_risks(f);
        let list = blocking.join(", ");
        self.record(
            "containerd",
            "refused-restart",
            &format!("running tasks: {list}"),
        );
        Some(f)
    }

    /// A restart of a containerd whose unit would orphan payloads says so.
    fn with_risks(&self, f: Finding) -> Finding {
        self.restart_risks.iter().fold(f, |f, r| {
            f.evidence(format!("risk (runtime.kill-mode): {r}"))
        })
    }

    fn note_restart_outcome(
        &mut self,
        why: &str,
        attempt: u32,
        outcome: Result<String, String>,
        old_pid: Option<i32>,
        tie: String,
    ) {
        let text = match &outcome {
            Ok(t) | Err(t) => t.clone(),
        };
        if let Some(s) = self.state.as_mut() {
            for last in [s.restarts.last_mut(), s.history.last_mut()]
                .into_iter()
                .flatten()
            {
                last.outcome = format!("{why}: {text}");
            }
        }
        let _ = self.save();
        let budget = self.s.remediation.restart_budget;
        let f = match outcome {
            Ok(_) => Finding::pass(
                Id::RemedyRestart,
                format!("restarted containerd ({why}), restart {attempt} of {budget} this boot"),
            ),
            Err(_) => Finding::warn(
                Id::RemedyRestart,
                format!("the restart command failed (restart {attempt} of {budget} this boot)"),
            ),
        };
        let pid = old_pid.map_or("none".to_string(), |p| p.to_string());
        let f = f
            .evidence(text)
            .evidence(format!("containerd pid before: {pid}"))
            .evidence(tie);
        self.set(self.with_risks(f));
    }

    async fn restore(&mut self) -> Step {
        if !self.archives_tried {
            self.archives_tried = true;
            if self.import_archives().await {
                return Step::Observe;
            }
        }
        match self.s.sandbox.pull && self.pulls < self.s.sandbox.pull_attempts {
            true => Step::Pull,
            false => Step::Hold,
        }
    }

    /// Tries each `[sandbox] archives` entry in order until one imports. True if one did.
    async fn import_archives(&mut self) -> bool {
        let wanted = self.w.image_name();
        let mut tried = Vec::new();
        let mut restored = false;
        for a in self.s.sandbox.archives.clone() {
            let item = a.display().to_string();
            if !self.w.archive_present(&a) {
                tried.push(format!("{item}: not there"));
                continue;
            }
            crate::notify::status(&format!("importing {wanted} from {item}"));
            match self.w.import(&a).await {
                Import::Imported(text) => {
                    self.record(&item, "import", &text);
                    tried.push(text);
                    restored = true;
                    break;
                }
                Import::Refused(why) => {
                    self.record(&item, "refused-archive", &why);
                    tried.push(format!("REFUSED: {why}"));
                }
                Import::Failed(why) => {
                    self.record(&item, "import", &format!("failed: {why}"));
                    tried.push(format!("import failed: {why}"));
                }
            }
        }
        let f = self.restore_finding(restored, &wanted);
        self.set(tried.into_iter().fold(f, Finding::evidence));
        let _ = self.save();
        restored
    }

    fn restore_finding(&self, restored: bool, wanted: &str) -> Finding {
        const ID: Id = Id::RemedyRestoreImage;
        if restored {
            Finding::pass(ID, format!("restored {wanted} from an archive"))
        } else if self.s.sandbox.archives.is_empty() {
            Finding::skip(ID, "no [sandbox] archives configured")
        } else {
            Finding::warn(ID, format!("no archive restored {wanted}"))
                .remedy("replace the archive with a good copy of the sandbox image")
        }
    }

    /// One bounded CRI pull; between attempts the lock is released and the node looked at
    /// again (another guard may have restored the image).
    async fn pull(&mut self) -> Step {
        self.pulls += 1;
        let (attempt, attempts) = (self.pulls, self.s.sandbox.pull_attempts);
        let reference = self.w.image_reference();
        crate::notify::status(&format!(
            "pulling {reference} through CRI, attempt {attempt} of {attempts}"
        ));
        crate::notify::extend_timeout(self.s.sandbox.pull_timeout + Duration::from_secs(30));
        match self.w.pull().await {
            Ok(text) => {
                self.record(&reference, "pull", &text);
                self.set(Finding::pass(Id::RemedyPull, text));
                let _ = self.save();
                return Step::Observe;
            }
            Err(e) => {
                let line = format!("attempt {attempt}: {e}");
                self.record(&reference, "pull", &line);
                self.pull_errors.push(line);
            }
        }
        let f = Finding::warn(
            Id::RemedyPull,
            format!("could not pull {reference} through CRI"),
        )
        .remedy(
            "check the registry and containerd's registry configuration, or ship the image \
                 as an archive",
        );
        self.set(self.pull_errors.iter().cloned().fold(f, Finding::evidence));
        let _ = self.save();
        if attempt >= attempts || (self.mode.hold && self.left().is_zero()) {
            return Step::Hold;
        }
        self.unlock();
        let pause = self
            .pull_pause
            .next()
            .min(self.left().max(Duration::from_millis(100)));
        self.w.sleep(pause).await;
        Step::Observe
    }

    async fn hold(&mut self) -> Step {
        let left = self.left();
        if !self.mode.hold || left.is_zero() {
            if self.mode.hold {
                let timeout = format_duration(self.s.hold.timeout);
                self.set(
                    Finding::fail(
                        Id::RuntimeHold,
                        format!("the node did not become usable within {timeout}"),
                    )
                    .evidence(self.failure.clone()),
                );
            }
            return Step::Finish(End::Unusable);
        }
        self.unlock();
        let pause = self.poll.next().min(left);
        crate::notify::status(&format!(
            "holding kubelet: {} ({}s left)",
            self.failure,
            left.as_secs()
        ));
        crate::notify::extend_timeout(pause + Duration::from_secs(30));
        self.w.sleep(pause).await;
        Step::Observe
    }

    /// Reports, and for a repairing run records the outcome in the state file (taking the
    /// lock again briefly if it was let go) and the status line.
    async fn finish(mut self, end: End) -> Gate {
        if self.mode.acts() {
            let summary = match end {
                End::Usable => "usable".to_string(),
                End::Terminal => {
                    "TERMINAL: restart budget spent; `guard reset` after fixing".to_string()
                }
                End::Unusable => {
                    let all: Vec<Finding> =
                        self.checks.iter().chain(&self.remedies).cloned().collect();
                    first_failure(&all)
                        .map(|f| format!("NOT usable: {f}"))
                        .unwrap_or_default()
                }
            };
            // Before the findings are collected: a state file that cannot be saved is
            // reported.
            self.record_outcome(end, &summary).await;
            self.w.write_status(&format!("{}: {summary}", self.command));
            crate::notify::status(&summary);
        }
        self.unlock();
        let mut findings = std::mem::take(&mut self.checks);
        findings.append(&mut self.remedies);
        Gate { findings, end }
    }

    async fn record_outcome(&mut self, end: End, summary: &str) {
        if !self.locked && self.terminal.is_none() {
            if self.w.try_lock().is_err() {
                return; // another guard is acting; its own outcome will be the last
            }
            self.locked = true;
            self.load_state();
        }
        let command = self.command.to_string();
        if let Some(s) = self.state.as_mut() {
            s.last = Some(Outcome {
                unix: crate::state::unix_now(),
                command,
                exit: end.exit_code(),
                summary: summary.to_string(),
            });
            let _ = self.save();
        }
    }
}

/// `cgroup C: pid N, pid M` for the dry run.
fn condemned_text(c: &Condemned) -> String {
    let pids: Vec<String> = c
        .processes
        .iter()
        .map(|(p, _)| format!("pid {p}"))
        .collect();
    format!("cgroup {}: {}", c.cgroup, pids.join(", "))
}
