//! containerd processes in `/proc`, found by executable name, by root directory and by the
//! root they use. Everything here is read from processes the guard does not own, so every
//! read is bounded, never blocks and opens nothing but regular files ([`read_bounded`]).

use crate::host::Host;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

mod open_files;
pub use open_files::*;

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
/// regular file ([`open_regular`]). Errors name the path and why; a file over the cap is an
/// error, not a truncated read.
pub fn read_bounded(path: &Path, cap: u64, links: Links) -> Result<Vec<u8>, ReadError> {
    let (file, meta) = open_regular(path, links)?;
    if meta.len() > cap {
        return Err(ReadError::Refused(too_big(path, cap)));
    }
    // `/proc` files report size 0: the cap is enforced on what is read, too.
    match super::read_at_most(file, cap) {
        Ok(Some(data)) => Ok(data),
        Ok(None) => Err(ReadError::Refused(too_big(path, cap))),
        Err(e) => Err(ReadError::Io(format!("{}: {e}", path.display()), e.kind())),
    }
}

/// Opens a file someone else may control for reading, never blocking, and only a regular
/// file. The path is first opened with `O_PATH` (which never calls a device's `open`:
/// `/dev/watchdog` is not armed, a FIFO does not wait for a writer), checked with `fstat`,
/// and only then reopened for reading through that same descriptor.
pub fn open_regular(
    path: &Path,
    links: Links,
) -> Result<(std::fs::File, std::fs::Metadata), ReadError> {
    let mut flags = nix::libc::O_PATH | nix::libc::O_CLOEXEC;
    if links == Links::Refuse {
        flags |= nix::libc::O_NOFOLLOW;
    }
    let io = |e: std::io::Error| ReadError::Io(format!("{}: {e}", path.display()), e.kind());
    let handle = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
        .map_err(io)?;
    let meta = handle.metadata().map_err(io)?;
    if !meta.file_type().is_file() {
        return Err(ReadError::Refused(format!(
            "{} is not a regular file ({}): not read",
            path.display(),
            kind_of(&meta)
        )));
    }
    use std::os::fd::AsRawFd;
    let reopened = Path::new("/proc/self/fd").join(handle.as_raw_fd().to_string());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(&reopened)
        .map_err(io)?;
    Ok((file, meta))
}

/// Why [`read_bounded`] or [`open_regular`] gave nothing.
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

#[cfg(test)]
mod tests;
