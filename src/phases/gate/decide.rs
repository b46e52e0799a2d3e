//! Phase 2's "decide" step, pure: every family's rules over one observation (the
//! registry's, `src/checks/mod.rs`), and the remedy their findings call for.

use crate::checks::leaked_tasks::rules::Leak;
use crate::checks::orphans::rules::Condemned;
use crate::checks::volume::rules::Unverified;
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
    /// What the findings ask for and the volume forbids: refused and named, never done.
    pub withheld: Option<Withheld>,
}

/// The remedies refused because containerd's root is not the verified volume now: a
/// restart would start containerd on whatever is mounted there (the root filesystem's
/// directory, after a failover detached the volume under a running containerd), and a
/// restore, a pull or a pin would write into that containerd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    pub volume: Unverified,
    pub restart: Option<RestartReason>,
    pub restore_image: bool,
    pub pin_image: bool,
}

impl Withheld {
    pub fn any(&self) -> bool {
        self.restart.is_some() || self.restore_image || self.pin_image
    }
}

impl Plan {
    /// The plan without the remedies of families the run does not cover: no restart for
    /// a fault the run does not report (`guard hygiene` looks at the stale facts only to
    /// keep the image out of a stale containerd), no restore where the image is not its
    /// business; nor their refusals.
    pub fn permitted(self, scope: Scope) -> Plan {
        let image = scope.covers(FamilyId::SandboxImage);
        let withheld = self.withheld.map(|w| Withheld {
            restart: w.restart.filter(|r| scope.covers(r.family())),
            restore_image: w.restore_image && image,
            pin_image: w.pin_image && image,
            ..w
        });
        Plan {
            restart: self.restart.filter(|r| scope.covers(r.family())),
            restore_image: self.restore_image && image,
            pin_image: self.pin_image && image,
            withheld: withheld.filter(Withheld::any),
            ..self
        }
    }

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

/// The findings of every family, in report order, and the plan, for a run that does not
/// ask the volume (every remedy as the findings call for it).
pub fn judge(run: &Judging, obs: &Observation) -> (Vec<Finding>, Plan) {
    judge_with(run, obs, || None)
}

/// The findings and the plan. `volume` is asked only when the findings call for a
/// restart, a restore or a pin (a healthy look costs nothing more): where containerd's
/// root is not the verified volume, those are withheld and the fix lines say so.
pub fn judge_with(
    run: &Judging,
    obs: &Observation,
    volume: impl FnOnce() -> Option<Unverified>,
) -> (Vec<Finding>, Plan) {
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
    let acts_on_containerd = plan.restart.is_some() || restore || pin;
    match acts_on_containerd.then(volume).flatten() {
        Some(volume) => withhold(&mut findings, &mut plan, (restore, pin), volume),
        None => restart_first(&mut findings, &mut plan, (restore, pin)),
    }
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

/// A stale containerd's answers about images describe the wrong filesystem: restart
/// first, restore and pin after.
fn restart_first(findings: &mut [Finding], plan: &mut Plan, (restore, pin): (bool, bool)) {
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
}

/// Moves the restart, the restore and the pin into [`Plan::withheld`], and rewrites the
/// fix lines that promised them: the volume comes first.
fn withhold(
    findings: &mut [Finding],
    plan: &mut Plan,
    (restore, pin): (bool, bool),
    volume: Unverified,
) {
    let restarted_for = plan.restart.map(|r| match r {
        RestartReason::Stale => Id::RuntimeStale,
        RestartReason::NotAnswering => Id::RuntimeAnswers,
    });
    let not_before = format!(
        "{}; do not restart containerd before that: {}",
        volume.fix,
        volume.restart_refusal()
    );
    for f in findings.iter_mut().filter(|f| f.status != Status::Pass) {
        match f.id {
            id if Some(id) == restarted_for => f.remedy = not_before.clone(),
            Id::RuntimeSandboxImage if restore => {
                let why = volume.write_refusal("an import or a pull");
                f.evidence.push(format!("not restored: {why}"));
                f.remedy = volume.fix.clone();
            }
            Id::RuntimeSandboxPinned if pin => {
                let why = volume.write_refusal("its label");
                f.evidence.push(format!("not labelled pinned: {why}"));
                f.remedy = volume.fix.clone();
            }
            _ => {}
        }
    }
    plan.withheld = Some(Withheld {
        volume,
        restart: plan.restart.take(),
        restore_image: restore,
        pin_image: pin,
    });
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
