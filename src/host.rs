//! Every host path the guard reads goes through [`Host`], so that probes can be pointed
//! at a fixture tree copied from a real machine (or at `/sysroot` in the initrd) instead of
//! the live `/`. Nothing else in the crate builds an absolute host path by hand.

use std::path::{Component, Path, PathBuf};

/// The filesystem root the probes read from. `/` on a live node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    root: PathBuf,
}

impl Default for Host {
    fn default() -> Self {
        Host::live()
    }
}

impl Host {
    /// The running machine.
    pub fn live() -> Host {
        Host {
            root: PathBuf::from("/"),
        }
    }

    /// A fixture tree or a not-yet-switched-to root such as `/sysroot`.
    pub fn at(root: impl Into<PathBuf>) -> Host {
        Host { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
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

    /// Where systemd-style config directories live, lowest precedence first.
    pub fn config_dirs(&self) -> [PathBuf; 3] {
        [
            self.path("/usr/lib/containerd-guard/config.d"),
            self.path("/run/containerd-guard/config.d"),
            self.path("/etc/containerd-guard/config.d"),
        ]
    }

    /// This boot's identity; the restart budget is per boot.
    pub fn boot_id_path(&self) -> PathBuf {
        self.proc("sys/kernel/random/boot_id")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
