//! containerd processes in `/proc`, found by executable name and by the root they use.

use crate::host::Host;
use std::path::Path;

/// containerd processes that use `root`: by executable name *and* root (its `--root`
/// flag, or the `root` of the config file it was started with).
pub fn processes_for_root(host: &Host, root: &Path) -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir(host.path("/proc")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(comm) = std::fs::read_to_string(entry.path().join("comm")) else {
            continue;
        };
        if comm.trim() != "containerd" {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args = cmdline_args(&raw);
        if uses_root(host, pid, &args, root) {
            found.push((pid, args.join(" ")));
        }
    }
    found.sort();
    found
}

/// Whether a containerd with this command line uses `root`. `--root` decides; else the
/// root in the file given with `--config`/`-c` (read through the process's own root and
/// working directory), or in containerd's default config file when none is given. When
/// its config cannot be read, the answer is yes: fail closed rather than miss a runtime.
fn uses_root(host: &Host, pid: i32, args: &[String], root: &Path) -> bool {
    if let Some(r) = flag(args, "--root", None) {
        return Path::new(&r) == root;
    }
    let config = flag(args, "--config", Some("-c"))
        .unwrap_or_else(|| crate::containerd::config::DEFAULT_CONFIG.to_string());
    let config = Path::new(&config);
    let seen_by_process = if config.is_absolute() {
        host.proc(format!("{pid}/root"))
            .join(config.strip_prefix("/").unwrap_or(config))
    } else {
        host.proc(format!("{pid}/cwd")).join(config)
    };
    let file = if seen_by_process.exists() || !config.is_absolute() {
        seen_by_process
    } else {
        host.path(config)
    };
    match crate::containerd::config::load(&file) {
        Ok(c) => c.root == root,
        Err(_) => true,
    }
}

/// `/proc/PID/cmdline`: NUL-separated arguments, empty ones dropped.
pub fn cmdline_args(raw: &[u8]) -> Vec<String> {
    raw.split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The value of `--name VALUE`, `--name=VALUE` or the short form `-c VALUE`/`-cVALUE`.
pub fn flag(args: &[String], long: &str, short: Option<&str>) -> Option<String> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
            return Some(v.to_string());
        }
        if a == long || short == Some(a.as_str()) {
            return it.next().cloned();
        }
        if let Some(v) = short
            .and_then(|s| a.strip_prefix(s))
            .filter(|v| !v.is_empty())
        {
            return Some(v.to_string());
        }
    }
    None
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

/// Reads one process; `None` when it is gone (or not readable).
pub fn read_proc(host: &Host, pid: i32) -> Option<ProcInfo> {
    let dir = host.proc(pid.to_string());
    let (ppid, start_ticks) = parse_stat(&std::fs::read_to_string(dir.join("stat")).ok()?)?;
    let raw = std::fs::read(dir.join("cmdline")).unwrap_or_default();
    let cmdline = cmdline_args(&raw);
    Some(ProcInfo {
        pid,
        ppid,
        comm: std::fs::read_to_string(dir.join("comm"))
            .unwrap_or_default()
            .trim()
            .to_string(),
        cmdline: cmdline.join(" "),
        start_ticks,
        cgroup: std::fs::read_to_string(dir.join("cgroup")).ok()?,
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

    #[test]
    fn root_flag_forms() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let root = |v: &[&str]| flag(&a(v), "--root", None);
        assert_eq!(root(&["containerd", "--root", "/x"]), Some("/x".into()));
        assert_eq!(root(&["containerd", "--root=/y"]), Some("/y".into()));
        assert_eq!(root(&["containerd"]), None);
        let config = |v: &[&str]| flag(&a(v), "--config", Some("-c"));
        assert_eq!(
            config(&["containerd", "-c", "/a.toml"]),
            Some("/a.toml".into())
        );
        assert_eq!(config(&["containerd", "-c/b.toml"]), Some("/b.toml".into()));
        assert_eq!(
            config(&["containerd", "--config=/d.toml"]),
            Some("/d.toml".into())
        );
        assert_eq!(
            config(&["containerd", "--config", "/e.toml"]),
            Some("/e.toml".into())
        );
    }

    #[test]
    fn fixture_proc_tree_finds_only_matching_containerd() {
        let tmp = tempfile::tempdir().unwrap();
        let host = Host::at(tmp.path());
        for (pid, comm, cmdline) in [
            ("100", "containerd\n", "/usr/bin/containerd\0"),
            ("200", "containerd\n", "containerd\0--root\0/other\0"),
            ("300", "containerd-shim\n", "containerd-shim-runc-v2\0"),
            // Its own config names another root: not ours (e.g. a test's containerd).
            ("400", "containerd\n", "containerd\0--config\0/other.toml\0"),
            // Its own config names our root.
            ("500", "containerd\n", "containerd\0-c\0/ours.toml\0"),
            // Its config cannot be read: counted, fail closed.
            ("600", "containerd\n", "containerd\0--config=/broken.toml\0"),
            // No flags: containerd reads /etc/containerd/config.toml, here another root.
            ("700", "containerd\n", "containerd\0"),
        ] {
            let d = host.path(format!("/proc/{pid}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("comm"), comm).unwrap();
            std::fs::write(d.join("cmdline"), cmdline).unwrap();
        }
        std::fs::write(host.path("/other.toml"), "version = 2\nroot = \"/srv/x\"\n").unwrap();
        std::fs::write(host.path("/ours.toml"), "version = 2\n").unwrap();
        std::fs::write(host.path("/broken.toml"), "version = 2\nroot = 5\n").unwrap();
        let found: Vec<i32> = processes_for_root(&host, Path::new("/var/lib/containerd"))
            .into_iter()
            .map(|(pid, _)| pid)
            .collect();
        assert_eq!(found, vec![100, 500, 600, 700]);
        std::fs::create_dir_all(host.path("/etc/containerd")).unwrap();
        std::fs::write(
            host.path("/etc/containerd/config.toml"),
            "version = 2\nroot = \"/srv/y\"\n",
        )
        .unwrap();
        let found: Vec<i32> = processes_for_root(&host, Path::new("/var/lib/containerd"))
            .into_iter()
            .map(|(pid, _)| pid)
            .collect();
        assert_eq!(
            found,
            vec![500, 600],
            "flagless containerd uses /etc/containerd/config.toml"
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
