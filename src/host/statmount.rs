//! One mount, asked of the kernel by path: `statx(2)` names the mount a path is on
//! (`STATX_MNT_ID_UNIQUE`) and whether the path is that mount's root
//! (`STATX_ATTR_MOUNT_ROOT`); `statmount(2)` describes that one mount. Reading
//! `/proc/self/mountinfo` instead makes the kernel write every mount of the node (each
//! pod's overlay with its options, its shm, kubelet's volumes), which is the largest cost
//! of a look on a node with many pods.
//!
//! The answer is given as the [`MountEntry`] the mount table would hold, or not at all:
//! a kernel whose `statmount` does not give the mount's source or say which fields it
//! supports (before Linux 6.15; Debian 12's 6.1 has no `statmount`), a string the table
//! would show escaped, a read-only mount or filesystem, a filesystem with a subtype. The
//! caller then reads the table, so every fault is still judged, and said, from the table
//! as before.

use super::mountinfo::{DevNum, MountEntry, MountTable};
use nix::libc;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

// From <linux/mount.h> (not in the libc crate for every target).
const SYS_STATMOUNT: libc::c_long = 457;
const STATMOUNT_SB_BASIC: u64 = 0x1;
const STATMOUNT_MNT_BASIC: u64 = 0x2;
const STATMOUNT_MNT_ROOT: u64 = 0x8;
const STATMOUNT_MNT_POINT: u64 = 0x10;
const STATMOUNT_FS_TYPE: u64 = 0x20;
const STATMOUNT_MNT_OPTS: u64 = 0x80;
const STATMOUNT_FS_SUBTYPE: u64 = 0x100;
const STATMOUNT_SB_SOURCE: u64 = 0x200;
const STATMOUNT_SUPPORTED_MASK: u64 = 0x1000;
/// Always in an answer that has them.
const REQUIRED: u64 = STATMOUNT_SB_BASIC
    | STATMOUNT_MNT_BASIC
    | STATMOUNT_MNT_ROOT
    | STATMOUNT_MNT_POINT
    | STATMOUNT_FS_TYPE
    | STATMOUNT_SB_SOURCE
    | STATMOUNT_SUPPORTED_MASK;
/// Left out of an answer when empty: known to be empty only when the kernel supports them.
const OPTIONAL: u64 = STATMOUNT_MNT_OPTS | STATMOUNT_FS_SUBTYPE;
const WANTED: u64 = REQUIRED | OPTIONAL;
/// `struct mnt_id_req`, its first version: size, spare, mnt_id, param.
const MNT_ID_REQ_SIZE_VER0: u32 = 24;
/// `struct statmount` before its strings.
const HEADER: usize = 512;
/// The most one mount's description may take: paths and options of one mount, not a
/// table. A mount with more is read from the table.
const BUFFER: usize = 16 << 10;

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_NOEXEC: u64 = 0x8;
const MOUNT_ATTR_ATIME: u64 = 0x70;
const MOUNT_ATTR_RELATIME: u64 = 0x0;
const MOUNT_ATTR_NOATIME: u64 = 0x10;
const MOUNT_ATTR_NODIRATIME: u64 = 0x80;
const MOUNT_ATTR_NOSYMFOLLOW: u64 = 0x20_0000;
const SB_RDONLY: u32 = 0x1;
const SB_SYNCHRONOUS: u32 = 0x10;
const SB_DIRSYNC: u32 = 0x80;
const SB_LAZYTIME: u32 = 1 << 25;

/// What `statx` says of a path: the mount it is on, and whether it is that mount's root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OnMount {
    /// The unique (64-bit) mount id `statmount` takes.
    pub unique_id: u64,
    pub is_mount_root: bool,
}

/// `statx` of `path` itself (a final symlink is not followed, an automount not
/// triggered); `None` when the kernel does not give the unique mount id.
pub fn on_mount(path: &Path) -> Option<OnMount> {
    let stx = statx(path, libc::STATX_MNT_ID_UNIQUE)?;
    if stx.stx_mask & libc::STATX_MNT_ID_UNIQUE == 0 {
        return None;
    }
    let root = libc::STATX_ATTR_MOUNT_ROOT as u64;
    Some(OnMount {
        unique_id: stx.stx_mnt_id,
        is_mount_root: stx.stx_attributes_mask & root != 0 && stx.stx_attributes & root != 0,
    })
}

