//! The extension point of phase 2: one [`Family`] trait every check family implements,
//! and `registry!`, invoked once in `src/checks/mod.rs`, that lists them. Everything that
//! names the families derives from that list: [`FamilyId`](super::FamilyId) (what a
//! run's scope names), [`Observation`](super::Observation) (one field of facts per
//! family), the families a run covers (`FamilyId::LOOKING`, `FamilyId::EVERY`), which
//! family reports an id (`FamilyId::of`), a look at the node (`Observation::gather`:
//! every covered family's `gather`, concurrently, stage by stage) and judging them all
//! (`Observation::judge`). A family's look is its `gather`, read through a
//! [`Look`](super::Look), which holds what families share (one CRI answer, one pair of
//! hygiene looks): the real world's `observe` is the files stage, the connect and the
//! containerd stage, naming no family; the fake world's is its scripted facts. How to
//! add a family: docs/development.md, "Adding a check family".

use super::answers::rules::Knobs;
use super::leaked_tasks::rules::Leak;
use super::look::{Look, Stage};
use super::orphans::rules::Condemned;
use crate::report::{Finding, Id};
use std::future::Future;

/// A check family: the facts it looks at and how its rules judge them.
pub trait Family {
    /// Every id its rules report: a run reports them where its scope covers the family.
    const IDS: &'static [Id];
    /// When its facts are read: from files before containerd is asked (and so judged
    /// when it is silent), or from containerd once it answered.
    const STAGE: Stage;
    /// What the family's `facts.rs` gathers: plain data, judged by nothing but the rules.
    type Facts;
    /// The family's look: its facts, read through `look` (which holds the looks families
    /// share); `None` where they cannot be read in this look. Only called in the family's
    /// [`Family::STAGE`], where the run covers it.
    fn gather(look: &Look<'_>) -> impl Future<Output = Option<Self::Facts>>;
    /// The rules over the facts; `None` where they were not gathered (containerd did not
    /// answer, or the run does not cover the family: its findings are then not reported).
    /// Pure: no I/O, no clock.
    fn evaluate(facts: Option<&Self::Facts>, run: &Judging) -> Verdict;
}

/// What a run tells every family's rules.
pub struct Judging<'a> {
    /// The settings the answers family's rules depend on.
    pub knobs: &'a Knobs,
    /// Leaked tasks and orphans fail (`verify`, `hygiene`) or only warn (`runtime`:
    /// kubelet is never held for them).
    pub hygiene_blocks: bool,
    /// A kubelet pointed at another socket than the guard's containerd fails (`verify`)
    /// or only warns (`runtime`: two runtimes on one host may be deliberate).
    pub endpoint_blocks: bool,
}

/// The one shape every family's rules return: the findings (a report lists them in the
/// order of their ids) and the remedies they ask for. The gate decides which remedy runs
/// (at most one kind per cycle, a restart first); rules never act.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    pub findings: Vec<Finding>,
    pub asks: Vec<Remedy>,
}

impl Verdict {
    /// Findings that ask for nothing.
    pub fn of(findings: impl IntoIterator<Item = Finding>) -> Verdict {
        Verdict {
            findings: findings.into_iter().collect(),
            asks: Vec::new(),
        }
    }

    /// `remedy` asked for when `wanted`.
    pub fn asking(mut self, wanted: bool, remedy: Remedy) -> Verdict {
        if wanted {
            self.asks.push(remedy);
        }
        self
    }
}

/// A remedy a family's findings ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Remedy {
    /// Restart containerd: it is silent, or stale (the family that asks says which).
    Restart,
    /// Restore the sandbox image (archive, then pull).
    RestoreImage,
    /// Label the present sandbox image pinned.
    PinImage,
    /// Delete these leaked tasks (each judged again right before its delete).
    DeleteTasks(Vec<Leak>),
    /// Kill these orphaned container cgroups.
    Reap(Vec<Condemned>),
}

