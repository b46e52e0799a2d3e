//! cri-probe: the first thing kubelet does, and nothing more.
//!
//! The vm-tests guest has no kubelet (not packaged for Debian 12) and no crictl.
//! This stand-in speaks CRI v1 over containerd's unix socket exactly as kubelet
//! does: `RunPodSandbox` of a host-network pod (so the runtime must resolve and
//! unpack the configured sandbox image), then `PodSandboxStatus` until READY.
//! Messages are hand-declared with prost (field numbers from CRI api.proto,
//! runtime.v1), so no protoc is needed.
//!
//! Usage: cri-probe [--socket PATH] [--timeout SECS] run-pod NAME
//!        cri-probe [--socket PATH] [--timeout SECS] version
//! Prints `key=value` lines; exit 0 when the pod sandbox is READY.

use std::time::{Duration, Instant};

use http::uri::PathAndQuery;
use hyper_util::rt::TokioIo;
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};

#[derive(Clone, PartialEq, prost::Message)]
struct VersionRequest {
    #[prost(string, tag = "1")]
    version: String,
}
#[derive(Clone, PartialEq, prost::Message)]
struct VersionResponse {
    #[prost(string, tag = "1")]
    version: String,
    #[prost(string, tag = "2")]
    runtime_name: String,
    #[prost(string, tag = "3")]
    runtime_version: String,
    #[prost(string, tag = "4")]
    runtime_api_version: String,
}
#[derive(Clone, PartialEq, prost::Message)]
struct PodSandboxMetadata {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(string, tag = "2")]
    uid: String,
    #[prost(string, tag = "3")]
    namespace: String,
    #[prost(uint32, tag = "4")]
    attempt: u32,
}
#[derive(Clone, PartialEq, prost::Message)]
struct NamespaceOption {
    /// NamespaceMode: POD = 0, CONTAINER = 1, NODE = 2, TARGET = 3
    #[prost(int32, tag = "1")]
    network: i32,
    #[prost(int32, tag = "2")]
    pid: i32,
    #[prost(int32, tag = "3")]
    ipc: i32,
}
#[derive(Clone, PartialEq, prost::Message)]
struct LinuxSandboxSecurityContext {
    #[prost(message, optional, tag = "1")]
    namespace_options: Option<NamespaceOption>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct LinuxPodSandboxConfig {
    #[prost(string, tag = "1")]
    cgroup_parent: String,
    #[prost(message, optional, tag = "2")]
    security_context: Option<LinuxSandboxSecurityContext>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct PodSandboxConfig {
    #[prost(message, optional, tag = "1")]
    metadata: Option<PodSandboxMetadata>,
    #[prost(string, tag = "2")]
    hostname: String,
    #[prost(string, tag = "3")]
    log_directory: String,
    #[prost(message, optional, tag = "8")]
    linux: Option<LinuxPodSandboxConfig>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct RunPodSandboxRequest {
    #[prost(message, optional, tag = "1")]
    config: Option<PodSandboxConfig>,
    #[prost(string, tag = "2")]
    runtime_handler: String,
}
#[derive(Clone, PartialEq, prost::Message)]
struct RunPodSandboxResponse {
    #[prost(string, tag = "1")]
    pod_sandbox_id: String,
}
#[derive(Clone, PartialEq, prost::Message)]
struct PodSandboxStatusRequest {
    #[prost(string, tag = "1")]
    pod_sandbox_id: String,
    #[prost(bool, tag = "2")]
    verbose: bool,
}
#[derive(Clone, PartialEq, prost::Message)]
struct PodSandboxStatus {
    #[prost(string, tag = "1")]
    id: String,
    /// PodSandboxState: SANDBOX_READY = 0, SANDBOX_NOTREADY = 1
    #[prost(int32, tag = "3")]
    state: i32,
    #[prost(int64, tag = "4")]
    created_at: i64,
}
#[derive(Clone, PartialEq, prost::Message)]
struct PodSandboxStatusResponse {
    #[prost(message, optional, tag = "1")]
    status: Option<PodSandboxStatus>,
}

const NODE: i32 = 2;

async fn connect(socket: &str) -> Result<Channel, tonic::transport::Error> {
    let socket = socket.to_string();
    Endpoint::try_from("http://localhost")?
        .connect_timeout(Duration::from_secs(2))
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let socket = socket.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(socket).await?)) }
        }))
        .await
}

