//! The answers family: does containerd answer, and does its CRI serve? Part of every run:
//! no other family can look without an answer.

pub mod facts;
pub mod rules;

use super::family::{Family, Judging, Remedy, Verdict};
use crate::report::Id;

pub struct Answers;

impl Family for Answers {
    // (`runtime.hold` is the gate's, reported for this family: waiting for it to answer)
    const IDS: &'static [Id] = &[
        Id::RuntimeAnswers,
        Id::RuntimeVersion,
        Id::RuntimePlugins,
        Id::RuntimeCri,
        Id::RuntimeNetwork,
        Id::RuntimeHold,
    ];
    type Facts = facts::AnswerFacts;

    /// A silent containerd asks for a restart.
    fn evaluate(facts: Option<&Self::Facts>, run: &Judging) -> Verdict {
        // (always gathered: every look asks whether containerd answers)
        let Some(facts) = facts else {
            return Verdict::default();
        };
        let (findings, silent) = rules::evaluate(run.knobs, facts);
        Verdict::of(findings).asking(silent, Remedy::Restart)
    }
}
