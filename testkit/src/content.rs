//! "Nothing lost": what a fault case checks at its end. A snapshot of containerd's content
//! store (every blob under `<root>/io.containerd.content.v1.content/blobs/sha256`, hashed,
//! so a blob that is still there but changed counts as lost) and of the images its
//! metadata on the same disk holds (`meta.db`, read by [`super::bolt`]: never through a
//! socket, which on a stale node is another containerd's and lists nothing). After the
//! guard ran, every image is still there with the same target, and every blob an image
//! (before or after) reaches through its index, manifest and config is still there,
//! unchanged: the guard never formats and never deletes image data. Blobs no image reaches
//! are not counted: containerd's own garbage collector removes those when it starts, which
//! a restart by the guard causes. A check that reached no blob proves nothing and panics.

use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentSnapshot {
    /// blob file name (hex digest) -> sha256 of its bytes (equal unless damaged)
    blobs: BTreeMap<String, String>,
    /// blob -> the blobs it names (an index's manifests, a manifest's config and layers)
    refs: BTreeMap<String, Vec<String>>,
    /// "namespace/name@digest" of every image in containerd's metadata
    images: BTreeSet<String>,
}

impl ContentSnapshot {
    /// The blobs and images under containerd's `root` (its directory on the volume).
    pub fn take(root: &Path) -> ContentSnapshot {
        let (blobs, refs) = blobs(root);
        let images = super::bolt::images_on_disk(root)
            .unwrap_or_else(|e| panic!("containerd's metadata: {e}"));
        ContentSnapshot {
            blobs,
            refs,
            images: images.into_iter().collect(),
        }
    }

    /// Panics naming every blob or image of `self` that `after` lacks or changed, or when
    /// `self` holds no blob an image reaches (a check of nothing); else returns how many
    /// blobs and images it checked.
    #[track_caller]
    pub fn assert_nothing_lost(&self, after: &ContentSnapshot) -> usize {
        let mut lost: Vec<String> = Vec::new();
        let mut checked = 0;
        for name in self.reached_with(after) {
            let Some(sum) = self.blobs.get(&name) else {
                continue; // pulled or imported by the guard: growth
            };
            checked += 1;
            match after.blobs.get(&name) {
                None => lost.push(format!("blob {name} is gone")),
                Some(s) if s != sum => lost.push(format!("blob {name} changed")),
                Some(_) => {}
            }
        }
        assert!(
            checked > 0,
            "\"nothing lost\" checked nothing: no image on this disk reaches a blob \
             (the test must hold data worth losing)\nbefore: {self:?}"
        );
        lost.extend(
            self.images
                .iter()
                .filter(|i| !still_there(i, &after.images))
                .map(|i| format!("image {i} is gone")),
        );
        assert!(
            lost.is_empty(),
            "content lost:\n  {}\nbefore: {self:?}\nafter: {after:?}",
            lost.join("\n  ")
        );
        checked + self.images.len()
    }

    pub fn blob_count(&self) -> usize {
        self.blobs.len()
    }

    /// The blobs `after` holds that `self` did not: what was imported or pulled since.
    /// (Not a count: containerd's garbage collector may remove unreferenced blobs after a
    /// restart, which would hide an import in a comparison of totals.)
    pub fn added_in<'a>(&self, after: &'a ContentSnapshot) -> Vec<&'a str> {
        after
            .blobs
            .keys()
            .filter(|b| !self.blobs.contains_key(*b))
            .map(String::as_str)
            .collect()
    }

    /// Whether an image whose name starts with `name` was listed (any namespace).
    pub fn has_image_named(&self, name: &str) -> bool {
        self.images
            .iter()
            .any(|i| i.split_once('/').is_some_and(|(_, n)| n.starts_with(name)))
    }

    /// Whether the blob whose file is named `hex` (its digest without `sha256:`) was seen.
    pub fn has_blob(&self, hex: &str) -> bool {
        self.blobs.contains_key(hex)
    }

    /// The images and every blob they reach, with its sum: what a command that changes
    /// nothing leaves as it was (blobs no image reaches are containerd's GC's to remove at
    /// any moment).
    pub fn reached(&self) -> (&BTreeSet<String>, BTreeMap<&str, &str>) {
        let reached = self.reached_with(self);
        let blobs = self
            .blobs
            .iter()
            .filter(|(name, _)| reached.contains(*name))
            .map(|(name, sum)| (name.as_str(), sum.as_str()))
            .collect();
        (&self.images, blobs)
    }

    /// Every blob reached from the images of `self` or `after`.
    fn reached_with(&self, after: &ContentSnapshot) -> BTreeSet<String> {
        let targets = self.images.iter().chain(&after.images);
        let mut todo: Vec<String> = targets
            .filter_map(|i| i.rsplit_once("@sha256:").map(|(_, d)| d.to_string()))
            .collect();
        let mut seen = BTreeSet::new();
        while let Some(d) = todo.pop() {
            if seen.insert(d.clone()) {
                for refs in [self.refs.get(&d), after.refs.get(&d)]
                    .into_iter()
                    .flatten()
                {
                    todo.extend(refs.iter().cloned());
                }
            }
        }
        seen
    }
}

type Blobs = (BTreeMap<String, String>, BTreeMap<String, Vec<String>>);

fn blobs(root: &Path) -> Blobs {
    let (mut sums, mut refs) = (BTreeMap::new(), BTreeMap::new());
    let dir = root.join("io.containerd.content.v1.content/blobs/sha256");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return (sums, refs); // an empty store (never written) has no blobs folder
    };
    for entry in entries {
        let entry = entry.expect("read the content store");
        // containerd's GC may remove a blob between the listing and the read (`ctr images
        // import` leaves the archive's own index unreferenced): then it is not there.
        let bytes = match std::fs::read(entry.path()) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("read the blob {}: {e}", entry.path().display()),
        };
        let name = entry.file_name().to_string_lossy().into_owned();
        sums.insert(name.clone(), hex::encode(Sha256::digest(&bytes)));
        refs.insert(name, named_blobs(&bytes));
    }
    (sums, refs)
}

/// The digests (hex) an OCI/Docker index or manifest names; nothing for other blobs.
fn named_blobs(bytes: &[u8]) -> Vec<String> {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return Vec::new(); // a layer
    };
    let listed = ["manifests", "layers"]
        .into_iter()
        .flat_map(|k| v[k].as_array().into_iter().flatten().map(|d| &d["digest"]));
    listed
        .chain(std::iter::once(&v["config"]["digest"]))
        .filter_map(|d| d.as_str()?.strip_prefix("sha256:").map(str::to_string))
        .collect()
}

/// Whether `image` ("namespace/name@digest") is in `now` with the same target. CRI's own
/// alias of an image by its config digest (`k8s.io/sha256:<config>`) is containerd's
/// bookkeeping, not an image anyone pulled: CRI points it at the newest image with that
/// config (an import of the same content in another format moves it), so only its name
/// must stay.
fn still_there(image: &str, now: &BTreeSet<String>) -> bool {
    let Some((name, _)) = image.rsplit_once('@') else {
        return now.contains(image);
    };
    let is_cri_alias = name
        .split_once('/')
        .is_some_and(|(_, n)| n.strip_prefix("sha256:").is_some_and(|h| h.len() == 64));
    match is_cri_alias {
        true => now
            .iter()
            .any(|i| i.rsplit_once('@').is_some_and(|(n, _)| n == name)),
        false => now.contains(image),
    }
}
