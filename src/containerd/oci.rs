//! OCI image structure, pure: descriptors, picking this platform's manifest, diff IDs and
//! chain IDs, and image references normalised the way containerd names images. Shared by
//! the sandbox image check (content read from containerd) and the archive verification
//! (content read from a tar file). No I/O here.

use serde_json::Value;
use sha2::{Digest, Sha256};

pub const MT_OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const MT_DOCKER_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const MT_OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const MT_DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// A descriptor as found in an index or manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desc {
    pub media_type: String,
    pub digest: String,
    pub size: i64,
}

/// A descriptor from JSON; `None` when `mediaType` or `digest` is missing (both are
/// required by the OCI image spec).
pub fn desc(v: &Value) -> Option<Desc> {
    Some(Desc {
        media_type: v.get("mediaType")?.as_str().unwrap_or("").to_string(),
        digest: v.get("digest")?.as_str()?.to_string(),
        size: v.get("size").and_then(Value::as_i64).unwrap_or(0),
    })
}

pub fn is_index(media_type: &str) -> bool {
    media_type == MT_OCI_INDEX || media_type == MT_DOCKER_LIST
}

/// The manifest for `os/arch` in an index (the first without a platform if none matches
/// exactly and the index has only one entry, as single-platform OCI layouts often do).
pub fn pick_manifest(index: &Value, os: &str, arch: &str) -> Option<Desc> {
    let manifests = index.get("manifests")?.as_array()?;
    let exact = manifests.iter().find(|m| {
        let p = m.get("platform");
        p.and_then(|p| p.get("os")).and_then(Value::as_str) == Some(os)
            && p.and_then(|p| p.get("architecture"))
                .and_then(Value::as_str)
                == Some(arch)
    });
    match exact {
        Some(m) => desc(m),
        None if manifests.len() == 1 && manifests[0].get("platform").is_none() => {
            desc(&manifests[0])
        }
        None => None,
    }
}

/// (config, layers) of a manifest.
pub fn manifest_parts(manifest: &Value) -> Option<(Desc, Vec<Desc>)> {
    let config = desc(manifest.get("config")?)?;
    let layers = manifest
        .get("layers")?
        .as_array()?
        .iter()
        .map(desc)
        .collect::<Option<Vec<_>>>()?;
    Some((config, layers))
}

/// The image's diff IDs from its config.
pub fn diff_ids(config: &Value) -> Option<Vec<String>> {
    config
        .get("rootfs")?
        .get("diff_ids")?
        .as_array()?
        .iter()
        .map(|d| d.as_str().map(str::to_string))
        .collect()
}

/// OCI chain ID: `chain[0] = diff[0]`, `chain[n] = sha256(chain[n-1] + " " + diff[n])`.
pub fn chain_id(diff_ids: &[String]) -> Option<String> {
    let mut it = diff_ids.iter();
    let mut chain = it.next()?.clone();
    for d in it {
        let h = Sha256::digest(format!("{chain} {d}").as_bytes());
        chain = format!("sha256:{}", hex::encode(h));
    }
    Some(chain)
}

pub fn sha256_digest(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

/// Normalises an image reference the way containerd names images:
/// `pause:3.6` -> `docker.io/library/pause:3.6`, no tag -> `:latest`.
pub fn normalize_ref(reference: &str) -> String {
    let (name, digest) = match reference.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (reference, None),
    };
    let (domain, rest) = match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (first.to_string(), rest.to_string())
        }
        _ => ("docker.io".to_string(), name.to_string()),
    };
    let rest = if domain == "docker.io" && !rest.contains('/') {
        format!("library/{rest}")
    } else {
        rest
    };
    let last = rest.rsplit('/').next().unwrap_or("");
    let mut out = format!("{domain}/{rest}");
    if !last.contains(':') && digest.is_none() {
        out.push_str(":latest");
    }
    if let Some(d) = digest {
        out.push('@');
        out.push_str(d);
    }
    out
}

/// `amd64`, `arm64`... as OCI platforms spell this machine's architecture.
pub fn oci_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_id_of_one_layer_is_its_diff_id_and_grows_by_hash() {
        let one = vec!["sha256:aaaa".to_string()];
        assert_eq!(chain_id(&one).unwrap(), "sha256:aaaa");
        let two = vec!["sha256:aaaa".to_string(), "sha256:bbbb".to_string()];
        let want = sha256_digest(b"sha256:aaaa sha256:bbbb");
        assert_eq!(chain_id(&two).unwrap(), want);
        assert_eq!(chain_id(&[]), None);
    }

    #[test]
    fn picks_this_platform_from_an_index() {
        let index: Value = serde_json::json!({
            "manifests": [
                {"mediaType": MT_OCI_MANIFEST, "digest": "sha256:arm", "size": 1,
                 "platform": {"os": "linux", "architecture": "arm64"}},
                {"mediaType": MT_OCI_MANIFEST, "digest": "sha256:amd", "size": 2,
                 "platform": {"os": "linux", "architecture": "amd64"}}
            ]
        });
        assert_eq!(
            pick_manifest(&index, "linux", "amd64").unwrap().digest,
            "sha256:amd"
        );
        assert_eq!(pick_manifest(&index, "linux", "s390x"), None);
        let single: Value = serde_json::json!({
            "manifests": [{"mediaType": MT_OCI_MANIFEST, "digest": "sha256:only", "size": 3}]
        });
        assert_eq!(
            pick_manifest(&single, "linux", "amd64").unwrap().digest,
            "sha256:only"
        );
    }

    #[test]
    fn references_normalise_like_containerd() {
        for (r, want) in [
            ("pause:3.6", "docker.io/library/pause:3.6"),
            ("pause", "docker.io/library/pause:latest"),
            ("rancher/pause:3.6", "docker.io/rancher/pause:3.6"),
            ("registry.k8s.io/pause:3.6", "registry.k8s.io/pause:3.6"),
            (
                "localhost:5000/vmware.io/pause:3.4.1",
                "localhost:5000/vmware.io/pause:3.4.1",
            ),
            ("localhost/pause", "localhost/pause:latest"),
            (
                "127.0.0.1:5000/pause@sha256:ab",
                "127.0.0.1:5000/pause@sha256:ab",
            ),
        ] {
            assert_eq!(normalize_ref(r), want, "{r}");
        }
    }
}
