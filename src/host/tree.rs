//! Files of a tree someone else built (a node image under `guard lint --root`, the OS
//! below `/sysroot`), read as a process chrooted there would see them, without a chroot:
//! every symlink, in the last component or in a directory on the way, is resolved here in
//! userspace, inside the tree (an absolute target starts again at the tree's root, `..`
//! stops there). Nothing the tree holds can make the guard read a file of the host.
//!
//! The walk goes one component at a time through directory descriptors (`openat` with
//! `O_NOFOLLOW`), the way systemd's `chase()` does: a directory swapped for a symlink
//! between the look and the open fails the open instead of being followed. No `openat2`
//! (`RESOLVE_IN_ROOT`): the binary also runs on RHEL 8's 4.18 kernel, which lacks it.
//! Files are opened `O_NONBLOCK` (a FIFO cannot hang the guard) and read up to a cap.

use nix::fcntl::{openat, readlinkat, AtFlags, OFlag};
use nix::sys::stat::{fstat, fstatat, FileStat, Mode, SFlag};
use nix::unistd::dup;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

#[cfg(test)]
mod tests;

/// Symlinks followed in one lookup at most (Linux's own limit).
const MAX_HOPS: usize = 40;
/// Names read from one directory at most.
pub const MAX_ENTRIES: usize = 4096;
/// A directory on the way, or to list: never through a link.
const DIR_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_NOFOLLOW)
    .union(OFlag::O_CLOEXEC);

/// What one path names, as `lstat` (or `stat`) inside the tree reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    pub uid: u32,
    pub mode: u32,
    pub len: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Link,
    Other,
}

impl Meta {
    fn of(st: &FileStat) -> Meta {
        let kind = match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFREG => Kind::File,
            SFlag::S_IFDIR => Kind::Dir,
            SFlag::S_IFLNK => Kind::Link,
            _ => Kind::Other,
        };
        Meta {
            kind,
            uid: st.st_uid,
            mode: st.st_mode,
            len: u64::try_from(st.st_size).unwrap_or(0),
        }
    }
}

/// A directory tree read as its own root.
#[derive(Debug)]
pub struct Tree {
    root: OwnedFd,
    shown: PathBuf,
    owner: u32,
}

/// The end of a walk: the directory holding the last component, its name and what it is.
struct Found {
    dir: OwnedFd,
    name: OsString,
    meta: Meta,
}

impl Tree {
    /// Opens `root` (following the host's links to it: the caller named it).
    pub fn open(root: &Path) -> Result<Tree, String> {
        let fd = nix::fcntl::open(
            root,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| format!("{}: {}", root.display(), e.desc()))?;
        let owner = fstat(&fd)
            .map_err(|e| format!("{}: {}", root.display(), e.desc()))?
            .st_uid;
        Ok(Tree {
            root: fd,
            shown: root.to_path_buf(),
            owner,
        })
    }

    /// The owner of the tree's root directory: root's stand-in for judging who may have
    /// written a file (an image built rootless belongs to a subuid).
    pub fn owner(&self) -> u32 {
        self.owner
    }

    /// What `path` names, the last component not followed; `None` when nothing is there.
    pub fn lstat(&self, path: &Path) -> Result<Option<Meta>, String> {
        Ok(self.walk(path, false)?.map(|f| f.meta))
    }

    /// The target of the symlink `path` (its directories resolved), as written.
    pub fn read_link(&self, path: &Path) -> Result<Option<PathBuf>, String> {
        match self.walk(path, false)? {
            Some(f) if f.meta.kind == Kind::Link => readlinkat(&f.dir, f.name.as_os_str())
                .map(|t| Some(PathBuf::from(t)))
                .map_err(|e| self.error(path, e)),
            _ => Ok(None),
        }
    }

    /// Opens the regular file `path` resolves to; `None` when nothing is there. Refuses
    /// anything else (a directory, a FIFO, a device).
    pub fn open_file(&self, path: &Path) -> Result<Option<(File, Meta)>, String> {
        let Some(found) = self.walk(path, true)? else {
            return Ok(None);
        };
        if found.meta.kind != Kind::File {
            return Err(self.not_regular(path));
        }
        let flags = OFlag::O_RDONLY
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_CLOEXEC
            | OFlag::O_NOCTTY;
        let fd = openat(&found.dir, found.name.as_os_str(), flags, Mode::empty())
            .map_err(|e| self.error(path, e))?;
        let meta = Meta::of(&fstat(&fd).map_err(|e| self.error(path, e))?);
        if meta.kind != Kind::File {
            return Err(self.not_regular(path));
        }
        Ok(Some((File::from(fd), meta)))
    }

