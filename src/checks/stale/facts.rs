//! The stale-runtime facts, read from `/proc/PID` of the containerd that serves the
//! socket (found through the socket's peer credentials): which metadata databases it holds
//! open, as what file, on which mount, and what is at their paths now. Judged by
//! [`super::rules`].

use crate::containerd::client::peer_pid;
use crate::host::mountinfo::MountTable;
use crate::host::proc::{read_bounded, Links};
use crate::host::Host;
use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file's identity: device number (raw `st_dev`) and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

impl std::fmt::Display for FileId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = crate::host::mountinfo::DevNum::from_raw(self.dev);
        write!(f, "{d}:{}", self.ino)
    }
}

/// One open metadata database of containerd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenDb {
    pub fd: u32,
    /// `readlink /proc/PID/fd/N`.
    pub link: String,
    /// `stat /proc/PID/fd/N` (the open file itself).
    pub open: Result<FileId, String>,
    /// The path the file should be at (`root` + its relative path), as containerd sees it.
    pub expected: PathBuf,
    /// `stat /proc/PID/root/<expected>` now.
    pub now: Result<FileId, String>,
    /// `mnt_id:` from `/proc/PID/fdinfo/N`.
    pub mnt_id: Option<u64>,
    /// `expected` with every symlink resolved in containerd's mount namespace now (the
    /// form the kernel shows fd paths in): a snapshotter directory that is a symlink.
    pub resolved: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleFacts {
    /// containerd's PID from the socket's peer credentials.
    pub pid: Result<i32, String>,
    /// `/proc/PID/comm`, evidence only.
    pub comm: String,
    /// containerd's root path, as the process itself computes it (flags, config, imports).
    pub root: PathBuf,
    /// Why the process's own root is not the one the guard was configured for, if so.
    pub other_root: Option<String>,
    /// The open metadata databases found in `/proc/PID/fd`.
    pub dbs: Result<Vec<OpenDb>, String>,
    /// `/proc/PID/mountinfo`: containerd's mount namespace.
    pub mounts: Result<Arc<MountTable>, String>,
}

/// The relative paths (under containerd's root) of the databases the detector looks at.
pub fn is_metadata_db(rel: &Path) -> bool {
    let parts: Vec<_> = rel.iter().map(|p| p.to_string_lossy()).collect();
    match parts.as_slice() {
        [dir, file] => {
            (dir == "io.containerd.metadata.v1.bolt" && file == "meta.db")
                || (dir.starts_with("io.containerd.snapshotter.v1.") && file == "metadata.db")
        }
        _ => false,
    }
}

/// The detector's raw facts, read from `/proc/PID` of the socket's peer. `own_mounts`: the
/// guard's own mount table (read by its caller), asked for and taken for containerd's
/// only when both are in one mount namespace.
pub fn gather(
    host: &Host,
    socket: &Path,
    root: &Path,
    own_mounts: impl FnOnce() -> Option<Arc<MountTable>>,
) -> StaleFacts {
    let pid = peer_pid(socket).map_err(|e| e.to_string());
    let mut f = StaleFacts {
        pid: pid.clone(),
        comm: String::new(),
        root: root.to_path_buf(),
        other_root: None,
        dbs: Err("no pid".into()),
        mounts: Err("no pid".into()),
    };
    let Ok(pid) = pid else { return f };
    let proc = host.proc(pid.to_string());
    f.comm = crate::host::proc::read_proc_file(host, pid, "comm", crate::host::proc::COMM_CAP)
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    // The kernel shows fd paths resolved: a root reached through a symlink is compared by
    // its real path (resolved in containerd's mount namespace), or a healthy containerd
    // would look stale. The root this containerd itself uses (a `--root` over its config,
    // an import) must be the guard's: another one is said, never taken for a stale one.
    let own = real_root(&proc, &own_root(host, pid, root));
    f.root = real_root(&proc, root);
    if own != f.root {
        f.other_root = Some(format!(
            "pid {pid} uses {} as its root (its command line and config), not {}",
            own.display(),
            f.root.display()
        ));
    }
    f.dbs = open_dbs(&proc, &f.root);
    f.mounts = super::mounts::table(host, &proc, own_mounts, &f.dbs);
    f
}

/// The root `pid` computes from its own command line and config
/// ([`crate::containerd::config::effective`]); `configured` when that cannot be read.
fn own_root(host: &Host, pid: i32, configured: &Path) -> PathBuf {
    use crate::host::proc::{cmdline_args, CMDLINE_CAP};
    let proc = host.proc(pid.to_string());
    read_bounded(&proc.join("cmdline"), CMDLINE_CAP, Links::Refuse)
        .ok()
        .and_then(|raw| crate::containerd::config::effective(&proc, &cmdline_args(&raw)).ok())
        .map_or_else(|| configured.to_path_buf(), |c| c.root)
}

