//! Restores the sandbox image from an archive baked into the node image: verified against
//! its own digests first (a corrupt or tampered archive is refused, named), imported with
//! `ctr images import` (argv, no shell), then named as configured.

use super::command::run_argv;
use crate::config::trust::{self, Distrust};
use crate::containerd::archive;
use crate::containerd::client::{Conn, K8S_NS};
use crate::containerd::image;
use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::services::v1::{CreateImageRequest, Image};
use containerd_client::types::Descriptor;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Import {
    Imported(String),
    /// The archive failed verification; nothing was imported.
    Refused(String),
    Failed(String),
}

/// Verifies `path` and imports it with `ctr images import` (argv, no shell), then makes
/// sure the image carries the wanted name.
pub async fn import_archive(
    conn: &Conn,
    socket_on_host: &Path,
    path: &Path,
    wanted: &str,
    snapshotter: &str,
    timeout: Duration,
) -> Import {
    // Judged and read through one descriptor; `ctr` is given that same open file
    // (`/proc/<guard>/fd/N`), so what is imported is what was judged and verified, even if
    // the path is replaced meanwhile.
    let file = match open_archive(path) {
        Ok(f) => f,
        Err(e) => return Import::Refused(e),
    };
    let same_file = PathBuf::from(format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        file.as_raw_fd()
    ));
    let verified = match verify(&same_file, path, wanted) {
        Ok(v) => v,
        Err(e) => return Import::Refused(e),
    };
    let argv: Vec<String> = [
        "ctr",
        "--address",
        &socket_on_host.display().to_string(),
        "--namespace",
        K8S_NS,
        "images",
        "import",
        "--snapshotter",
        snapshotter,
        &same_file.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Err(e) = run_argv(&argv, timeout).await {
        return Import::Failed(e);
    }
    drop(file);
    let how = format!(
        "imported {} ({:?}, digests verified)",
        path.display(),
        verified.format
    );
    match name_it(conn, &verified, wanted).await {
        Ok(false) => Import::Imported(how),
        Ok(true) => Import::Imported(format!("{how} and named it {wanted}")),
        Err(e) => Import::Failed(format!("{}: {e}", path.display())),
    }
}

/// The archive, opened once, when no other user could have written it (the rule of
/// [`trust`]: root's own file, not writable by group or others, in directories only root
/// can change). It was judged already when the config was loaded if it existed then; one
/// that appeared later is judged here. Refusing it here is a failed remedy (a finding
/// naming the file, its owner and mode), not a configuration error: by now the guard may
/// have acted, and `guard runtime` goes on to pull the image or holds, honestly unusable.
fn open_archive(path: &Path) -> Result<File, String> {
    trust::open_trusted(path).map_err(|e| match e {
        Distrust::Missing => format!("{}: no such file", path.display()),
        Distrust::Unreadable(e) | Distrust::Untrusted(e) => e,
    })
}

/// Checks every blob of the archive against its digest before anything is imported.
/// `open` is the path read (the opened descriptor), `named` the one the errors name.
fn verify(open: &Path, named: &Path, wanted: &str) -> Result<archive::Verified, String> {
    let arch = crate::containerd::oci::oci_arch(std::env::consts::ARCH);
    let rename = |e: String| e.replace(&*open.to_string_lossy(), &named.to_string_lossy());
    let files = archive::read_tar(open).map_err(rename)?;
    archive::verify(&files, wanted, "linux", arch).map_err(|e| format!("{}: {e}", named.display()))
}

/// Names the imported image as configured when the archive called it something else.
/// True when a name was added.
async fn name_it(conn: &Conn, verified: &archive::Verified, wanted: &str) -> Result<bool, String> {
    if image::target(conn, wanted).await?.is_some() {
        return Ok(false);
    }
    let mut target = verified.top.clone().map(|d| Descriptor {
        media_type: d.media_type,
        digest: d.digest,
        size: d.size,
        annotations: Default::default(),
    });
    for n in &verified.names {
        if target.is_some() {
            break;
        }
        target = image::target(conn, n).await?.map(|d| Descriptor {
            media_type: d.media_type,
            digest: d.digest,
            size: d.size,
            annotations: Default::default(),
        });
    }
    let Some(target) = target else {
        return Err(format!(
            "it was imported but holds no image named {wanted} (it names: {})",
            verified.names.join(", ")
        ));
    };
    let create = CreateImageRequest {
        image: Some(Image {
            name: wanted.to_string(),
            target: Some(target),
            ..Default::default()
        }),
        source_date_epoch: None,
    };
    let mut images = ImagesClient::new(conn.channel.clone());
    let req = conn.request(create, Some(K8S_NS));
    conn.call("Images.Create", images.create(req)).await?;
    Ok(true)
}