/// The mount id `/proc/PID/fdinfo` and the mount table show for the mount `path` is on.
pub fn mount_id(path: &Path) -> Option<u64> {
    let stx = statx(path, libc::STATX_MNT_ID)?;
    (stx.stx_mask & libc::STATX_MNT_ID != 0).then_some(stx.stx_mnt_id)
}

fn statx(path: &Path, mask: u32) -> Option<libc::statx> {
    let c = CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statx(2) writes one `struct statx` into `buf` and reads the NUL-terminated
    // path; both outlive the call.
    let mut buf: libc::statx = unsafe { std::mem::zeroed() };
    let flags = libc::AT_SYMLINK_NOFOLLOW | libc::AT_NO_AUTOMOUNT | libc::AT_STATX_SYNC_AS_STAT;
    let rc = unsafe { libc::statx(libc::AT_FDCWD, c.as_ptr(), flags, mask, &mut buf) };
    (rc == 0).then_some(buf)
}

/// The mount `path` is on, as a mount table line would describe it; `None` when the
/// kernel cannot say all of it, or the mount is not one the healthy path may take
/// without the table (see the module's comment).
/// A read-only mount is described only when `judged` is false (a mount only located,
/// such as `/` beside the volume: its options are not judged).
pub fn mount_holding(path: &Path, judged: bool) -> Option<MountEntry> {
    let on = on_mount(path)?;
    healthy_entry(&read(on.unique_id)?, judged)
}

/// The mounts holding `paths`, once each, as a partial table; only located (a read-only
/// one is described too: no option of theirs is judged). `None` when one cannot be
/// described.
pub fn mounts_holding<'a>(paths: impl IntoIterator<Item = &'a Path>) -> Option<MountTable> {
    let mut entries: Vec<MountEntry> = Vec::new();
    for path in paths {
        let mount = mount_holding(path, false)?;
        if entries.iter().all(|m| m.mount_id != mount.mount_id) {
            entries.push(mount);
        }
    }
    Some(MountTable::of_mounts(entries))
}

/// The mount at exactly `path` (a mount root whose mount point is `path` as given).
pub fn mount_at(path: &Path, judged: bool) -> Option<MountEntry> {
    let on = on_mount(path)?;
    if !on.is_mount_root {
        return None;
    }
    healthy_entry(&read(on.unique_id)?, judged).filter(|m| m.mount_point == path)
}

/// Whether a partial table (the few mounts a look described) answers for a file open
/// through mount `mnt_id` that belongs at `path`: that mount is in it, and `path` is now
/// on the mount the table's longest prefix names (`statx` in the caller's mount
/// namespace). Anything else (another mount, one over the path, no mount id) is the
/// whole table's to judge.
pub fn answers_for(table: &MountTable, path: &Path, mnt_id: Option<u64>) -> bool {
    let here = table.containing(path).map(|m| m.mount_id);
    mnt_id.is_some_and(|id| table.by_id(id).is_some()) && here.is_some() && mount_id(path) == here
}

/// `statmount(2)` of one mount, its raw answer.
fn read(unique_id: u64) -> Option<Vec<u8>> {
    let mut req = [0u8; MNT_ID_REQ_SIZE_VER0 as usize];
    req[..4].copy_from_slice(&MNT_ID_REQ_SIZE_VER0.to_ne_bytes());
    req[8..16].copy_from_slice(&unique_id.to_ne_bytes());
    req[16..24].copy_from_slice(&WANTED.to_ne_bytes());
    // u64-aligned, as the kernel's struct is
    let mut buf = vec![0u64; BUFFER / 8];
    // SAFETY: statmount(2) reads the request (24 bytes) and writes at most BUFFER bytes
    // into `buf`; both outlive the call.
    let rc = unsafe {
        libc::syscall(
            SYS_STATMOUNT,
            req.as_ptr(),
            buf.as_mut_ptr(),
            BUFFER as libc::size_t,
            0 as libc::c_uint,
        )
    };
    if rc != 0 {
        return None;
    }
    Some(buf.iter().flat_map(|w| w.to_ne_bytes()).collect())
}