fn real_root(proc: &Path, root: &Path) -> PathBuf {
    let ns_root = proc.join("root");
    let mut in_ns = ns_root.clone();
    for c in root.components().skip(1) {
        in_ns.push(c);
    }
    match (
        std::fs::canonicalize(&in_ns),
        std::fs::canonicalize(&ns_root),
    ) {
        (Ok(real), Ok(base)) => match real.strip_prefix(&base) {
            Ok(rel) => Path::new("/").join(rel),
            Err(_) => root.to_path_buf(),
        },
        _ => root.to_path_buf(),
    }
}

/// `path` (absolute, as containerd names it) inside its root directory.
fn in_namespace(proc: &Path, path: &Path) -> PathBuf {
    let mut in_ns = proc.join("root");
    in_ns.extend(path.components().skip(1));
    in_ns
}

/// `path` with every symlink resolved in containerd's mount namespace, as the kernel
/// would show it in `/proc/PID/fd`; `None` when it does not resolve there.
fn resolved_in_namespace(proc: &Path, path: &Path) -> Option<String> {
    let base = std::fs::canonicalize(proc.join("root")).ok()?;
    let real = std::fs::canonicalize(in_namespace(proc, path)).ok()?;
    let rel = real.strip_prefix(&base).ok()?;
    Some(Path::new("/").join(rel).display().to_string())
}

/// Each database containerd keeps under `root` (its metadata and each snapshotter's),
/// by relative path, with the real path it resolves to now.
fn known_dbs_resolved(proc: &Path, root: &Path) -> Vec<(PathBuf, String)> {
    let mut rels = vec![PathBuf::from("io.containerd.metadata.v1.bolt/meta.db")];
    if let Ok(entries) = std::fs::read_dir(in_namespace(proc, root)) {
        rels.extend(
            entries
                .take(256)
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("io.containerd.snapshotter.v1."))
                .map(|n| PathBuf::from(n).join("metadata.db")),
        );
    }
    rels.into_iter()
        .filter_map(|rel| {
            let real = resolved_in_namespace(proc, &root.join(&rel))?;
            Some((rel, real))
        })
        .collect()
}

fn file_id(p: &Path) -> Result<FileId, String> {
    std::fs::metadata(p)
        .map(|m| FileId {
            dev: m.dev(),
            ino: m.ino(),
        })
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("missing ({e})"),
            _ => e.to_string(),
        })
}

/// `/proc/PID/fdinfo/N`: a few lines (an inotify or epoll fd lists more).
const FDINFO_CAP: u64 = 64 << 10;

/// The database a file path (as the kernel shows an fd's or a mapping's file) is, by its
/// path relative to containerd's root: the last two components name it, wherever its
/// filesystem now is; else it is one of the databases reached through a symlink inside
/// the root (`resolved`).
fn db_named(shown: &str, resolved: &[(PathBuf, String)]) -> Option<PathBuf> {
    let clean = shown.trim_end_matches(" (deleted)");
    let parts: Vec<&str> = clean.rsplitn(3, '/').collect();
    let named = match parts.as_slice() {
        [file, dir, ..] => Some(PathBuf::from(dir).join(file)),
        _ => None,
    };
    match named.filter(|rel| is_metadata_db(rel)) {
        Some(rel) => Some(rel),
        None => resolved
            .iter()
            .find(|(_, real)| real == clean)
            .map(|(rel, _)| rel.clone()),
    }
}

/// containerd's memory map: a few hundred lines, whatever its number of fds.
const MAPS_CAP: u64 = 4 << 20;

/// The databases containerd has mapped, as the kernel shows their files (bolt maps every
/// database it opens, for as long as it has it open). `None` when `maps` cannot be read.
fn mapped_dbs(proc: &Path, resolved: &[(PathBuf, String)]) -> Option<BTreeSet<String>> {
    let maps = read_bounded(&proc.join("maps"), MAPS_CAP, Links::Refuse).ok()?;
    let maps = String::from_utf8_lossy(&maps);
    let files = maps.lines().filter_map(mapped_file);
    Some(
        files
            .filter(|f| db_named(f, resolved).is_some())
            .map(String::from)
            .collect(),
    )
}

/// The file of one `maps` line (`addr perms offset dev inode path`), if it has one.
fn mapped_file(line: &str) -> Option<&str> {
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start().split_once(' ')?.1;
    }
    Some(rest.trim_start()).filter(|f| f.starts_with('/'))
}

