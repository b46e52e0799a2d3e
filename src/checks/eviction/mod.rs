//! Do kubelet's eviction thresholds cover containerd's volume? Read from kubelet's
//! configuration, so judged even when containerd is silent.

pub mod facts;
pub mod rules;

use super::family::{Family, Judging, Verdict};
use super::look::{Look, Stage};
use crate::report::Id;

pub struct Eviction;

impl Family for Eviction {
    const IDS: &'static [Id] = &[Id::VolumeEviction];
    type Facts = facts::EvictionFacts;
    const STAGE: Stage = Stage::Files;

    /// kubelet's configuration, read on the loop: one small file.
    async fn gather(look: &Look<'_>) -> Option<Self::Facts> {
        Some(facts::gather(look.kubelet_files()))
    }

    /// Reported only where looked at; never a remedy.
    fn evaluate(facts: Option<&Self::Facts>, _: &Judging) -> Verdict {
        Verdict::of(facts.map(rules::evaluate))
    }
}
