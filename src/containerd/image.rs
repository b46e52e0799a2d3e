//! Reads from containerd's image, content and snapshot services, each bounded. The sandbox
//! image check (`checks::sandbox_image`) walks an image with these; they judge nothing.

use super::client::{Conn, RpcError, K8S_NS};
use super::oci::{sha256_digest, Desc};
use containerd_client::services::v1::content_client::ContentClient;
use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::services::v1::snapshots::snapshots_client::SnapshotsClient;
use containerd_client::services::v1::snapshots::StatSnapshotRequest;
use containerd_client::services::v1::{GetImageRequest, InfoRequest, ReadContentRequest};

/// The label containerd's CRI reads as "pinned" (1.7 and later report it in
/// `ImageStatus`, and kubelet's image garbage collection skips a pinned image). containerd
/// sets it on its configured sandbox image itself; 1.6 knows no pinning, and the label is
/// only a label there.
pub const PINNED_LABEL: &str = "io.cri-containerd.pinned";

/// Labels the image `name` pinned, as containerd labels its own sandbox image; changes
/// nothing else of it (`Images.Update` of that one label). The update carries the image
/// as containerd holds it: containerd 1.7 and 2.1 crash (a nil dereference) on an update
/// without the image's target, whatever the field mask (measured: `tests/hygiene_images.rs` h12).
pub async fn pin(conn: &Conn, name: &str) -> Result<(), RpcError> {
    use containerd_client::services::v1::UpdateImageRequest;
    let mut c = ImagesClient::new(conn.channel.clone());
    let req = GetImageRequest {
        name: name.to_string(),
    };
    let got = conn.call("Images.Get", c.get(conn.request(req, Some(K8S_NS))));
    let mut image = match got.await?.image {
        Some(image) if image.target.is_some() => image,
        _ => {
            return Err(RpcError::internal(
                "Images.Get",
                &format!("no image {name}"),
            ))
        }
    };
    image
        .labels
        .insert(PINNED_LABEL.to_string(), "pinned".to_string());
    let req = UpdateImageRequest {
        image: Some(image),
        update_mask: Some(prost_types::FieldMask {
            paths: vec![format!("labels.{PINNED_LABEL}")],
        }),
        source_date_epoch: None,
    };
    conn.call("Images.Update", c.update(conn.request(req, Some(K8S_NS))))
        .await
        .map(|_| ())
}

/// Image `name` as containerd's image service records it (namespace k8s.io).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRecord {
    pub target: Desc,
    /// It carries [`PINNED_LABEL`]`=pinned`.
    pub pin_label: bool,
}

