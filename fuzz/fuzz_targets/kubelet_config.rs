//! kubelet's configuration file (`volume.eviction`, kubelet's contract with containerd):
//! the event walk of the YAML, never expanding an alias, the thresholds and the plain
//! settings read from it.
#![no_main]
use containerd_guard::host::kubelet::yaml::parse_file;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(f) = parse_file(&text) {
        let _ = f.eviction.hard_threshold("imagefs.available");
        let _ = f.eviction.soft_threshold("imagefs.inodesFree");
        assert!(f.plain.values().all(|l| l.line >= 1));
    }
});
