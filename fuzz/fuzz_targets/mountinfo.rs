//! `/proc/self/mountinfo`: the table and the lookups the volume checks make on it.
#![no_main]
use containerd_guard::host::mountinfo::{unescape, MountTable};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = unescape(&text);
    let Ok(table) = MountTable::parse(&text) else {
        return;
    };
    let _ = table.root();
    for path in [
        "/var/lib/containerd",
        "/",
        "/var/lib/containerd/io.containerd.content.v1",
    ] {
        let _ = table.at(Path::new(path));
        if let Some(e) = table.containing(Path::new(path)) {
            let _ = (
                e.is_read_only(),
                e.dev.is_anonymous(),
                table.by_id(e.parent_id),
            );
        }
    }
});
