//! The sandbox image check: not "is it listed" (listing lies when containerd is stale) but
//! "is every content blob for this platform there, and is it unpacked". Walks the image's
//! index and manifest through the content service, as `ctr images check` does, then stats
//! the snapshot named by the layers' chain ID in the CRI snapshotter.

use super::client::{bounded, request, Conn, K8S_NS};
use crate::policy::runtime::ImageState;
use containerd_client::services::v1::content_client::ContentClient;
use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::StatSnapshotRequest;
use containerd_client::services::v1::{GetImageRequest, InfoRequest, ReadContentRequest};
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

fn not_found(e: &str) -> bool {
    e.contains("NotFound")
}

/// Reads `size` bytes of a blob from the start (0: all of it, at most 16 MiB), bounded by
/// the connection's timeout.
async fn read_content(conn: &Conn, d: &Desc, size: i64) -> Result<Vec<u8>, String> {
    let mut c = ContentClient::new(conn.channel.clone());
    let req = ReadContentRequest {
        digest: d.digest.clone(),
        offset: 0,
        size,
    };
    let failed =
        |s: tonic::Status| format!("Read {}: {}", d.digest, super::client::status_text(&s));
    let work = async {
        let mut stream = c
            .read(request(req, Some(K8S_NS), conn.timeout))
            .await
            .map_err(failed)?
            .into_inner();
        let mut data = Vec::new();
        while let Some(chunk) = stream.message().await.map_err(failed)? {
            data.extend_from_slice(&chunk.data);
            if data.len() > 16 << 20 {
                return Err(format!("{}: larger than 16 MiB, not a manifest", d.digest));
            }
        }
        Ok(data)
    };
    tokio::time::timeout(conn.timeout, work)
        .await
        .map_err(|_| format!("Read {}: no answer in time", d.digest))?
}

/// Reads a whole blob (small: index, manifest, config) and checks its digest.
async fn read_blob(conn: &Conn, d: &Desc) -> Result<Vec<u8>, String> {
    let data = read_content(conn, d, 0).await?;
    if sha256_digest(&data) != d.digest {
        return Err(format!("{}: content does not match its digest", d.digest));
    }
    Ok(data)
}

/// Proves a (possibly large) blob is present: its record (Info) and its first byte on disk.
async fn blob_present(conn: &Conn, d: &Desc) -> Result<(), String> {
    let mut c = ContentClient::new(conn.channel.clone());
    let info = bounded(
        "Info",
        conn.timeout,
        c.info(request(
            InfoRequest {
                digest: d.digest.clone(),
            },
            Some(K8S_NS),
            conn.timeout,
        )),
    )
    .await?;
    if let Some(i) = info.info {
        if d.size > 0 && i.size != d.size {
            return Err(format!(
                "{}: size {} but the manifest says {}",
                d.digest, i.size, d.size
            ));
        }
    }
    // The record alone can outlive the data (the stale state): read its first byte.
    read_content(conn, d, 1).await.map(|_| ())
}

/// The full check of image `name` in namespace k8s.io.
pub async fn check(conn: &Conn, name: &str, snapshotter: &str, os: &str, arch: &str) -> ImageState {
    let mut images = ImagesClient::new(conn.channel.clone());
    let got = bounded(
        "Images.Get",
        conn.timeout,
        images.get(request(
            GetImageRequest {
                name: name.to_string(),
            },
            Some(K8S_NS),
            conn.timeout,
        )),
    )
    .await;
    let target = match got {
        Ok(r) => match r.image.and_then(|i| i.target) {
            Some(t) => Desc {
                media_type: t.media_type,
                digest: t.digest,
                size: t.size,
            },
            None => return ImageState::Missing,
        },
        Err(e) if not_found(&e) => return ImageState::Missing,
        Err(e) => return ImageState::Unknown(e),
    };
    let mut missing = Vec::new();
    let mut note = |what: &str, e: String| {
        missing.push(format!("{what}: {e}"));
    };
    let manifest_desc = if is_index(&target.media_type) {
        let index = match read_blob(conn, &target).await {
            Ok(b) => b,
            Err(e) => {
                note("index", e);
                return ImageState::Incomplete { missing };
            }
        };
        let v: Value = match serde_json::from_slice(&index) {
            Ok(v) => v,
            Err(e) => return ImageState::Unknown(format!("index {}: {e}", target.digest)),
        };
        match pick_manifest(&v, os, arch) {
            Some(m) => m,
            None => {
                note(
                    "manifest",
                    format!("index {} has no {os}/{arch} manifest", target.digest),
                );
                return ImageState::Incomplete { missing };
            }
        }
    } else {
        target.clone()
    };
    let manifest = match read_blob(conn, &manifest_desc).await {
        Ok(b) => b,
        Err(e) => {
            note("manifest", e);
            return ImageState::Incomplete { missing };
        }
    };
    let Some((config_desc, layers)) = serde_json::from_slice::<Value>(&manifest)
        .ok()
        .as_ref()
        .and_then(manifest_parts)
    else {
        return ImageState::Unknown(format!("manifest {} does not parse", manifest_desc.digest));
    };
    let config = match read_blob(conn, &config_desc).await {
        Ok(b) => Some(b),
        Err(e) => {
            note("config", e);
            None
        }
    };
    for l in &layers {
        if let Err(e) = blob_present(conn, l).await {
            note("layer", e);
        }
    }
    if !missing.is_empty() {
        return ImageState::Incomplete { missing };
    }
    let config: Value = match config.map(|c| serde_json::from_slice(&c)) {
        Some(Ok(v)) => v,
        _ => return ImageState::Unknown(format!("config {} does not parse", config_desc.digest)),
    };
    let Some(chain) = diff_ids(&config).as_deref().and_then(chain_id) else {
        return ImageState::Unknown(format!(
            "config {} has no rootfs.diff_ids",
            config_desc.digest
        ));
    };
    let mut snaps = SnapshotsClient::new(conn.channel.clone());
    let stat = bounded(
        "Snapshots.Stat",
        conn.timeout,
        snaps.stat(request(
            StatSnapshotRequest {
                snapshotter: snapshotter.to_string(),
                key: chain.clone(),
            },
            Some(K8S_NS),
            conn.timeout,
        )),
    )
    .await;
    match stat {
        Ok(_) => ImageState::Usable {
            digest: manifest_desc.digest,
            chain_id: chain,
        },
        Err(e) if not_found(&e) => ImageState::NotUnpacked { chain_id: chain },
        Err(e) => ImageState::Unknown(e),
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
}
