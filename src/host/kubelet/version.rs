//! kubelet's version, where its contract changed (1.35 removed `--pod-infra-container-image`
//! and made `failCgroupV1` true by default). On a node it is what `kubelet --version` says
//! (run by `guard verify` only, never on kubelet's start path, and cached per boot keyed
//! on the binary's inode and mtime); in an image, `guard lint` never runs what the image
//! holds: it reads dpkg's record of the kubelet package, else the version Kubernetes'
//! release build writes into the binary's Go build information
//! (`-X k8s.io/component-base/version.gitVersion=v1.35.0`), scanned in bounded chunks.

use serde::{Deserialize, Serialize};
use std::io::Read;

/// `major.minor.patch`, ordered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Version(pub u32, pub u32, pub u32);

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

impl Version {
    /// kubelet 1.35: `--pod-infra-container-image` removed, `failCgroupV1` true by default.
    pub const CONTRACT_1_35: Version = Version(1, 35, 0);

    /// `1.35.0`, `v1.35.0`, `1.35.0-1.1` (a package's), `v1.35.0-rc.1+abc`: the leading
    /// three numbers.
    pub fn parse(text: &str) -> Option<Version> {
        let text = text.strip_prefix('v').unwrap_or(text);
        let end = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(text.len());
        let mut parts = text[..end].splitn(3, '.').map(|p| p.parse::<u32>().ok());
        let (major, minor) = (parts.next()??, parts.next()??);
        let patch = parts.next().flatten().unwrap_or(0);
        Some(Version(major, minor, patch))
    }
}

/// `kubelet --version`'s answer (`Kubernetes v1.35.0`).
pub fn from_version_output(text: &str) -> Option<Version> {
    let at = text.find("Kubernetes v")?;
    Version::parse(&text[at + "Kubernetes ".len()..])
}

/// dpkg's status file, and the most of it read (a full system's is a few MiB).
pub const DPKG_STATUS: &str = "/var/lib/dpkg/status";
pub const DPKG_STATUS_CAP: u64 = 64 << 20;

/// The installed kubelet package's version in dpkg's status file.
pub fn from_dpkg_status(text: &str) -> Option<Version> {
    dpkg_package_version(text, &["kubelet"])
}

/// The version of the first of `packages` dpkg's status file records as installed
/// (containerd is `containerd` in Debian, `containerd.io` in Docker's repository).
pub fn dpkg_package_version(text: &str, packages: &[&str]) -> Option<Version> {
    text.split("\n\n").find_map(|paragraph| {
        let field = |name: &str| {
            paragraph
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':').map(str::trim))
        };
        let installed = field("Status").is_some_and(|s| s.ends_with(" installed"));
        let wanted = field("Package").is_some_and(|p| packages.contains(&p));
        match wanted && installed {
            true => Version::parse(field("Version")?.split(':').next_back()?),
            false => None,
        }
    })
}

/// What Kubernetes' release build writes into the binary (Go's build settings keep the
/// linker flags).
const MARKER: &[u8] = b"k8s.io/component-base/version.gitVersion=v";
/// The most read of a binary (kubelet is about 80 MiB; its build information is near
/// the start of the data, but a few hundred MiB is the bound whatever it holds).
pub const BINARY_CAP: u64 = 512 << 20;

/// The version in a kubelet binary's build information, reading at most `cap` bytes in
/// chunks (never all of it at once). Read whole or not at all: a version whose text runs
/// into the next chunk is read on (`v1.3` of `v1.35.0` is no version), and one cut off by
/// the cap is not known.
pub fn from_binary(mut file: impl Read, cap: u64) -> Option<Version> {
    const CHUNK: usize = 1 << 20;
    let (mut window, mut chunk, mut read) = (Vec::new(), vec![0u8; CHUNK], 0u64);
    loop {
        match window.windows(MARKER.len()).position(|w| w == MARKER) {
            Some(at) => match whole(&window[at + MARKER.len()..]) {
                Some(text) => return Version::parse(text),
                None => drop(window.drain(..at)),
            },
            // (what may be the start of a marker stays for the next chunk)
            None => drop(window.drain(..window.len().saturating_sub(MARKER.len()))),
        }
        let want = CHUNK.min(usize::try_from(cap - read).unwrap_or(CHUNK));
        let n = match want {
            0 => return None, // the cap: a version cut off there is not known
            _ => file.read(&mut chunk[..want]).ok()?,
        };
        if n == 0 {
            // the end of the file ends the version's text
            let at = window.windows(MARKER.len()).position(|w| w == MARKER)?;
            return Version::parse(std::str::from_utf8(&window[at + MARKER.len()..]).ok()?);
        }
        read += n as u64;
        window.extend_from_slice(&chunk[..n]);
    }
}

/// The version's text at the start of `rest`, when something that is no part of it
/// follows within the bytes read.
fn whole(rest: &[u8]) -> Option<&str> {
    let end = rest
        .iter()
        .position(|b| !(b.is_ascii_digit() || *b == b'.'))?;
    std::str::from_utf8(&rest[..end]).ok()
}

