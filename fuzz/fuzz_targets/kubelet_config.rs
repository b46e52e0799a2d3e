//! kubelet's configuration file (`volume.eviction`): the event walk of the YAML, never
//! expanding an alias, and the thresholds read from it.
#![no_main]
use containerd_guard::host::kubelet::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(e) = parse(&text) {
        let _ = e.hard_threshold("imagefs.available");
        let _ = e.soft_threshold("imagefs.inodesFree");
    }
});
