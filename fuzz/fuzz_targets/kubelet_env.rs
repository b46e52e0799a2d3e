//! kubelet's environment files (`/etc/default/kubelet`, kubeadm's `kubeadm-flags.env`),
//! read as systemd reads them, and the `ExecStart=` line expanded with what they set.
#![no_main]
use containerd_guard::host::kubelet::env::{command_line, parse_file};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let vars = parse_file(&text).into_iter().collect();
    let _ = command_line(&text, &vars);
});