/// The registry: one line per family, `module: Type`, in the order the families are
/// judged. It declares each family's module (`src/checks/<module>/`, whose `mod.rs`
/// implements [`Family`] for `Type`) and generates everything listed at the top of this
/// file. A family that changes something to look (the canary makes a pod) goes under
/// `makes`: it is never part of "every check", and the gate gathers its facts in a step
/// of its own, after every other check passed (a look leaves its field `None`).
macro_rules! registry {
    (
        looks { $($module:ident: $family:ident,)* }
        makes { $($m_module:ident: $m_family:ident,)* }
    ) => {
        $(pub mod $module;)*
        $(pub mod $m_module;)*

        /// A family as a run's scope names it.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum FamilyId {
            $($family,)*
            $($m_family,)*
        }

        impl FamilyId {
            /// Every family that only looks.
            pub const LOOKING: &'static [FamilyId] = &[$(FamilyId::$family,)*];
            /// Every family, those that make something last.
            pub const EVERY: &'static [FamilyId] =
                &[$(FamilyId::$family,)* $(FamilyId::$m_family,)*];

            /// The family whose rules report `id`; `None` for phase 1's ids and the
            /// remedies'.
            pub fn of(id: crate::report::Id) -> Option<FamilyId> {
                $(if <$module::$family as Family>::IDS.contains(&id) {
                    return Some(FamilyId::$family);
                })*
                $(if <$m_module::$m_family as Family>::IDS.contains(&id) {
                    return Some(FamilyId::$m_family);
                })*
                None
            }
        }

        /// One look at the node: each family's facts, `None` where they were not gathered
        /// (containerd did not answer, or the run does not cover the family).
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct Observation {
            $(pub $module: Option<<$module::$family as Family>::Facts>,)*
            $(pub $m_module: Option<<$m_module::$m_family as Family>::Facts>,)*
        }

        impl Observation {
            /// Every family's facts of one stage of a look, where `looked_at` takes the
            /// family: the families ask concurrently (containerd's on one channel, the
            /// host's reads off the loop), so a stage costs its slowest family, not the
            /// sum. The families that make something are gathered by the gate's own step.
            pub async fn gather(
                look: &Look<'_>,
                stage: Stage,
                looked_at: impl Fn(FamilyId) -> bool,
            ) -> Observation {
                let gathers = |family: FamilyId, at: Stage| at == stage && looked_at(family);
                let ($($module,)*) = tokio::join!($(async {
                    match gathers(FamilyId::$family, <$module::$family as Family>::STAGE) {
                        true => <$module::$family as Family>::gather(look).await,
                        false => None,
                    }
                },)*);
                Observation { $($module,)* $($m_module: None,)* }
            }

            /// Each family's facts from `self`, else from `other` (the stages of a look).
            pub fn or(self, other: Observation) -> Observation {
                Observation {
                    $($module: self.$module.or(other.$module),)*
                    $($m_module: self.$m_module.or(other.$m_module),)*
                }
            }

            /// The observation without the facts of the families `looked_at` refuses: what
            /// a look that gathers only those would hold.
            pub fn only(mut self, looked_at: impl Fn(FamilyId) -> bool) -> Self {
                $(if !looked_at(FamilyId::$family) {
                    self.$module = None;
                })*
                $(if !looked_at(FamilyId::$m_family) {
                    self.$m_module = None;
                })*
                self
            }

            /// Every family's verdict over its facts, in registry order.
            pub fn judge(&self, run: &Judging) -> Vec<(FamilyId, Verdict)> {
                vec![
                    $((FamilyId::$family, <$module::$family as Family>::evaluate(
                        self.$module.as_ref(), run)),)*
                    $((FamilyId::$m_family, <$m_module::$m_family as Family>::evaluate(
                        self.$m_module.as_ref(), run)),)*
                ]
            }
        }
    };
}
pub(crate) use registry;
