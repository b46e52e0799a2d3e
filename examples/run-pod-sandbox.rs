//! The kubelet's view, for the demo (no crictl on Debian 12, no kubelet here): CRI
//! RunPodSandbox of a host-network pod (empty hostname) with the configured sandbox image,
//! then StopPodSandbox and RemovePodSandbox. Prints the sandbox ID or CRI's error and exits
//! 0 or 1.
//!
//!   cargo run --release --example run-pod-sandbox -- /path/to/containerd.sock

use containerd_guard::runtime::client::{connect, request, status_text};
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use std::time::Duration;

fn main() {
    let Some(socket) = std::env::args().nth(1) else {
        eprintln!("usage: run-pod-sandbox SOCKET");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let result: Result<String, String> = rt.block_on(async {
        let conn = connect(std::path::Path::new(&socket), Duration::from_secs(5)).await?;
        let mut c = RuntimeServiceClient::new(conn.channel.clone());
        let config = PodSandboxConfig {
            metadata: Some(PodSandboxMetadata {
                name: format!("demo-{}", std::process::id()),
                uid: format!("demo-uid-{}", std::process::id()),
                namespace: "demo".into(),
                attempt: 0,
            }),
            hostname: String::new(),
            linux: Some(LinuxPodSandboxConfig {
                security_context: Some(LinuxSandboxSecurityContext {
                    namespace_options: Some(NamespaceOption {
                        network: NamespaceMode::Node as i32,
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let t = Duration::from_secs(60);
        let id = c
            .run_pod_sandbox(request(
                RunPodSandboxRequest {
                    config: Some(config),
                    runtime_handler: String::new(),
                },
                None,
                t,
            ))
            .await
            .map_err(|s| status_text(&s))?
            .into_inner()
            .pod_sandbox_id;
        let _ = c
            .stop_pod_sandbox(request(
                StopPodSandboxRequest {
                    pod_sandbox_id: id.clone(),
                },
                None,
                t,
            ))
            .await;
        let _ = c
            .remove_pod_sandbox(request(
                RemovePodSandboxRequest {
                    pod_sandbox_id: id.clone(),
                },
                None,
                t,
            ))
            .await;
        Ok(id)
    });
    match result {
        Ok(id) => println!("RunPodSandbox: ok (sandbox {id}, stopped and removed again)"),
        Err(e) => {
            println!("RunPodSandbox FAILED: {e}");
            std::process::exit(1);
        }
    }
}
