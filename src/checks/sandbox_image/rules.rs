//! `runtime.sandbox-image`: is the image every pod sandbox starts from there, complete for
//! this platform and unpacked for the CRI snapshotter? Pure: facts from [`super::facts`].

use super::facts::{ImageFacts, ImageState};
use crate::report::{Finding, Id};

const ID: Id = Id::RuntimeSandboxImage;
const FIX: &str = "the guard restores it from [sandbox] archives or pulls it through CRI \
                   (`guard verify --repair`)";

/// The finding, and whether restoring the image (archive, then pull) would fix it.
/// `None`: containerd did not answer, so nothing could be asked.
pub fn evaluate(img: Option<&ImageFacts>) -> (Finding, bool) {
    let Some(img) = img else {
        return (Finding::skip(ID, "containerd does not answer"), false);
    };
    let what = if img.name == img.reference {
        img.reference.clone()
    } else {
        format!("{} ({})", img.reference, img.name)
    };
    let from = format!("named by {}", img.source);
    match &img.state {
        ImageState::Usable { digest, chain_id } => {
            let summary = format!(
                "sandbox image {what} is complete and unpacked for {}",
                img.snapshotter
            );
            let f = Finding::pass(ID, summary).evidence(format!("{digest}, chain {chain_id}"));
            (f, false)
        }
        ImageState::Missing => {
            let summary = format!("sandbox image {what} is not in namespace k8s.io");
            (Finding::fail(ID, summary).evidence(from).remedy(FIX), true)
        }
        ImageState::Incomplete { missing } => {
            let summary = format!(
                "sandbox image {what} is listed but its content for {} is incomplete",
                img.platform
            );
            let mut f = Finding::fail(ID, summary).evidence(from).remedy(FIX);
            for m in missing.iter().take(8) {
                f = f.evidence(format!("missing {m}"));
            }
            (f, true)
        }
        ImageState::NotUnpacked { chain_id } => {
            let summary = format!(
                "sandbox image {what} is not unpacked for the {} snapshotter",
                img.snapshotter
            );
            let f = Finding::fail(ID, summary)
                .evidence(format!("no snapshot {chain_id}"))
                .evidence(from)
                .remedy(FIX);
            (f, true)
        }
        // The check itself failed: no remedy is guessed.
        ImageState::Unknown(e) => {
            let summary = format!("cannot check sandbox image {what}");
            (
                Finding::fail(ID, summary)
                    .evidence(e.clone())
                    .evidence(from),
                false,
            )
        }
    }
}
