//! The kubelet's view, for the demo and the VM tests' kubelet stand-in (no crictl on
//! Debian 12, no kubelet here): CRI RunPodSandbox of a host-network pod with the configured
//! sandbox image, then StopPodSandbox and RemovePodSandbox. Prints the sandbox ID or CRI's
//! error and exits 0 or 1.
//!
//!   cargo run --release --example run-pod-sandbox -- /path/to/containerd.sock [--keep]
//!
//! `--keep` leaves the sandbox running (the VM stand-in keeps its pod, as kubelet would).

use containerd_guard::runtime::pod::{remove_pod, start_host_network_pod};
use std::path::PathBuf;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(socket) = args.next().map(PathBuf::from) else {
        eprintln!("usage: run-pod-sandbox SOCKET [--keep]");
        std::process::exit(2);
    };
    let keep = args.next().as_deref() == Some("--keep");
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("run-pod-sandbox: cannot start the I/O runtime: {e}");
            std::process::exit(1);
        }
    };
    let pid = std::process::id();
    let result = rt.block_on(async {
        let id = start_host_network_pod(
            &socket,
            &format!("standin-{pid}"),
            &format!("standin-uid-{pid}"),
            "standin",
        )
        .await?;
        if !keep {
            remove_pod(&socket, &id).await?;
        }
        Ok::<_, String>(id)
    });
    match result {
        Ok(id) if keep => println!("RunPodSandbox: ok (sandbox {id}, left running)"),
        Ok(id) => println!("RunPodSandbox: ok (sandbox {id}, stopped and removed again)"),
        Err(e) => {
            println!("RunPodSandbox FAILED: {e}");
            std::process::exit(1);
        }
    }
}
