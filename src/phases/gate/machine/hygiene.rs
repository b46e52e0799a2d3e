//! Leaked tasks and orphans: each deleted or killed on its own, recorded, reported as one
//! finding per remedy; and the dry run's account of every remedy a plan calls for.

use super::{Machine, Step, World};
use crate::checks::orphans::rules::Condemned;
use crate::phases::gate::decide::Plan;
use crate::remedies::RemedyError;
use crate::report::{Finding, Id};
use crate::state::ledger::{Action, Outcome};

impl<W: World> Machine<'_, W> {
    /// `--dry-run`: one finding per remedy the plan calls for, saying exactly what would be
    /// done; nothing is done.
    pub(super) fn dry_run(&mut self, plan: &Plan, not_systemd: bool) {
        let would = |id: Id, what: String, items: &[String]| {
            items.iter().fold(
                Finding::skip(id, format!("dry run: would {what}")),
                |f, i| f.evidence(i.clone()),
            )
        };
        if let Some(reason) = plan.restart {
            let forecast = self.restart_forecast(reason, not_systemd);
            self.set(forecast);
        }
        let refusals = plan.withheld.iter().flat_map(|w| self.refusals(w, true));
        for refusal in refusals.collect::<Vec<_>>() {
            self.set(refusal);
        }
        if plan.restore_image {
            let what = format!(
                "restore {} from [sandbox] archives, then pull it",
                self.w.image_reference()
            );
            self.set(would(Id::RemedyRestoreImage, what, &[]));
        }
        if plan.pin_image {
            let what = format!("label {} pinned", self.w.image_name());
            self.set(would(Id::RemedyPinImage, what, &[]));
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
    pub(super) async fn hygiene(&mut self, plan: &Plan) -> Step {
        self.hygiene_done = true;
        let mut outcomes = Vec::new();
        for leak in &plan.delete_tasks {
            let outcome = self.w.delete_task(leak).await;
            let noted = self.note(Id::RemedyDeleteTask, Action::DeleteTask, &leak.id, outcome);
            outcomes.push(noted);
        }
        for condemned in &plan.reap {
            let outcome = self.w.reap(condemned).await;
            let cgroup = &condemned.cgroup;
            let noted = self.note(Id::RemedyReapOrphans, Action::ReapOrphans, cgroup, outcome);
            outcomes.push(noted);
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
        action: Action,
        item: &str,
        outcome: Result<String, RemedyError>,
    ) -> (Id, bool, String) {
        let (ok, text) = match outcome {
            Ok(t) => (true, t),
            Err(e) => (false, format!("failed: {e}")),
        };
        let ended = if ok { Outcome::Ok } else { Outcome::Failed };
        self.record(item, action, ended, &text);
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
