//! Files the guard creates as root, in directories another user may be able to write to
//! (the Prometheus textfile directory is often the `prometheus` user's). Such a user can
//! plant a symlink, a FIFO or a hard link at any name they can predict, so nothing here
//! opens a path: a directory is opened once, `O_DIRECTORY|O_NOFOLLOW`, and every file is
//! reached beneath that descriptor with `O_NOFOLLOW`:
//!
//! - a new file is created `O_CREAT|O_EXCL` under a random name (`.NAME.<16 hex>.tmp`,
//!   from `/dev/urandom`, not the pid), written, fsynced, then `renameat` over `NAME`
//!   (which replaces a planted link, never writes through it), and the directory fsynced;
//! - an existing file (a state file, the lock) is opened `O_NOFOLLOW|O_NONBLOCK` and used
//!   only when `fstat` says it is a regular file with one link.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{openat, renameat, OFlag};
use nix::sys::stat::Mode;
use nix::unistd::{unlinkat, UnlinkatFlags};

/// A directory, held open: every name below is resolved from this descriptor.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

fn io(e: nix::errno::Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

impl Dir {
    /// Opens `path` as a directory, refusing a symlink in its last component (an error
    /// that says so).
    pub fn open(path: &Path) -> io::Result<Dir> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::open(path, flags, Mode::empty()).map_err(|e| {
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink());
            match link {
                true => io::Error::other(format!(
                    "{} is a symbolic link; the guard never follows one there: name the real \
                     directory instead",
                    path.display()
                )),
                false => io(e),
            }
        })?;
        Ok(Dir {
            fd,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The directory's own inode (owner, mode), as opened.
    pub fn metadata(&self) -> io::Result<std::fs::Metadata> {
        File::from(self.fd.try_clone()?).metadata()
    }

    /// The directory as a `File` (for judging it through the descriptor).
    pub fn as_file(&self) -> io::Result<File> {
        Ok(File::from(self.fd.try_clone()?))
    }

    /// Replaces `name` with `bytes`: a fresh randomly named file, then a rename.
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> io::Result<()> {
        // A SIGTERM or SIGINT waits for the rename (or the removal of the temporary file):
        // no stray temporary file, and a restart's record is on disk before the guard dies.
        let _renamed_first = crate::signals::critical();
        let (tmp, mut file) = self.create_temporary(name)?;
        let written = file
            .write_all(bytes)
            .and_then(|()| file.sync_all())
            .inspect(|()| crate::signals::hook("temporary file written"))
            .and_then(|()| renameat(&self.fd, tmp.as_str(), &self.fd, name).map_err(io));
        if written.is_err() {
            let _ = unlinkat(&self.fd, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
        }
        written?;
        // The rename itself must reach the disk too (matters when the directory persists).
        let _ = nix::unistd::fsync(&self.fd);
        Ok(())
    }

    /// A new file that did not exist before (`O_EXCL`), under a name no one can predict.
    fn create_temporary(&self, name: &str) -> io::Result<(String, File)> {
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let mut last = io::Error::from(io::ErrorKind::AlreadyExists);
        // A collision of 64 random bits means someone else made the name: try anew.
        for _ in 0..4 {
            let tmp = format!(".{name}.{}.tmp", random_hex()?);
            match openat(
                &self.fd,
                tmp.as_str(),
                flags,
                Mode::from_bits_truncate(0o644),
            ) {
                Ok(fd) => return Ok((tmp, File::from(fd))),
                Err(nix::errno::Errno::EEXIST) => last = io(nix::errno::Errno::EEXIST),
                Err(e) => return Err(io(e)),
            }
        }
        Err(last)
    }

    /// Opens (creating it when missing) `name` for reading and writing, as the repair lock
    /// needs it: never through a symlink, never a FIFO, device or hard link.
    pub fn open_or_create(&self, name: &str) -> io::Result<File> {
        let flags = OFlag::O_RDWR
            | OFlag::O_CREAT
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_CLOEXEC;
        let fd = openat(&self.fd, name, flags, Mode::from_bits_truncate(0o644))
            .map_err(|e| refused_link(e, name))?;
        only_regular(File::from(fd), name)
    }

    /// Reads `name` whole when it is a regular file of at most `cap` bytes (`InvalidData`
    /// beyond); never through a symlink, never blocking on a FIFO.
    pub fn read_at_most(&self, name: &str, cap: u64) -> io::Result<Vec<u8>> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let fd = openat(&self.fd, name, flags, Mode::empty()).map_err(|e| refused_link(e, name))?;
        let file = only_regular(File::from(fd), name)?;
        crate::host::read_at_most(file, cap)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "larger than the {} KiB a state file of the guard can be",
                    cap >> 10
                ),
            )
        })
    }

    /// Removes `name` (the entry itself, also when it is a link). False when it was not
    /// there.
    pub fn remove(&self, name: &str) -> io::Result<bool> {
        match unlinkat(&self.fd, name, UnlinkatFlags::NoRemoveDir) {
            Ok(()) => Ok(true),
            Err(nix::errno::Errno::ENOENT) => Ok(false),
            Err(e) => Err(io(e)),
        }
    }

    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        renameat(&self.fd, from, &self.fd, to).map_err(io)
    }

    /// The names in this directory that start with `prefix`, at most `max` of them
    /// (sorted), read beneath the descriptor: a directory swapped for another after it was
    /// opened is not the one listed.
    pub fn names_starting(&self, prefix: &str, max: usize) -> io::Result<Vec<String>> {
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let mut listing = nix::dir::Dir::openat(&self.fd, ".", flags, Mode::empty()).map_err(io)?;
        let mut names = Vec::new();
        for entry in listing.iter() {
            let name = entry
                .map_err(io)?
                .file_name()
                .to_string_lossy()
                .into_owned();
            if name.starts_with(prefix) {
                names.push(name);
            }
        }
        names.sort();
        names.truncate(max);
        Ok(names)
    }
}

