//! A workload the way kubelet starts one, for the VM tests' scenarios about running pods
//! (`k3s`: orphaned payloads holding a lock; `leaked-task`): CRI only, through the crate's
//! own client, like `run-pod-sandbox`. Never installed on nodes.
//!
//! ```text
//! cri-workload SOCKET run --name N --uid U --image REF [--namespace NS]
//!     [--cgroup-parent P] [--mount HOST:CONTAINER] [--arg A]...
//!     [--expect TEXT] [--fail-on TEXT] [--timeout SECS]
//! cri-workload SOCKET stop-container ID
//! cri-workload SOCKET remove-pod ID        (StopPodSandbox, then RemovePodSandbox)
//! cri-workload SOCKET container-status ID
//! ```
//!
//! `run`: RunPodSandbox of a host-network pod (with `linux.cgroup_parent` when given: the
//! cgroupfs `/kubepods/besteffort/pod<uid>` or the systemd driver's
//! `kubepods-besteffort-pod<uid_with_underscores>.slice`, as kubelet sets it), then
//! CreateContainer + StartContainer of REF with the hostPath mount, logging to
//! `/var/log/pods/<ns>_<name>_<uid>/<name>/0.log` as kubelet lays it out. Then it waits
//! (bounded by `--timeout`, default 60 s) until the container's log says `--expect` (ok),
//! says `--fail-on` or the container exits (fail); without `--expect`, until it runs.
//!
//! Prints `key=value` lines (`pod_sandbox_id=`, `container_id=`, `container_state=`,
//! `exit_code=`, `output=` (the log's messages, ` | `-joined), `error=`, `result=ok|fail`)
//! and exits 0 (ok), 1 (fail) or 2 (usage).

use containerd_guard::containerd::client::{connect, request, status_text};
use containerd_guard::containerd::pod::HostNetworkPod;
use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
use k8s_cri::v1::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use testkit::cri::container_config;
use tonic::transport::Channel;

const CALL_TIMEOUT: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

const USAGE: &str = "usage: cri-workload SOCKET run --name N --uid U --image REF [--namespace NS] \
[--cgroup-parent P] [--mount HOST:CONTAINER] [--arg A]... [--expect TEXT] [--fail-on TEXT] \
[--timeout SECS] | stop-container ID | remove-pod ID | container-status ID";

#[derive(Default)]
struct RunArgs {
    name: String,
    uid: String,
    namespace: String,
    image: String,
    cgroup_parent: String,
    mounts: Vec<(String, String)>,
    args: Vec<String>,
    expect: Option<String>,
    fail_on: Option<String>,
    timeout: Duration,
}

enum Cmd {
    Run(Box<RunArgs>),
    StopContainer(String),
    RemovePod(String),
    ContainerStatus(String),
}

fn parse(mut a: impl Iterator<Item = String>) -> Result<(PathBuf, Cmd), String> {
    let socket = PathBuf::from(a.next().ok_or("no SOCKET")?);
    let cmd = a.next().ok_or("no command")?;
    let rest: Vec<String> = a.collect();
    let one = || match rest.as_slice() {
        [id] => Ok(id.clone()),
        _ => Err(format!("{cmd}: one ID")),
    };
    let cmd = match cmd.as_str() {
        "stop-container" => Cmd::StopContainer(one()?),
        "remove-pod" => Cmd::RemovePod(one()?),
        "container-status" => Cmd::ContainerStatus(one()?),
        "run" => Cmd::Run(Box::new(parse_run(rest.clone().into_iter())?)),
        other => return Err(format!("unknown command {other:?}")),
    };
    Ok((socket, cmd))
}

