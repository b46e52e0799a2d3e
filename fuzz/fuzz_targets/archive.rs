//! Image archives (`[sandbox] archives`): the tar layer, then the OCI or docker structure
//! and digests, as the guard verifies an archive before importing it.
#![no_main]
use containerd_guard::containerd::archive::{parse_tar, verify};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(files) = parse_tar(data) else {
        return;
    };
    let _ = verify(&files, "registry.k8s.io/pause:3.10", "linux", "amd64");
});
