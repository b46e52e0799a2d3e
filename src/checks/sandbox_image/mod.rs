//! Is the pause image complete, unpacked, and pinned against kubelet's garbage collection?

pub mod facts;
pub mod rules;

use super::family::{Family, Judging, Remedy, Verdict};
use super::look::{Look, Stage};
use crate::report::Id;

pub struct SandboxImage;

impl Family for SandboxImage {
    const IDS: &'static [Id] = &[Id::RuntimeSandboxImage, Id::RuntimeSandboxPinned];
    type Facts = facts::ImageFacts;
    const STAGE: Stage = Stage::Containerd;

    /// The image as containerd holds it, and whether CRI says it is pinned (from the
    /// answers family's CRI answers, awaited after this family's own calls: asked once).
    async fn gather(look: &Look<'_>) -> Option<Self::Facts> {
        use tracing::Instrument;
        let version = look.containerd_version();
        let own = facts::gather(look.conn()?, &look.target.image, version);
        let image = own.instrument(tracing::debug_span!("sandbox_image facts")).await;
        let cri = look.cri().await?;
        Some(facts::with_cri_answer(image, &cri.sandbox_status))
    }

    /// A missing image asks to be restored, an unpinned one to be pinned.
    fn evaluate(facts: Option<&Self::Facts>, _: &Judging) -> Verdict {
        let (image, restore) = rules::evaluate(facts);
        let (pinned, pin) = rules::pinned(facts);
        Verdict::of([image, pinned])
            .asking(restore, Remedy::RestoreImage)
            .asking(pin, Remedy::PinImage)
    }
}
