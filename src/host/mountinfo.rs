//! `/proc/PID/mountinfo`, parsed by hand because the fields carry octal escapes
//! (`\040` for a space, `\011` tab, `\012` newline, `\134` backslash) that procfs leaves
//! encoded: a mount point with a space would otherwise never match its path.

use std::path::{Path, PathBuf};

/// A block device number, as the kernel shows it (`major:minor`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DevNum {
    pub major: u32,
    pub minor: u32,
}

impl DevNum {
    pub fn from_raw(dev: u64) -> DevNum {
        DevNum {
            major: nix::sys::stat::major(dev) as u32,
            minor: nix::sys::stat::minor(dev) as u32,
        }
    }

    /// Parses `"8:1"` as found in mountinfo and sysfs `dev` files.
    pub fn parse(text: &str) -> Option<DevNum> {
        let (major, minor) = text.trim().split_once(':')?;
        Some(DevNum {
            major: major.parse().ok()?,
            minor: minor.parse().ok()?,
        })
    }

    /// Anonymous devices (major 0) back tmpfs, overlay, proc: never a disk.
    pub fn is_anonymous(&self) -> bool {
        self.major == 0
    }
}

impl std::fmt::Display for DevNum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub mount_id: u64,
    pub parent_id: u64,
    pub dev: DevNum,
    /// The directory of the filesystem that is mounted (not `/` for bind mounts).
    pub fs_root: PathBuf,
    pub mount_point: PathBuf,
    /// Per-mount options (`rw`, `ro`, `nosuid`...).
    pub mount_options: Vec<String>,
    pub fstype: String,
    pub source: String,
    /// Superblock options; `ro` here means the filesystem itself went read-only.
    pub super_options: Vec<String>,
}

impl MountEntry {
    /// Read-only either for this mount or for the whole filesystem
    /// (an `errors=remount-ro` trip shows up in the superblock options).
    pub fn is_read_only(&self) -> bool {
        // Since Linux 6.x an ext4 error trip shows as `emergency_ro`, not `ro`.
        self.mount_options.iter().any(|o| o == "ro")
            || self
                .super_options
                .iter()
                .any(|o| o == "ro" || o == "emergency_ro")
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountTable {
    pub entries: Vec<MountEntry>,
    /// Only the mounts a look asked the kernel for one by one (`statmount`), not the
    /// whole table: a mount missing here may still exist.
    pub partial: bool,
}

/// The most of a mount table the guard reads: about 40,000 mounts.
pub const MOUNTINFO_CAP: u64 = 8 << 20;

impl MountTable {
    pub fn parse(text: &str) -> Result<MountTable, String> {
        let entries = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(n, l)| {
                parse_line(l).ok_or_else(|| format!("line {}: cannot parse {l:?}", n + 1))
            })
            .collect::<Result<_, _>>()?;
        Ok(MountTable {
            entries,
            partial: false,
        })
    }

    /// Reads at most [`MOUNTINFO_CAP`] bytes: a process's mount table grows with every pod
    /// (each sandbox and container adds mounts), and the guard's memory must not.
    pub fn read(path: &Path) -> Result<MountTable, String> {
        let shown = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        let file = std::fs::File::open(path).map_err(|e| shown(&e))?;
        let bytes = crate::host::read_at_most(file, MOUNTINFO_CAP)
            .map_err(|e| shown(&e))?
            .ok_or_else(|| shown(&format!("larger than {} MiB", MOUNTINFO_CAP >> 20)))?;
        let text = String::from_utf8_lossy(&bytes);
        MountTable::parse(&text).map_err(|e| shown(&e))
    }

    /// The mount visible at exactly `path`: the last one stacked there wins.
    pub fn at(&self, path: &Path) -> Option<&MountEntry> {
        self.entries.iter().rev().find(|m| m.mount_point == path)
    }

    /// The mount whose filesystem `path` lives on (longest mount-point prefix, topmost).
    pub fn containing(&self, path: &Path) -> Option<&MountEntry> {
        self.entries
            .iter()
            .rev()
            .filter(|m| path.starts_with(&m.mount_point))
            .max_by_key(|m| m.mount_point.components().count())
    }

    pub fn root(&self) -> Option<&MountEntry> {
        self.at(Path::new("/"))
    }

    /// The few mounts a look needs, described one by one: a partial table.
    pub fn of_mounts(entries: Vec<MountEntry>) -> MountTable {
        MountTable {
            entries,
            partial: true,
        }
    }

    pub fn by_id(&self, mount_id: u64) -> Option<&MountEntry> {
        self.entries.iter().find(|m| m.mount_id == mount_id)
    }
}

/// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`
fn parse_line(line: &str) -> Option<MountEntry> {
    let (left, right) = line.split_once(" - ")?;
    let mut l = left.split(' ');
    let mount_id = l.next()?.parse().ok()?;
    let parent_id = l.next()?.parse().ok()?;
    let dev = DevNum::parse(l.next()?)?;
    let fs_root = PathBuf::from(unescape(l.next()?));
    let mount_point = PathBuf::from(unescape(l.next()?));
    let mount_options = l.next()?.split(',').map(String::from).collect();
    // The rest of the left side are optional fields (shared:N, master:N); not needed.
    let mut r = right.splitn(3, ' ');
    let fstype = unescape(r.next()?);
    let source = unescape(r.next()?);
    let super_options = r
        .next()
        .unwrap_or("")
        .split(',')
        .map(String::from)
        .collect();
    Some(MountEntry {
        mount_id,
        parent_id,
        dev,
        fs_root,
        mount_point,
        mount_options,
        fstype,
        source,
        super_options,
    })
}

/// Decodes the kernel's `\ooo` escapes; anything else is kept as written.
pub fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 3 < bytes.len() {
            let digits = &bytes[i + 1..i + 4];
            if digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let value = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(byte) = u8::try_from(value) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mount_table_over_the_cap_is_refused_naming_it_not_read_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mountinfo");
        let file = std::fs::File::create(&path).unwrap();
        file.set_len(MOUNTINFO_CAP + 1).unwrap(); // sparse: costs no disk
        let e = MountTable::read(&path).unwrap_err();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(e.contains("larger than 8 MiB"), "{e}");
    }

