//! Pulls the sandbox image through CRI (`PullImage`), so containerd's own registry
//! configuration (mirrors, auth, TLS) applies. One bounded attempt per call.

use crate::containerd::client::{bounded, request, Conn, RpcError, K8S_NS};
use std::time::Duration;

/// One CRI PullImage, bounded by `timeout`.
pub async fn pull(conn: &Conn, reference: &str, timeout: Duration) -> Result<String, RpcError> {
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
