//! Who may have written the files that steer the guard. The guard runs as root and its
//! config names a command it runs (`[containerd] restart`) and archives it imports into
//! containerd (`[sandbox] archives`): a file another local user can change would let that
//! user make root run a command or import an image of their choosing. So every config
//! file and every archive is opened once, judged through the opened descriptor (`fstat`,
//! no path-then-open race), and read from that same descriptor, only when:
//!
//! - it is a regular file owned by root or by the user running the guard, and not
//!   writable by group or others;
//! - every directory above it (of the path as named and of the file it resolves to) is
//!   owned by root or that user and not writable by group or others, unless it has the
//!   sticky bit (`/tmp`): there only a file's owner may rename or remove it, so the file
//!   cannot be replaced. A group/other-writable directory without the sticky bit lets
//!   another user replace the file with their own, so it is refused like the file itself.
//!
//! Directories are judged by path after the file was opened: only their owner (root or
//! the guard's user, once judged) can change their mode or owner, so the answer cannot
//! be changed by another user between the open and the look.

use std::fs::File;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What a file or directory's inode says about who may change it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Perms {
    pub uid: u32,
    pub mode: u32,
}

/// Why a file (or a directory above it) cannot be trusted, or cannot be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Distrust {
    /// The file does not exist (an archive may appear later; a config file named with
    /// `--config` must exist).
    Missing,
    /// It cannot be opened or is not a regular file.
    Unreadable(String),
    /// Someone other than root or the guard's user could change what the guard reads.
    Untrusted(String),
}

impl std::fmt::Display for Distrust {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Distrust::Missing => write!(f, "no such file"),
            Distrust::Unreadable(e) | Distrust::Untrusted(e) => write!(f, "{e}"),
        }
    }
}

const GROUP_OTHER_WRITE: u32 = 0o022;
const STICKY: u32 = 0o1000;

/// The rule for the file itself (pure): `None` when trusted, else what is wrong.
pub fn judge_file(p: Perms, euid: u32) -> Option<String> {
    let owner_ok = p.uid == 0 || p.uid == euid;
    let writable = p.mode & GROUP_OTHER_WRITE != 0;
    match (owner_ok, writable) {
        (true, false) => None,
        (false, _) => Some("is owned by another user".into()),
        (true, true) => Some("is writable by group or others".into()),
    }
}

/// The rule for a directory above it (pure): as for files, except that a sticky
/// directory (`/tmp`) may be writable by others.
pub fn judge_dir(p: Perms, euid: u32) -> Option<String> {
    let owner_ok = p.uid == 0 || p.uid == euid;
    let writable = p.mode & GROUP_OTHER_WRITE != 0 && p.mode & STICKY == 0;
    match (owner_ok, writable) {
        (true, false) => None,
        (false, _) => Some("is owned by another user".into()),
        (true, true) => Some("is writable by group or others without the sticky bit".into()),
    }
}

/// `owner nobody (uid 65534), mode 0664`.
pub fn describe(p: Perms) -> String {
    let name = nix::unistd::User::from_uid(p.uid.into())
        .ok()
        .flatten()
        .map_or_else(|| "?".to_string(), |u| u.name);
    format!("owner {name} (uid {}), mode {:04o}", p.uid, p.mode & 0o7777)
}

fn refusal(what: &str, path: &Path, p: Perms, problem: &str) -> Distrust {
    let fix = format!("chown root: {0} && chmod go-w {0}", path.display());
    Distrust::Untrusted(format!(
        "{what} {} {problem} ({}): another user could change what the guard, running as \
         root, reads from it; fix: `{fix}`",
        path.display(),
        describe(p)
    ))
}

fn perms(m: &std::fs::Metadata) -> Perms {
    Perms {
        uid: m.uid(),
        mode: m.mode(),
    }
}

