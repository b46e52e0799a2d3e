//! The transitions of phase 2 (see the diagram in `../mod.rs`). Each step is one function
//! that returns the next step; only [`World`] touches the outside. This file is the step
//! loop and its decisions; the steps that act live beside it, one concern per file:
//! `records.rs` (the repair lock and the state file), `restart.rs` (containerd restarts
//! within the budget), `image.rs` (the sandbox image: archives, then pulls) and
//! `hygiene.rs` (leaked tasks, orphans, and the dry run's account of every remedy).

mod hygiene;
mod image;
mod records;
mod restart;
mod withheld;

use super::decide::{first_failure, judge_with, Observation, Plan, RestartReason};
use super::world::World;
use super::{End, FamilyId, Gate, Mode};
use crate::backoff::Backoff;
use crate::checks::answers::rules::{Knobs, SilentFix};
use crate::checks::canary::facts::CanaryRun;
use crate::checks::canary::rules as canary;
use crate::checks::canary::Canary;
use crate::checks::kill_mode::facts::KillModeFacts;
use crate::checks::{Family, Judging};
use crate::command::Command;
use crate::config::units::format_duration;
use crate::config::Settings;
use crate::progress::Progress;
use crate::report::{Finding, Id};
use crate::state::ledger::{State, Terminal};
use crate::state::LedgerFile;
use image::ArchiveRounds;
use std::time::Duration;

/// Read-only `guard verify` does not wait long for a silent containerd.
const VERIFY_WAIT: Duration = Duration::from_secs(5);
/// A terminal guard only looks, briefly, to show the checks: exit 4 stays immediate.
const TERMINAL_WAIT: Duration = Duration::from_secs(1);
/// systemd's start timeout reaches this far past a step's own bound (its report, exit).
const EXTEND_SLACK: Duration = Duration::from_secs(30);

enum Step {
    Begin,
    Observe,
    Decide(Box<Observation>),
    Restart(RestartReason),
    Hygiene(Box<Plan>),
    Restore,
    Pull,
    Pin,
    Canary,
    Hold,
    Finish(End),
}

struct Machine<'a, W: World> {
    w: &'a mut W,
    s: &'a Settings,
    knobs: Knobs,
    mode: Mode,
    command: Command,
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
    archives: ArchiveRounds,
    /// Leaked tasks and orphans are cleaned up once per run.
    hygiene_done: bool,
    /// The sandbox image is labelled pinned at most once per run.
    pin_tried: bool,
    /// What a restart would risk (`runtime.kill-mode`), named by the restart remedy.
    restart_risks: Vec<String>,
    pulls: u32,
    pull_errors: Vec<String>,
    poll: Backoff,
    pull_pause: Backoff,
    /// Says what each wait waits for (every await below runs through it).
    progress: Progress,
    /// A holding run has begun to hold: its looks belong to the hold's wait.
    holding: bool,
}

/// Runs phase 2 to its end. `command` (with `mode`'s flags) names the run in the state
/// file and the status line.
pub async fn run<W: World>(w: &mut W, s: &Settings, mode: Mode, command: Command) -> Gate {
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
            Step::Pin => m.pin().await,
            Step::Canary => m.canary().await,
            Step::Hold => m.hold().await,
            Step::Finish(end) => return m.finish(end).await,
        }
    }
}

impl<'a, W: World> Machine<'a, W> {
    fn new(w: &'a mut W, s: &'a Settings, mode: Mode, command: Command) -> Self {
        let hold = if mode.hold {
            s.hold.timeout
        } else {
            Duration::ZERO
        };
        let deadline = w.now() + hold;
        let knobs = Knobs {
            require_network: s.hold.require_network,
            snapshotter: w.snapshotter(),
            silent: match (mode.scope.covers(FamilyId::Answers), mode.acts()) {
                (false, _) => SilentFix::NeverHere,
                (true, true) => SilentFix::GuardRestarts,
                (true, false) => SilentFix::OperatorMay(s.containerd.restart.join(" ")),
            },
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
            archives: ArchiveRounds::default(),
            hygiene_done: false,
            pin_tried: false,
            restart_risks: Vec::new(),
            pulls: 0,
            pull_errors: Vec::new(),
            poll: Backoff::new(Duration::from_millis(200), Duration::from_secs(5)),
            pull_pause: Backoff::new(Duration::from_secs(1), Duration::from_secs(10)),
            progress: Progress::default(),
            holding: false,
        }
    }

    fn set(&mut self, f: Finding) {
        self.remedies.retain(|old| old.id != f.id);
        self.remedies.push(f);
    }

    fn left(&self) -> Duration {
        self.deadline.saturating_sub(self.w.now())
    }

