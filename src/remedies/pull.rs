//! Pulls the sandbox image through CRI (`PullImage`), so containerd's own registry
//! configuration (mirrors, auth, TLS) applies. One bounded attempt per call.

use crate::containerd::client::{bounded, request, Conn, RpcError, K8S_NS};
use std::time::Duration;

/// The pod annotation by which CRI's PullImage learns a pod's runtime (containerd 1.7 and
/// later; 1.6 ignores it), and unpacks the image for that runtime's own snapshotter
/// instead of CRI's (containerd #6657).
const RUNTIME_HANDLER: &str = "io.containerd.cri.runtime-handler";

/// One CRI PullImage, bounded by `timeout`; for the pods of runtime `handler` where it is
/// given (unpacked for its snapshotter).
pub async fn pull(
    conn: &Conn,
    reference: &str,
    handler: Option<&str>,
    timeout: Duration,
) -> Result<String, RpcError> {
    use k8s_cri::v1::image_service_client::ImageServiceClient;
    use k8s_cri::v1::{ImageSpec, PodSandboxConfig, PullImageRequest};
    let mut c = ImageServiceClient::new(conn.channel.clone());
    let sandbox_config = handler.map(|h| PodSandboxConfig {
        annotations: [(RUNTIME_HANDLER.to_string(), h.to_string())].into(),
        ..Default::default()
    });
    let req = PullImageRequest {
        image: Some(ImageSpec {
            image: reference.to_string(),
            ..Default::default()
        }),
        auth: None,
        sandbox_config,
    };
    bounded(
        "CRI PullImage",
        timeout,
        c.pull_image(request(req, Some(K8S_NS), timeout)),
    )
    .await
    .map(|r| format!("pulled {reference} as {}", r.image_ref))
}
