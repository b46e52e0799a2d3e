//! containerd processes in `/proc`, found by executable name, by root directory and by the
//! root they use. Everything here is read from processes the guard does not own, so every
//! read is bounded, never blocks and opens nothing but regular files ([`read_bounded`]).

use crate::host::Host;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Caps on what is read from a process the guard does not own (the kernel's own limits
/// where there is one: `comm` is 16 bytes, a `stat` line well under 1 KiB).
pub const COMM_CAP: u64 = 64;
pub const CMDLINE_CAP: u64 = 128 << 10;
pub const STAT_CAP: u64 = 4 << 10;
pub const CGROUP_CAP: u64 = 64 << 10;
/// `/proc/locks` of a busy node: about 70 bytes a lock, some 60,000 locks.
pub const LOCKS_CAP: u64 = 4 << 20;

/// Whether the last component of a path may be a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// `/proc` files and anything else where a symlink means someone planted it.
    Refuse,
    /// A config path: containerd follows links, and so does the guard.
    Follow,
}

/// Reads a file someone else may control: at most `cap` bytes, never blocking, and only a
/// regular file. The path is first opened with `O_PATH` (which never calls a device's
/// `open`: `/dev/watchdog` is not armed, a FIFO does not wait for a writer), checked with
/// `fstat`, and only then reopened for reading through that same descriptor. Errors name
/// the path and why; a file over the cap is an error, not a truncated read.
pub fn read_bounded(path: &Path, cap: u64, links: Links) -> Result<Vec<u8>, ReadError> {
    let mut flags = nix::libc::O_PATH | nix::libc::O_CLOEXEC;
    if links == Links::Refuse {
        flags |= nix::libc::O_NOFOLLOW;
    }
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(|e| ReadError::Io(format!("{}: {e}", path.display()), e.kind()))?;
    let meta = handle
        .metadata()
        .map_err(|e| ReadError::Io(format!("{}: {e}", path.display()), e.kind()))?;
    if !meta.file_type().is_file() {
        return Err(ReadError::Refused(format!(
            "{} is not a regular file ({}): not read",
            path.display(),
            kind_of(&meta)
        )));
    }
    if meta.len() > cap {
        return Err(ReadError::Refused(too_big(path, cap)));
    }
    use std::os::fd::AsRawFd;
    let reopened = Path::new("/proc/self/fd").join(handle.as_raw_fd().to_string());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(&reopened)
        .map_err(|e| ReadError::Io(format!("{}: {e}", path.display()), e.kind()))?;
    // `/proc` files report size 0: the cap is enforced on what is read, too.
    match super::read_at_most(file, cap) {
        Ok(Some(data)) => Ok(data),
        Ok(None) => Err(ReadError::Refused(too_big(path, cap))),
        Err(e) => Err(ReadError::Io(format!("{}: {e}", path.display()), e.kind())),
    }
}

/// Why [`read_bounded`] gave nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Not a regular file, a symlink where none is expected, or over the cap: nothing a
    /// real containerd (or the kernel) would hand out; reading it could hang or exhaust.
    Refused(String),
    /// The open or read failed (gone, not permitted).
    Io(String, std::io::ErrorKind),
}

impl ReadError {
    pub fn text(&self) -> &str {
        match self {
            ReadError::Refused(t) | ReadError::Io(t, _) => t,
        }
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, ReadError::Io(_, std::io::ErrorKind::NotFound))
    }
}

fn too_big(path: &Path, cap: u64) -> String {
    format!(
        "{} holds more than {cap} bytes: not read (the guard reads at most that)",
        path.display()
    )
}

fn kind_of(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    match () {
        _ if t.is_dir() => "a directory",
        _ if t.is_symlink() => "a symlink",
        _ if t.is_fifo() => "a FIFO",
        _ if t.is_char_device() => "a character device",
        _ if t.is_block_device() => "a block device",
        _ if t.is_socket() => "a socket",
        _ => "not a file",
    }
}

