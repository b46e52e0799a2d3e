//! cloud-init configs (`guard lint`: the image's `/etc/cloud` and `--user-data`): the
//! bounded event walk of the YAML, never expanding an alias, nested at most 64 deep.
#![no_main]
use containerd_guard::host::cloud_init::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(c) = parse(&text) {
        let _ = c.mounts.iter().map(|(f, l)| f.len() + l).sum::<usize>();
    }
});
