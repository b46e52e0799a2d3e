//! Resolves `[volume] device` to a device number. udev's `/dev/disk/by-*` links are used
//! when they exist; otherwise every block device in sysfs is read directly, so the answer
//! does not depend on udev having run. Two devices carrying the same label or UUID (a
//! cloned disk) is reported, never guessed between.

use super::mountinfo::DevNum;
use super::superblock::{read_identity, read_partition};
use crate::host::Host;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    Found {
        dev: DevNum,
        node: PathBuf,
        how: String,
    },
    /// Nothing carries that name (yet): worth waiting for.
    Absent { looked: String },
    /// The name is ambiguous or the path is not a block device: waiting will not help.
    Invalid { problem: String },
}

pub fn resolve(host: &Host, spec: &DeviceSpec) -> Lookup {
    if let DeviceSpec::Path(path) = spec {
        return match block_dev(&host.path(path)) {
            Ok(Some(dev)) => Lookup::Found {
                dev,
                node: path.clone(),
                how: format!("{} is block device {dev}", path.display()),
            },
            Ok(None) => Lookup::Invalid {
                problem: format!("{} exists but is not a block device", path.display()),
            },
            Err(_) => Lookup::Absent {
                looked: format!("{} does not exist", path.display()),
            },
        };
    }
    let (dir, value) = match spec {
        DeviceSpec::Label(v) => ("by-label", v),
        DeviceSpec::Uuid(v) => ("by-uuid", v),
        DeviceSpec::PartUuid(v) => ("by-partuuid", v),
        DeviceSpec::PartLabel(v) => ("by-partlabel", v),
        DeviceSpec::Path(_) => unreachable!("handled above"),
    };
    let link = Path::new("/dev/disk").join(dir).join(udev_escape(value));
    if let Ok(Some(dev)) = block_dev(&host.path(&link)) {
        return Lookup::Found {
            dev,
            node: link.clone(),
            how: format!("udev link {} -> {dev}", link.display()),
        };
    }
    scan_sysfs(host, spec, &link)
}

/// How the ephemeral volume is named in `[volume] device`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    Label(String),
    Uuid(String),
    PartUuid(String),
    PartLabel(String),
    Path(PathBuf),
}

impl DeviceSpec {
    pub fn parse(text: &str) -> Option<DeviceSpec> {
        let (tag, value) = match text.split_once('=') {
            Some((tag, value)) if !value.is_empty() => (tag, value),
            Some(_) => return None,
            None if text.starts_with("/dev/") && text.len() > 5 => {
                return Some(DeviceSpec::Path(PathBuf::from(text)))
            }
            None => return None,
        };
        Some(match tag {
            "LABEL" => DeviceSpec::Label(value.into()),
            "UUID" => DeviceSpec::Uuid(value.to_ascii_lowercase()),
            "PARTUUID" => DeviceSpec::PartUuid(value.to_ascii_lowercase()),
            "PARTLABEL" => DeviceSpec::PartLabel(value.into()),
            _ => return None,
        })
    }
}

impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Label(v) => write!(f, "LABEL={v}"),
            DeviceSpec::Uuid(v) => write!(f, "UUID={v}"),
            DeviceSpec::PartUuid(v) => write!(f, "PARTUUID={v}"),
            DeviceSpec::PartLabel(v) => write!(f, "PARTLABEL={v}"),
            DeviceSpec::Path(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Every block device the kernel knows, read directly.
fn scan_sysfs(host: &Host, spec: &DeviceSpec, link: &Path) -> Lookup {
    let class = host.sys("class/block");
    let Ok(entries) = std::fs::read_dir(&class) else {
        return Lookup::Absent {
            looked: format!(
                "no udev link {} and {} is unreadable",
                link.display(),
                class.display()
            ),
        };
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut matches = Vec::new();
    for name in &names {
        let sys = class.join(name);
        let Some(dev) = std::fs::read_to_string(sys.join("dev"))
            .ok()
            .and_then(|t| DevNum::parse(&t))
        else {
            continue;
        };
        let node = Path::new("/dev").join(devname(&sys).unwrap_or_else(|| name.clone()));
        if carries(host, spec, &sys, &node) {
            matches.push((dev, node));
        }
    }
    scanned(spec, link, names.len(), matches)
}

/// Whether the device at `sys` (its node `node`) carries `spec`.
fn carries(host: &Host, spec: &DeviceSpec, sys: &Path, node: &Path) -> bool {
    let identity = || read_identity(&host.path(node)).ok().flatten();
    match spec {
        DeviceSpec::Label(want) => identity().is_some_and(|id| &id.label == want),
        DeviceSpec::Uuid(want) => identity().is_some_and(|id| &id.uuid == want),
        DeviceSpec::PartUuid(want) => partition_of(host, sys).is_some_and(|p| &p.partuuid == want),
        DeviceSpec::PartLabel(want) => {
            partition_of(host, sys).is_some_and(|p| p.partlabel.as_ref() == Some(want))
        }
        DeviceSpec::Path(_) => false,
    }
}

/// The scan's answer: one device carrying `spec` is found; none is absent; several is
/// refused rather than guessed.
fn scanned(
    spec: &DeviceSpec,
    link: &Path,
    devices: usize,
    mut matches: Vec<(DevNum, PathBuf)>,
) -> Lookup {
    match matches.len() {
        0 => Lookup::Absent {
            looked: format!(
                "no udev link {} and none of {devices} block devices carries {spec}",
                link.display(),
            ),
        },
        1 => {
            let (dev, node) = matches.remove(0);
            Lookup::Found {
                how: format!(
                    "{} carries {spec} (read from the device; no udev link)",
                    node.display()
                ),
                dev,
                node,
            }
        }
        _ => Lookup::Invalid {
            problem: format!(
                "{spec} is carried by {} devices: {}; refusing to guess (a cloned disk?)",
                matches.len(),
                matches
                    .iter()
                    .map(|(d, n)| format!("{} ({d})", n.display()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
    }
}

fn devname(sys: &Path) -> Option<String> {
    let uevent = std::fs::read_to_string(sys.join("uevent")).ok()?;
    uevent
        .lines()
        .find_map(|l| l.strip_prefix("DEVNAME=").map(String::from))
}

fn partition_of(host: &Host, sys: &Path) -> Option<super::superblock::PartitionIdentity> {
    let number: u32 = std::fs::read_to_string(sys.join("partition"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    // The partition's sysfs directory sits inside its disk's directory.
    let disk_sys = std::fs::canonicalize(sys).ok()?.parent()?.to_path_buf();
    let disk = devname(&disk_sys)?;
    let sector: u64 = std::fs::read_to_string(disk_sys.join("queue/logical_block_size"))
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(512);
    read_partition(&host.path(Path::new("/dev").join(disk)), number, sector)
        .ok()
        .flatten()
}

/// A mounted btrfs filesystem and the block devices behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BtrfsDevices {
    /// The filesystem's UUID (its fsid).
    pub fsid: String,
    /// Every device the kernel lists for it (`/sys/fs/btrfs/<fsid>/devices`): name and number.
    pub devices: Vec<(String, DevNum)>,
}

/// The devices behind a btrfs mount whose mountinfo source is `source`. btrfs shows an
/// anonymous device number in mountinfo (`0:N`, one per subvolume), never its disk's, so
/// the disk is found from the source instead: the device node there carries the filesystem
/// (its fsid, read from the superblock), and the kernel's list of that mounted
/// filesystem's devices must include it, or the source does not describe this mount.
pub fn btrfs_devices(host: &Host, source: &str) -> Result<BtrfsDevices, String> {
    let node = host.path(source);
    let source_dev = match block_dev(&node) {
        Ok(Some(dev)) => dev,
        Ok(None) => return Err(format!("the mount's source {source} is not a block device")),
        Err(e) => return Err(format!("the mount's source {source}: {e}")),
    };
    let fsid = match read_identity(&node) {
        Ok(Some(id)) if id.fstype == "btrfs" => id.uuid,
        Ok(_) => return Err(format!("{source} carries no btrfs superblock")),
        Err(e) => return Err(format!("cannot read the superblock of {source}: {e}")),
    };
    let dir = host.sys(format!("fs/btrfs/{fsid}/devices"));
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut devices: Vec<(String, DevNum)> = entries
        .flatten()
        .filter_map(|e| {
            let dev = std::fs::read_to_string(e.path().join("dev")).ok()?;
            Some((
                e.file_name().to_string_lossy().into_owned(),
                DevNum::parse(&dev)?,
            ))
        })
        .collect();
    devices.sort();
    if !devices.iter().any(|(_, d)| *d == source_dev) {
        return Err(format!(
            "{source} ({source_dev}) is not among the devices the kernel lists in {}",
            dir.display()
        ));
    }
    Ok(BtrfsDevices { fsid, devices })
}

/// `Ok(Some)` for a block device, `Ok(None)` for anything else, `Err` when absent.
pub fn block_dev(path: &Path) -> std::io::Result<Option<DevNum>> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path)?;
    Ok(meta
        .file_type()
        .is_block_device()
        .then(|| DevNum::from_raw(meta.rdev())))
}

/// udev's escaping of names in `/dev/disk/by-label/`: ASCII outside its safe set becomes
/// `\xHH`; valid UTF-8 beyond ASCII is kept as is.
pub fn udev_escape(value: &str) -> String {
    value
        .chars()
        .map(|c| {
            if !c.is_ascii() || c.is_ascii_alphanumeric() || "#+-.:=@_".contains(c) {
                c.to_string()
            } else {
                format!("\\x{:02x}", c as u32)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udev_escapes_like_udev() {
        assert_eq!(udev_escape("eph"), "eph");
        assert_eq!(udev_escape("eph disk"), "eph\\x20disk");
        assert_eq!(udev_escape("a/b"), "a\\x2fb");
        assert_eq!(udev_escape("dätä 1"), "dätä\\x201");
    }

    #[test]
    fn missing_path_is_absent_and_regular_file_is_invalid() {
        let tmp = tempfile::tempdir().unwrap();
        let host = Host::at(tmp.path());
        assert!(matches!(
            resolve(&host, &DeviceSpec::Path("/dev/vdb".into())),
            Lookup::Absent { .. }
        ));
        std::fs::create_dir_all(host.path("/dev")).unwrap();
        std::fs::write(host.path("/dev/vdb"), "").unwrap();
        assert!(matches!(
            resolve(&host, &DeviceSpec::Path("/dev/vdb".into())),
            Lookup::Invalid { .. }
        ));
    }

    #[test]
    fn label_without_links_or_sysfs_is_absent_with_what_was_looked_at() {
        let tmp = tempfile::tempdir().unwrap();
        match resolve(&Host::at(tmp.path()), &DeviceSpec::Label("eph".into())) {
            Lookup::Absent { looked } => {
                assert!(looked.contains("/dev/disk/by-label/eph"), "{looked}")
            }
            other => panic!("{other:?}"),
        }
    }
}
