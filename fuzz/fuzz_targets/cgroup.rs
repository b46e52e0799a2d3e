//! The cgroup files the hygiene checks read: `/proc/PID/cgroup` (kubelet's container
//! cgroups, both drivers, v1 and v2) and `cgroup.procs`.
#![no_main]
use containerd_guard::host::cgroup::{container_cgroup_of, parse_container_cgroup, parse_procs};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = container_cgroup_of(text);
    let _ = parse_container_cgroup(text);
    let _ = parse_procs(text);
});