    fn fixture(name: &str) -> MountTable {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/mountinfo")
            .join(name);
        MountTable::read(&p).unwrap()
    }

    #[test]
    fn escapes_are_decoded() {
        assert_eq!(unescape(r"/mnt/with\040space"), "/mnt/with space");
        assert_eq!(unescape(r"/a\011tab\012nl\134bs"), "/a\ttab\nnl\\bs");
        assert_eq!(
            unescape(r"/trailing\04"),
            r"/trailing\04",
            "short escape kept"
        );
        assert_eq!(unescape(r"/x\999"), r"/x\999", "non-octal kept");
        assert_eq!(unescape(r"\"), r"\");
    }

    #[test]
    fn a_mount_point_with_a_space_is_found_by_its_real_path() {
        let t = fixture("real-loop-bind-stacked.txt");
        let m = t
            .at(Path::new("/var/lib/containerd data"))
            .expect("escaped mount point");
        assert_eq!(m.fstype, "ext4");
        assert_eq!(m.dev, DevNum { major: 7, minor: 0 });
        let tab = t.at(Path::new("/mnt/tab\there")).expect("tab escape");
        assert_eq!(tab.source, "/dev/loop1");
    }

    #[test]
    fn tkgs_layout_has_the_ephemeral_disk_at_containerd_root() {
        let t = fixture("tkgs-worker.txt");
        let root = t.root().unwrap();
        let eph = t.at(Path::new("/var/lib/containerd")).unwrap();
        assert_ne!(root.dev, eph.dev);
        assert_eq!(eph.fstype, "ext4");
        assert_eq!(eph.source, "/dev/sdb");
        assert_eq!(
            t.containing(Path::new(
                "/var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db"
            ))
            .unwrap()
            .mount_id,
            eph.mount_id
        );
        assert_eq!(
            t.containing(Path::new("/var/lib/kubelet"))
                .unwrap()
                .mount_id,
            root.mount_id
        );
    }

    #[test]
    fn overlay_root_of_a_container_host() {
        let t = fixture("container-overlay-root.txt");
        let root = t.root().unwrap();
        assert_eq!(root.fstype, "overlay");
        assert!(root.dev.is_anonymous());
    }

    #[test]
    fn bind_mount_shows_its_filesystem_root_and_stacking_picks_the_top() {
        let t = fixture("real-loop-bind-stacked.txt");
        let bind = t.at(Path::new("/var/lib/containerd")).unwrap();
        assert_eq!(
            bind.fs_root,
            Path::new("/srv/containerd"),
            "bind of a root-fs directory"
        );
        assert_eq!(bind.dev, t.root().unwrap().dev);
        let stacked = t.at(Path::new("/mnt/stack")).unwrap();
        assert_eq!(
            stacked.fstype, "tmpfs",
            "the later, upper mount is the visible one"
        );
    }

    #[test]
    fn read_only_in_either_option_set() {
        let t = fixture("real-loop-bind-stacked.txt");
        assert!(t.at(Path::new("/mnt/ro")).unwrap().is_read_only());
        assert!(
            t.at(Path::new("/mnt/remounted-ro")).unwrap().is_read_only(),
            "errors=remount-ro trip"
        );
        assert!(!t.root().unwrap().is_read_only());
    }

    #[test]
    fn garbage_is_an_error_with_a_line_number() {
        let err = MountTable::parse("22 1 8:1 / / rw - ext4 /dev/sda1 rw\nnonsense\n").unwrap_err();
        assert!(err.starts_with("line 2:"), "{err}");
    }
}
