//! The `/proc` files the guard and the hygiene checks read: `PID/stat`, `PID/cmdline` (and
//! the containerd flags in it), `locks`, `net/tcp` and `net/tcp6`. Each parser gets the
//! whole input.
#![no_main]
use containerd_guard::host::proc::{
    cmdline_args, flag, parse_locks, parse_stat, parse_tcp_listeners,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let args = cmdline_args(data);
    let _ = flag(&args, "--root", None);
    let _ = flag(&args, "--config", Some("-c"));
    // The others are read with read_to_string: non-UTF-8 is an error before parsing.
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_stat(text);
    let _ = parse_locks(text);
    let _ = parse_tcp_listeners(text);
});
