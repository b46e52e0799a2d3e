//! CRI clients of the tests and the CRI tools: start, inspect and remove a host-network
//! pod as kubelet would (`containerd_guard::containerd::pod::HostNetworkPod`), and the one
//! container config every tool builds.

use containerd_guard::containerd::client::{connect, request, status_text};
use containerd_guard::containerd::pod::{host_network_namespaces, HostNetworkPod};
use k8s_cri::v1::image_service_client::ImageServiceClient;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use std::path::Path;
use std::time::Duration;

/// One CRI call may take this long: RunPodSandbox pulls the sandbox image when missing.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A channel to containerd's socket, for one tool's call or two.
async fn channel(socket: &Path) -> Result<tonic::transport::Channel, String> {
    let conn = connect(socket, CONNECT_TIMEOUT).await;
    conn.map(|c| c.channel).map_err(|e| e.to_string())
}

fn image_spec(reference: &str) -> Option<ImageSpec> {
    Some(ImageSpec {
        image: reference.to_string(),
        ..Default::default()
    })
}

/// Waits, at most `bound`, until CRI answers `Status`, as kubelet does before it runs a
/// pod: containerd serves its socket, and tells systemd it is ready, a moment before its
/// CRI plugin is initialised ("server is not initialized yet" until then). The last
/// error when it never answered.
pub async fn wait_for_cri(socket: &Path, bound: Duration) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        let answer = async {
            let mut c = RuntimeServiceClient::new(channel(socket).await?);
            let req = request(StatusRequest { verbose: false }, None, CALL_TIMEOUT);
            c.status(req).await.map(|_| ()).map_err(|s| status_text(&s))
        };
        match answer.await {
            Ok(()) => return Ok(()),
            Err(e) if tokio::time::Instant::now() >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// The I/O runtime of a kubelet stand-in tool; when it cannot start, the tool says so in
/// the stand-in's `key=value` protocol (`result=fail`) and exits 1.
pub fn stand_in_runtime() -> tokio::runtime::Runtime {
    let built = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    built.unwrap_or_else(|e| {
        println!("result=fail\nerror=cannot start the I/O runtime: {e}");
        std::process::exit(1);
    })
}

/// A container as kubelet asks for one in a host-network pod: its own PID namespace (a
/// pod without shareProcessNamespace, so it does not die with the sandbox's pause
/// process), the node's network. Callers add args, mounts, labels and the log path with
/// `ContainerConfig { args, ..container_config(name, image) }`.
pub fn container_config(name: &str, image: &str) -> ContainerConfig {
    ContainerConfig {
        metadata: Some(ContainerMetadata {
            name: name.to_string(),
            attempt: 0,
        }),
        image: Some(ImageSpec {
            image: image.to_string(),
            ..Default::default()
        }),
        linux: Some(LinuxContainerConfig {
            security_context: Some(LinuxContainerSecurityContext {
                namespace_options: Some(host_network_namespaces()),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Starts a host-network sandbox named `name` in pod namespace `namespace`; returns its ID
/// or CRI's error text (the text kubelet would put in a `FailedCreatePodSandBox` event).
pub async fn start_host_network_pod(
    socket: &Path,
    name: &str,
    uid: &str,
    namespace: &str,
) -> Result<String, String> {
    let pod = HostNetworkPod {
        name,
        uid,
        namespace,
        ..Default::default()
    };
    run_pod(socket, pod).await
}

/// A host-network sandbox in pod namespace `namespace` carrying `labels`: a pod as
/// kubelet makes one (its `io.kubernetes.pod.*` labels), or one forging the canary's.
pub async fn start_labelled_pod(
    socket: &Path,
    name: &str,
    namespace: &str,
    labels: &[(&str, &str)],
) -> Result<String, String> {
    let uid = crate::random_uuid();
    start_labelled_pod_of_uid(socket, name, namespace, &uid, labels).await
}

/// As [`start_labelled_pod`], the pod's uid `uid` (one a canary record names).
pub async fn start_labelled_pod_of_uid(
    socket: &Path,
    name: &str,
    namespace: &str,
    uid: &str,
    labels: &[(&str, &str)],
) -> Result<String, String> {
    let pod = HostNetworkPod {
        name,
        uid,
        namespace,
        labels,
        ..Default::default()
    };
    run_pod(socket, pod).await
}

/// RunPodSandbox of `pod`; its ID or CRI's error text.
async fn run_pod(socket: &Path, pod: HostNetworkPod<'_>) -> Result<String, String> {
    let mut c = RuntimeServiceClient::new(channel(socket).await?);
    let req = RunPodSandboxRequest {
        config: Some(pod.config()),
        runtime_handler: String::new(),
    };
    Ok(c.run_pod_sandbox(request(req, None, CALL_TIMEOUT))
        .await
        .map_err(|s| status_text(&s))?
        .into_inner()
        .pod_sandbox_id)
}

/// The ids of the sandboxes CRI lists in pod namespace `namespace`, any state.
pub async fn sandboxes_in(socket: &Path, namespace: &str) -> Result<Vec<String>, String> {
    let mut c = RuntimeServiceClient::new(channel(socket).await?);
    let req = ListPodSandboxRequest { filter: None };
    let items = c
        .list_pod_sandbox(request(req, None, CALL_TIMEOUT))
        .await
        .map_err(|s| status_text(&s))?
        .into_inner()
        .items;
    Ok(items
        .into_iter()
        .filter(|s| {
            s.metadata
                .as_ref()
                .is_some_and(|m| m.namespace == namespace)
        })
        .map(|s| s.id)
        .collect())
}

/// StopPodSandbox then RemovePodSandbox, so nothing is left behind.
pub async fn remove_pod(socket: &Path, id: &str) -> Result<(), String> {
    let mut c = RuntimeServiceClient::new(channel(socket).await?);
    let stop = StopPodSandboxRequest {
        pod_sandbox_id: id.to_string(),
    };
    c.stop_pod_sandbox(request(stop, None, CALL_TIMEOUT))
        .await
        .map_err(|s| status_text(&s))?;
    let remove = RemovePodSandboxRequest {
        pod_sandbox_id: id.to_string(),
    };
    c.remove_pod_sandbox(request(remove, None, CALL_TIMEOUT))
        .await
        .map_err(|s| status_text(&s))?;
    Ok(())
}

/// PodSandboxStatus's state name (`SANDBOX_READY` when the pause process runs).
pub async fn sandbox_state(socket: &Path, id: &str) -> Result<String, String> {
    let mut c = RuntimeServiceClient::new(channel(socket).await?);
    let req = PodSandboxStatusRequest {
        pod_sandbox_id: id.to_string(),
        verbose: false,
    };
    let status = c
        .pod_sandbox_status(request(req, None, CALL_TIMEOUT))
        .await
        .map_err(|s| status_text(&s))?
        .into_inner()
        .status
        .ok_or("PodSandboxStatus: no status in the answer")?;
    Ok(PodSandboxState::try_from(status.state)
        .map(|s| s.as_str_name().to_string())
        .unwrap_or_else(|_| format!("state {}", status.state)))
}

/// CRI PullImage of `reference`, as kubelet pulls an image: containerd's own pull, with
/// its own settings (the snapshotter, `discard_unpacked_layers`). The image's reference.
pub async fn pull_image(socket: &Path, reference: &str) -> Result<String, String> {
    let mut c = ImageServiceClient::new(channel(socket).await?);
    let req = PullImageRequest {
        image: image_spec(reference),
        ..Default::default()
    };
    let pulled = c
        .pull_image(request(req, None, CALL_TIMEOUT))
        .await
        .map_err(|s| status_text(&s))?;
    Ok(pulled.into_inner().image_ref)
}

/// CRI RemoveImage of `reference`, as kubelet's image garbage collection or an operator's
/// `crictl rmi` removes it.
pub async fn remove_image(socket: &Path, reference: &str) -> Result<(), String> {
    let mut c = ImageServiceClient::new(channel(socket).await?);
    let req = RemoveImageRequest {
        image: image_spec(reference),
    };
    c.remove_image(request(req, None, CALL_TIMEOUT))
        .await
        .map_err(|s| status_text(&s))?;
    Ok(())
}

/// CRI ImageStatus of `reference`: `None` when CRI does not know it, else whether it is
/// pinned (always `false` on containerd 1.6, which has no pinning).
pub async fn image_pinned(socket: &Path, reference: &str) -> Result<Option<bool>, String> {
    let mut c = ImageServiceClient::new(channel(socket).await?);
    let req = ImageStatusRequest {
        image: image_spec(reference),
        verbose: false,
    };
    let status = c
        .image_status(request(req, None, CALL_TIMEOUT))
        .await
        .map_err(|s| status_text(&s))?
        .into_inner();
    Ok(status.image.map(|i| i.pinned))
}

/// What CRI shows of every pod sandbox (id, metadata, state, labels) and image (id, tags,
/// pinned), one sorted line each: two views taken around a command that must change
/// nothing compare equal.
pub async fn cri_view(socket: &Path) -> Result<Vec<String>, String> {
    let channel = channel(socket).await?;
    let mut rt = RuntimeServiceClient::new(channel.clone());
    let pods = rt
        .list_pod_sandbox(request(
            ListPodSandboxRequest { filter: None },
            None,
            CALL_TIMEOUT,
        ))
        .await
        .map_err(|s| status_text(&s))?
        .into_inner()
        .items;
    let mut images = ImageServiceClient::new(channel);
    let listed = images
        .list_images(request(
            ListImagesRequest { filter: None },
            None,
            CALL_TIMEOUT,
        ))
        .await
        .map_err(|s| status_text(&s))?
        .into_inner()
        .images;
    let mut view: Vec<String> = pods
        .into_iter()
        .map(|p| {
            let labels: std::collections::BTreeMap<_, _> = p.labels.into_iter().collect();
            format!(
                "pod {} {:?} state {} labels {labels:?}",
                p.id, p.metadata, p.state
            )
        })
        .chain(
            listed
                .into_iter()
                .map(|i| format!("image {} tags {:?} pinned {}", i.id, i.repo_tags, i.pinned)),
        )
        .collect();
    view.sort();
    Ok(view)
}
