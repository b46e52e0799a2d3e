//! Every host path the guard reads goes through [`Host`], so that probes can be pointed
//! at a fixture tree copied from a real machine instead of the live `/`, and so that the
//! initrd can check the OS it is about to switch to (`--sysroot /sysroot`): there the
//! kernel interfaces (`/proc`, `/sys`, `/dev`, `/run`) are the initrd's own while the
//! configuration and the volume path belong to the OS under `/sysroot`. Nothing else in
//! the crate builds an absolute host path by hand.

pub mod blockdev;
pub mod cgroup;
pub mod cloud_init;
pub mod fstab;
pub mod kubelet;
pub mod mountinfo;
pub mod pod_scan;
pub mod proc;
pub mod proc_files;
pub mod statmount;
pub mod superblock;
pub mod tree;
pub mod units;

use std::path::{Component, Path, PathBuf};

/// The guard's config fragment directories, lowest precedence first.
pub const CONFIG_DIRS: [&str; 3] = [
    "/usr/lib/containerd-guard/config.d",
    "/run/containerd-guard/config.d",
    "/etc/containerd-guard/config.d",
];

/// The filesystem root the probes read from. `/` on a live node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// Where everything is read from: `/`, or a fixture tree in tests.
    root: PathBuf,
    /// The OS tree whose config and volume are meant, below `root`: `/`, or `/sysroot`.
    sysroot: PathBuf,
}

impl Default for Host {
    fn default() -> Self {
        Host::live()
    }
}

impl Host {
    /// The running machine.
    pub fn live() -> Host {
        Host::at("/")
    }

    /// A fixture tree or a not-yet-switched-to root such as `/sysroot`.
    pub fn at(root: impl Into<PathBuf>) -> Host {
        Host {
            root: root.into(),
            sysroot: PathBuf::from("/"),
        }
    }

    /// The same host, checking the OS mounted at `sysroot` (the initrd's `/sysroot`).
    pub fn with_sysroot(mut self, sysroot: impl Into<PathBuf>) -> Host {
        self.sysroot = sysroot.into();
        self
    }

