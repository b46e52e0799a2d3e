//! `runtime.sandbox-image`: is the image every pod sandbox starts from there, complete for
//! this platform and unpacked for the CRI snapshotter? And `runtime.sandbox-pinned`: will
//! kubelet's image garbage collection leave it alone? Pure: facts from [`super::facts`].

use super::facts::{ImageFacts, ImageState, Pin, PINNED_LABEL};
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
        ImageState::Usable {
            digest,
            chain_id,
            absent_layers,
        } => {
            let summary = match img.remote {
                true => format!(
                    "sandbox image {what} is unpacked in the remote snapshotter {}",
                    img.snapshotter
                ),
                false => format!(
                    "sandbox image {what} is complete and unpacked for {}",
                    img.snapshotter
                ),
            };
            let f = Finding::pass(ID, summary).evidence(format!("{digest}, chain {chain_id}"));
            let f = said(f, img);
            let f = match (absent_layers, &img.layers_may_be_absent) {
                (0, _) | (_, None) => f,
                (n, Some(why)) => f.evidence(format!(
                    "{n} layer blob(s) absent from the content store, as expected: {why}; \
                     pods start from the unpacked snapshot"
                )),
            };
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
        ImageState::NotUnpacked { chain_id } if !img.remote => {
            (first_sandbox_unpacks(img, &what, chain_id), false)
        }
        ImageState::NotUnpacked { chain_id } => {
            let remote = if img.remote { "remote " } else { "" };
            let summary = format!(
                "sandbox image {what} is not unpacked for the {remote}{} snapshotter",
                img.snapshotter
            );
            let f = Finding::fail(ID, summary).evidence(format!("no snapshot {chain_id}"));
            let f = said(f, img).evidence(from).remedy(FIX);
            (f, true)
        }
        ImageState::RemoteSilent { address, error } => {
            (remote_silent(img, &what, address.as_deref(), error), false)
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

/// Complete (every layer there), but not unpacked for the snapshotter the sandbox starts
/// from: CRI unpacks it from the layers when it starts a pod sandbox (`WithNewSnapshot`,
/// containerd 1.6 to 2.x), so the node is usable; the first sandbox waits for the unpack.
/// Nothing is pulled: containerd mends this itself.
fn first_sandbox_unpacks(img: &ImageFacts, what: &str, chain_id: &str) -> Finding {
    let summary = format!(
        "sandbox image {what} is not unpacked for the {} snapshotter; its layers are \
         there, and CRI unpacks it when it starts the first pod sandbox",
        img.snapshotter
    );
    let f = Finding::warn(ID, summary).evidence(format!("no snapshot {chain_id}"));
    said(f, img).evidence(format!("named by {}", img.source))
}

/// The remote snapshotter did not answer. A FAIL, not a skip: CRI starts every pod
/// sandbox from this snapshotter, so until it answers no pod can start, whatever the
/// image; restoring or pulling the image cannot help, so no remedy is asked.
fn remote_silent(img: &ImageFacts, what: &str, address: Option<&str>, error: &str) -> Finding {
    let name = &img.snapshotter;
    let summary =
        format!("cannot judge sandbox image {what}: the remote snapshotter {name} does not answer");
    let at = address.map_or_else(
        || format!("[proxy_plugins.{name}] names no address"),
        |a| format!("its socket: {a} ([proxy_plugins.{name}] address)"),
    );
    let f = Finding::fail(ID, summary).evidence(error.to_string()).evidence(at.clone());
    said(f, img).remedy(format!(
        "start the remote snapshotter ({at}); containerd starts no pod sandbox from {name} \
         until it answers"
    ))
}

/// `f` with the line saying which key chose the snapshotter judged, where one is known.
fn said(f: Finding, img: &ImageFacts) -> Finding {
    match &img.snapshotter_said {
        Some(said) => f.evidence(said.clone()),
        None => f,
    }
}

/// `runtime.sandbox-pinned`, and whether labelling the image pinned would fix it.
///
/// Whether this containerd pins at all is read from CRI, not from its version: CRI
/// reports `pinned` for an image that carries the label where pinning exists (containerd
/// 1.7 and later). A labelled image that CRI calls unpinned means no pinning (1.6). An
/// unlabelled, unpinned one is unpinned either way; the label is what both need.
pub fn pinned(img: Option<&ImageFacts>) -> (Finding, bool) {
    const PINNED: Id = Id::RuntimeSandboxPinned;
    let Some(img) = img else {
        return (Finding::skip(PINNED, "containerd does not answer"), false);
    };
    let reference = &img.reference;
    let Some(Pin { labelled, reported }) = &img.pin else {
        let why = format!("no sandbox image {reference} to pin (see runtime.sandbox-image)");
        return (Finding::skip(PINNED, why), false);
    };
    match (reported, labelled) {
        (Ok(Some(true)), _) => {
            let summary = format!("sandbox image {reference} is pinned");
            let why = "CRI reports it pinned: kubelet's image garbage collection leaves it alone";
            (Finding::pass(PINNED, summary).evidence(why), false)
        }
        (Ok(Some(false)), true) => {
            let summary = "this containerd has no image pinning (containerd 1.6): the guard's \
                           hygiene timer is the protection";
            let f = Finding::skip(PINNED, summary).evidence(format!(
                "{reference} carries {PINNED_LABEL}=pinned, and CRI still reports it unpinned; kubelet's \
                 image garbage collection may remove it, and `guard hygiene` restores it \
                 within one timer period"
            ));
            (f, false)
        }
        (Ok(Some(false)), false) => {
            let summary = format!(
                "sandbox image {reference} is not pinned: kubelet's image garbage collection \
                 may delete it"
            );
            let f = Finding::warn(PINNED, summary)
                .evidence(format!(
                    "CRI reports it unpinned, and containerd's record has no {PINNED_LABEL} label"
                ))
                .remedy(
                    "`guard verify --repair` labels it pinned, as containerd 1.7 and later \
                     label their own sandbox image (so do `guard runtime` and `guard \
                     hygiene`); on containerd 1.6, which has no pinning, this then reads SKIP",
                );
            (f, true)
        }
        (Ok(None), _) => {
            let why = format!("CRI does not list {reference} yet (containerd has it)");
            (Finding::skip(PINNED, why), false)
        }
        (Err(e), _) => {
            let summary = format!("cannot ask CRI whether {reference} is pinned");
            (Finding::warn(PINNED, summary).evidence(e.clone()), false)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Status;

    fn facts(pin: Option<Pin>) -> ImageFacts {
        ImageFacts {
            reference: "registry.k8s.io/pause:3.10".into(),
            name: "registry.k8s.io/pause:3.10".into(),
            source: "(containerd default)".into(),
            snapshotter: "overlayfs".into(),
            snapshotter_said: None,
            remote: false,
            layers_may_be_absent: None,
            platform: "linux/amd64".into(),
            state: ImageState::Usable {
                digest: "sha256:m".into(),
                chain_id: "sha256:c".into(),
                absent_layers: 0,
            },
            pin,
        }
    }

    #[test]
    fn pinned_reads_cri_and_the_label_together() {
        let pin = |labelled, reported| Some(Pin { labelled, reported });
        let cases = [
            (
                "CRI says pinned",
                pin(false, Ok(Some(true))),
                Status::Pass,
                false,
            ),
            (
                "labelled, CRI says no: 1.6",
                pin(true, Ok(Some(false))),
                Status::Skip,
                false,
            ),
            ("neither", pin(false, Ok(Some(false))), Status::Warn, true),
            (
                "CRI does not list it",
                pin(false, Ok(None)),
                Status::Skip,
                false,
            ),
            (
                "CRI error",
                pin(false, Err("Unavailable".into())),
                Status::Warn,
                false,
            ),
            ("no image", None, Status::Skip, false),
        ];
        for (name, pin, status, fix) in cases {
            let (finding, pins) = pinned(Some(&facts(pin)));
            assert_eq!((finding.status, pins), (status, fix), "{name}: {finding:?}");
        }
        assert_eq!(pinned(None).0.status, Status::Skip);
    }

    /// A remote snapshotter is named in the verdict both ways, and a missing snapshot
    /// there is "not unpacked", whatever the layers.
    #[test]
    fn a_remote_snapshotter_is_named() {
        let mut img = facts(None);
        (img.remote, img.snapshotter) = (true, "stargz".into());
        img.snapshotter_said = Some("snapshotter stargz: proxy_plugins.stargz".into());
        let (f, _) = evaluate(Some(&img));
        assert_eq!(f.status, Status::Pass);
        assert!(f.summary.contains("remote snapshotter stargz"), "{f:?}");
        assert!(f.evidence.iter().any(|e| e.contains("proxy_plugins.stargz")), "{f:?}");
        img.state = ImageState::NotUnpacked {
            chain_id: "sha256:c".into(),
        };
        let (f, restore) = evaluate(Some(&img));
        assert_eq!((f.status, restore), (Status::Fail, true));
        assert!(f.summary.contains("not unpacked for the remote stargz snapshotter"), "{f:?}");
        // a local snapshotter's missing snapshot, the layers there: the first sandbox
        // unpacks it, nothing is restored
        img.remote = false;
        let (f, restore) = evaluate(Some(&img));
        assert_eq!((f.status, restore), (Status::Warn, false));
        assert!(f.summary.contains("the first pod sandbox"), "{f:?}");
        img.state = ImageState::RemoteSilent {
            address: Some("/run/stargz.sock".into()),
            error: "Snapshots.Stat: Unavailable".into(),
        };
        let (f, restore) = evaluate(Some(&img));
        assert_eq!((f.status, restore), (Status::Fail, false));
        assert!(f.summary.contains("remote snapshotter stargz does not answer"), "{f:?}");
        assert!(f.evidence.iter().any(|e| e.contains("/run/stargz.sock")), "{f:?}");
    }

    #[test]
    fn absent_layers_are_said_only_where_containerd_discards_them() {
        let mut img = facts(None);
        img.state = ImageState::Usable {
            digest: "sha256:m".into(),
            chain_id: "sha256:c".into(),
            absent_layers: 2,
        };
        img.layers_may_be_absent = Some("discard_unpacked_layers = true".into());
        let (f, restore) = evaluate(Some(&img));
        assert_eq!((f.status, restore), (Status::Pass, false));
        assert!(f.evidence.iter().any(|e| e.starts_with("2 layer blob(s) absent")), "{f:?}");
        img.layers_may_be_absent = None;
        let (f, _) = evaluate(Some(&img));
        assert!(!f.evidence.iter().any(|e| e.contains("absent")), "{f:?}");
    }
}
