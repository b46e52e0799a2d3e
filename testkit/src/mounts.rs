//! Filesystem images, loop devices and mounts, each released by `Drop`.
//!
//! Drop order matters and is encoded in [`LoopVolume`]'s field order: unmount first, then
//! detach the loop device, then delete the image file. Only devices and mounts created
//! here are ever touched (never `losetup -D`).

use super::{is_mount_point, poll_until, run, run_quiet};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsKind {
    Ext4,
    Xfs,
    Btrfs,
}

impl FsKind {
    pub fn name(self) -> &'static str {
        match self {
            FsKind::Ext4 => "ext4",
            FsKind::Xfs => "xfs",
            FsKind::Btrfs => "btrfs",
        }
    }
    /// Smallest image the mkfs tool accepts, with room for tests.
    pub fn default_size(self) -> u64 {
        match self {
            FsKind::Ext4 => 64 << 20,
            // xfsprogs >= 5.19 refuses filesystems under 300 MiB; the file is sparse.
            FsKind::Xfs => 320 << 20,
            // btrfs-progs refuses filesystems under 114 MiB (single metadata profile).
            FsKind::Btrfs => 256 << 20,
        }
    }
}

/// A sparse image file, optionally formatted. Deleted with its directory by the caller's
/// tempdir; this type owns only the path.
#[derive(Debug)]
pub struct Image {
    pub path: PathBuf,
    pub size: u64,
}

impl Image {
    /// Creates a sparse file of `size` bytes at `path`.
    pub fn sparse(path: impl Into<PathBuf>, size: u64) -> Image {
        let path = path.into();
        let f = std::fs::File::create(&path)
            .unwrap_or_else(|e| panic!("cannot create image {}: {e}", path.display()));
        f.set_len(size)
            .unwrap_or_else(|e| panic!("cannot size image {}: {e}", path.display()));
        Image { path, size }
    }

    /// A sparse file formatted with `kind`, carrying `label` and, when given, `uuid`.
    /// Formatting a plain file needs no loop device, so the device can "appear" later.
    pub fn formatted(
        path: impl Into<PathBuf>,
        kind: FsKind,
        label: &str,
        uuid: Option<&str>,
        extra_mkfs_args: &[&str],
    ) -> Image {
        let img = Image::sparse(path, kind.default_size());
        mkfs(&img.path, kind, label, uuid, extra_mkfs_args);
        img
    }

    pub fn attach(&self) -> LoopDevice {
        LoopDevice::attach(&self.path, false)
    }
}

/// Formats a file or device.
pub fn mkfs(target: &Path, kind: FsKind, label: &str, uuid: Option<&str>, extra: &[&str]) {
    let t = target.to_str().expect("utf-8 path");
    let mut args: Vec<&str> = Vec::new();
    match kind {
        FsKind::Ext4 => {
            args.extend(["-q", "-F", "-L", label]);
            if let Some(u) = uuid {
                args.extend(["-U", u]);
            }
            args.extend(extra);
            args.push(t);
            run("mkfs.ext4", &args);
        }
        FsKind::Xfs => {
            let m;
            args.extend(["-q", "-f", "-L", label]);
            if let Some(u) = uuid {
                m = format!("uuid={u}");
                args.extend(["-m", &m]);
            }
            args.extend(extra);
            args.push(t);
            run("mkfs.xfs", &args);
        }
        FsKind::Btrfs => {
            args.extend(["-q", "-f", "-L", label]);
            if let Some(u) = uuid {
                args.extend(["-U", u]);
            }
            args.extend(extra);
            args.push(t);
            run("mkfs.btrfs", &args);
        }
    }
}

/// A loop device this test attached; detached on drop.
#[derive(Debug)]
pub struct LoopDevice {
    /// `/dev/loopN`
    pub path: PathBuf,
    /// `loopN`
    pub name: String,
}

