//! kubelet's side of its contract with containerd: the socket it talks to, the flag 1.35
//! removed, whether it refuses this cgroup v1 host, and whether its cgroup driver is
//! containerd's. Read from kubelet's files (and, in `guard verify`, its binary's
//! version), so judged even when containerd is silent.

pub mod facts;
pub mod rules;

use super::family::{Family, Judging, Verdict};
use super::look::{Look, Stage};
use crate::report::Id;

pub struct Kubelet;

impl Family for Kubelet {
    const IDS: &'static [Id] = &rules::IDS;
    type Facts = facts::KubeletFacts;
    const STAGE: Stage = Stage::Files;

    /// kubelet's files, and its binary's version where the run asks it.
    async fn gather(look: &Look<'_>) -> Option<Self::Facts> {
        Some(look.kubelet().await)
    }

    /// Reported only where looked at; never a remedy (the guard does not edit kubelet).
    fn evaluate(facts: Option<&Self::Facts>, run: &Judging) -> Verdict {
        Verdict::of(
            facts
                .map(|f| rules::evaluate(f, run.endpoint_blocks))
                .unwrap_or_default(),
        )
    }
}
