//! Does containerd hold its metadata on the filesystem now mounted at its root?

pub mod facts;
pub mod rules;

use super::family::{Family, Judging, Remedy, Verdict};
use crate::report::Id;

pub struct Stale;

impl Family for Stale {
    const IDS: &'static [Id] = &[Id::RuntimeStale];
    type Facts = facts::StaleFacts;

    /// A stale containerd asks for a restart.
    fn evaluate(facts: Option<&Self::Facts>, _: &Judging) -> Verdict {
        let (finding, stale) = rules::evaluate(facts);
        Verdict::of([finding]).asking(stale, Remedy::Restart)
    }
}
