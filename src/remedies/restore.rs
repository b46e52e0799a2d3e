//! Restores the sandbox image from an archive baked into the node image: verified against
//! its own digests first (a corrupt or tampered archive is refused, named), then exactly
//! the verified image (a new archive of its files alone, in memory) imported with
//! `ctr images import` (argv, no shell), then named as configured. Nothing else the
//! archive holds is imported or tagged.

use super::command::run_argv;
use crate::config::trust::{self, Distrust};
use crate::containerd::archive;
use crate::containerd::client::{Conn, K8S_NS};
use crate::containerd::image;
use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::services::v1::{CreateImageRequest, Image};
use containerd_client::types::Descriptor;
use std::fs::File;
use std::io::Write;
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

/// Verifies `path`, imports exactly the wanted image of it with `ctr images import` (argv,
/// no shell), then makes sure the image carries the wanted name.
pub async fn import_archive(
    conn: &Conn,
    socket_on_host: &Path,
    path: &Path,
    wanted: &str,
    snapshotter: &str,
    timeout: Duration,
) -> Import {
    // Judged and read through one descriptor, so what is imported is what was judged and
    // verified, even if the path is replaced meanwhile.
    let file = match open_archive(path) {
        Ok(f) => f,
        Err(e) => return Import::Refused(e),
    };
    let (verified, only_it) = match verify(&fd_path(&file), path, wanted) {
        Ok(v) => v,
        Err(e) => return Import::Refused(e),
    };
    drop(file);
    // `ctr` reads the verified image's own archive from a memory file of the guard's
    // (`/proc/<guard>/fd/N`): no file on disk anyone else could swap.
    let memory = match in_memory(&only_it) {
        Ok(m) => m,
        Err(e) => return Import::Failed(format!("{}: {e}", path.display())),
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
        &fd_path(&memory).display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Err(e) = run_argv(&argv, timeout).await {
        return Import::Failed(e.to_string());
    }
    drop(memory);
    let how = format!(
        "imported {} from {} ({:?}, digests verified; nothing else of the archive)",
        imported_name(wanted),
        path.display(),
        verified.format
    );
    let how = match name_it(conn, &verified, wanted).await {
        Ok(false) => how,
        Ok(true) => format!("{how} and named it {wanted}"),
        Err(e) => return Import::Failed(format!("{}: {e}", path.display())),
    };
    Import::Imported(format!("{how}; {}", pinned(conn, wanted).await))
}

/// Pins the image the guard just brought back, so kubelet's image garbage collection
/// leaves it alone where containerd pins (the evidence line's end). A failed pin is said,
/// not a failed restore: the image is there.
pub async fn pinned(conn: &Conn, name: &str) -> String {
    match image::pin(conn, name).await {
        Ok(()) => format!("labelled {}=pinned", image::PINNED_LABEL),
        Err(e) => format!("not pinned: {e}"),
    }
}

/// The name the verified image is imported under: the wanted name without a `@digest`.
fn imported_name(wanted: &str) -> &str {
    wanted.split('@').next().unwrap_or(wanted)
}

/// `/proc/<guard>/fd/N` for an open file of the guard's.
fn fd_path(file: &impl AsRawFd) -> PathBuf {
    PathBuf::from(format!(
        "/proc/{}/fd/{}",
        std::process::id(),
        file.as_raw_fd()
    ))
}

/// `data` in an anonymous memory file (`memfd_create`).
fn in_memory(data: &[u8]) -> Result<File, String> {
    use nix::sys::memfd::{memfd_create, MFdFlags};
    let fd = memfd_create(c"guard-sandbox-image", MFdFlags::MFD_CLOEXEC)
        .map_err(|e| format!("memfd_create: {e}"))?;
    let mut file = File::from(fd);
    file.write_all(data)
        .map_err(|e| format!("writing the verified image to memory: {e}"))?;
    Ok(file)
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

/// Checks every blob of the archive against its digest before anything is imported; the
/// verified image and an archive of it alone. `open` is the path read (the opened
/// descriptor), `named` the one the errors name.
fn verify(open: &Path, named: &Path, wanted: &str) -> Result<(archive::Verified, Vec<u8>), String> {
    let arch = crate::containerd::oci::oci_arch(std::env::consts::ARCH);
    let rename = |e: String| e.replace(&*open.to_string_lossy(), &named.to_string_lossy());
    let files = archive::read_tar(open).map_err(rename)?;
    let in_named = |e: String| format!("{}: {e}", named.display());
    let verified = archive::verify(&files, wanted, "linux", arch).map_err(in_named)?;
    let only_it =
        archive::only_verified(&files, &verified, imported_name(wanted)).map_err(in_named)?;
    Ok((verified, only_it))
}

/// Names the imported image as configured when the archive called it something else.
/// True when a name was added.
async fn name_it(conn: &Conn, verified: &archive::Verified, wanted: &str) -> Result<bool, String> {
    let target_of =
        |name| async move { image::target(conn, name).await.map_err(|e| e.to_string()) };
    if target_of(wanted).await?.is_some() {
        return Ok(false);
    }
    let mut target = verified.top.clone().map(|d| Descriptor {
        media_type: d.media_type,
        digest: d.digest,
        size: d.size,
        annotations: Default::default(),
    });
    // A docker archive's image gets its digest only on import: found by the one name it
    // was imported under (never by another name the archive gave, which may be a node's
    // image).
    if target.is_none() {
        let name = imported_name(wanted);
        target = target_of(name).await?.map(|d| Descriptor {
            media_type: d.media_type,
            digest: d.digest,
            size: d.size,
            annotations: Default::default(),
        });
    }
    let Some(target) = target else {
        return Err(format!(
            "it was imported but containerd has no image {} (the archive names: {})",
            imported_name(wanted),
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
    conn.call("Images.Create", images.create(req))
        .await
        .map_err(|e| e.to_string())?;
    Ok(true)
}
