//! Many kubelet-like pods over CRI, fast, for `scripts/bench-hygiene` (no crictl on Debian
//! 12, no kubelet here). Each pod is what kubelet with the cgroupfs driver runs for a
//! BestEffort pod: a host-network sandbox with cgroup parent `/kubepods/besteffort/pod<uid>`
//! and one container of IMAGE (its entrypoint, no arguments) started in it.
//!
//!   cri-pods create N SOCKET IMAGE [UID_PREFIX]
//!                                    RunPodSandbox + CreateContainer + StartContainer, N times
//!                                    (a few at a time); prints `<sandbox id> <container id>
//!                                    <uid>` per pod as it runs; exits 1 if any failed. Pod
//!                                    uids are random UUIDs, starting with UID_PREFIX when
//!                                    given (so a cleanup can find every cgroup it made)
//!   cri-pods list SOCKET             ListContainers + ListPodSandbox (crictl ps -a, crictl
//!                                    pods): one line per container and per sandbox
//!   cri-pods remove-all SOCKET       StopPodSandbox + RemovePodSandbox of every pod this
//!                                    program created (label `guard-bench=1`)
//!   cri-pods stop-container SOCKET ID   CRI StopContainer (grace 10 s)
//!   cri-pods state SOCKET ID         ContainerStatus: prints CONTAINER_RUNNING, _EXITED, ...
//!
//! Pods are in pod namespace `guard-bench`, labelled `guard-bench=1`, with kubelet's own
//! labels and annotations on each sandbox and container (CRI's listings carry them). One connection is
//! shared by every call (tonic multiplexes it); calls like src/containerd/pod.rs makes them.

use containerd_guard::containerd::client::{connect, request, status_text};
use containerd_guard::containerd::pod::HostNetworkPod;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use testkit::cri::container_config;
use tonic::transport::Channel;

/// One CRI call may take this long (a sandbox start on a loaded node).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Pods created at once: containerd serialises much of RunPodSandbox, more buys nothing.
const PARALLEL: usize = 4;
const POD_NAMESPACE: &str = "guard-bench";
const LABEL: &str = "guard-bench";

type Client = RuntimeServiceClient<Channel>;

fn usage() -> ! {
    eprintln!(
        "usage: cri-pods create N SOCKET IMAGE | list SOCKET | remove-all SOCKET |\n       \
         stop-container SOCKET ID | state SOCKET ID"
    );
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a = |i: usize| args.get(i).cloned().unwrap_or_else(|| usage());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| {
            eprintln!("cannot start the I/O runtime: {e}");
            std::process::exit(1)
        });
    let result = rt.block_on(async {
        match a(0).as_str() {
            "create" => {
                let n: usize = a(1).parse().unwrap_or_else(|_| usage());
                let prefix = args.get(4).cloned().unwrap_or_default();
                create(&client(&a(2)).await?, n, &a(3), &prefix).await
            }
            "list" => list(&client(&a(1)).await?).await,
            "remove-all" => remove_all(&client(&a(1)).await?).await,
            "stop-container" => stop_container(&client(&a(1)).await?, &a(2)).await,
            "state" => state(&client(&a(1)).await?, &a(2)).await,
            _ => usage(),
        }
    });
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn client(socket: &str) -> Result<Client, String> {
    let conn = connect(&PathBuf::from(socket), CALL_TIMEOUT)
        .await
        .map_err(|e| e.to_string())?;
    Ok(RuntimeServiceClient::new(conn.channel.clone()))
}

fn cri<T>(call: &str, r: Result<tonic::Response<T>, tonic::Status>) -> Result<T, String> {
    r.map(|r| r.into_inner())
        .map_err(|s| format!("{call}: {}", status_text(&s)))
}