/// containerd's fd numbers, lowest first: its databases are among the first it opens.
fn fd_numbers(fd_dir: &Path) -> Result<Vec<u32>, String> {
    let entries = std::fs::read_dir(fd_dir).map_err(|e| format!("{}: {e}", fd_dir.display()))?;
    let mut fds: Vec<u32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
        .collect();
    fds.sort_unstable();
    Ok(fds)
}

/// The first fds are tried by number, without listing the fd directory (at 100 pods a
/// containerd holds about 1,200 fds, and the listing alone cost 1.5 ms).
const PROBED_FDS: u32 = 64;

/// Every fd of containerd's that is one of its metadata databases. The walk goes through
/// the fds lowest first and stops once it has found every database containerd has mapped
/// ([`mapped_dbs`]): its databases are among the first dozen fds it opens. The first
/// [`PROBED_FDS`] are tried by number; the directory is listed only when that did not find
/// them all (or without a readable `maps`: then every fd is looked at).
fn open_dbs(proc: &Path, root: &Path) -> Result<Vec<OpenDb>, String> {
    let fd_dir = proc.join("fd");
    let resolved = known_dbs_resolved(proc, root);
    let mut unfound = mapped_dbs(proc, &resolved);
    let all_found =
        |unfound: &Option<BTreeSet<String>>| unfound.as_ref().is_some_and(BTreeSet::is_empty);
    let mut out = Vec::new();
    for fd in 0..PROBED_FDS {
        if all_found(&unfound) {
            return Ok(out);
        }
        db_at(proc, root, fd, &resolved, &mut unfound, &mut out);
    }
    if all_found(&unfound) {
        return Ok(out);
    }
    // (listed only now: an unreadable fd directory fails the walk, as it always did)
    for fd in fd_numbers(&fd_dir)?
        .into_iter()
        .filter(|fd| *fd >= PROBED_FDS)
    {
        if all_found(&unfound) {
            break;
        }
        db_at(proc, root, fd, &resolved, &mut unfound, &mut out);
    }
    Ok(out)
}

/// When containerd's `fd` is one of its databases: the database, into `out`, and no
/// longer `unfound`.
fn db_at(
    proc: &Path,
    root: &Path,
    fd: u32,
    resolved: &[(PathBuf, String)],
    unfound: &mut Option<BTreeSet<String>>,
    out: &mut Vec<OpenDb>,
) {
    let path = proc.join("fd").join(fd.to_string());
    let Ok(link) = std::fs::read_link(&path) else {
        return;
    };
    let link = link.to_string_lossy().into_owned();
    let Some(rel) = db_named(&link, resolved) else {
        return;
    };
    if let Some(unfound) = unfound.as_mut() {
        unfound.remove(&link);
    }
    let expected = root.join(&rel);
    // Resolve the path in containerd's mount namespace, not the guard's.
    let in_ns = in_namespace(proc, &expected);
    let fdinfo = proc.join("fdinfo").join(fd.to_string());
    let mnt_id = read_bounded(&fdinfo, FDINFO_CAP, Links::Refuse)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("mnt_id:").map(|v| v.trim().parse().ok()))
                .flatten()
        });
    out.push(OpenDb {
        fd,
        link,
        open: file_id(&path),
        now: file_id(&in_ns),
        mnt_id,
        resolved: resolved_in_namespace(proc, &expected),
        expected,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_maps_line_names_its_file_spaces_and_deleted_included() {
        let line = "7f3a00000000-7f3a00400000 r--s 00000000 fe:01 1234                       /var/lib/my containerd/io.containerd.metadata.v1.bolt/meta.db (deleted)";
        assert_eq!(
            mapped_file(line),
            Some("/var/lib/my containerd/io.containerd.metadata.v1.bolt/meta.db (deleted)")
        );
        assert_eq!(
            mapped_file("7ffd1000-7ffd2000 rw-p 00000000 00:00 0    [stack]"),
            None
        );
        assert_eq!(mapped_file("7ffd1000-7ffd2000 rw-p 00000000 00:00 0"), None);
        assert_eq!(mapped_file(""), None);
    }

    #[test]
    fn the_fd_walk_and_the_maps_name_the_same_databases() {
        let resolved = vec![(
            PathBuf::from("io.containerd.snapshotter.v1.overlayfs/metadata.db"),
            "/srv/snap/metadata.db".to_string(),
        )];
        let db = |s| db_named(s, &resolved);
        assert_eq!(
            db("/x/io.containerd.metadata.v1.bolt/meta.db (deleted)"),
            Some(PathBuf::from("io.containerd.metadata.v1.bolt/meta.db"))
        );
        assert_eq!(
            db("/srv/snap/metadata.db"),
            Some(PathBuf::from(
                "io.containerd.snapshotter.v1.overlayfs/metadata.db"
            ))
        );
        assert_eq!(db("/x/io.containerd.content.v1.content/ingest/x"), None);
    }
}