    /// Checking an OS mounted below `--sysroot` (from the initrd), not the running one.
    pub fn checks_another_os(&self) -> bool {
        self.sysroot != Path::new("/")
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// This tree is the running OS's own, so the kernel's answers about a path (`statx`,
    /// `statmount`) describe it: live, and not an OS below `--sysroot`.
    pub fn is_running_os(&self) -> bool {
        self.is_live() && !self.checks_another_os()
    }

    pub fn is_live(&self) -> bool {
        self.root == Path::new("/")
    }

    /// Maps an absolute host path (`/proc/self/mountinfo`) into this root.
    /// `..` components are dropped so a path from a config file cannot climb out.
    pub fn path(&self, host_path: impl AsRef<Path>) -> PathBuf {
        let mut out = self.root.clone();
        for part in host_path.as_ref().components() {
            if let Component::Normal(p) = part {
                out.push(p);
            }
        }
        out
    }

    /// A file of the OS being checked (its `/etc`, `/usr`, `/var`), as readable here.
    pub fn os_file(&self, os_path: impl AsRef<Path>) -> PathBuf {
        self.path(self.in_namespace(os_path))
    }

    /// An OS path as this mount namespace shows it in mountinfo (`/sysroot/var/lib/...`
    /// in the initrd).
    pub fn in_namespace(&self, os_path: impl AsRef<Path>) -> PathBuf {
        let mut out = self.sysroot.clone();
        for part in os_path.as_ref().components() {
            if let Component::Normal(p) = part {
                out.push(p);
            }
        }
        out
    }

    pub fn proc(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path(Path::new("/proc").join(rel))
    }

    pub fn sys(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path(Path::new("/sys").join(rel))
    }

    pub fn dev(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path(Path::new("/dev").join(rel))
    }

    /// `/proc/self/mountinfo`: the mount table of the namespace the guard runs in.
    pub fn mountinfo(&self) -> PathBuf {
        self.proc("self/mountinfo")
    }

    /// Where systemd-style config directories live, lowest precedence first. `/run` is
    /// the running system's (it survives the switch from the initrd); the others the OS's.
    pub fn config_dirs(&self) -> [PathBuf; 3] {
        let [vendor, run, admin] = CONFIG_DIRS;
        [self.os_file(vendor), self.path(run), self.os_file(admin)]
    }

    /// The OS tree (`/`, or `/sysroot` in the initrd) for reading its unit files with
    /// every link resolved inside it ([`tree::Tree`]).
    pub fn os_tree(&self) -> Result<tree::Tree, String> {
        tree::Tree::open(&self.os_file("/"))
    }

    /// This boot's identity; the restart budget is per boot.
    pub fn boot_id_path(&self) -> PathBuf {
        self.proc("sys/kernel/random/boot_id")
    }
}

/// Reads `reader` to its end when it holds at most `cap` bytes, `None` when it holds more.
/// Never reads past `cap + 1` bytes: a huge (or endless) file costs no memory.
pub fn read_at_most(reader: impl std::io::Read, cap: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    // Room for a page-sized kernel file at once: a `/proc` file reports size 0, and an
    // empty buffer would be filled by a 32-byte read first, then doubled, read by read.
    let mut data = Vec::with_capacity(cap.min(64 << 10) as usize + 1);
    reader.take(cap + 1).read_to_end(&mut data)?;
    Ok((data.len() as u64 <= cap).then_some(data))
}

/// The whole lines among the first `cap` bytes of `path`, for a `/proc` file whose length
/// a process controls (its mounts, its sockets): a line the cap cuts is dropped.
pub fn read_head_lines(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(cap)
        .read_to_end(&mut bytes)?;
    let whole = bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |at| at + 1);
    bytes.truncate(whole);
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_at_most_reads_up_to_the_cap_and_refuses_more_without_reading_it() {
        assert_eq!(
            read_at_most(&b"abcd"[..], 4).unwrap(),
            Some(b"abcd".to_vec())
        );
        assert_eq!(read_at_most(&b"abcde"[..], 4).unwrap(), None);
        // an endless reader: only cap + 1 bytes are taken
        assert_eq!(read_at_most(std::io::repeat(b'x'), 1 << 10).unwrap(), None);
    }

    #[test]
    fn live_paths_are_unchanged() {
        let h = Host::live();
        assert_eq!(
            h.mountinfo(),
            PathBuf::from("/proc/self/mountinfo"),
            "live host must read the real /proc"
        );
        assert_eq!(
            h.dev("disk/by-label/x"),
            PathBuf::from("/dev/disk/by-label/x")
        );
    }

    #[test]
    fn fixture_paths_are_rebased_and_cannot_escape() {
        let h = Host::at("/tmp/fx");
        assert_eq!(
            h.path("/var/lib/containerd"),
            PathBuf::from("/tmp/fx/var/lib/containerd")
        );
        assert_eq!(
            h.path("/../../etc/passwd"),
            PathBuf::from("/tmp/fx/etc/passwd")
        );
        assert!(!h.is_live());
    }

    #[test]
    fn sysroot_moves_os_files_but_not_kernel_interfaces() {
        let h = Host::live().with_sysroot("/sysroot");
        assert_eq!(
            h.os_file("/etc/containerd/config.toml"),
            PathBuf::from("/sysroot/etc/containerd/config.toml")
        );
        assert_eq!(
            h.in_namespace("/var/lib/containerd"),
            PathBuf::from("/sysroot/var/lib/containerd")
        );
        assert_eq!(h.mountinfo(), PathBuf::from("/proc/self/mountinfo"));
        assert_eq!(h.dev("vdb"), PathBuf::from("/dev/vdb"));
        let dirs = h.config_dirs();
        assert_eq!(
            dirs[0],
            PathBuf::from("/sysroot/usr/lib/containerd-guard/config.d")
        );
        assert_eq!(dirs[1], PathBuf::from("/run/containerd-guard/config.d"));
        assert_eq!(
            dirs[2],
            PathBuf::from("/sysroot/etc/containerd-guard/config.d")
        );
    }
}