    /// The content of the regular file `path` resolves to, when it holds at most `cap`
    /// bytes; `None` when nothing is there.
    pub fn read(&self, path: &Path, cap: u64) -> Result<Option<(Vec<u8>, Meta)>, String> {
        let Some((file, meta)) = self.open_file(path)? else {
            return Ok(None);
        };
        match crate::host::read_at_most(file, cap) {
            Ok(Some(bytes)) => Ok(Some((bytes, meta))),
            Ok(None) => Err(format!(
                "{}: larger than {cap} bytes; not read",
                self.display(path).display()
            )),
            Err(e) => Err(format!("{}: {e}", self.display(path).display())),
        }
    }

    /// The names in the directory `path` resolves to, sorted (at most [`MAX_ENTRIES`]);
    /// empty when it is missing or not a directory.
    pub fn list(&self, path: &Path) -> Result<Vec<String>, String> {
        let Some(found) = self.walk(path, true)? else {
            return Ok(Vec::new());
        };
        if found.meta.kind != Kind::Dir {
            return Ok(Vec::new());
        }
        let dir = openat(&found.dir, found.name.as_os_str(), DIR_FLAGS, Mode::empty())
            .map_err(|e| self.error(path, e))?;
        let mut dir = nix::dir::Dir::from_fd(dir).map_err(|e| self.error(path, e))?;
        let mut names: Vec<String> = dir
            .iter()
            .flatten()
            .filter_map(|e| e.file_name().to_str().ok().map(str::to_string))
            .filter(|n| n != "." && n != "..")
            .take(MAX_ENTRIES)
            .collect();
        names.sort();
        Ok(names)
    }

    /// `path` as the host shows it, for messages: the tree's place joined with it.
    pub fn display(&self, path: &Path) -> PathBuf {
        let mut out = self.shown.clone();
        out.extend(
            path.components()
                .filter(|c| matches!(c, Component::Normal(_))),
        );
        out
    }

    fn error(&self, path: &Path, e: nix::Error) -> String {
        format!("{}: {}", self.display(path).display(), e.desc())
    }

    /// The directory the walk is in: the innermost of `dirs`, else the root.
    fn innermost<'a>(&'a self, dirs: &'a [OwnedFd]) -> BorrowedFd<'a> {
        dirs.last().map_or(self.root.as_fd(), |d| d.as_fd())
    }

    fn not_regular(&self, path: &Path) -> String {
        format!("{}: not a regular file", self.display(path).display())
    }

    /// Walks `path` from the tree's root, one component at a time. A path that ends in
    /// a directory reached by `.` or `..` (or the root itself) is that directory, `.`.
    fn walk(&self, path: &Path, follow_last: bool) -> Result<Option<Found>, String> {
        let mut todo: VecDeque<OsString> = parts(path);
        let mut dirs: Vec<OwnedFd> = Vec::new(); // below the root, innermost last
        let mut hops = 0;
        while let Some(name) = todo.pop_front() {
            if name == ".." {
                dirs.pop();
                continue;
            }
            if name == "." {
                continue;
            }
            let st = match fstatat(
                self.innermost(&dirs),
                name.as_os_str(),
                AtFlags::AT_SYMLINK_NOFOLLOW,
            ) {
                Ok(st) => st,
                Err(nix::Error::ENOENT | nix::Error::ENOTDIR) => return Ok(None),
                Err(e) => return Err(self.error(path, e)),
            };
            let meta = Meta::of(&st);
            let last = todo.is_empty();
            if meta.kind == Kind::Link && (follow_last || !last) {
                hops += 1;
                if hops > MAX_HOPS {
                    return Err(format!(
                        "{}: more than {MAX_HOPS} symlinks; not followed",
                        self.display(path).display()
                    ));
                }
                let target = readlinkat(self.innermost(&dirs), name.as_os_str())
                    .map_err(|e| self.error(path, e))?;
                if target.as_bytes().starts_with(b"/") {
                    dirs.clear();
                }
                for part in parts(Path::new(&target)).into_iter().rev() {
                    todo.push_front(part);
                }
            } else if last {
                let dir = dup(self.innermost(&dirs)).map_err(|e| self.error(path, e))?;
                return Ok(Some(Found { dir, name, meta }));
            } else if meta.kind != Kind::Dir {
                return Ok(None);
            } else {
                let fd = openat(
                    self.innermost(&dirs),
                    name.as_os_str(),
                    DIR_FLAGS,
                    Mode::empty(),
                )
                .map_err(|e| self.error(path, e))?;
                dirs.push(fd);
            }
        }
        let dir = dup(self.innermost(&dirs)).map_err(|e| self.error(path, e))?;
        let meta = Meta::of(&fstat(&dir).map_err(|e| self.error(path, e))?);
        Ok(Some(Found {
            dir,
            name: OsString::from("."),
            meta,
        }))
    }
}

/// The names of `path`, `.` and `..` kept (the walk applies them), the root dropped.
fn parts(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::CurDir => Some(OsString::from(".")),
            Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}