/// A random pod uid (kubelet's are UUIDs, from the kernel here), its start replaced by
/// `prefix`.
fn uid(prefix: &str) -> String {
    let uuid = std::fs::read_to_string("/proc/sys/kernel/random/uuid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| format!("{:x}", std::process::id()));
    let tail = uuid.get(prefix.len()..).unwrap_or("");
    format!("{prefix}{tail}")
}

fn sandbox_config(name: &str, uid: &str) -> PodSandboxConfig {
    let mut config = HostNetworkPod {
        name,
        uid,
        namespace: POD_NAMESPACE,
        cgroup_parent: &format!("/kubepods/besteffort/pod{uid}"),
        ..Default::default()
    }
    .config();
    config.labels = kubelet_labels(name, uid, None);
    config.annotations = pairs(&[
        (
            "kubernetes.io/config.seen",
            "2026-12-06T12:00:00.000000000Z",
        ),
        ("kubernetes.io/config.source", "api"),
    ]);
    config
}

/// The labels kubelet gives a pod's sandbox (`container`: None) or one of its containers,
/// and this program's own.
fn kubelet_labels(pod: &str, uid: &str, container: Option<&str>) -> HashMap<String, String> {
    let mut labels = pairs(&[
        (LABEL, "1"),
        ("io.kubernetes.pod.name", pod),
        ("io.kubernetes.pod.namespace", POD_NAMESPACE),
        ("io.kubernetes.pod.uid", uid),
    ]);
    if let Some(name) = container {
        labels.insert("io.kubernetes.container.name".into(), name.into());
    }
    labels
}

/// The annotations kubelet gives each container it creates.
fn container_annotations() -> HashMap<String, String> {
    pairs(&[
        ("io.kubernetes.container.hash", "6a5a9c5d"),
        ("io.kubernetes.container.restartCount", "0"),
        (
            "io.kubernetes.container.terminationMessagePath",
            "/dev/termination-log",
        ),
        ("io.kubernetes.container.terminationMessagePolicy", "File"),
        ("io.kubernetes.pod.terminationGracePeriod", "30"),
    ])
}

fn pairs(kv: &[(&str, &str)]) -> HashMap<String, String> {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// One pod: sandbox, container created and started. Returns `sandbox container uid`.
async fn one_pod(
    mut c: Client,
    name: String,
    image: String,
    uid: String,
) -> Result<String, String> {
    let config = sandbox_config(&name, &uid);
    let req = RunPodSandboxRequest {
        config: Some(config.clone()),
        runtime_handler: String::new(),
    };
    let sandbox = cri(
        "RunPodSandbox",
        c.run_pod_sandbox(request(req, None, CALL_TIMEOUT)).await,
    )?
    .pod_sandbox_id;
    let container = ContainerConfig {
        labels: kubelet_labels(&name, &uid, Some("payload")),
        annotations: container_annotations(),
        ..container_config("payload", &image)
    };
    let req = CreateContainerRequest {
        pod_sandbox_id: sandbox.clone(),
        config: Some(container),
        sandbox_config: Some(config),
    };
    let created = c.create_container(request(req, None, CALL_TIMEOUT)).await;
    let id = cri("CreateContainer", created)
        .map_err(|e| format!("{e} (pod {name}, sandbox {sandbox})"))?
        .container_id;
    let req = StartContainerRequest {
        container_id: id.clone(),
    };
    cri(
        "StartContainer",
        c.start_container(request(req, None, CALL_TIMEOUT)).await,
    )
    .map_err(|e| format!("{e} (pod {name}, container {id})"))?;
    Ok(format!("{sandbox} {id} {uid}"))
}

async fn create(c: &Client, n: usize, image: &str, prefix: &str) -> Result<(), String> {
    let next = Arc::new(AtomicUsize::new(0));
    let pid = std::process::id();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..PARALLEL.min(n) {
        let (c, next) = (c.clone(), next.clone());
        let (image, prefix) = (image.to_string(), prefix.to_string());
        workers.spawn(async move {
            let mut failed = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= n {
                    return failed;
                }
                let name = format!("bench-{pid}-{i}");
                // Printed at once: a caller interrupted meanwhile still knows every pod.
                match one_pod(c.clone(), name, image.clone(), uid(&prefix)).await {
                    Ok(line) => println!("{line}"),
                    Err(e) => failed.push(e),
                }
            }
        });
    }
    let mut failed = Vec::new();
    while let Some(done) = workers.join_next().await {
        failed.extend(done.map_err(|e| e.to_string())?);
    }
    match failed.first() {
        None => Ok(()),
        Some(e) => Err(format!("{} of {n} pod(s) failed; first: {e}", failed.len())),
    }
}

/// `crictl ps -a` and `crictl pods`: every container and sandbox, one line each.
async fn list(c: &Client) -> Result<(), String> {
    let mut c = c.clone();
    let req = ListContainersRequest { filter: None };
    let containers = cri(
        "ListContainers",
        c.list_containers(request(req, None, CALL_TIMEOUT)).await,
    )?
    .containers;
    let req = ListPodSandboxRequest { filter: None };
    let sandboxes = cri(
        "ListPodSandbox",
        c.list_pod_sandbox(request(req, None, CALL_TIMEOUT)).await,
    )?
    .items;
    let mut out = String::new();
    for k in &containers {
        let state = ContainerState::try_from(k.state)
            .map(|s| s.as_str_name())
            .unwrap_or("?");
        out.push_str(&format!(
            "container {} {state} {}\n",
            k.id, k.pod_sandbox_id
        ));
    }
    for s in &sandboxes {
        let state = PodSandboxState::try_from(s.state)
            .map(|s| s.as_str_name())
            .unwrap_or("?");
        out.push_str(&format!("sandbox {} {state}\n", s.id));
    }
    print!("{out}");
    Ok(())
}

async fn remove_all(c: &Client) -> Result<(), String> {
    let mut c = c.clone();
    let req = ListPodSandboxRequest {
        filter: Some(PodSandboxFilter {
            label_selector: HashMap::from([(LABEL.to_string(), "1".to_string())]),
            ..Default::default()
        }),
    };
    let ids: Vec<String> = cri(
        "ListPodSandbox",
        c.list_pod_sandbox(request(req, None, CALL_TIMEOUT)).await,
    )?
    .items
    .into_iter()
    .filter(|s| s.metadata.as_ref().map(|m| m.namespace.as_str()) == Some(POD_NAMESPACE))
    .map(|s| s.id)
    .collect();
    let ids = Arc::new(ids);
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..PARALLEL {
        let (mut c, next, ids) = (c.clone(), next.clone(), ids.clone());
        workers.spawn(async move {
            let mut errors = Vec::new();
            while let Some(id) = ids.get(next.fetch_add(1, Ordering::SeqCst)) {
                let stop = StopPodSandboxRequest {
                    pod_sandbox_id: id.clone(),
                };
                let r = cri(
                    "StopPodSandbox",
                    c.stop_pod_sandbox(request(stop, None, CALL_TIMEOUT)).await,
                );
                let r = match r {
                    Ok(_) => {
                        let rm = RemovePodSandboxRequest {
                            pod_sandbox_id: id.clone(),
                        };
                        let removed = c.remove_pod_sandbox(request(rm, None, CALL_TIMEOUT)).await;
                        cri("RemovePodSandbox", removed).map(|_| ())
                    }
                    Err(e) => Err(e),
                };
                if let Err(e) = r {
                    errors.push(format!("{id}: {e}"));
                }
            }
            errors
        });
    }
    let mut errors = Vec::new();
    while let Some(done) = workers.join_next().await {
        errors.extend(done.map_err(|e| e.to_string())?);
    }
    println!("removed {} pod(s)", ids.len() - errors.len());
    match errors.first() {
        None => Ok(()),
        Some(e) => Err(format!("{} pod(s) not removed; first: {e}", errors.len())),
    }
}

async fn stop_container(c: &Client, id: &str) -> Result<(), String> {
    let req = StopContainerRequest {
        container_id: id.to_string(),
        timeout: 10,
    };
    cri(
        "StopContainer",
        c.clone()
            .stop_container(request(req, None, CALL_TIMEOUT))
            .await,
    )
    .map(|_| ())
}

async fn state(c: &Client, id: &str) -> Result<(), String> {
    let req = ContainerStatusRequest {
        container_id: id.to_string(),
        verbose: false,
    };
    let status = cri(
        "ContainerStatus",
        c.clone()
            .container_status(request(req, None, CALL_TIMEOUT))
            .await,
    )?
    .status
    .ok_or("ContainerStatus: no status in the answer")?;
    let name = ContainerState::try_from(status.state)
        .map(|s| s.as_str_name().to_string())
        .unwrap_or_else(|_| format!("state {}", status.state));
    println!("{name}");
    Ok(())
}