/// Opens `path` for reading if it can be trusted (see the module's rules); the returned
/// descriptor is the one that was judged.
pub fn open_trusted(path: &Path) -> Result<File, Distrust> {
    // O_NONBLOCK: a FIFO put in a file's place must not block the open.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Distrust::Missing,
            _ => Distrust::Unreadable(format!("cannot open {}: {e}", path.display())),
        })?;
    let meta = file
        .metadata()
        .map_err(|e| Distrust::Unreadable(format!("cannot stat {}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(Distrust::Unreadable(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    let euid = nix::unistd::geteuid().as_raw();
    if let Some(problem) = judge_file(perms(&meta), euid) {
        return Err(refusal("file", path, perms(&meta), &problem));
    }
    judge_above(path, &file, euid)?;
    Ok(file)
}

/// Judges a directory the guard keeps its own files in (`state_dir`), opened as `dir`
/// from `path`: the directory itself and every directory above it, by the rules above.
pub fn judge_directory(path: &Path, dir: &File) -> Result<(), Distrust> {
    let meta = dir
        .metadata()
        .map_err(|e| Distrust::Unreadable(format!("cannot stat {}: {e}", path.display())))?;
    let euid = nix::unistd::geteuid().as_raw();
    if let Some(problem) = judge_dir(perms(&meta), euid) {
        return Err(refusal("directory", path, perms(&meta), &problem));
    }
    judge_above(path, dir, euid)
}

/// Judges a symlink that changes what the guard reads (a `config.d` mask): its owner
/// must be root or the guard's user (a link's own mode means nothing); its directory is
/// judged by [`judge_directory`].
pub fn judge_link(path: &Path) -> Result<(), Distrust> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Distrust::Unreadable(format!("cannot stat {}: {e}", path.display())))?;
    let euid = nix::unistd::geteuid().as_raw();
    let p = perms(&meta);
    if p.uid == 0 || p.uid == euid {
        return Ok(());
    }
    Err(Distrust::Untrusted(format!(
        "mask link {} is owned by another user ({}): another user could decide which \
         config the guard, running as root, reads; fix: `chown -h root: {}`",
        path.display(),
        describe(p),
        path.display()
    )))
}

/// Every directory above `path` (see [`directories_above`]) by [`judge_dir`].
fn judge_above(path: &Path, opened: &File, euid: u32) -> Result<(), Distrust> {
    for dir in directories_above(path, opened) {
        let Ok(m) = std::fs::metadata(&dir) else {
            continue; // renamed away meanwhile: its new place is judged through the fd
        };
        if let Some(problem) = judge_dir(perms(&m), euid) {
            return Err(refusal("directory", &dir, perms(&m), &problem));
        }
    }
    Ok(())
}

/// Every directory above the path as named, as written (a directory holding a symlink of
/// the path could swap that link) and resolved, and above the file the descriptor really
/// is: each once, nearest first.
fn directories_above(path: &Path, file: &File) -> Vec<PathBuf> {
    use std::os::fd::AsRawFd;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let written = std::path::absolute(parent).ok();
    let resolved = std::fs::canonicalize(parent).ok();
    let real = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf));
    let mut out: Vec<PathBuf> = Vec::new();
    for start in [written, resolved, real].into_iter().flatten() {
        for dir in start.ancestors() {
            if !out.iter().any(|d| d == dir) {
                out.push(dir.to_path_buf());
            }
        }
    }
    out
}