/// A `/proc/PID/NAME` file as text, bounded ([`read_bounded`], no symlink).
pub fn read_proc_file(host: &Host, pid: i32, name: &str, cap: u64) -> Result<String, ReadError> {
    let path = host.proc(format!("{pid}/{name}"));
    read_bounded(&path, cap, Links::Refuse).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// `/proc/locks`, bounded: `None` when it cannot be read or is over [`LOCKS_CAP`].
pub fn read_locks(host: &Host) -> Vec<FileLock> {
    read_bounded(&host.proc("locks"), LOCKS_CAP, Links::Refuse)
        .map(|b| parse_locks(&String::from_utf8_lossy(&b)))
        .unwrap_or_default()
}

/// `/proc/PID/cmdline`: NUL-separated arguments, empty ones dropped.
pub fn cmdline_args(raw: &[u8]) -> Vec<String> {
    raw.split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// containerd's global flags that take a value (Go's `flag` package, through urfave/cli):
/// a flag not listed here is a boolean and takes none.
const VALUE_FLAGS: &[&str] = &[
    "config",
    "c",
    "log-level",
    "l",
    "address",
    "a",
    "root",
    "state",
];

/// The value of a flag as containerd parses it (Go's `flag` package): `-name VALUE`,
/// `--name VALUE`, `-name=VALUE` or `--name=VALUE`, the last one winning; parsing stops at
/// the first argument that is not a flag, and at `--`. `short` is the one-letter alias.
pub fn flag(args: &[String], long: &str, short: Option<&str>) -> Option<String> {
    let names = [
        Some(long.trim_start_matches('-')),
        short.map(|s| s.trim_start_matches('-')),
    ];
    let mut found = None;
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        let Some(body) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) else {
            break; // a subcommand or operand: flags end here
        };
        if body.is_empty() || a == "--" {
            break;
        }
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        let value = match inline {
            Some(v) => Some(v),
            None if VALUE_FLAGS.contains(&name) => it.next().cloned(),
            None => None,
        };
        if names.contains(&Some(name)) {
            found = value;
        }
    }
    found
}

/// One process as `/proc/PID` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: i32,
    pub ppid: i32,
    pub comm: String,
    pub cmdline: String,
    /// Start time in clock ticks since boot (`stat` field 22): with the pid, it names one
    /// process for good (a reused pid has another start time).
    pub start_ticks: u64,
    /// `/proc/PID/cgroup`.
    pub cgroup: String,
}

/// `(ppid, start_ticks)` from a `/proc/PID/stat` line. The command name (field 2) may hold
/// spaces and parentheses, so fields are counted after its last `)`.
pub fn parse_stat(stat: &str) -> Option<(i32, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state): ppid is field 4, starttime field 22.
    Some((fields.get(1)?.parse().ok()?, fields.get(19)?.parse().ok()?))
}

/// Reads one process, bounded ([`read_bounded`]); `None` when it is gone (or not readable).
pub fn read_proc(host: &Host, pid: i32) -> Option<ProcInfo> {
    let read = |name, cap| read_proc_file(host, pid, name, cap);
    let (ppid, start_ticks) = parse_stat(&read("stat", STAT_CAP).ok()?)?;
    let raw = read_bounded(
        &host.proc(format!("{pid}/cmdline")),
        CMDLINE_CAP,
        Links::Refuse,
    )
    .unwrap_or_default();
    Some(ProcInfo {
        pid,
        ppid,
        comm: read("comm", COMM_CAP)
            .unwrap_or_default()
            .trim()
            .to_string(),
        cmdline: cmdline_args(&raw).join(" "),
        start_ticks,
        cgroup: read("cgroup", CGROUP_CAP).ok()?,
    })
}

/// Every pid in `/proc`.
pub fn pids(host: &Host) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir(host.path("/proc")) else {
        return Vec::new();
    };
    let mut out: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
        .collect();
    out.sort_unstable();
    out
}

/// Clock ticks per second for `start_ticks` (sysconf `_SC_CLK_TCK`; 100 on Linux).
/// Time since boot, from `/proc/uptime` (read bounded; `None` when unreadable).
pub fn uptime(host: &Host) -> Option<std::time::Duration> {
    let text = read_bounded(&host.proc("uptime"), 256, Links::Refuse).ok()?;
    let secs: f64 = std::str::from_utf8(&text)
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    std::time::Duration::try_from_secs_f64(secs).ok()
}

pub fn ticks_per_second() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|t| *t > 0)
        .map_or(100, |t| t as u64)
}

/// A lock from `/proc/locks`: who took it and on which file (device and inode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileLock {
    pub kind: String,
    pub access: String,
    pub pid: i32,
    pub major: u32,
    pub minor: u32,
    pub inode: u64,
}

/// Parses `/proc/locks` (`1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF`); waiters
/// (`1: -> FLOCK ...`) are skipped: they hold nothing.
pub fn parse_locks(text: &str) -> Vec<FileLock> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.get(1) == Some(&"->") {
                return None;
            }
            let dev: Vec<&str> = f.get(5)?.split(':').collect();
            Some(FileLock {
                kind: f.get(1)?.to_string(),
                access: f.get(3)?.to_string(),
                pid: f.get(4)?.parse().ok()?,
                major: u32::from_str_radix(dev.first()?, 16).ok()?,
                minor: u32::from_str_radix(dev.get(1)?, 16).ok()?,
                inode: dev.get(2)?.parse().ok()?,
            })
        })
        .collect()
}

/// A listening socket from `/proc/PID/net/tcp{,6}`: its address and socket inode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub address: String,
    pub inode: u64,
}

