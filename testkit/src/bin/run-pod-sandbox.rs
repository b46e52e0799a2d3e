//! The kubelet's view, for the demo and for the VM tests' kubelet stand-in (no crictl on
//! Debian 12, no kubelet here): once CRI answers `Status` (at most 60 s, as kubelet waits
//! for the runtime), CRI RunPodSandbox of a host-network pod with the configured
//! sandbox image, PodSandboxStatus until it says SANDBOX_READY, then StopPodSandbox and
//! RemovePodSandbox. Prints `key=value` lines (`result=ok|fail`, `pod_sandbox_id=`,
//! `state=`, `error=`) and exits 0 or 1.
//!
//!   cargo run --release --example run-pod-sandbox -- /path/to/containerd.sock [--keep]
//!
//! `--keep` leaves the sandbox running, as kubelet would (the VM stand-in does this).

use std::path::PathBuf;
use std::time::Duration;
use testkit::cri::{remove_pod, sandbox_state, start_host_network_pod, wait_for_cri};

/// How long the stand-in waits for CRI to answer before its pod, as kubelet waits for the
/// runtime to be ready: containerd's CRI plugin initialises after containerd is ready.
const CRI_WAIT: Duration = Duration::from_secs(60);

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(socket) = args.next().map(PathBuf::from) else {
        eprintln!("usage: run-pod-sandbox SOCKET [--keep]");
        std::process::exit(2);
    };
    let keep = args.next().as_deref() == Some("--keep");
    let rt = testkit::cri::stand_in_runtime();
    let pid = std::process::id();
    let ok = rt.block_on(async {
        if let Err(e) = wait_for_cri(&socket, CRI_WAIT).await {
            println!("result=fail\nerror=CRI Status: {}", e.replace('\n', " "));
            return false;
        }
        let id = match start_host_network_pod(
            &socket,
            &format!("standin-{pid}"),
            &format!("standin-uid-{pid}"),
            "standin",
        )
        .await
        {
            Ok(id) => id,
            Err(e) => {
                println!("result=fail\nerror=RunPodSandbox: {}", e.replace('\n', " "));
                return false;
            }
        };
        println!("pod_sandbox_id={id}");
        let state = sandbox_state(&socket, &id).await;
        let ready = matches!(&state, Ok(s) if s == "SANDBOX_READY");
        match state {
            Ok(s) => println!("state={s}"),
            Err(e) => println!("error=PodSandboxStatus: {e}"),
        }
        if !keep {
            if let Err(e) = remove_pod(&socket, &id).await {
                println!("error=StopPodSandbox/RemovePodSandbox: {e}");
                return false;
            }
            println!("removed=yes");
        }
        println!("result={}", if ready { "ok" } else { "fail" });
        ready
    });
    std::process::exit(if ok { 0 } else { 1 });
}
