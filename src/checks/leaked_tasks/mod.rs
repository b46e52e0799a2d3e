//! Tasks no one reaps, which block their pod's removal.

pub mod facts;
pub mod rules;

use super::family::{Family, Judging, Remedy, Verdict};
use super::look::{Look, Stage};
use crate::report::Id;

pub struct LeakedTasks;

impl Family for LeakedTasks {
    const IDS: &'static [Id] = &[Id::RuntimeLeakedTasks];
    type Facts = facts::LeakedTaskFacts;
    const STAGE: Stage = Stage::Containerd;

    /// The hygiene looks (shared with the orphans family: taken once for both).
    async fn gather(look: &Look<'_>) -> Option<Self::Facts> {
        look.hygiene().await.map(|(leaks, _)| leaks.clone())
    }

    /// Leaks ask to be deleted.
    fn evaluate(facts: Option<&Self::Facts>, run: &Judging) -> Verdict {
        let (finding, leaks) = rules::evaluate(facts, run.hygiene_blocks);
        Verdict::of([finding]).asking(!leaks.is_empty(), Remedy::DeleteTasks(leaks))
    }
}
