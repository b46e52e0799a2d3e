//! Does containerd hold its metadata on the filesystem now mounted at its root?

pub mod facts;
mod mounts;
pub mod rules;

use super::family::{Family, Judging, Remedy, Verdict};
use super::look::{Look, Stage};
use crate::report::Id;

pub struct Stale;

impl Family for Stale {
    const IDS: &'static [Id] = &[Id::RuntimeStale];
    type Facts = facts::StaleFacts;
    const STAGE: Stage = Stage::Containerd;

    /// containerd's mounts beside the filesystem at its root (the look's, shared with
    /// the deprecations family).
    async fn gather(look: &Look<'_>) -> Option<Self::Facts> {
        Some(look.stale().await.clone())
    }

    /// A stale containerd asks for a restart.
    fn evaluate(facts: Option<&Self::Facts>, _: &Judging) -> Verdict {
        let (finding, stale) = rules::evaluate(facts);
        Verdict::of([finding]).asking(stale, Remedy::Restart)
    }
}