/// `ELOOP` from `O_NOFOLLOW` means the name is a symlink: say so.
fn refused_link(e: nix::errno::Errno, name: &str) -> io::Error {
    match e {
        nix::errno::Errno::ELOOP => io::Error::other(format!(
            "{name} is a symbolic link; the guard never follows one there: remove it"
        )),
        e => io(e),
    }
}

fn only_regular(file: File, name: &str) -> io::Result<File> {
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other(format!(
            "{name} is not a regular file: remove it"
        )));
    }
    if meta.nlink() > 1 {
        return Err(io::Error::other(format!(
            "{name} has {} hard links (another name could be any file): remove it",
            meta.nlink()
        )));
    }
    Ok(file)
}

/// 16 hex digits from the kernel's random pool.
pub(crate) fn random_hex() -> io::Result<String> {
    let mut bytes = [0u8; 8];
    File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// For callers that hold a `Dir` and want a descriptor (e.g. to fsync).
impl AsFd for Dir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_planted_link_is_replaced_not_written_through() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let d = tmp.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::os::unix::fs::symlink(&victim, d.join("out")).unwrap();
        let dir = Dir::open(&d).unwrap();
        dir.write_atomic("out", b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(std::fs::symlink_metadata(d.join("out")).unwrap().is_file());
        assert_eq!(std::fs::read(d.join("out")).unwrap(), b"new");
        assert_eq!(names(&d), vec!["out"], "no temporary file left");
    }

    #[test]
    fn links_fifos_and_hard_links_are_refused_for_reading_and_locking() {
        let tmp = tempfile::tempdir().unwrap();
        let victim = tmp.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let d = tmp.path().join("d");
        std::fs::create_dir(&d).unwrap();
        std::os::unix::fs::symlink(&victim, d.join("link")).unwrap();
        std::fs::hard_link(&victim, d.join("hard")).unwrap();
        nix::unistd::mkfifo(&d.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
        let dir = Dir::open(&d).unwrap();
        let e = dir.open_or_create("link").unwrap_err().to_string();
        assert!(e.contains("link is a symbolic link"), "{e}");
        let e = dir.read_at_most("fifo", 10).unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let e = dir.open_or_create("hard").unwrap_err().to_string();
        assert!(e.contains("2 hard links"), "{e}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert!(dir.remove("link").unwrap());
        assert!(!dir.remove("link").unwrap());
    }

    #[test]
    fn a_directory_that_is_a_symlink_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(tmp.path(), tmp.path().join("l")).unwrap();
        let e = Dir::open(&tmp.path().join("l")).unwrap_err().to_string();
        assert!(e.contains("l is a symbolic link"), "{e}");
    }
}
