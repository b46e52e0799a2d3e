//! Restarting containerd: within the budget and its backoff, tied to the containerd
//! proven stale, never over running tasks unless forced, terminal once spent.

use super::{Machine, Step, World, EXTEND_SLACK};
use crate::phases::gate::decide::RestartReason;
use crate::phases::gate::End;
use crate::remedies::budget::{self, Decision};
use crate::remedies::command::{systemctl_restart_unit, tie_restart, CommandError, RestartTie};
use crate::report::{Finding, Id};
use crate::state::ledger::{Action, Outcome, Terminal};
use std::time::Duration;

impl<W: World> Machine<'_, W> {
    /// The longest one restart may take: its command, then containerd's wait to answer.
    pub(super) fn one_restart(&self) -> Duration {
        self.s.containerd.restart_timeout + self.s.containerd.wait
    }

    /// Asks systemd for `by` more start time; a holding run never past the hold's end and
    /// [`EXTEND_SLACK`]: a held kubelet's start ends by `[hold] timeout`, whichever step
    /// (a restart, a pull, the canary) began last.
    pub(super) fn extend(&self, by: Duration) {
        let by = match self.mode.hold {
            true => by.min(self.left() + EXTEND_SLACK),
            false => by,
        };
        crate::notify::extend_timeout(by);
    }

    pub(super) async fn restart(&mut self, reason: RestartReason) -> Step {
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
            // Not a restart: the budget counts only restarts that ran.
            let why = "phase 1 failed this boot";
            self.record("containerd", Action::Restart, Outcome::Refused, why);
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
                let line = format!("restart at uptime {}s: {}", r.uptime_ms / 1000, r.message);
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
            crate::human::duration(left)
        );
        if self.mode.hold && left < self.left() {
            self.extend(left + EXTEND_SLACK);
            tracing::info!("{msg}");
            self.unlock();
            self.holding = true;
            let hold_left = self.left();
            let holding = format!("holding kubelet: {}", self.failure);
            self.progress.waiting(&holding, hold_left);
            // (after the hold's own status: the backoff says more)
            crate::notify::status(&format!("holding: {}; {msg}", self.failure));
            self.progress.during(self.w.sleep(left)).await;
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
        self.extend(self.one_restart());
        // Counted before it runs: a crash mid-restart must not refund the budget. A restart
        // the state file does not remember would not count: without a record, no restart.
        let argv = self.s.containerd.restart.join(" ");
        let running = format!("{why}: running `{argv}`");
        self.record("containerd", Action::Restart, Outcome::Started, &running);
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
        let restarting = format!("restarting containerd ({why}), attempt {attempt} of {budget}");
        self.progress
            .waiting(&restarting, self.s.containerd.restart_timeout);
        let outcome = self.progress.during(self.w.restart()).await;
        self.note_restart_outcome(why, attempt, outcome, old_pid, tie);
        Step::Observe
    }

    /// The dry run's account of a restart: what would really run on this host, the
    /// configured command with what ties it to the containerd at fault (and what the
    /// restart would risk), or why none would run. Records nothing.
    pub(super) fn restart_forecast(&self, reason: RestartReason, not_systemd: bool) -> Finding {
        let restart = &self.s.containerd.restart;
        let argv = restart.join(" ");
        if not_systemd && systemctl_restart_unit(restart).is_some() {
            return Finding::skip(
                Id::RemedyRestart,
                format!("dry run: no restart is possible: `{argv}` needs systemd, and this is not a systemd host"),
            )
            .evidence("/run/systemd/system does not exist: systemd does not run here")
            .remedy("set [containerd] restart to the command that restarts containerd on this host");
        }
        let pid = self.w.containerd_pid();
        let cgroup = pid.and_then(|p| self.w.process_cgroup(p));
        match tie_restart(restart, pid, cgroup.as_deref()) {
            RestartTie::Refused(line) => Finding::skip(
                Id::RemedyRestart,
                format!("dry run: would refuse to restart containerd: `{argv}` does not reach the containerd at fault"),
            )
            .evidence(line),
            RestartTie::Tied(line) | RestartTie::Untied(line) => {
                let what = format!(
                    "dry run: would restart containerd ({}) with `{argv}`, within the budget",
                    reason.text()
                );
                let risks = self.restart_risks.iter().cloned();
                risks.fold(Finding::skip(Id::RemedyRestart, what).evidence(line), Finding::evidence)
            }
        }
    }

    /// The restart command must reach the containerd proven stale and no other runtime
    /// (`remedies::command::tie_restart`). `Ok` carries the evidence line of a command
    /// that may run; `Err` the refusal (never a restart, not counted in the budget).
    fn tie(&mut self, pid: Option<i32>) -> Result<String, Finding> {
        let cgroup = pid.and_then(|p| self.w.process_cgroup(p));
        match tie_restart(&self.s.containerd.restart, pid, cgroup.as_deref()) {
            RestartTie::Tied(line) | RestartTie::Untied(line) => Ok(line),
            RestartTie::Refused(line) => {
                self.record("containerd", Action::Restart, Outcome::Refused, &line);
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
        let line = format!("running tasks: {list}");
        self.record("containerd", Action::Restart, Outcome::Refused, &line);
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
        outcome: Result<String, CommandError>,
        old_pid: Option<i32>,
        tie: String,
    ) {
        let (text, ended) = match &outcome {
            Ok(t) => (t.clone(), Outcome::Ok),
            Err(e) => (e.to_string(), Outcome::Failed),
        };
        if let Some(s) = self.state.as_mut() {
            s.end_restart(ended, format!("{why}: {text}"));
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
}
