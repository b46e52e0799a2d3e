//! Gathers everything phase 1 decides on into [`VolumeFacts`]: plain data, no judgement.

use crate::checks::eviction;
use crate::config::{DeviceSpec, Settings};
use crate::containerd::client::{connect_within, ConnectError};
use crate::containerd::processes::processes_for_root;
use crate::host::blockdev::{self, BtrfsDevices, Lookup};
use crate::host::kubelet::KubeletFiles;
use crate::host::mountinfo::{MountEntry, MountTable};
use crate::host::Host;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsStats {
    pub free_bytes: u64,
    pub total_bytes: u64,
    pub free_inodes: u64,
    pub total_inodes: u64,
}

/// The root filesystem's own copy of the directory, hidden under the mount point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HiddenData {
    pub entries: u64,
    pub bytes: u64,
    /// The walk stopped at its bound; the numbers are a lower limit.
    pub truncated: bool,
}

/// What a connect to containerd's socket showed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// Nobody listens (no socket, or refused).
    Absent,
    Accepts,
    /// A listener exists but its backlog stayed full: a hung containerd.
    DoesNotAccept,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerdSeen {
    /// Whether a process listens on containerd's socket.
    pub listener: Listener,
    pub socket: PathBuf,
    /// containerd processes using this root: (pid, command line).
    pub processes: Vec<(i32, String)>,
    /// Processes named containerd that are not the host's containerd, each with why.
    pub not_counted: Vec<String>,
}