/// The LISTEN (`0A`) entries of a `/proc/net/tcp` or `tcp6` table, addresses decoded.
pub fn parse_tcp_listeners(text: &str) -> Vec<Listener> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.get(3) != Some(&"0A") {
                return None;
            }
            let (ip, port) = f.get(1)?.split_once(':')?;
            let port = u16::from_str_radix(port, 16).ok()?;
            Some(Listener {
                address: format!("{}:{port}", decode_ip(ip)?),
                inode: f.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

/// `/proc/net/tcp` prints addresses as little-endian 32-bit words in hex.
fn decode_ip(hex: &str) -> Option<String> {
    // Sliced by byte offsets below: anything but ASCII hex is no address (and a multi-byte
    // character would put a slice inside it).
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let words: Vec<u32> = (0..hex.len() / 8)
        .map(|i| u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16).map(u32::from_be))
        .collect::<Result<_, _>>()
        .ok()?;
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
    match bytes.len() {
        4 => Some(std::net::Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).to_string()),
        16 => {
            let a: [u8; 16] = bytes.try_into().ok()?;
            Some(format!("[{}]", std::net::Ipv6Addr::from(a)))
        }
        _ => None,
    }
}

/// What one process holds open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenFiles {
    /// `(path, dev, inode)` of each fd that is not a socket.
    pub files: Vec<(String, u64, u64)>,
    /// The inodes of its sockets.
    pub sockets: Vec<u64>,
}

/// The fd a pass was asking about: `stat` of its target had not returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StuckAt {
    pub pid: i32,
    pub fd: String,
    pub target: String,
}

/// What the helper thread of [`open_files_in_background`] reports, in order.
#[derive(Debug)]
pub enum Progress {
    /// About to `stat` this fd's target.
    Asking(StuckAt),
    Read(i32, OpenFiles),
}

/// One pass over some processes' open files, as far as it got.
#[derive(Debug, Default)]
pub struct OpenFilesPass {
    pub read: std::collections::BTreeMap<i32, OpenFiles>,
    /// Where the pass stood when last heard from, while a `stat` was outstanding.
    pub stuck: Option<StuckAt>,
}

impl OpenFilesPass {
    /// Takes what the thread has reported so far; true once the pass is complete.
    pub fn take(&mut self, from: &std::sync::mpsc::Receiver<Progress>) -> bool {
        use std::sync::mpsc::TryRecvError;
        loop {
            match from.try_recv() {
                Ok(Progress::Asking(at)) => self.stuck = Some(at),
                Ok(Progress::Read(pid, open)) => {
                    self.stuck = None;
                    self.read.insert(pid, open);
                }
                Err(TryRecvError::Empty) => return false,
                Err(TryRecvError::Disconnected) => return true,
            }
        }
    }
}

/// Reads what each of `pids` holds open on one helper thread, reporting as it goes. `stat`
/// of an fd's target asks its filesystem, which may never answer (a dead hard-mounted NFS
/// server, a hung FUSE daemon): the caller waits with its own deadline and, when it
/// passes, leaves the thread behind (a blocked `stat` cannot be cancelled; the thread
/// ends with the process).
pub fn open_files_in_background(host: &Host, pids: &[i32]) -> std::sync::mpsc::Receiver<Progress> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (host, pids) = (host.clone(), pids.to_vec());
    std::thread::spawn(move || {
        for pid in pids {
            let open = open_files(&host, pid, &mut |at| {
                let _ = tx.send(Progress::Asking(at));
            });
            if tx.send(Progress::Read(pid, open)).is_err() {
                return; // nobody waits any more
            }
        }
    });
    rx
}

/// What a process holds open. `asking` is told about each `stat` before it is made.
fn open_files(host: &Host, pid: i32, asking: &mut dyn FnMut(StuckAt)) -> OpenFiles {
    use std::os::unix::fs::MetadataExt;
    let mut open = OpenFiles::default();
    let Ok(entries) = std::fs::read_dir(host.proc(format!("{pid}/fd"))) else {
        return open;
    };
    for e in entries.flatten() {
        let Ok(link) = std::fs::read_link(e.path()) else {
            continue;
        };
        let link = link.to_string_lossy().into_owned();
        if let Some(inode) = link
            .strip_prefix("socket:[")
            .and_then(|s| s.strip_suffix(']'))
        {
            open.sockets.extend(inode.parse::<u64>().ok());
            continue;
        }
        asking(StuckAt {
            pid,
            fd: e.file_name().to_string_lossy().into_owned(),
            target: link.clone(),
        });
        if let Ok(m) = std::fs::metadata(e.path()) {
            open.files.push((link, m.dev(), m.ino()));
        }
    }
    open
}

#[cfg(test)]
mod tests {
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
}
