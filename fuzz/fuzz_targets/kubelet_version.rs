//! kubelet's version as `guard lint` reads it from a node image without running anything
//! of it: dpkg's status file (the kubelet package's record) and the version string in the
//! binary's build information, scanned in bounded chunks.
#![no_main]
use containerd_guard::host::kubelet::version::{from_binary, from_dpkg_status, Version};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = from_dpkg_status(&text);
    let _ = Version::parse(&text);
    // (a cap below the input's size too: the scan must stop there, not past it)
    let cap = (data.len() / 2) as u64;
    let _ = from_binary(data, cap);
    let _ = from_binary(data, u64::MAX);
});
