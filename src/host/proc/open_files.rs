//! The pass over what processes hold open (`/proc/PID/fd`), run in the background so a
//! process whose descriptors hang (a stuck FUSE or NFS mount) is named, never waited on.

use super::*;

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
pub(super) fn open_files(host: &Host, pid: i32, asking: &mut dyn FnMut(StuckAt)) -> OpenFiles {
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
