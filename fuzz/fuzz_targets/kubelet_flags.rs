//! kubelet's flags from its unit: the unit file's assignments, `Environment=` and
//! `EnvironmentFile=` variables expanded into `ExecStart=`, each flag with its place. The
//! input is the unit; every environment file it names reads as the same bytes.
#![no_main]
use containerd_guard::host::kubelet::flags::from_unit;
use containerd_guard::host::units::{parse, Unit};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let unit = Unit {
        name: "kubelet.service".to_string(),
        fragment: None,
        masked: false,
        dropins: Vec::new(),
        masked_dropins: Vec::new(),
        assignments: parse(&text, Path::new("/etc/systemd/system/kubelet.service")),
    };
    let flags = from_unit(&unit, |_| Some(text.to_string()));
    for f in &flags.flags {
        assert!(!f.at.is_empty(), "{f:?} has no place");
    }
    let _ = flags.get("pod-infra-container-image");
});
