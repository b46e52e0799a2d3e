//! containerd's own config file (versions 1, 2 and 3), as the guard reads it, and the
//! same input split at NUL bytes into files merged as containerd merges `imports`.
#![no_main]
use containerd_guard::config::Settings;
use containerd_guard::containerd::config::{parse, parse_merged, socket};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(config) = parse(text) {
        let _ = socket(&Settings::default(), &config);
    }
    let files: Vec<&str> = text.split('\0').collect();
    let _ = parse_merged(&files);
});