impl ContainerdSeen {
    /// Any sign of a started containerd: a listener (accepting or not) or a process.
    pub fn running(&self) -> bool {
        self.listener != Listener::Absent || !self.processes.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeFacts {
    /// containerd's root, the path the ephemeral volume must be mounted at.
    pub path: PathBuf,
    /// Nothing at all exists at `path` (not even a link): said so, not "a directory".
    pub missing: bool,
    pub mounts: Result<Arc<MountTable>, String>,
    /// The configured device and what it resolved to; `None` when not configured.
    pub device: Option<(DeviceSpec, Lookup)>,
    /// For a btrfs mount (whose mountinfo device is anonymous): the disks behind it.
    pub btrfs: Option<Result<BtrfsDevices, String>>,
    pub stats: Option<Result<FsStats, String>>,
    /// Result of creating an unnamed temporary file on the volume (leaves no trace).
    pub write_probe: Option<Result<(), String>>,
    pub hidden: Option<Result<HiddenData, String>>,
    pub containerd: ContainerdSeen,
    /// kubelet's eviction settings, read for `guard verify`'s early warning on space.
    pub kubelet: Option<crate::checks::eviction::facts::EvictionFacts>,
}

impl VolumeFacts {
    pub fn mount(&self) -> Option<&MountEntry> {
        self.mounts.as_ref().ok()?.at(&self.path)
    }
}

/// Bound on the hidden-data walk: it is evidence, not an inventory.
const HIDDEN_WALK_LIMIT: u64 = 200_000;

/// What a gather looks at beyond the mount itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    /// Walk the root filesystem's copy hidden under the mount point (evidence only, up to
    /// [`HIDDEN_WALK_LIMIT`] entries; the quick check before a later start skips it).
    pub under: bool,
    /// Look for a containerd already running for this root ([`seen`]: every process's
    /// name). `guard verify` does not: containerd runs then, and that check is skipped.
    pub for_containerd: bool,
    /// Read kubelet's eviction thresholds (`guard verify`: space near them warns).
    pub kubelet: bool,
}

/// `root` is containerd's root as its config names it, inside the OS being checked.
pub fn gather(
    host: &Host,
    settings: &Settings,
    root: &Path,
    socket: &Path,
    look: Look,
) -> VolumeFacts {
    let path = host.in_namespace(root);
    let path = path.as_path();
    let mounts = match mounts_by_path(host, path, look.under) {
        Some(few) => Ok(Arc::new(few)),
        None => MountTable::read(&host.mountinfo()).map(Arc::new),
    };
    let device = settings
        .volume
        .device
        .as_ref()
        .map(|spec| (spec.clone(), blockdev::resolve(host, spec)));
    let mount = mounts.as_ref().ok().and_then(|t| t.at(path));
    let mounted = mount.is_some();
    let btrfs = mount
        .filter(|m| m.fstype == "btrfs")
        .map(|m| blockdev::btrfs_devices(host, &m.source));
    let on_disk = host.os_file(root);
    let (stats, write_probe, hidden) = if mounted {
        (
            Some(statvfs(&on_disk)),
            Some(write_probe(&on_disk)),
            look.under
                .then(|| hidden_under(host, mounts.as_deref().ok(), path)),
        )
    } else {
        (None, None, None)
    };
    VolumeFacts {
        path: path.to_path_buf(),
        missing: matches!(
            std::fs::symlink_metadata(&on_disk),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound
        ),
        device,
        btrfs,
        stats,
        write_probe,
        hidden,
        containerd: match look.for_containerd {
            true => seen(host, root, socket),
            false => ContainerdSeen::not_looked(socket),
        },
        kubelet: (look.kubelet && mounted).then(|| {
            let configured = settings.kubelet.config.as_deref();
            eviction::facts::gather(&KubeletFiles::read(host, configured))
        }),
        mounts,
    }
}

/// The mounts the volume checks read, asked of the kernel one by one (`statx` and
/// `statmount`) instead of reading the whole table: the volume at `path`, `/` and (for
/// the look under it) the mount holding its parent. `None`, and the caller reads the
/// table, when any of them cannot be described so or is not healthy: not a mount point,
/// read-only, a kernel without `statmount`, a tree that is not this host's.
fn mounts_by_path(host: &Host, path: &Path, under: bool) -> Option<MountTable> {
    use crate::host::statmount::{mount_at, mount_holding};
    if !host.is_running_os() {
        return None;
    }
    let volume = mount_at(path, true)?;
    let mut entries = vec![mount_at(Path::new("/"), false)?];
    if under {
        let holder = mount_holding(path.parent()?, false)?;
        if entries.iter().all(|m| m.mount_id != holder.mount_id) {
            entries.push(holder);
        }
    }
    entries.push(volume);
    Some(MountTable::of_mounts(entries))
}

fn statvfs(path: &Path) -> Result<FsStats, String> {
    let s =
        nix::sys::statvfs::statvfs(path).map_err(|e| format!("statvfs {}: {e}", path.display()))?;
    let frag = s.fragment_size() as u64;
    Ok(FsStats {
        // f_bavail: what an unprivileged writer gets; containerd runs as root but the
        // reserved blocks are the filesystem's emergency margin, not working space.
        free_bytes: s.blocks_available() as u64 * frag,
        total_bytes: s.blocks() as u64 * frag,
        free_inodes: s.files_available() as u64,
        total_inodes: s.files() as u64,
    })
}

/// Proves the filesystem accepts writes with an O_TMPFILE file: nothing is left behind
/// even if the guard is killed mid-way, so this is safe in read-only `verify` as well.
fn write_probe(path: &Path) -> Result<(), String> {
    use nix::fcntl::{open, OFlag};
    use nix::sys::stat::Mode;
    let fd = open(
        path,
        OFlag::O_TMPFILE | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(|e| format!("cannot create a file on {}: {e}", path.display()))?;
    let written = nix::unistd::write(&fd, b"containerd-guard write probe\n")
        .map_err(|e| format!("cannot write to {}: {e}", path.display()));
    written.map(|_| ())
}

/// Looks under the mount point without changing any mount visible to others: a
/// non-recursive detached clone (`open_tree(OPEN_TREE_CLONE)`) of the parent's mount shows
/// the parent filesystem alone, including what the volume covers.
fn hidden_under(
    host: &Host,
    table: Option<&MountTable>,
    path: &Path,
) -> Result<HiddenData, String> {
    let table = table.ok_or("the mount table is unreadable")?;
    let parent = path.parent().ok_or("volume path has no parent")?;
    let name = path.file_name().ok_or("volume path has no name")?;
    // The mount that holds the parent directory, and the parent's place inside it.
    let holder = table
        .containing(parent)
        .ok_or("no mount holds the parent directory")?;
    let below = parent
        .strip_prefix(&holder.mount_point)
        .unwrap_or(Path::new(""));
    let tree = open_tree_clone(&host.path(&holder.mount_point))?;
    let dir = Path::new("/proc/self/fd")
        .join(tree.to_string())
        .join(below)
        .join(name);
    let result = walk(&dir);
    let _ = nix::unistd::close(tree);
    result
}

fn open_tree_clone(mount_point: &Path) -> Result<i32, String> {
    use std::os::unix::ffi::OsStrExt;
    let c =
        std::ffi::CString::new(mount_point.as_os_str().as_bytes()).map_err(|e| e.to_string())?;
    // From <linux/mount.h>; not yet exported by the libc crate on every target.
    const OPEN_TREE_CLONE: u32 = 1;
    const OPEN_TREE_CLOEXEC: u32 = nix::libc::O_CLOEXEC as u32;
    // SAFETY: open_tree(2) takes a dirfd, a NUL-terminated path and flags; it returns an
    // fd or -1. No memory is shared with the kernel beyond the path.
    let fd = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_open_tree,
            nix::libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(format!(
            "cannot look under {}: open_tree: {}",
            mount_point.display(),
            std::io::Error::last_os_error()
        ));
    }
    Ok(fd as i32)
}

fn walk(dir: &Path) -> Result<HiddenData, String> {
    let mut data = HiddenData {
        entries: 0,
        bytes: 0,
        truncated: false,
    };
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if d == dir && e.kind() == std::io::ErrorKind::NotFound => return Ok(data),
            Err(e) => return Err(format!("cannot read the hidden directory: {e}")),
        };
        for entry in entries.flatten() {
            if data.entries >= HIDDEN_WALK_LIMIT {
                data.truncated = true;
                return Ok(data);
            }
            data.entries += 1;
            if let Ok(meta) = entry.metadata() {
                if meta.is_dir() {
                    stack.push(entry.path());
                } else {
                    use std::os::unix::fs::MetadataExt;
                    data.bytes += meta.blocks() * 512;
                }
            }
        }
    }
    Ok(data)
}

