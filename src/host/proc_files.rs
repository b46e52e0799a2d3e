//! One small kernel file of every process (`/proc/PID/cgroup`, `/proc/PID/comm`), read
//! cheaply: a pass over `/proc` costs three system calls per process (`openat`, `read`,
//! `close`), where [`read_bounded`]'s careful open costs seven. On a node with 250 pods
//! (about 800 processes) such a pass is most of what `guard verify` spends on them
//! (docs/performance.md).

use super::proc::{read_bounded, Links};
use super::Host;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Reads one named file of many processes, at most `cap` bytes each.
pub struct ProcFiles {
    name: &'static str,
    /// The host's `/proc` is the kernel's; else (a fixture tree) every file is read with
    /// [`read_bounded`], which refuses anything but a regular file.
    procfs: bool,
    /// One more byte than the cap: a read that fills it is over the cap.
    buf: Vec<u8>,
}

impl ProcFiles {
    pub fn new(host: &Host, name: &'static str, cap: u64) -> ProcFiles {
        let procfs = nix::sys::statfs::statfs(&host.proc(""))
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::PROC_SUPER_MAGIC);
        ProcFiles {
            name,
            procfs,
            buf: vec![0; cap as usize + 1],
        }
    }

    /// `/proc/PID/<name>` as text; `None` when it is gone, unreadable or over the cap.
    pub fn read(&mut self, host: &Host, pid: i32) -> Option<String> {
        let path = host.proc(format!("{pid}/{}", self.name));
        let cap = self.buf.len() as u64 - 1;
        match self.procfs {
            true => read_once(&path, &mut self.buf),
            false => read_bounded(&path, cap, Links::Refuse)
                .ok()
                .map(|b| String::from_utf8_lossy(&b).into_owned()),
        }
    }
}

/// A procfs file with one `read`: a seq_file made by one show call (as these are) hands
/// out its whole text in one read when it fits, so a full buffer means over the cap and
/// is refused. No symlink is followed and nothing waited on (`O_NOFOLLOW | O_NONBLOCK`),
/// though procfs holds neither here.
fn read_once(path: &Path, buf: &mut [u8]) -> Option<String> {
    use std::io::Read;
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    let n = file.read(buf).ok()?;
    (n < buf.len()).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
}
