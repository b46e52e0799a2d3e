//! Guard config fragments (`config.d/*.toml`): applied over the defaults as `guard` loads
//! them (an error finds its key's line and column in the text), then described as `guard
//! config` prints them; and a device spec (`LABEL=...`).
#![no_main]
use containerd_guard::config::{apply_fragment, describe, DeviceSpec, Inherited, Loaded, Settings};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The loader reads fragments with read_to_string: non-UTF-8 never reaches the parser.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut settings = Settings::default();
    if apply_fragment(&mut settings, text).is_ok() {
        let loaded = Loaded {
            settings,
            sources: Default::default(),
            files: Vec::new(),
        };
        let inherited = Inherited {
            containerd: Err("not read by the fuzzer".into()),
            kubelet_config: None,
        };
        let _ = describe(&loaded, &inherited);
    }
    let _ = DeviceSpec::parse(text);
});