/// How long phase 1 waits for a listener with a full backlog to accept. Its answer does not
/// change the verdict (any listener means containerd started), so this is short.
const SOCKET_CONNECT_BOUND: Duration = Duration::from_millis(500);

/// A successful connect means a listener exists; nothing is sent. Bounded: a hung
/// containerd's full backlog would block a plain connect for good.
fn listener(socket: &Path) -> Listener {
    match connect_within(socket, SOCKET_CONNECT_BOUND) {
        Ok(_) => Listener::Accepts,
        Err(ConnectError::Busy { .. }) => Listener::DoesNotAccept,
        Err(ConnectError::Failed { .. }) => Listener::Absent,
    }
}

impl ContainerdSeen {
    /// Nothing looked for (`guard verify`).
    fn not_looked(socket: &Path) -> ContainerdSeen {
        ContainerdSeen {
            listener: Listener::Absent,
            socket: socket.to_path_buf(),
            processes: Vec::new(),
            not_counted: Vec::new(),
        }
    }
}

/// Is containerd already running for this root? Phase 1 runs before containerd, so any
/// answer but "no" means the boot order was lost.
pub fn seen(host: &Host, root: &Path, socket: &Path) -> ContainerdSeen {
    let found = processes_for_root(host, root);
    ContainerdSeen {
        listener: listener(&host.path(socket)),
        socket: socket.to_path_buf(),
        processes: found.using_root,
        not_counted: found.not_counted,
    }
}