/// Reads at most `cap` bytes of a trusted file; more is an error (a guard config is a
/// few hundred bytes: a huge file is not one).
pub fn read_capped(file: File, path: &Path, cap: u64) -> Result<Vec<u8>, String> {
    crate::host::read_at_most(file, cap)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .ok_or_else(|| {
            format!(
                "{} is larger than the {} bytes accepted",
                path.display(),
                cap
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    const ME: u32 = 1000;

    #[test]
    fn file_rule() {
        let ok = |uid, mode| judge_file(Perms { uid, mode }, ME).is_none();
        assert!(ok(0, 0o100644), "root 0644");
        assert!(ok(ME, 0o100600), "the guard's own user");
        assert!(ok(0, 0o100444));
        assert!(!ok(0, 0o100664), "group-writable");
        assert!(!ok(0, 0o100646), "other-writable");
        assert!(!ok(65534, 0o100644), "another user's file");
        assert!(
            !ok(0, 0o101666),
            "the sticky bit means nothing on a regular file"
        );
    }

    #[test]
    fn directory_rule() {
        let ok = |uid, mode| judge_dir(Perms { uid, mode }, ME).is_none();
        assert!(ok(0, 0o40755));
        assert!(
            ok(0, 0o41777),
            "/tmp: sticky, only owners replace their files"
        );
        assert!(!ok(0, 0o40777), "other-writable, not sticky");
        assert!(!ok(0, 0o40775), "group-writable, not sticky");
        assert!(!ok(65534, 0o40755), "another user's directory");
        assert!(!ok(65534, 0o41777), "another user's sticky directory");
    }

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn open_judges_the_file_and_its_directories() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        chmod(&dir, 0o755);
        let file = dir.join("x.toml");
        std::fs::write(&file, "a = 1\n").unwrap();
        chmod(&file, 0o644);
        assert!(open_trusted(&file).is_ok());
        chmod(&file, 0o664);
        let e = open_trusted(&file).unwrap_err().to_string();
        assert!(e.contains("writable by group or others"), "{e}");
        assert!(
            e.contains("mode 0664") && e.contains(&*file.to_string_lossy()),
            "{e}"
        );
        assert!(e.contains("chmod go-w"), "{e}");
        chmod(&file, 0o644);
        chmod(&dir, 0o777);
        let e = open_trusted(&file).unwrap_err().to_string();
        assert!(e.contains("directory") && e.contains("sticky"), "{e}");
        chmod(&dir, 0o1777);
        assert!(open_trusted(&file).is_ok(), "a sticky directory is fine");
        assert_eq!(
            open_trusted(&dir.join("nope")).unwrap_err(),
            Distrust::Missing
        );
        assert!(matches!(open_trusted(&dir), Err(Distrust::Unreadable(_))));
    }

    #[test]
    fn a_link_is_judged_where_it_points_too() {
        let tmp = tempfile::tempdir().unwrap();
        let open = tmp.path().join("open");
        std::fs::create_dir(&open).unwrap();
        let target = open.join("real.toml");
        std::fs::write(&target, "").unwrap();
        chmod(&target, 0o644);
        chmod(&open, 0o777);
        let link = tmp.path().join("link.toml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = open_trusted(&link).unwrap_err().to_string();
        assert!(e.contains(&*open.to_string_lossy()), "{e}");
    }

    #[test]
    fn a_directory_link_is_judged_where_it_lives_too() {
        let tmp = tempfile::tempdir().unwrap();
        let (open, safe) = (tmp.path().join("open"), tmp.path().join("safe"));
        std::fs::create_dir(&open).unwrap();
        std::fs::create_dir(&safe).unwrap();
        let file = safe.join("x.toml");
        std::fs::write(&file, "").unwrap();
        chmod(&file, 0o644);
        chmod(&safe, 0o755);
        std::os::unix::fs::symlink(&safe, open.join("conf")).unwrap();
        chmod(&open, 0o755);
        assert!(open_trusted(&open.join("conf/x.toml")).is_ok());
        // Another user could replace the link `open/conf` itself.
        chmod(&open, 0o777);
        let e = open_trusted(&open.join("conf/x.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&*open.to_string_lossy()), "{e}");
    }

    #[test]
    fn reads_are_capped() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("big");
        std::fs::write(&p, vec![b'#'; 2048]).unwrap();
        let f = File::open(&p).unwrap();
        assert!(read_capped(f, &p, 1024).unwrap_err().contains("larger"));
        let f = File::open(&p).unwrap();
        assert_eq!(read_capped(f, &p, 4096).unwrap().len(), 2048);
    }
}
