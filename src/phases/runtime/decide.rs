//! Phase 2's "decide" step, pure: every runtime family's rules over one observation, and
//! the remedy the findings call for. The order of `judge` is the order of the report.

use crate::checks::eviction::facts::EvictionFacts;
use crate::checks::eviction::rules as eviction;
use crate::checks::kill_mode::facts::KillModeFacts;
use crate::checks::kill_mode::rules as kill_mode;
use crate::checks::leaked_tasks::facts::LeakedTaskFacts;
use crate::checks::leaked_tasks::rules::{self as leaked_tasks, Leak};
use crate::checks::orphans::facts::OrphanFacts;
use crate::checks::orphans::rules::{self as orphans, Condemned};
use crate::checks::runtime::facts::RuntimeFacts;
use crate::checks::runtime::rules::{self as runtime, Knobs};
use crate::checks::sandbox_image::facts::ImageFacts;
use crate::checks::sandbox_image::rules as sandbox_image;
use crate::checks::stale::facts::StaleFacts;
use crate::checks::stale::rules as stale;
use crate::checks::Family;
use crate::report::{Finding, Id, Status};

/// One look at the node: each family's facts. Only `runtime` (and `kill_mode`) when
/// containerd is silent. This is the phase's gather list: a new family adds a field here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub runtime: RuntimeFacts,
    pub stale: Option<StaleFacts>,
    pub sandbox_image: Option<ImageFacts>,
    pub leaked_tasks: Option<LeakedTaskFacts>,
    pub orphans: Option<OrphanFacts>,
    pub kill_mode: KillModeFacts,
    /// `None` where the run does not cover the family.
    pub eviction: Option<EvictionFacts>,
}

impl Observation {
    /// containerd did not answer: none of the families that ask it were looked at.
    pub fn unanswered(
        runtime: RuntimeFacts,
        kill_mode: KillModeFacts,
        eviction: Option<EvictionFacts>,
    ) -> Self {
        Observation {
            runtime,
            stale: None,
            sandbox_image: None,
            leaked_tasks: None,
            orphans: None,
            kill_mode,
            eviction,
        }
    }
}

/// The families a run covers (each command's list is its `Mode` constant). Whether
/// containerd answers is part of every run: nothing else can be looked at without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope(pub &'static [Family]);

impl Scope {
    /// Every check that only looks (the canary makes a pod: it is named on its own).
    pub const ALL: Scope = Scope(&[
        Family::Runtime,
        Family::Stale,
        Family::SandboxImage,
        Family::LeakedTasks,
        Family::Orphans,
        Family::KillMode,
        Family::Eviction,
    ]);

    /// Every check, and the canary pod last (`guard runtime`, `guard verify --deep`).
    pub const WITH_CANARY: Scope = Scope(&[
        Family::Runtime,
        Family::Stale,
        Family::SandboxImage,
        Family::LeakedTasks,
        Family::Orphans,
        Family::KillMode,
        Family::Eviction,
        Family::Canary,
    ]);

    pub fn covers(self, family: Family) -> bool {
        self.0.contains(&family)
    }

    /// Whether a look gathers the family's facts: those it covers, and the stale facts
    /// wherever the sandbox image is covered (a stale containerd's images describe the
    /// wrong filesystem: nothing is restored into it, whether or not the run reports it).
    pub fn looks_at(self, family: Family) -> bool {
        self.covers(family) || (family == Family::Stale && self.covers(Family::SandboxImage))
    }

    /// Whether a check's finding belongs in this run's report.
    pub fn reports(self, id: Id) -> bool {
        id == Id::RuntimeAnswers || Family::of(id).is_some_and(|f| self.covers(f))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartReason {
    Stale,
    NotAnswering,
}

impl RestartReason {
    pub fn text(self) -> &'static str {
        match self {
            RestartReason::Stale => "stale",
            RestartReason::NotAnswering => "not answering",
        }
    }

    /// The family whose fault the restart mends: a run that does not cover it never
    /// restarts for it.
    pub fn family(self) -> Family {
        match self {
            RestartReason::Stale => Family::Stale,
            RestartReason::NotAnswering => Family::Runtime,
        }
    }
}

/// What the findings call for. At most one remedy family per cycle: a restart first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Restart containerd (only ever for a stale or silent containerd).
    pub restart: Option<RestartReason>,
    /// Restore the sandbox image (archive, then pull).
    pub restore_image: bool,
    /// Label the present sandbox image pinned (`runtime.sandbox-pinned`).
    pub pin_image: bool,
    /// Leaked tasks to delete, as judged (each is judged again right before its delete).
    pub delete_tasks: Vec<Leak>,
    /// Orphaned container cgroups to kill, with the processes judged orphaned in each.
    pub reap: Vec<Condemned>,
    /// Why a containerd restart would orphan payloads (`runtime.kill-mode`), for the
    /// restart remedy to name.
    pub restart_risks: Vec<String>,
}

impl Plan {
    pub fn has_hygiene(&self) -> bool {
        !self.delete_tasks.is_empty() || !self.reap.is_empty()
    }
}

/// The findings of every family, and the plan. `hygiene_blocks`: leaked tasks and
/// orphans fail (`verify`, `hygiene`) or only warn (`runtime`: kubelet is never held for
/// them).
pub fn judge(knobs: &Knobs, hygiene_blocks: bool, obs: &Observation) -> (Vec<Finding>, Plan) {
    let (mut findings, silent) = runtime::evaluate(knobs, &obs.runtime);
    let (stale_finding, is_stale) = stale::evaluate(obs.stale.as_ref());
    let (mut image_finding, restore) = sandbox_image::evaluate(obs.sandbox_image.as_ref());
    let (pin_finding, pin) = sandbox_image::pinned(obs.sandbox_image.as_ref());
    let (leak_finding, delete_tasks) =
        leaked_tasks::evaluate(obs.leaked_tasks.as_ref(), hygiene_blocks);
    let (orphan_finding, reap) = orphans::evaluate(obs.orphans.as_ref(), hygiene_blocks);
    let kill_mode_finding = kill_mode::evaluate(&obs.kill_mode);
    let restart_risks = match kill_mode_finding.status {
        Status::Warn => kill_mode_finding.evidence.clone(),
        _ => Vec::new(),
    };
    if restore && is_stale {
        image_finding = image_finding.evidence(
            "not restored: containerd is stale (runtime.stale), so its images describe the \
             wrong filesystem; restart it first (`guard verify --repair`)",
        );
    }
    findings.insert(findings.len().min(3), stale_finding);
    findings.extend([
        image_finding,
        pin_finding,
        leak_finding,
        orphan_finding,
        kill_mode_finding,
    ]);
    findings.extend(obs.eviction.as_ref().map(eviction::evaluate));
    let restart = match (silent, is_stale) {
        (true, _) => Some(RestartReason::NotAnswering),
        (false, true) => Some(RestartReason::Stale),
        (false, false) => None,
    };
    // A stale containerd's answers about images describe the wrong filesystem: restart
    // first, restore after.
    let plan = Plan {
        restart,
        restore_image: restore && restart.is_none(),
        pin_image: pin && restart.is_none(),
        delete_tasks,
        reap,
        restart_risks,
    };
    (findings, plan)
}

/// The first failed check as `id: summary`, the reason the node is not usable.
pub fn first_failure(findings: &[Finding]) -> Option<String> {
    findings
        .iter()
        .find(|f| f.status == Status::Fail)
        .map(|f| format!("{}: {}", f.id, f.summary))
}

#[cfg(test)]
mod tests;
