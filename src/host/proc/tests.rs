use super::*;

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn flags_are_parsed_as_gos_flag_package_does() {
    let root = |v: &[&str]| flag(&args(v), "--root", None);
    let config = |v: &[&str]| flag(&args(v), "--config", Some("-c"));
    let address = |v: &[&str]| flag(&args(v), "--address", Some("-a"));
    assert_eq!(root(&["containerd", "--root", "/x"]), Some("/x".into()));
    assert_eq!(root(&["containerd", "--root=/y"]), Some("/y".into()));
    assert_eq!(root(&["containerd", "-root", "/z"]), Some("/z".into()));
    assert_eq!(root(&["containerd"]), None);
    assert_eq!(
        config(&["containerd", "-c", "/a.toml"]),
        Some("/a.toml".into())
    );
    assert_eq!(
        config(&["containerd", "--config=/d.toml"]),
        Some("/d.toml".into())
    );
    assert_eq!(
        config(&["containerd", "--config", "/e.toml"]),
        Some("/e.toml".into())
    );
    // The last one wins.
    assert_eq!(
        config(&["containerd", "-c", "/1", "--config", "/2"]),
        Some("/2".into())
    );
    // Go has no attached short values: `-c/b.toml` is a flag named "c/b.toml".
    assert_eq!(config(&["containerd", "-c/b.toml"]), None);
    // A value flag takes the next argument even when it looks like a flag.
    assert_eq!(
        address(&["containerd", "-l", "debug", "-a", "/s.sock"]),
        Some("/s.sock".into())
    );
    assert_eq!(root(&["containerd", "--state", "--root", "x"]), None);
    // Flags end at the first operand (a subcommand) and at `--`.
    assert_eq!(root(&["containerd", "config", "--root", "/w"]), None);
    assert_eq!(root(&["containerd", "--", "--root", "/w"]), None);
    // A boolean flag takes no value.
    assert_eq!(
        root(&["containerd", "--help", "--root", "/v"]),
        Some("/v".into())
    );
}

#[test]
fn the_open_files_pass_reads_a_live_process_to_the_end() {
    let file = tempfile::NamedTempFile::new().unwrap();
    let held = std::fs::File::open(file.path()).unwrap();
    let me = std::process::id() as i32;
    let progress = open_files_in_background(&Host::live(), &[me, i32::MAX]);
    let mut pass = OpenFilesPass::default();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !pass.take(&progress) {
        assert!(
            std::time::Instant::now() < deadline,
            "the pass did not finish"
        );
        std::thread::yield_now();
    }
    assert_eq!(pass.stuck, None, "a finished pass is stuck nowhere");
    let path = file.path().display().to_string();
    assert!(
        pass.read[&me].files.iter().any(|(p, _, _)| *p == path),
        "{path} not among {:?}",
        pass.read[&me].files
    );
    assert_eq!(
        pass.read[&i32::MAX],
        OpenFiles::default(),
        "no such process"
    );
    drop(held);
}

#[test]
fn bounded_reads_refuse_fifos_devices_symlinks_and_oversized_files() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let refused = |p: &Path, links| match read_bounded(p, 16, links) {
        Err(ReadError::Refused(why)) => why,
        other => panic!("{}: {other:?}", p.display()),
    };
    assert!(refused(&fifo, Links::Follow).contains("a FIFO"));
    assert!(refused(Path::new("/dev/zero"), Links::Follow).contains("a character device"));
    let big = tmp.path().join("big");
    std::fs::write(&big, [b'x'; 17]).unwrap();
    assert!(refused(&big, Links::Follow).contains("more than 16 bytes"));
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&big, &link).unwrap();
    assert!(refused(&link, Links::Refuse).contains("a symlink"));
    std::fs::write(&big, b"ok").unwrap();
    assert_eq!(read_bounded(&link, 16, Links::Follow).unwrap(), b"ok");
    // A /proc file reports size 0: the cap holds on what is read.
    let cmdline = Path::new("/proc/self/cmdline");
    assert!(refused(cmdline, Links::Refuse).contains("more than 16 bytes"));
    let gone = read_bounded(&tmp.path().join("gone"), 16, Links::Refuse).unwrap_err();
    assert!(gone.is_not_found(), "{gone:?}");
}

#[test]
fn stat_fields_are_counted_after_the_command_name() {
    let stat = "4242 (we(ird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 \
                987654 1000 10";
    assert_eq!(parse_stat(stat), Some((1, 987654)));
    assert_eq!(parse_stat("garbage"), None);
}

#[test]
fn locks_name_the_taker_and_the_file_and_skip_waiters() {
    let text = "1: FLOCK  ADVISORY  WRITE 812 fe:01:1048602 0 EOF\n\
                1: -> FLOCK  ADVISORY  WRITE 900 fe:01:1048602 0 EOF\n\
                2: POSIX  ADVISORY  READ 77 08:11:33 0 EOF\n";
    let locks = parse_locks(text);
    assert_eq!(locks.len(), 2);
    assert_eq!(
        locks[0],
        FileLock {
            kind: "FLOCK".into(),
            access: "WRITE".into(),
            pid: 812,
            major: 0xfe,
            minor: 1,
            inode: 1048602
        }
    );
    assert_eq!((locks[1].major, locks[1].minor), (8, 0x11));
}

#[test]
fn listeners_are_decoded_from_the_kernel_table() {
    let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
               0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 31337 1 0\n\
               1: 0100007F:1F91 0100007F:D431 01 00000000:00000000 00:00000000 00000000     0        0 31338 1 0\n";
    let l = parse_tcp_listeners(tcp);
    assert_eq!(
        l,
        vec![Listener {
            address: "127.0.0.1:8080".into(),
            inode: 31337
        }]
    );
    let tcp6 = "header\n 0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 0:0 0:0 0 0 0 4444 1\n";
    assert_eq!(parse_tcp_listeners(tcp6)[0].address, "[::1]:80");
}

#[test]
fn a_listener_address_with_a_multibyte_character_is_skipped_not_a_panic() {
    // Found by the proc_files fuzz target: slicing "0000000\u{fffd}" at byte 8 fell
    // inside the character and panicked.
    let tcp = "h\n 0: 0000000\u{fffd}:0050 0 0A 0 0 0 0 0 4444 1\n";
    assert_eq!(parse_tcp_listeners(tcp), vec![]);
    let tcp = "h\n 0: 0100007F:0050 0 0A 0 0 0 0 0 4444 1\n";
    assert_eq!(parse_tcp_listeners(tcp)[0].address, "127.0.0.1:80");
}
