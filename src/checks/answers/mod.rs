//! The answers family: does containerd answer, and does its CRI serve? Part of every run:
//! no other family can look without an answer.

pub mod facts;
pub mod rules;

use super::family::{Family, Judging, Remedy, Verdict};
use super::look::{Look, Stage};
use crate::config::units::format_duration;
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
    const STAGE: Stage = Stage::Containerd;

    /// CRI's answers (shared: the sandbox image family reads them too). A silent
    /// containerd's facts are the look's connect step's: no family is gathered then.
    async fn gather(look: &Look<'_>) -> Option<Self::Facts> {
        let answering = look.cri().await?.clone();
        // (evidence only where containerd is silent; here, the look until CRI answered)
        let waited = look.started.elapsed().as_millis() as u64;
        Some(facts::AnswerFacts {
            socket: look.target.socket.display().to_string(),
            answering: Ok(Box::new(answering)),
            waited: format_duration(std::time::Duration::from_millis(waited)),
            path_fault: None,
        })
    }

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