impl LoopDevice {
    /// `losetup --find --show [--partscan] FILE`.
    pub fn attach(file: &Path, partscan: bool) -> LoopDevice {
        let f = file.to_str().expect("utf-8 path");
        let mut args = vec!["--find", "--show"];
        if partscan {
            args.push("--partscan");
        }
        args.push(f);
        let dev = run("losetup", &args).trim().to_string();
        assert!(
            dev.starts_with("/dev/loop"),
            "losetup printed {dev:?}, not a loop device"
        );
        let name = dev.trim_start_matches("/dev/").to_string();
        let lo = LoopDevice {
            path: PathBuf::from(&dev),
            name,
        };
        // devtmpfs creates the node; wait until it is a block device.
        poll_until(&format!("{dev} to exist"), Duration::from_secs(5), || {
            std::fs::metadata(&lo.path).ok().map(|_| ())
        });
        lo
    }

    /// Partition `n` (1-based) of a device attached with `partscan`: `/dev/loopNpM`.
    ///
    /// Some kernels lack the GPT parser (`CONFIG_EFI_PARTITION` unset), so `--partscan`
    /// finds nothing: then `partx --add` reads the table in user space and registers the
    /// partitions with BLKPG. They go away when the device is detached.
    pub fn partition(&self, n: u32) -> PathBuf {
        let p = PathBuf::from(format!("{}p{n}", self.path.display()));
        let sys = PathBuf::from(format!("/sys/class/block/{}p{n}", self.name));
        if !sys.exists() {
            let dev = self.path.to_string_lossy().into_owned();
            run("partx", &["--add", "--nr", &n.to_string(), &dev]);
        }
        poll_until(
            &format!("{} to exist", p.display()),
            Duration::from_secs(5),
            || {
                use std::os::unix::fs::FileTypeExt;
                std::fs::metadata(&p)
                    .ok()
                    .filter(|m| m.file_type().is_block_device())
                    .map(|_| ())
            },
        );
        p
    }

    /// `major:minor` as the kernel reports it in sysfs.
    pub fn devnum(&self) -> String {
        std::fs::read_to_string(format!("/sys/class/block/{}/dev", self.name))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    pub fn mount(&self, at: &Path, options: &str) -> Mount {
        Mount::device(&self.path, at, options)
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let dev = self.path.to_string_lossy().into_owned();
        // Partitions registered by hand (see `partition`) must not outlive the device.
        let has_parts = std::fs::read_dir(format!("/sys/class/block/{}", self.name))
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with(&self.name))
            })
            .unwrap_or(false);
        if has_parts {
            let _ = run_quiet("partx", &["--delete", &dev]);
        }
        // The kernel may hold the device a moment after umount; retry briefly.
        for _ in 0..50 {
            if run_quiet("losetup", &["-d", &dev]) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("warning: could not detach {dev}; detach it by hand: losetup -d {dev}");
    }
}

/// A mount this test made; unmounted on drop (lazily if it is busy).
#[derive(Debug)]
pub struct Mount {
    pub target: PathBuf,
}

impl Mount {
    /// `mount [-o OPTIONS] DEVICE TARGET`
    pub fn device(device: &Path, target: &Path, options: &str) -> Mount {
        std::fs::create_dir_all(target).expect("mount point");
        let (d, t) = (device.to_str().unwrap(), target.to_str().unwrap());
        let mut args = Vec::new();
        if !options.is_empty() {
            args.extend(["-o", options]);
        }
        args.extend([d, t]);
        run("mount", &args);
        Mount {
            target: target.to_path_buf(),
        }
    }

    /// `mount -t FSTYPE [-o OPTIONS] SOURCE TARGET` (tmpfs, overlay, ...).
    pub fn fs(fstype: &str, source: &str, target: &Path, options: &str) -> Mount {
        std::fs::create_dir_all(target).expect("mount point");
        let t = target.to_str().unwrap();
        let mut args = vec!["-t", fstype];
        if !options.is_empty() {
            args.extend(["-o", options]);
        }
        args.extend([source, t]);
        run("mount", &args);
        Mount {
            target: target.to_path_buf(),
        }
    }