/// The record of image `name` in namespace k8s.io; `None` when there is no such image.
pub async fn record(conn: &Conn, name: &str) -> Result<Option<ImageRecord>, RpcError> {
    let mut images = ImagesClient::new(conn.channel.clone());
    let req = GetImageRequest {
        name: name.to_string(),
    };
    match conn
        .call("Images.Get", images.get(conn.request(req, Some(K8S_NS))))
        .await
    {
        Ok(r) => Ok(r.image.and_then(|i| {
            let pin_label = i.labels.get(PINNED_LABEL).is_some_and(|v| v == "pinned");
            i.target.map(|t| ImageRecord {
                target: Desc {
                    media_type: t.media_type,
                    digest: t.digest,
                    size: t.size,
                },
                pin_label,
            })
        })),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The target descriptor of image `name` in namespace k8s.io; `None` when there is no
/// such image.
pub async fn target(conn: &Conn, name: &str) -> Result<Option<Desc>, RpcError> {
    Ok(record(conn, name).await?.map(|r| r.target))
}

/// CRI's `pinned` for image `reference` (`ImageStatus`, as kubelet's image GC reads it);
/// `None` when CRI does not know the image.
pub async fn cri_pinned(conn: &Conn, reference: &str) -> Result<Option<bool>, RpcError> {
    use k8s_cri::v1::image_service_client::ImageServiceClient;
    use k8s_cri::v1::{ImageSpec, ImageStatusRequest};
    let mut c = ImageServiceClient::new(conn.channel.clone());
    let req = ImageStatusRequest {
        image: Some(ImageSpec {
            image: reference.to_string(),
            ..Default::default()
        }),
        verbose: false,
    };
    let status = conn.call("CRI ImageStatus", c.image_status(conn.request(req, None)));
    Ok(status.await?.image.map(|i| i.pinned))
}

/// Whether the snapshot `key` exists in `snapshotter` (namespace k8s.io).
pub async fn snapshot_exists(conn: &Conn, snapshotter: &str, key: &str) -> Result<bool, RpcError> {
    let mut snaps = SnapshotsClient::new(conn.channel.clone());
    let req = StatSnapshotRequest {
        snapshotter: snapshotter.to_string(),
        key: key.to_string(),
    };
    match conn
        .call(
            "Snapshots.Stat",
            snaps.stat(conn.request(req, Some(K8S_NS))),
        )
        .await
    {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(e),
    }
}

/// Why a blob of containerd's content store cannot be read or proven present.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    #[error(transparent)]
    Rpc(#[from] RpcError),
    #[error("{digest}: larger than 16 MiB, not a manifest")]
    TooLarge { digest: String },
    #[error("{digest}: content does not match its digest")]
    NotItsDigest { digest: String },
    #[error("{digest}: size {found} but the manifest says {want}")]
    NotItsSize {
        digest: String,
        found: i64,
        want: i64,
    },
}

/// Reads `size` bytes of a blob from the start (0: all of it, at most 16 MiB), bounded by
/// the connection's timeout.
async fn read_content(conn: &Conn, d: &Desc, size: i64) -> Result<Vec<u8>, BlobError> {
    let mut c = ContentClient::new(conn.channel.clone());
    let req = ReadContentRequest {
        digest: d.digest.clone(),
        offset: 0,
        size,
    };
    let call = format!("Read {}", d.digest);
    let failed = |s: tonic::Status| BlobError::Rpc(RpcError::status(&call, &s));
    let work = async {
        let mut stream = c
            .read(conn.request(req, Some(K8S_NS)))
            .await
            .map_err(failed)?
            .into_inner();
        let mut data = Vec::new();
        while let Some(chunk) = stream.message().await.map_err(failed)? {
            data.extend_from_slice(&chunk.data);
            if data.len() > SMALL_BLOB_MAX {
                let digest = d.digest.clone();
                return Err(BlobError::TooLarge { digest });
            }
        }
        Ok(data)
    };
    tokio::time::timeout(conn.timeout, work)
        .await
        .map_err(|_| RpcError::timeout(&call, conn.timeout))?
}

/// The largest blob read whole (index, manifest, config): anything larger is not one.
const SMALL_BLOB_MAX: usize = 16 << 20;

/// Reads a whole blob (small: index, manifest, config) and checks its digest.
pub async fn read_blob(conn: &Conn, d: &Desc) -> Result<Vec<u8>, BlobError> {
    let data = read_content(conn, d, 0).await?;
    if sha256_digest(&data) != d.digest {
        let digest = d.digest.clone();
        return Err(BlobError::NotItsDigest { digest });
    }
    Ok(data)
}

/// Proves a (possibly large) blob is present: its record (Info) and its first byte on disk,
/// asked for at the same time.
pub async fn blob_present(conn: &Conn, d: &Desc) -> Result<(), BlobError> {
    let mut c = ContentClient::new(conn.channel.clone());
    let req = InfoRequest {
        digest: d.digest.clone(),
    };
    let info = conn.call("Info", c.info(conn.request(req, Some(K8S_NS))));
    // The record alone can outlive the data (the stale state): its first byte is read.
    let (info, first_byte) = tokio::join!(info, read_content(conn, d, 1));
    let info = info?;
    if let Some(i) = info.info {
        if d.size > 0 && i.size != d.size {
            return Err(BlobError::NotItsSize {
                digest: d.digest.clone(),
                found: i.size,
                want: d.size,
            });
        }
    }
    first_byte.map(|_| ())
}
