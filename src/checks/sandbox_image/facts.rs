//! The sandbox image facts: not "is it listed" (listing lies when containerd is stale) but
//! "is every content blob for this platform there, and is it unpacked". Walks the image's
//! index and manifest through the content service, as `ctr images check` does, then stats
//! the snapshot named by the layers' chain ID in the CRI snapshotter.

use crate::containerd::client::Conn;
pub use crate::containerd::image::PINNED_LABEL;
use crate::containerd::image::{blob_present, read_blob, record, snapshot_exists};
use crate::containerd::oci::{
    chain_id, diff_ids, is_index, manifest_parts, normalize_ref, oci_arch, pick_manifest, Desc,
};
use serde_json::Value;

/// What the sandbox image check found, from the content and snapshot services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageState {
    /// No image record with this name in namespace k8s.io.
    Missing,
    /// Listed, but some content is missing (listing lies in the stale state).
    Incomplete {
        missing: Vec<String>,
    },
    /// Content present (every layer, but in a remote snapshotter, which fetches its
    /// own), but the snapshot of its chain ID does not exist.
    NotUnpacked {
        chain_id: String,
    },
    Usable {
        digest: String,
        chain_id: String,
        /// Layer blobs absent from the content store where that is expected (see
        /// [`Wanted::layers_may_be_absent`]): the snapshot is what pods start from.
        absent_layers: usize,
    },
    /// The remote snapshotter the image is judged in did not answer whether it holds
    /// the snapshot: nothing can be judged there, and no sandbox can start from it.
    RemoteSilent {
        /// Its socket, as containerd's config names it.
        address: Option<String>,
        error: String,
    },
    /// The check itself could not run.
    Unknown(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFacts {
    /// As configured.
    pub reference: String,
    /// The containerd image name it normalises to.
    pub name: String,
    /// Where the reference came from (config key).
    pub source: String,
    pub snapshotter: String,
    /// Which key of containerd's config chose the snapshotter, and why (evidence);
    /// `None` where nothing said it (the fake world).
    pub snapshotter_said: Option<String>,
    /// A remote snapshotter (a proxy plugin): the image is judged by its snapshot alone.
    pub remote: bool,
    /// Why layer blobs may be absent from a healthy image, as [`Snapshotter`] says.
    pub layers_may_be_absent: Option<String>,
    pub platform: String,
    pub state: ImageState,
    /// Whether kubelet's image GC leaves it alone; `None` when containerd has no record.
    pub pin: Option<Pin>,
}

/// The image's pin, as containerd records it and as CRI reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// containerd's record carries `io.cri-containerd.pinned=pinned`.
    pub labelled: bool,
    /// CRI `ImageStatus`'s `pinned` (`None`: CRI does not know the image yet), or why it
    /// could not be asked.
    pub reported: Result<Option<bool>, String>,
}

/// Which image to check, and where its name came from (evidence).
#[derive(Debug, Clone)]
pub struct Wanted {
    pub reference: String,
    pub source: String,
    /// The snapshotter the sandbox is unpacked into where containerd reads a runtime's own
    /// (1.7 and later): the sandbox runtime's own, else CRI's.
    pub snapshotter: Snapshotter,
    /// CRI's own snapshotter: the one containerd 1.6 uses whatever the runtime says.
    pub cri_snapshotter: Snapshotter,
    /// The runtime pod sandboxes run with (`default_runtime_name`).
    pub runtime: String,
}

/// A snapshotter as containerd's config names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshotter {
    pub name: String,
    /// The key that named it (`(containerd default)` when none did).
    pub key: String,
    /// A proxy plugin (`[proxy_plugins.NAME] type = "snapshot"`): a remote snapshotter.
    pub remote: bool,
    /// The proxy plugin's socket (`address`), where it is remote.
    pub address: Option<String>,
    /// Why a healthy image may lack its layer blobs once unpacked, as containerd's config
    /// says (`discard_unpacked_layers = true`, or a remote snapshotter that unpacks
    /// lazily); `None`: every layer must be there. The image is then judged by its
    /// manifest, its config and the snapshot of its chain.
    pub layers_may_be_absent: Option<String>,
}

impl Wanted {
    /// The snapshotter containerd of `version` (its `Version` answer) starts the sandbox
    /// from, and what chose it (evidence).
    pub fn judged(&self, version: Option<&str>) -> (&Snapshotter, String) {
        use crate::containerd::config::reads_runtime_snapshotter;
        let (own, cri) = (&self.snapshotter, &self.cri_snapshotter);
        if own == cri {
            return (cri, format!("snapshotter {}: {}", cri.name, cri.key));
        }
        match version {
            Some(v) if !reads_runtime_snapshotter(v) => (
                cri,
                format!(
                    "snapshotter {}: {}; containerd {v} ignores {} (read from 1.7 on)",
                    cri.name, cri.key, own.key
                ),
            ),
            _ => (
                own,
                format!(
                    "snapshotter {}: {}, runtime {} runs the pod sandboxes",
                    own.name, own.key, self.runtime
                ),
            ),
        }
    }
}

/// The image's facts; CRI's `pinned` comes from the runtime family's `ImageStatus`
/// (kubelet's own start call, asked once) through [`with_cri_answer`].
/// `version`: containerd's answer to `Version`, which decides the snapshotter
/// ([`Wanted::judged`]).
pub async fn gather(conn: &Conn, w: &Wanted, version: Option<&str>) -> ImageFacts {
    let arch = oci_arch(std::env::consts::ARCH);
    let name = normalize_ref(&w.reference);
    let (snapshotter, said) = w.judged(version);
    let (state, labelled) = check(conn, &name, snapshotter, arch).await;
    ImageFacts {
        reference: w.reference.clone(),
        name,
        source: w.source.clone(),
        snapshotter: snapshotter.name.clone(),
        snapshotter_said: Some(said),
        remote: snapshotter.remote,
        layers_may_be_absent: snapshotter.layers_may_be_absent.clone(),
        platform: format!("linux/{arch}"),
        state,
        pin: labelled.map(|labelled| Pin {
            labelled,
            reported: Err("CRI ImageStatus was not asked".into()),
        }),
    }
}

