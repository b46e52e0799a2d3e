//! Can containerd create a pod sandbox right now? The one family that changes something
//! to look: it makes and removes a canary pod, last in a run, where a command names it.

pub mod facts;
pub mod rules;

use super::family::{Family, Judging, Verdict};
use super::look::{Look, Stage};
use crate::report::Id;

pub struct Canary;

impl Family for Canary {
    const IDS: &'static [Id] = &[Id::RuntimeCanCreate, Id::RuntimeCanaryNamespace];
    type Facts = facts::CanaryFacts;
    const STAGE: Stage = Stage::Containerd;

    /// Never part of a look: a canary is a pod made and removed, so the gate makes it in
    /// a step of its own, after every other check passed (`World::canary`), with the
    /// state directory and the signal guard a look does not hold.
    async fn gather(_: &Look<'_>) -> Option<Self::Facts> {
        None
    }

    /// The sandboxes it left in its namespace, then whether it could create; never
    /// repaired. Nothing where it did not run.
    fn evaluate(facts: Option<&Self::Facts>, _: &Judging) -> Verdict {
        let Some(facts) = facts else {
            return Verdict::default();
        };
        Verdict::of(rules::neighbours(facts).into_iter().chain([rules::evaluate(facts)]))
    }
}