fn parse_run(mut a: impl Iterator<Item = String>) -> Result<RunArgs, String> {
    let mut r = RunArgs {
        namespace: "vm-tests".into(),
        timeout: Duration::from_secs(60),
        ..Default::default()
    };
    while let Some(flag) = a.next() {
        let value = a.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--name" => r.name = value,
            "--uid" => r.uid = value,
            "--namespace" => r.namespace = value,
            "--image" => r.image = value,
            "--cgroup-parent" => r.cgroup_parent = value,
            "--mount" => {
                let (h, c) = value.split_once(':').ok_or("--mount HOST:CONTAINER")?;
                r.mounts.push((h.into(), c.into()));
            }
            "--arg" => r.args.push(value),
            "--expect" => r.expect = Some(value),
            "--fail-on" => r.fail_on = Some(value),
            "--timeout" => {
                let secs: u64 = value.parse().map_err(|_| "--timeout SECS")?;
                r.timeout = Duration::from_secs(secs);
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if r.name.is_empty() || r.uid.is_empty() || r.image.is_empty() {
        return Err("run needs --name, --uid and --image".into());
    }
    Ok(r)
}

fn main() {
    let (socket, cmd) = match parse(std::env::args().skip(1)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("cri-workload: {e}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let rt = testkit::cri::stand_in_runtime();
    let outcome = rt.block_on(async {
        // connect()'s bound is also every call's on this channel: RunPodSandbox starts a
        // shim and may take far longer than connecting does (seconds in a TCG guest).
        let conn = connect(&socket, CALL_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        let mut c = RuntimeServiceClient::new(conn.channel.clone());
        match cmd {
            Cmd::Run(r) => run(&mut c, &r).await,
            Cmd::StopContainer(id) => stop_container(&mut c, &id).await,
            Cmd::RemovePod(id) => remove_pod(&mut c, &id).await,
            Cmd::ContainerStatus(id) => {
                let (state, code) = container_state(&mut c, &id).await?;
                println!("container_state={state}\nexit_code={code}");
                Ok(())
            }
        }
    });
    match outcome {
        Ok(()) => println!("result=ok"),
        Err(e) => {
            println!("error={}\nresult=fail", e.replace('\n', " "));
            std::process::exit(1);
        }
    }
}

type Cri = RuntimeServiceClient<Channel>;

fn call_err(call: &str) -> impl Fn(tonic::Status) -> String + '_ {
    move |s| format!("{call}: {}", status_text(&s))
}

fn pod_config(r: &RunArgs) -> PodSandboxConfig {
    HostNetworkPod {
        name: &r.name,
        uid: &r.uid,
        namespace: &r.namespace,
        log_directory: &log_dir(r).display().to_string(),
        cgroup_parent: &r.cgroup_parent,
        labels: &[],
    }
    .config()
}

/// kubelet's layout: `/var/log/pods/<namespace>_<name>_<uid>`.
fn log_dir(r: &RunArgs) -> PathBuf {
    PathBuf::from(format!(
        "/var/log/pods/{}_{}_{}",
        r.namespace, r.name, r.uid
    ))
}

async fn run(c: &mut Cri, r: &RunArgs) -> Result<(), String> {
    let deadline = Instant::now() + r.timeout;
    // kubelet creates the log directories; containerd only opens the file.
    let rel = format!("{}/0.log", r.name);
    let log = log_dir(r).join(&rel);
    std::fs::create_dir_all(log.parent().unwrap_or(Path::new("/")))
        .map_err(|e| format!("{}: {e}", log.display()))?;
    let sandbox_config = pod_config(r);
    let pod = c
        .run_pod_sandbox(request(
            RunPodSandboxRequest {
                config: Some(sandbox_config.clone()),
                runtime_handler: String::new(),
            },
            None,
            CALL_TIMEOUT,
        ))
        .await
        .map_err(call_err("RunPodSandbox"))?
        .into_inner()
        .pod_sandbox_id;
    println!("pod_sandbox_id={pod}");
    let config = ContainerConfig {
        args: r.args.clone(),
        mounts: r
            .mounts
            .iter()
            .map(|(h, ctr)| Mount {
                host_path: h.clone(),
                container_path: ctr.clone(),
                ..Default::default()
            })
            .collect(),
        log_path: rel,
        ..container_config(&r.name, &r.image)
    };
    let id = c
        .create_container(request(
            CreateContainerRequest {
                pod_sandbox_id: pod.clone(),
                config: Some(config),
                sandbox_config: Some(sandbox_config),
            },
            None,
            CALL_TIMEOUT,
        ))
        .await
        .map_err(call_err("CreateContainer"))?
        .into_inner()
        .container_id;
    println!("container_id={id}");
    c.start_container(request(
        StartContainerRequest {
            container_id: id.clone(),
        },
        None,
        CALL_TIMEOUT,
    ))
    .await
    .map_err(call_err("StartContainer"))?;
    wait_for(c, r, &id, &log, deadline).await
}

/// Until the log says `--expect` (or, without it, the container runs), the log says
/// `--fail-on`, the container exits, or the deadline passes.
async fn wait_for(
    c: &mut Cri,
    r: &RunArgs,
    id: &str,
    log: &Path,
    deadline: Instant,
) -> Result<(), String> {
    loop {
        let (state, code) = container_state(c, id).await?;
        let output = messages(log);
        let said = |t: &Option<String>| t.as_ref().is_some_and(|t| output.contains(t.as_str()));
        let exited = state == "CONTAINER_EXITED";
        let verdict = if said(&r.fail_on) {
            let text = r.fail_on.as_deref().unwrap_or_default();
            Some(Err(format!("the container said {text:?}")))
        } else if said(&r.expect) || (r.expect.is_none() && state == "CONTAINER_RUNNING") {
            Some(Ok(()))
        } else if exited {
            Some(Err("the container exited".to_string()))
        } else if Instant::now() >= deadline {
            Some(Err(format!(
                "not done within {}s (state {state})",
                r.timeout.as_secs()
            )))
        } else {
            None
        };
        if let Some(v) = verdict {
            println!("container_state={state}");
            if exited {
                println!("exit_code={code}");
            }
            println!("output={output}");
            return v;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The messages of a CRI log file (`<time> <stream> <F|P> <message>` lines), ` | `-joined.
fn messages(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.splitn(4, ' ').nth(3).unwrap_or(l))
        .collect();
    lines.join(" | ")
}

async fn container_state(c: &mut Cri, id: &str) -> Result<(String, i32), String> {
    let status = c
        .container_status(request(
            ContainerStatusRequest {
                container_id: id.to_string(),
                verbose: false,
            },
            None,
            CALL_TIMEOUT,
        ))
        .await
        .map_err(call_err("ContainerStatus"))?
        .into_inner()
        .status
        .ok_or("ContainerStatus: no status in the answer")?;
    let state = ContainerState::try_from(status.state)
        .map(|s| s.as_str_name().to_string())
        .unwrap_or_else(|_| format!("state {}", status.state));
    Ok((state, status.exit_code))
}

async fn stop_container(c: &mut Cri, id: &str) -> Result<(), String> {
    c.stop_container(request(
        StopContainerRequest {
            container_id: id.to_string(),
            timeout: 10,
        },
        None,
        CALL_TIMEOUT,
    ))
    .await
    .map_err(call_err("StopContainer"))?;
    let (state, code) = container_state(c, id).await?;
    println!("container_state={state}\nexit_code={code}");
    Ok(())
}

async fn remove_pod(c: &mut Cri, id: &str) -> Result<(), String> {
    c.stop_pod_sandbox(request(
        StopPodSandboxRequest {
            pod_sandbox_id: id.to_string(),
        },
        None,
        CALL_TIMEOUT,
    ))
    .await
    .map_err(call_err("StopPodSandbox"))?;
    c.remove_pod_sandbox(request(
        RemovePodSandboxRequest {
            pod_sandbox_id: id.to_string(),
        },
        None,
        CALL_TIMEOUT,
    ))
    .await
    .map_err(call_err("RemovePodSandbox"))?;
    Ok(())
}
