//! "Nothing lost": what a fault case checks at its end. A snapshot of containerd's content
//! store (every blob under `<root>/io.containerd.content.v1.content/blobs/sha256`, hashed,
//! so a blob that is still there but changed counts as lost) and, while containerd answers,
//! its image list in every namespace (name and target digest). After the guard ran, every
//! image is still there with the same target, and every blob an image (before or after)
//! reaches through its index, manifest and config is still there, unchanged: the guard never
//! formats and never deletes image data. Blobs no image reaches are not counted: containerd's
//! own garbage collector removes those when it starts, which a restart by the guard causes.

use super::containerd::containerd_tool;
use super::run_exe;
use super::workload::CTR_TIMEOUT;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContentSnapshot {
    /// blob file name (hex digest) -> sha256 of its bytes (equal unless damaged)
    blobs: BTreeMap<String, String>,
    /// blob -> the blobs it names (an index's manifests, a manifest's config and layers)
    refs: BTreeMap<String, Vec<String>>,
    /// "namespace/name@digest", when taken with a socket
    images: Option<BTreeSet<String>>,
}

impl ContentSnapshot {
    /// Blobs under containerd's `root`; images too when `socket` is given (containerd must
    /// answer on it).
    pub fn take(root: &Path, socket: Option<&Path>) -> ContentSnapshot {
        let (blobs, refs) = blobs(root);
        ContentSnapshot {
            blobs,
            refs,
            images: socket.map(images),
        }
    }

    /// Panics naming every blob or image of `self` that `after` lacks or changed.
    pub fn assert_nothing_lost(&self, after: &ContentSnapshot) {
        let mut lost: Vec<String> = Vec::new();
        for name in self.reached_with(after) {
            let Some(sum) = self.blobs.get(&name) else {
                continue; // pulled or imported by the guard: growth
            };
            match after.blobs.get(&name) {
                None => lost.push(format!("blob {name} is gone")),
                Some(s) if s != sum => lost.push(format!("blob {name} changed")),
                Some(_) => {}
            }
        }
        if let (Some(before), Some(now)) = (&self.images, &after.images) {
            lost.extend(
                before
                    .iter()
                    .filter(|i| !still_there(i, now))
                    .map(|i| format!("image {i} is gone")),
            );
        }
        assert!(
            lost.is_empty(),
            "content lost:\n  {}\nbefore: {self:?}\nafter: {after:?}",
            lost.join("\n  ")
        );
    }

    pub fn blob_count(&self) -> usize {
        self.blobs.len()
    }

    /// Whether an image whose name starts with `name` was listed (any namespace).
    pub fn has_image_named(&self, name: &str) -> bool {
        self.images
            .iter()
            .flatten()
            .any(|i| i.split_once('/').is_some_and(|(_, n)| n.starts_with(name)))
    }

    /// Whether the blob whose file is named `hex` (its digest without `sha256:`) was seen.
    pub fn has_blob(&self, hex: &str) -> bool {
        self.blobs.contains_key(hex)
    }

    /// The images and every blob they reach, with its sum: what a command that changes
    /// nothing leaves as it was (blobs no image reaches are containerd's GC's to remove at
    /// any moment).
    pub fn reached(&self) -> (Option<&BTreeSet<String>>, BTreeMap<&str, &str>) {
        let reached = self.reached_with(self);
        let blobs = self
            .blobs
            .iter()
            .filter(|(name, _)| reached.contains(*name))
            .map(|(name, sum)| (name.as_str(), sum.as_str()))
            .collect();
        (self.images.as_ref(), blobs)
    }

    /// Every blob reached from the images of `self` or `after`.
    fn reached_with(&self, after: &ContentSnapshot) -> BTreeSet<String> {
        let targets = [&self.images, &after.images]
            .into_iter()
            .flatten()
            .flatten();
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

fn images(socket: &Path) -> BTreeSet<String> {
    let ctr = containerd_tool("ctr");
    let address = socket.to_str().expect("socket path is UTF-8");
    let namespaces = run_exe(
        &ctr,
        &[
            "-a",
            address,
            "--timeout",
            CTR_TIMEOUT,
            "namespaces",
            "ls",
            "-q",
        ],
    );
    let mut out = BTreeSet::new();
    for ns in namespaces.lines().filter(|l| !l.is_empty()) {
        let listed = run_exe(
            &ctr,
            &[
                "-a",
                address,
                "--timeout",
                CTR_TIMEOUT,
                "-n",
                ns,
                "images",
                "ls",
            ],
        );
        for line in listed.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let [name, _type, digest, ..] = f[..] {
                out.insert(format!("{ns}/{name}@{digest}"));
            }
        }
    }
    out
}