fn u32_at(raw: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(raw.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(raw: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(raw.get(at..at + 8)?.try_into().ok()?))
}

/// A string of the answer: `field` holds its offset into the strings after the header.
/// `None` for one the table would show escaped (a backslash, a blank, a control
/// character): the table's decoding stays the one way such a name is read.
fn str_at(raw: &[u8], field: usize) -> Option<String> {
    let size = (u32_at(raw, 0)? as usize).min(raw.len());
    let start = HEADER + u32_at(raw, field)? as usize;
    let tail = raw.get(start..size)?;
    let text = &tail[..tail.iter().position(|b| *b == 0)?];
    let plain = text.iter().all(|b| b.is_ascii_graphic() && *b != b'\\');
    plain
        .then(|| String::from_utf8(text.to_vec()).ok())
        .flatten()
}

/// The entry, when everything the checks judge is in the answer and (`judged`) says
/// "healthy".
fn healthy_entry(raw: &[u8], judged: bool) -> Option<MountEntry> {
    let (mask, supported) = (u64_at(raw, 8)?, u64_at(raw, 144)?);
    if mask & REQUIRED != REQUIRED || supported & WANTED != WANTED {
        return None;
    }
    let (sb_flags, attr) = (u32_at(raw, 32)?, u64_at(raw, 64)?);
    if judged && (sb_flags & SB_RDONLY != 0 || attr & MOUNT_ATTR_RDONLY != 0) {
        return None; // the fault's evidence is the table's
    }
    if mask & STATMOUNT_FS_SUBTYPE != 0 {
        return None; // a subtype (fuse.*): the table names it
    }
    let fs_options = match mask & STATMOUNT_MNT_OPTS {
        0 => String::new(),
        _ => str_at(raw, 4)?,
    };
    let entry = MountEntry {
        mount_id: u32_at(raw, 56)?.into(),
        parent_id: u32_at(raw, 60)?.into(),
        dev: DevNum {
            major: u32_at(raw, 16)?,
            minor: u32_at(raw, 20)?,
        },
        fs_root: PathBuf::from(str_at(raw, 104)?),
        mount_point: PathBuf::from(str_at(raw, 108)?),
        mount_options: mount_options(attr),
        fstype: str_at(raw, 36)?,
        source: str_at(raw, 124)?,
        super_options: super_options(sb_flags, &fs_options),
    };
    (!judged || !entry.is_read_only()).then_some(entry)
}

/// The per-mount options as the table spells them, in its order.
fn mount_options(attr: u64) -> Vec<String> {
    let flags = [
        (attr & MOUNT_ATTR_NOSUID != 0, "nosuid"),
        (attr & MOUNT_ATTR_NODEV != 0, "nodev"),
        (attr & MOUNT_ATTR_NOEXEC != 0, "noexec"),
        (attr & MOUNT_ATTR_ATIME == MOUNT_ATTR_NOATIME, "noatime"),
        (attr & MOUNT_ATTR_NODIRATIME != 0, "nodiratime"),
        (attr & MOUNT_ATTR_ATIME == MOUNT_ATTR_RELATIME, "relatime"),
        (attr & MOUNT_ATTR_NOSYMFOLLOW != 0, "nosymfollow"),
    ];
    spelled(attr & MOUNT_ATTR_RDONLY != 0, &flags)
        .map(String::from)
        .collect()
}

/// The superblock's options as the table spells them: its flags, then the filesystem's.
fn super_options(sb_flags: u32, fs_options: &str) -> Vec<String> {
    let flags = [
        (sb_flags & SB_SYNCHRONOUS != 0, "sync"),
        (sb_flags & SB_DIRSYNC != 0, "dirsync"),
        (sb_flags & SB_LAZYTIME != 0, "lazytime"),
    ];
    spelled(sb_flags & SB_RDONLY != 0, &flags)
        .chain(fs_options.split(',').filter(|o| !o.is_empty()))
        .map(String::from)
        .collect()
}

/// `ro` or `rw`, then the name of each flag that is on, in the table's order: how the
/// mount table spells both its mount and its superblock options.
fn spelled<'a>(
    read_only: bool,
    flags: &'a [(bool, &'static str)],
) -> impl Iterator<Item = &'a str> {
    let rw = if read_only { "ro" } else { "rw" };
    std::iter::once(rw).chain(flags.iter().filter(|(on, _)| *on).map(|(_, name)| *name))
}

#[cfg(test)]
mod tests;
