//! Container payloads that outlived their shim.

pub mod facts;
pub mod rules;

use super::family::{Family, Judging, Remedy, Verdict};
use super::look::{Look, Stage};
use crate::report::Id;

pub struct Orphans;

impl Family for Orphans {
    const IDS: &'static [Id] = &[Id::RuntimeOrphans];
    type Facts = facts::OrphanFacts;
    const STAGE: Stage = Stage::Containerd;

    /// The hygiene looks (shared with the leaked tasks family: taken once for both).
    async fn gather(look: &Look<'_>) -> Option<Self::Facts> {
        look.hygiene().await.map(|(_, orphans)| orphans.clone())
    }

    /// Orphans confirmed by two looks (and `[orphans] reap`) ask to be reaped.
    fn evaluate(facts: Option<&Self::Facts>, run: &Judging) -> Verdict {
        let (finding, condemned) = rules::evaluate(facts, run.hygiene_blocks);
        Verdict::of([finding]).asking(!condemned.is_empty(), Remedy::Reap(condemned))
    }
}