async fn unary<Q, R>(ch: &Channel, path: &'static str, req: Q) -> Result<R, tonic::Status>
where
    Q: prost::Message + Send + Sync + 'static,
    R: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(ch.clone());
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("channel not ready: {e}")))?;
    let codec = tonic_prost::ProstCodec::<Q, R>::default();
    let mut request = tonic::Request::new(req);
    request.set_timeout(Duration::from_secs(60));
    Ok(grpc
        .unary(request, PathAndQuery::from_static(path), codec)
        .await?
        .into_inner())
}

fn usage() -> ! {
    eprintln!("usage: cri-probe [--socket PATH] [--timeout SECS] (version | run-pod NAME)");
    std::process::exit(2)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut socket = "/run/containerd/containerd.sock".to_string();
    let mut timeout = 60u64;
    let mut args = std::env::args().skip(1);
    let mut rest = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--socket" => socket = args.next().unwrap_or_else(|| usage()),
            "--timeout" => {
                timeout = args.next().and_then(|t| t.parse().ok()).unwrap_or_else(|| usage())
            }
            _ => rest.push(a),
        }
    }
    let deadline = Instant::now() + Duration::from_secs(timeout);

    // Like kubelet: keep trying to reach the runtime until a deadline.
    let (ch, ver) = loop {
        let attempt = async {
            let ch = connect(&socket).await.map_err(|e| format!("connect {socket}: {e:?}"))?;
            let v: VersionResponse = unary(
                &ch,
                "/runtime.v1.RuntimeService/Version",
                VersionRequest { version: "v1".into() },
            )
            .await
            .map_err(|e| format!("Version: {e}"))?;
            Ok::<_, String>((ch, v))
        };
        match attempt.await {
            Ok(x) => break x,
            Err(e) if Instant::now() < deadline => {
                eprintln!("cri-probe: waiting for runtime: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => {
                println!("result=fail\nerror={e}");
                std::process::exit(1);
            }
        }
    };
    println!(
        "runtime={} {} api={}",
        ver.runtime_name, ver.runtime_version, ver.runtime_api_version
    );

    match rest.first().map(String::as_str) {
        Some("version") => println!("result=ok"),
        Some("run-pod") => {
            let name = rest.get(1).cloned().unwrap_or_else(|| usage());
            let cfg = PodSandboxConfig {
                metadata: Some(PodSandboxMetadata {
                    name: name.clone(),
                    uid: format!("{name}-uid"),
                    namespace: "kube-system".into(),
                    attempt: 0,
                }),
                // host-network sandboxes need an empty hostname
                hostname: String::new(),
                log_directory: String::new(),
                linux: Some(LinuxPodSandboxConfig {
                    cgroup_parent: String::new(),
                    security_context: Some(LinuxSandboxSecurityContext {
                        namespace_options: Some(NamespaceOption { network: NODE, pid: 0, ipc: 0 }),
                    }),
                }),
            };
            let t0 = Instant::now();
            let run: Result<RunPodSandboxResponse, _> = unary(
                &ch,
                "/runtime.v1.RuntimeService/RunPodSandbox",
                RunPodSandboxRequest { config: Some(cfg), runtime_handler: String::new() },
            )
            .await;
            let id = match run {
                Ok(r) => r.pod_sandbox_id,
                Err(e) => {
                    println!("result=fail\nerror=RunPodSandbox: {}", e.message().replace('\n', " "));
                    std::process::exit(1);
                }
            };
            println!("pod_sandbox_id={id}\nrun_pod_seconds={:.3}", t0.elapsed().as_secs_f64());
            loop {
                let st: Result<PodSandboxStatusResponse, _> = unary(
                    &ch,
                    "/runtime.v1.RuntimeService/PodSandboxStatus",
                    PodSandboxStatusRequest { pod_sandbox_id: id.clone(), verbose: false },
                )
                .await;
                match st.map(|s| s.status.map(|s| s.state)) {
                    Ok(Some(0)) => {
                        println!("state=SANDBOX_READY\nresult=ok");
                        return;
                    }
                    other if Instant::now() >= deadline => {
                        println!("result=fail\nerror=PodSandboxStatus: {other:?}");
                        std::process::exit(1);
                    }
                    _ => tokio::time::sleep(Duration::from_millis(300)).await,
                }
            }
        }
        _ => usage(),
    }
}