    /// Reads the state file without the lock: a terminal boot is reported at once. Every
    /// run, read-only ones too, ends terminal then (exit 4, whatever else passes): kubelet's
    /// next start exits 4 at once, so no command may call the node usable.
    fn begin(&mut self) -> Step {
        match self.w.read_state() {
            LedgerFile::Current(s) if s.terminal.is_some() => self.terminal = s.terminal,
            LedgerFile::Corrupt(problem) if !self.mode.acts() => self.set(
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
        // The lock and the look may take the hold's time left: systemd is asked for it
        // first, so a kubelet unit whose TimeoutStartSec is shorter than [hold] timeout
        // still ends by the hold, not by systemd killing the first look.
        self.extend(self.left().max(self.wait()) + EXTEND_SLACK);
        if self.mode.acts() && self.terminal.is_none() && !self.locked {
            if let Err(end) = self.lock().await {
                return Step::Finish(end);
            }
        }
        let (wait, scope) = (self.wait(), self.mode.scope);
        if !self.holding {
            self.progress
                .waiting("waiting for containerd to answer", wait);
        }
        let obs = self.progress.during(self.w.observe(wait, scope)).await;
        // the snapshotter sandboxes start from depends on the version that just answered
        // (1.6 ignores a runtime's own): its plugin is required only then
        self.knobs.snapshotter = self.w.snapshotter();
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

    fn decide(&mut self, obs: &Observation) -> Step {
        // Leaked tasks and orphans hold kubelet only where nothing else will: a holding
        // run (kubelet's gate) reports them as warnings and cleans them up.
        let run = Judging {
            knobs: &self.knobs,
            hygiene_blocks: !self.mode.hold,
            endpoint_blocks: !self.mode.hold,
        };
        let (checks, plan) = judge_with(&run, obs, || self.volume_now());
        let scope = self.mode.scope;
        let plan = plan.permitted(scope);
        self.checks = checks.into_iter().filter(|f| scope.reports(f.id)).collect();
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
        let seen = failure.as_deref().unwrap_or("every check passed");
        tracing::debug!("looked: {seen}; the plan: {}", plan.describe());
        self.failure = failure.clone().unwrap_or_default();
        if let Some(failure) = failure
            .as_deref()
            .filter(|_| scope.covers(FamilyId::Canary))
        {
            self.checks.push(canary::not_tried(failure));
        }
        if self.mode.dry_run {
            // "not a systemd host" only where this run looked (else the facts are a stand-in)
            let not_systemd = obs.kill_mode == Some(KillModeFacts::NotSystemd);
            self.dry_run(&plan, not_systemd);
        }
        if !self.mode.acts() {
            return match failure {
                Some(_) => Step::Finish(End::Unusable),
                None => self.usable(),
            };
        }
        if let Some(withheld) = &plan.withheld {
            self.refuse(withheld);
        }
        self.next_remedy(failure.is_some(), plan)
    }

    /// The remedy for this cycle: a restart first (a stale containerd's answers about
    /// anything else describe the wrong filesystem), then hygiene once, the pin once, then
    /// the image.
    fn next_remedy(&mut self, failing: bool, plan: Plan) -> Step {
        if let (true, Some(reason)) = (failing, plan.restart) {
            return Step::Restart(reason);
        }
        if plan.has_hygiene() && !self.hygiene_done {
            return Step::Hygiene(Box::new(plan));
        }
        if plan.pin_image && !self.pin_tried {
            return Step::Pin;
        }
        match (failing, plan.restore_image) {
            (false, _) => self.usable(),
            (true, true) => Step::Restore,
            // (a run that does not hold, `guard hygiene` included, ends there: unusable)
            (true, false) => Step::Hold,
        }
    }

    /// Every check passed: the canary when the run covers it, else the end.
    fn usable(&self) -> Step {
        match self.mode.scope.covers(FamilyId::Canary) && self.terminal.is_none() {
            true => Step::Canary,
            false => Step::Finish(End::Usable),
        }
    }

    /// Makes and removes a canary pod. A failure holds like a failed check, and is never
    /// repaired: the next look runs it again.
    async fn canary(&mut self) -> Step {
        let bound = self.s.canary.timeout + 2 * crate::checks::canary::facts::CLEANUP;
        self.extend(bound + EXTEND_SLACK);
        self.progress
            .waiting("creating a canary pod sandbox", bound);
        // Only a repairing run removes what another guard left; a dry run makes nothing.
        let run = match (self.mode.dry_run, self.mode.acts()) {
            (true, _) => CanaryRun::DryRun,
            (false, true) => CanaryRun::Repair,
            (false, false) => CanaryRun::ReadOnly,
        };
        match self.progress.during(self.w.canary(run)).await {
            Some(facts) => {
                let run = Judging {
                    knobs: &self.knobs,
                    hygiene_blocks: !self.mode.hold,
                    endpoint_blocks: !self.mode.hold,
                };
                let verdict = <Canary as Family>::evaluate(Some(&facts), &run);
                self.checks.extend(verdict.findings);
            }
            None => self.checks.push(canary::no_connection()),
        }
        match first_failure(&self.checks) {
            None => Step::Finish(End::Usable),
            Some(failure) => {
                self.failure = failure;
                match self.mode.hold {
                    true => Step::Hold,
                    false => Step::Finish(End::Unusable),
                }
            }
        }
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
        // (the pause needs no extension of its own: the look before it asked systemd for
        // the hold's time left and the slack, which ends where this pause's would)
        let pause = self.poll.next().min(left);
        self.holding = true;
        let holding = format!("holding kubelet: {}", self.failure);
        self.progress.waiting(&holding, left);
        self.progress.during(self.w.sleep(pause)).await;
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
            let invocation = self.mode.invocation(self.command);
            self.w.write_status(&format!("{invocation}: {summary}"));
            crate::notify::status(&summary);
        }
        self.unlock();
        let mut findings = std::mem::take(&mut self.checks);
        findings.append(&mut self.remedies);
        Gate { findings, end }
    }
}