/// A cached answer of `kubelet --version`: good for this boot and this binary only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cached {
    pub boot_id: String,
    pub binary: String,
    pub dev: u64,
    pub ino: u64,
    pub mtime_ns: i128,
    pub version: Version,
}

impl Cached {
    /// The key of `binary` as it is now.
    pub fn key_of(meta: &std::fs::Metadata) -> (u64, u64, i128) {
        use std::os::unix::fs::MetadataExt;
        let mtime = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
        (meta.dev(), meta.ino(), mtime)
    }

    /// Whether this record answers for `binary` (whose key is `key`) in boot `boot_id`.
    pub fn answers(&self, boot_id: &str, binary: &str, key: (u64, u64, i128)) -> bool {
        self.boot_id == boot_id
            && self.binary == binary
            && (self.dev, self.ino, self.mtime_ns) == key
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_as_kubelet_packages_and_builds_write_them() {
        assert_eq!(Version::parse("1.35.0-1.1"), Some(Version(1, 35, 0)));
        assert_eq!(Version::parse("v1.34.2"), Some(Version(1, 34, 2)));
        assert_eq!(Version::parse("v1.36.0-rc.1+abc"), Some(Version(1, 36, 0)));
        assert_eq!(Version::parse("1.35"), Some(Version(1, 35, 0)));
        assert_eq!(Version::parse("banana"), None);
        assert_eq!(
            from_version_output("Kubernetes v1.35.1\n"),
            Some(Version(1, 35, 1))
        );
        assert!(Version(1, 35, 1) >= Version::CONTRACT_1_35);
        assert!(Version(1, 34, 9) < Version::CONTRACT_1_35);
    }

    #[test]
    fn dpkg_status_names_only_an_installed_kubelet() {
        let status = "Package: kubeadm\nStatus: install ok installed\nVersion: 1.30.0-1.1\n\n\
                      Package: kubelet\nStatus: install ok installed\nVersion: 1.35.0-1.1\n";
        assert_eq!(from_dpkg_status(status), Some(Version(1, 35, 0)));
        let removed = "Package: kubelet\nStatus: deinstall ok config-files\nVersion: 1.35.0-1.1\n";
        assert_eq!(from_dpkg_status(removed), None);
    }

    #[test]
    fn dpkg_status_names_containerd_by_either_package_name_and_epoch() {
        let names = ["containerd", "containerd.io"];
        let debian =
            "Package: containerd\nStatus: install ok installed\nVersion: 1.6.20~ds1-1+b1\n";
        assert_eq!(
            dpkg_package_version(debian, &names),
            Some(Version(1, 6, 20))
        );
        let docker = "Package: containerd.io\nStatus: install ok installed\nVersion: 1:1.7.27-1\n";
        assert_eq!(
            dpkg_package_version(docker, &names),
            Some(Version(1, 7, 27))
        );
        let other = "Package: containerd-guard\nStatus: install ok installed\nVersion: 0.2.0\n";
        assert_eq!(dpkg_package_version(other, &names), None);
    }

    #[test]
    fn the_binary_scan_finds_the_marker_across_chunks_and_stops_at_its_cap() {
        let mut bin = vec![0u8; (1 << 20) - 10];
        bin.extend_from_slice(
            b"build\t-ldflags=\"-X 'k8s.io/component-base/version.gitVersion=v1.35.2' -X x\"",
        );
        assert_eq!(from_binary(&bin[..], BINARY_CAP), Some(Version(1, 35, 2)));
        assert_eq!(
            from_binary(&bin[..], 1 << 19),
            None,
            "past the cap nothing is read"
        );
        assert_eq!(from_binary(&b"no marker"[..], BINARY_CAP), None);
    }

    /// The version read whole wherever the chunks cut it: its text just past the first
    /// chunk, across the boundary (`v1.3|5.0`), at the very end of the file; cut by the cap,
    /// not known.
    #[test]
    fn the_binary_scan_reads_a_version_whole_or_not_at_all() {
        let text = b"k8s.io/component-base/version.gitVersion=v1.35.0' -X";
        let marker = text.iter().position(|b| *b == b'=').unwrap() + 1;
        for cut in [
            0,
            marker - 3,
            marker,
            marker + 3,
            marker + 4,
            marker + 6,
            text.len(),
        ] {
            let mut bin = vec![0u8; (1 << 20) - cut];
            bin.extend_from_slice(text);
            assert_eq!(
                from_binary(&bin[..], BINARY_CAP),
                Some(Version(1, 35, 0)),
                "cut at {cut}"
            );
        }
        let mut at_end = vec![0u8; 100];
        at_end.extend_from_slice(&text[..marker + 7]);
        assert_eq!(
            from_binary(&at_end[..], BINARY_CAP),
            Some(Version(1, 35, 0))
        );
        let mut capped = vec![0u8; (1 << 20) - marker - 3];
        capped.extend_from_slice(text);
        assert_eq!(
            from_binary(&capped[..], 1 << 20),
            None,
            "v1.3 at the cap is no version"
        );
    }
}