/// `facts` with CRI `ImageStatus`'s answer about the image (`pinned`, `None`: unknown).
pub fn with_cri_answer(
    mut facts: ImageFacts,
    reported: &Result<Option<bool>, String>,
) -> ImageFacts {
    if let Some(pin) = facts.pin.as_mut() {
        pin.reported = reported.clone();
    }
    facts
}

/// The full check of image `name` (linux/`arch`) in namespace k8s.io, and whether its
/// record carries the pin label (`None`: no record, or it could not be read). Where
/// layer blobs may be absent, they are judged by the snapshot alone.
pub async fn check(
    conn: &Conn,
    name: &str,
    snapshotter: &Snapshotter,
    arch: &str,
) -> (ImageState, Option<bool>) {
    let top = match record(conn, name).await {
        Ok(Some(r)) => r,
        Ok(None) => return (ImageState::Missing, None),
        Err(e) => return (ImageState::Unknown(e.to_string()), None),
    };
    let walked = walk(conn, top.target, snapshotter, arch).await;
    (walked, Some(top.pin_label))
}

/// From the image's target to its snapshot.
async fn walk(conn: &Conn, top: Desc, snapshotter: &Snapshotter, arch: &str) -> ImageState {
    let manifest_desc = match platform_manifest(conn, top, "linux", arch).await {
        Ok(d) => d,
        Err(state) => return state,
    };
    let (chain, absent) = match read_parts(conn, &manifest_desc).await {
        Ok(parts) => parts,
        Err(state) => return state,
    };
    let complete = absent.is_empty();
    let layers_optional = snapshotter.layers_may_be_absent.is_some();
    match snapshot_exists(conn, &snapshotter.name, &chain).await {
        // containerd answered the content calls: the error is its remote snapshotter's
        Err(e) if snapshotter.remote => ImageState::RemoteSilent {
            address: snapshotter.address.clone(),
            error: e.to_string(),
        },
        Err(e) => ImageState::Unknown(e.to_string()),
        Ok(true) if complete || layers_optional => ImageState::Usable {
            digest: manifest_desc.digest,
            chain_id: chain,
            absent_layers: absent.len(),
        },
        // a remote snapshotter fetches layers itself: only its snapshot says anything
        Ok(false) if snapshotter.remote => ImageState::NotUnpacked { chain_id: chain },
        // layers that must be there, or absent ones without the snapshot they became
        Ok(_) if !complete => ImageState::Incomplete { missing: absent },
        Ok(_) => ImageState::NotUnpacked { chain_id: chain },
    }
}

fn incomplete(what: &str, e: impl std::fmt::Display) -> ImageState {
    ImageState::Incomplete {
        missing: vec![format!("{what}: {e}")],
    }
}

/// The manifest for this platform: the target itself, or picked from its index.
async fn platform_manifest(
    conn: &Conn,
    top: Desc,
    os: &str,
    arch: &str,
) -> Result<Desc, ImageState> {
    if !is_index(&top.media_type) {
        return Ok(top);
    }
    let index = read_blob(conn, &top)
        .await
        .map_err(|e| incomplete("index", e))?;
    let v: Value = serde_json::from_slice(&index)
        .map_err(|e| ImageState::Unknown(format!("index {}: {e}", top.digest)))?;
    pick_manifest(&v, os, arch).ok_or_else(|| {
        let e = format!("index {} has no {os}/{arch} manifest", top.digest);
        incomplete("manifest", e)
    })
}

/// The chain ID of the image's layers, after proving the manifest and the config are
/// present, and the layer blobs that are absent (`layer: ...` each). The config and the
/// layers are asked for at the same time.
async fn read_parts(
    conn: &Conn,
    manifest_desc: &Desc,
) -> Result<(String, Vec<String>), ImageState> {
    let manifest = read_blob(conn, manifest_desc)
        .await
        .map_err(|e| incomplete("manifest", e))?;
    let Some((config_desc, layers)) = serde_json::from_slice::<Value>(&manifest)
        .ok()
        .as_ref()
        .and_then(manifest_parts)
    else {
        let e = format!("manifest {} does not parse", manifest_desc.digest);
        return Err(ImageState::Unknown(e));
    };
    let layers_missing = async {
        let mut missing = Vec::new();
        for l in &layers {
            if let Err(e) = blob_present(conn, l).await {
                missing.push(format!("layer: {e}"));
            }
        }
        missing
    };
    let (config, absent) = tokio::join!(read_blob(conn, &config_desc), layers_missing);
    if let Err(e) = &config {
        let mut missing = vec![format!("config: {e}")];
        missing.extend(absent);
        return Err(ImageState::Incomplete { missing });
    }
    let unknown = |what: &str| ImageState::Unknown(format!("config {} {what}", config_desc.digest));
    let parsed: Value = serde_json::from_slice(&config.unwrap_or_default())
        .map_err(|_| unknown("does not parse"))?;
    let chain = diff_ids(&parsed)
        .as_deref()
        .and_then(chain_id)
        .ok_or_else(|| unknown("has no rootfs.diff_ids"))?;
    Ok((chain, absent))
}
