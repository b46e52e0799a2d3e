//! The remedies, each bounded: restart containerd (an argument vector, never a shell),
//! import the sandbox image from a verified archive, pull it through CRI.

use super::archive;
use super::client::{bounded, request, Conn, K8S_NS};
use crate::config::units::format_duration;
use containerd_client::services::v1::images_client::ImagesClient;
use containerd_client::services::v1::{CreateImageRequest, GetImageRequest, Image};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Runs `argv` with a bound; the outcome text carries its exit status and output tail.
pub async fn run_argv(argv: &[String], timeout: Duration) -> Result<String, String> {
    let (prog, args) = argv.split_first().ok_or("empty command")?;
    let mut child = tokio::process::Command::new(prog)
        .args(args)
        // The guard's own notify socket is not the restart command's: systemd would log
        // and drop its messages (only the main PID may notify).
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run {prog}: {e}"))?;
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let collect = async {
        use tokio::io::AsyncReadExt;
        let mut o = Vec::new();
        let mut e = Vec::new();
        // Both pipes at once: a command that fills stderr first must not block on it.
        let read_out = async {
            if let Some(s) = out.as_mut() {
                let _ = s.read_to_end(&mut o).await;
            }
        };
        let read_err = async {
            if let Some(s) = err.as_mut() {
                let _ = s.read_to_end(&mut e).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = child.wait().await;
        (status, o, e)
    };
    let (status, o, e) = tokio::time::timeout(timeout, collect).await.map_err(|_| {
        format!(
            "`{}` did not finish within {}; killed",
            argv.join(" "),
            format_duration(timeout)
        )
    })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o),
        String::from_utf8_lossy(&e)
    );
    let tail: String = text
        .lines()
        .rev()
        .take(3)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join(" | ");
    match status {
        Ok(s) if s.success() => Ok(format!(
            "`{}` exited 0{}",
            argv.join(" "),
            if tail.is_empty() {
                String::new()
            } else {
                format!(": {tail}")
            }
        )),
        Ok(s) => Err(format!(
            "`{}` failed ({s}){}",
            argv.join(" "),
            if tail.is_empty() {
                String::new()
            } else {
                format!(": {tail}")
            }
        )),
        Err(e) => Err(format!("`{}`: {e}", argv.join(" "))),
    }
}

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
    let arch = crate::policy::runtime::oci_arch(std::env::consts::ARCH);
    let files = match archive::read_tar(path) {
        Ok(f) => f,
        Err(e) => return Import::Refused(e),
    };
    let verified = match archive::verify(&files, wanted, "linux", arch) {
        Ok(v) => v,
        Err(e) => return Import::Refused(format!("{}: {e}", path.display())),
    };
    drop(files);
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
        &path.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Err(e) = run_argv(&argv, timeout).await {
        return Import::Failed(e);
    }
    // Name it as configured when the archive called it something else.
    let mut images = ImagesClient::new(conn.channel.clone());
    let get = |name: String| GetImageRequest { name };
    if bounded(
        "Images.Get",
        conn.timeout,
        images.get(request(get(wanted.into()), Some(K8S_NS), conn.timeout)),
    )
    .await
    .is_ok()
    {
        return Import::Imported(format!(
            "imported {} ({:?}, digests verified)",
            path.display(),
            verified.format
        ));
    }
    let mut target = verified.top.map(|d| containerd_client::types::Descriptor {
        media_type: d.media_type,
        digest: d.digest,
        size: d.size,
        annotations: Default::default(),
    });
    if target.is_none() {
        for n in &verified.names {
            if let Ok(r) = bounded(
                "Images.Get",
                conn.timeout,
                images.get(request(get(n.clone()), Some(K8S_NS), conn.timeout)),
            )
            .await
            {
                target = r.image.and_then(|i| i.target);
                break;
            }
        }
    }
    let Some(target) = target else {
        return Import::Failed(format!(
            "{} was imported but holds no image named {wanted} (it names: {})",
            path.display(),
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
    match bounded(
        "Images.Create",
        conn.timeout,
        images.create(request(create, Some(K8S_NS), conn.timeout)),
    )
    .await
    {
        Ok(_) => Import::Imported(format!(
            "imported {} ({:?}, digests verified) and named it {wanted}",
            path.display(),
            verified.format
        )),
        Err(e) => Import::Failed(e),
    }
}

/// One CRI PullImage, bounded by `timeout`.
pub async fn pull(conn: &Conn, reference: &str, timeout: Duration) -> Result<String, String> {
    use k8s_cri::v1::image_service_client::ImageServiceClient;
    use k8s_cri::v1::{ImageSpec, PullImageRequest};
    let mut c = ImageServiceClient::new(conn.channel.clone());
    let req = PullImageRequest {
        image: Some(ImageSpec {
            image: reference.to_string(),
            ..Default::default()
        }),
        auth: None,
        sandbox_config: None,
    };
    bounded(
        "CRI PullImage",
        timeout,
        c.pull_image(request(req, Some(K8S_NS), timeout)),
    )
    .await
    .map(|r| format!("pulled {reference} as {}", r.image_ref))
}
