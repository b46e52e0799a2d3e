//! Would containerd's unit orphan payloads when it stops or starts? Read from the unit
//! files, so judged even when containerd is silent.

pub mod facts;
pub mod rules;

use super::family::{Family, Judging, Verdict};
use super::look::{Look, Stage};
use crate::report::Id;

pub struct KillMode;

impl Family for KillMode {
    const IDS: &'static [Id] = &[Id::RuntimeKillMode];
    type Facts = facts::KillModeFacts;
    const STAGE: Stage = Stage::Files;

    /// containerd's unit and its drop-ins, read on the loop: a few small files.
    async fn gather(look: &Look<'_>) -> Option<Self::Facts> {
        Some(tracing::debug_span!("kill_mode facts").in_scope(|| facts::gather(look.host)))
    }

    /// A risk, never a remedy (the gate names it when it restarts containerd).
    fn evaluate(facts: Option<&Self::Facts>, _: &Judging) -> Verdict {
        let not_read = facts::KillModeFacts::NotSystemd;
        Verdict::of([rules::evaluate(facts.unwrap_or(&not_read))])
    }
}