    /// `mount --bind SOURCE TARGET`
    pub fn bind(source: &Path, target: &Path) -> Mount {
        std::fs::create_dir_all(target).expect("mount point");
        run(
            "mount",
            &["--bind", source.to_str().unwrap(), target.to_str().unwrap()],
        );
        Mount {
            target: target.to_path_buf(),
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let t = self.target.to_string_lossy().into_owned();
        if !is_mount_point(&self.target) {
            return;
        }
        if !run_quiet("umount", &[&t]) {
            // Busy (a process still has a file open): detach it so the test run ends clean.
            let _ = run_quiet("umount", &["-l", &t]);
        }
    }
}

/// A formatted image on a loop device mounted at a path: the ephemeral volume.
/// Fields drop in order: mount, then loop device.
#[derive(Debug)]
pub struct LoopVolume {
    pub mount: Option<Mount>,
    pub device: LoopDevice,
    pub image: Image,
    pub kind: FsKind,
    pub label: String,
    pub uuid: String,
}

impl LoopVolume {
    /// Creates `image` in `dir`, formats it, attaches it and mounts it at `at`.
    pub fn new(dir: &Path, kind: FsKind, label: &str, at: &Path) -> LoopVolume {
        LoopVolume::with(dir, kind, label, &[], at, "")
    }

    /// As [`LoopVolume::new`] with extra mkfs arguments and mount options.
    pub fn with(
        dir: &Path,
        kind: FsKind,
        label: &str,
        mkfs_args: &[&str],
        at: &Path,
        mount_options: &str,
    ) -> LoopVolume {
        let mut v = LoopVolume::unmounted(dir, kind, label, mkfs_args);
        v.mount = Some(v.device.mount(at, mount_options));
        v
    }

    /// Formatted and attached, not mounted.
    pub fn unmounted(dir: &Path, kind: FsKind, label: &str, mkfs_args: &[&str]) -> LoopVolume {
        let uuid = super::random_uuid();
        let file = dir.join(format!("{label}.{}.img", kind.name()));
        let image = Image::formatted(file, kind, label, Some(&uuid), mkfs_args);
        let device = image.attach();
        LoopVolume {
            mount: None,
            device,
            image,
            kind,
            label: label.to_string(),
            uuid,
        }
    }

    pub fn mount_at(&mut self, at: &Path, options: &str) {
        self.mount = Some(self.device.mount(at, options));
    }

    pub fn mount_point(&self) -> &Path {
        &self.mount.as_ref().expect("volume is mounted").target
    }
}

/// Writes zeros to `path` 4 KiB at a time until its filesystem is full (as root: down to
/// the last block, the reserved ones included).
pub fn fill(path: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    let block = [0u8; 4096];
    loop {
        match f.write(&block) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(nix::libc::ENOSPC) => break,
            Err(e) => panic!("fill {}: {e}", path.display()),
        }
    }
    let _ = f.sync_all();
}

/// Trips a filesystem error on the ext4 of loop device `device` (mounted at `at` with
/// `errors=remount-ro`) and waits until mountinfo shows it read-only (`emergency_ro`).
pub fn trip_ext4_error(device: &LoopDevice, at: &Path) {
    let trigger = format!("/sys/fs/ext4/{}/trigger_fs_error", device.name);
    assert!(
        Path::new(&trigger).exists(),
        "this test needs {trigger} (ext4 sysfs error trigger)"
    );
    std::fs::write(&trigger, "1").expect("trip the filesystem error");
    let path = at.display().to_string();
    crate::poll::poll_until(
        "emergency_ro in mountinfo",
        std::time::Duration::from_secs(5),
        || {
            std::fs::read_to_string("/proc/self/mountinfo")
                .unwrap()
                .lines()
                .any(|l| l.contains(&path) && l.contains("emergency_ro"))
                .then_some(())
        },
    );
}
