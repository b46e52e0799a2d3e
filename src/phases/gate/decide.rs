//! Phase 2's "decide" step, pure: every family's rules over one observation (the
//! registry's, `src/checks/mod.rs`), and the remedy their findings call for.

use crate::checks::leaked_tasks::rules::Leak;
use crate::checks::orphans::rules::Condemned;
pub use crate::checks::Observation;
use crate::checks::{FamilyId, Judging, Remedy};
use crate::report::{Finding, Id, Status};

/// The families a run covers (each command's list is its `Mode` constant). Whether
/// containerd answers is part of every run: nothing else can be looked at without it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scope(pub &'static [FamilyId]);

impl Scope {
    /// Every check that only looks (the canary makes a pod: it is named on its own).
    pub const ALL: Scope = Scope(FamilyId::LOOKING);

    /// Every check, and the canary pod last (`guard runtime`, `guard verify --deep`).
    pub const WITH_CANARY: Scope = Scope(FamilyId::EVERY);

    pub fn covers(self, family: FamilyId) -> bool {
        self.0.contains(&family)
    }

    /// Whether a look gathers the family's facts: those it covers, whether containerd
    /// answers always, and the stale facts wherever the sandbox image is covered (a stale
    /// containerd's images describe the wrong filesystem: nothing is restored into it,
    /// whether or not the run reports it).
    pub fn looks_at(self, family: FamilyId) -> bool {
        let stale_for_image = family == FamilyId::Stale && self.covers(FamilyId::SandboxImage);
        family == FamilyId::Answers || self.covers(family) || stale_for_image
    }

    /// Whether a check's finding belongs in this run's report.
    pub fn reports(self, id: Id) -> bool {
        id == Id::RuntimeAnswers || FamilyId::of(id).is_some_and(|f| self.covers(f))
    }
}

/// Why containerd is restarted; a silent containerd outranks a stale one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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

    /// Why `family` asks for a restart.
    fn asked_by(family: FamilyId) -> Option<RestartReason> {
        match family {
            FamilyId::Stale => Some(RestartReason::Stale),
            FamilyId::Answers => Some(RestartReason::NotAnswering),
            _ => None,
        }
    }

    /// The family whose fault the restart mends: a run that does not cover it never
    /// restarts for it.
    pub fn family(self) -> FamilyId {
        match self {
            RestartReason::Stale => FamilyId::Stale,
            RestartReason::NotAnswering => FamilyId::Answers,
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

    /// What the plan asks for, in words (`-v`: the reasons behind each step).
    pub fn describe(&self) -> String {
        let mut asks = Vec::new();
        if let Some(reason) = self.restart {
            asks.push(format!("restart containerd ({})", reason.text()));
        }
        if self.restore_image {
            asks.push("restore the sandbox image".to_string());
        }
        if self.pin_image {
            asks.push("pin the sandbox image".to_string());
        }
        if !self.delete_tasks.is_empty() {
            asks.push(format!("delete {} leaked task(s)", self.delete_tasks.len()));
        }
        if !self.reap.is_empty() {
            asks.push(format!("reap {} orphaned cgroup(s)", self.reap.len()));
        }
        match asks.is_empty() {
            true => "no remedy".to_string(),
            false => asks.join(", "),
        }
    }
}

/// The findings of every family, in report order, and the plan.
pub fn judge(run: &Judging, obs: &Observation) -> (Vec<Finding>, Plan) {
    let mut findings = Vec::new();
    let mut plan = Plan::default();
    let (mut restore, mut pin) = (false, false);
    for (family, verdict) in obs.judge(run) {
        findings.extend(verdict.findings);
        for remedy in verdict.asks {
            match remedy {
                Remedy::Restart => plan.restart = plan.restart.max(RestartReason::asked_by(family)),
                Remedy::RestoreImage => restore = true,
                Remedy::PinImage => pin = true,
                Remedy::DeleteTasks(leaks) => plan.delete_tasks = leaks,
                Remedy::Reap(condemned) => plan.reap = condemned,
            }
        }
    }
    // A stale containerd's answers about images describe the wrong filesystem: restart
    // first, restore after.
    if restore && plan.restart == Some(RestartReason::Stale) {
        let image = findings
            .iter_mut()
            .find(|f| f.id == Id::RuntimeSandboxImage);
        image.into_iter().for_each(|f| {
            f.evidence.push(
                "not restored: containerd is stale (runtime.stale), so its images describe \
                 the wrong filesystem; restart it first (`guard verify --repair`)"
                    .into(),
            )
        });
    }
    plan.restore_image = restore && plan.restart.is_none();
    plan.pin_image = pin && plan.restart.is_none();
    plan.restart_risks = findings
        .iter()
        .find(|f| f.id == Id::RuntimeKillMode && f.status == Status::Warn)
        .map(|f| f.evidence.clone())
        .unwrap_or_default();
    // The report's order is the ids' (`ids!` in src/report/id.rs), whichever family ran
    // first: a family's findings may sit between another's (`runtime.stale` follows the
    // answers family's `runtime.plugins`).
    findings.sort_by_key(|f| f.id);
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
