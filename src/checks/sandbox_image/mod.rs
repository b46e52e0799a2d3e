//! Is the pause image complete, unpacked, and pinned against kubelet's garbage collection?

pub mod facts;
pub mod rules;

use super::family::{Family, Judging, Remedy, Verdict};
use crate::report::Id;

pub struct SandboxImage;

impl Family for SandboxImage {
    const IDS: &'static [Id] = &[Id::RuntimeSandboxImage, Id::RuntimeSandboxPinned];
    type Facts = facts::ImageFacts;

    /// A missing image asks to be restored, an unpinned one to be pinned.
    fn evaluate(facts: Option<&Self::Facts>, _: &Judging) -> Verdict {
        let (image, restore) = rules::evaluate(facts);
        let (pinned, pin) = rules::pinned(facts);
        Verdict::of([image, pinned])
            .asking(restore, Remedy::RestoreImage)
            .asking(pin, Remedy::PinImage)
    }
}
