//! Reads a filesystem's label and UUID straight from its superblock, and partition
//! GUIDs and names from a GPT (or MBR) table, so `LABEL=`/`UUID=`/`PARTUUID=`/`PARTLABEL=`
//! resolve even before udev has made `/dev/disk/by-*` links (early boot, initrd, tests).
//!
//! Why not libblkid: it is a C library that would have to be linked into a binary we also
//! ship in the initrd, and it is far larger than the four formats a containerd volume uses
//! (ext2/3/4, xfs, btrfs) plus GPT/MBR. These layouts are fixed on-disk formats.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// What the readers below read: a block device or image file, or bytes in memory (tests
/// and the fuzz targets).
pub trait Device: Read + Seek {}
impl<T: Read + Seek> Device for T {}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FsIdentity {
    pub fstype: &'static str,
    pub label: String,
    /// Lowercase `8-4-4-4-12` text, as `blkid` prints it.
    pub uuid: String,
}

fn read_at(dev: &mut impl Device, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    dev.seek(SeekFrom::Start(offset))?;
    let mut buf = vec![0u8; len];
    dev.read_exact(&mut buf)?;
    Ok(buf)
}

fn uuid_text(b: &[u8]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// GPT stores the first three GUID fields little-endian.
fn guid_text(b: &[u8]) -> String {
    let mut swapped = [0u8; 16];
    swapped[..4].copy_from_slice(&[b[3], b[2], b[1], b[0]]);
    swapped[4..6].copy_from_slice(&[b[5], b[4]]);
    swapped[6..8].copy_from_slice(&[b[7], b[6]]);
    swapped[8..].copy_from_slice(&b[8..16]);
    uuid_text(&swapped)
}

fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|&x| x == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Where each known filesystem keeps its magic, UUID and label. Offsets are relative to
/// the superblock, which starts at `at` bytes into the device.
struct Layout {
    fstype: &'static str,
    at: u64,
    magic_at: usize,
    magic: &'static [u8],
    uuid_at: usize,
    label: std::ops::Range<usize>,
}

const LAYOUTS: &[Layout] = &[
    // ext2/3/4: little-endian 0xEF53.
    Layout {
        fstype: "ext4",
        at: 1024,
        magic_at: 0x38,
        magic: &[0x53, 0xef],
        uuid_at: 0x68,
        label: 0x78..0x88,
    },
    Layout {
        fstype: "xfs",
        at: 0,
        magic_at: 0,
        magic: b"XFSB",
        uuid_at: 32,
        label: 108..120,
    },
    Layout {
        fstype: "btrfs",
        at: 0x10000,
        magic_at: 0x40,
        magic: b"_BHRfS_M",
        uuid_at: 0x20,
        label: 0x12b..0x22b,
    },
];

/// Identifies the filesystem on `device`, or `None` when none of the known formats is there.
pub fn read_identity(device: &Path) -> io::Result<Option<FsIdentity>> {
    identify(&mut File::open(device)?)
}

/// [`read_identity`] of an open device.
pub fn identify(f: &mut impl Device) -> io::Result<Option<FsIdentity>> {
    for l in LAYOUTS {
        // A device too small for this layout's superblock simply is not this format.
        let Ok(sb) = read_at(f, l.at, l.label.end) else {
            continue;
        };
        if &sb[l.magic_at..l.magic_at + l.magic.len()] == l.magic {
            return Ok(Some(FsIdentity {
                fstype: l.fstype,
                uuid: uuid_text(&sb[l.uuid_at..l.uuid_at + 16]),
                label: c_string(&sb[l.label.clone()]),
            }));
        }
    }
    Ok(None)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionIdentity {
    /// GPT unique partition GUID, or `SSSSSSSS-NN` from an MBR disk signature.
    pub partuuid: String,
    /// GPT partition name; MBR partitions have none.
    pub partlabel: Option<String>,
}

/// Reads partition `number` (1-based, as in sysfs `partition`) of `disk`.
pub fn read_partition(
    disk: &Path,
    number: u32,
    sector: u64,
) -> io::Result<Option<PartitionIdentity>> {
    if number == 0 {
        return Ok(None);
    }
    partition_of(&mut File::open(disk)?, number, sector)
}

/// [`read_partition`] of an open disk.
pub fn partition_of(
    f: &mut impl Device,
    number: u32,
    sector: u64,
) -> io::Result<Option<PartitionIdentity>> {
    if number == 0 {
        return Ok(None);
    }
    let header = read_at(f, sector, 92)?;
    if &header[0..8] == b"EFI PART" {
        let u64_at = |o: usize| u64::from_le_bytes(header[o..o + 8].try_into().unwrap_or_default());
        let u32_at = |o: usize| u32::from_le_bytes(header[o..o + 4].try_into().unwrap_or_default());
        let (entries_lba, count, size) = (u64_at(72), u32_at(80), u32_at(84));
        if number > count || !(128..=4096).contains(&size) {
            return Ok(None);
        }
        // The table's LBA is the disk's word: one past the end of a u64 is no table.
        let offset = entries_lba
            .checked_mul(sector)
            .and_then(|o| o.checked_add(u64::from(number - 1) * u64::from(size)));
        let Some(offset) = offset else {
            return Ok(None);
        };
        let entry = read_at(f, offset, 128)?;
        if entry[0..16].iter().all(|&b| b == 0) {
            return Ok(None); // unused entry
        }
        let name: Vec<u16> = entry[56..128]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .take_while(|&c| c != 0)
            .collect();
        return Ok(Some(PartitionIdentity {
            partuuid: guid_text(&entry[16..32]),
            partlabel: Some(String::from_utf16_lossy(&name)),
        }));
    }
    let mbr = read_at(f, 0, 512)?;
    if mbr[510..512] == [0x55, 0xaa] {
        let signature = u32::from_le_bytes([mbr[440], mbr[441], mbr[442], mbr[443]]);
        return Ok(Some(PartitionIdentity {
            partuuid: format!("{signature:08x}-{number:02x}"),
            partlabel: None,
        }));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// Makes a real filesystem image with the distribution's mkfs; the test fails with a
    /// clear message when the tool is missing (the test command installs it).
    fn mkfs(tool: &str, args: &[&str], size_mib: u64) -> tempfile::NamedTempFile {
        let img = tempfile::NamedTempFile::new().unwrap();
        img.as_file().set_len(size_mib << 20).unwrap();
        let status = Command::new(sbin_tool(tool))
            .args(args)
            .arg(img.path())
            .output()
            .unwrap_or_else(|e| panic!("{tool} is required for this test (apt-get install e2fsprogs xfsprogs btrfs-progs): {e}"));
        assert!(
            status.status.success(),
            "{tool} failed: {}",
            String::from_utf8_lossy(&status.stderr)
        );
        img
    }

    #[test]
    fn ext4_label_and_uuid_match_what_mkfs_wrote() {
        let img = mkfs(
            "mkfs.ext4",
            &[
                "-q",
                "-F",
                "-L",
                "eph disk",
                "-U",
                "0f4b7c1e-2d3a-4b5c-8d9e-a1b2c3d4e5f6",
            ],
            16,
        );
        let id = read_identity(img.path()).unwrap().unwrap();
        assert_eq!(id.fstype, "ext4");
        assert_eq!(id.label, "eph disk");
        assert_eq!(id.uuid, "0f4b7c1e-2d3a-4b5c-8d9e-a1b2c3d4e5f6");
    }

    #[test]
    fn xfs_label_and_uuid_match_what_mkfs_wrote() {
        let img = mkfs(
            "mkfs.xfs",
            &[
                "-q",
                "-f",
                "-L",
                "ephxfs",
                "-m",
                "uuid=11111111-2222-4333-8444-555555555555",
            ],
            300,
        );
        let id = read_identity(img.path()).unwrap().unwrap();
        assert_eq!(id.fstype, "xfs");
        assert_eq!(id.label, "ephxfs");
        assert_eq!(id.uuid, "11111111-2222-4333-8444-555555555555");
    }

    #[test]
    fn btrfs_label_and_uuid_match_what_mkfs_wrote() {
        let img = mkfs(
            "mkfs.btrfs",
            &[
                "-q",
                "-f",
                "-L",
                "ephbtrfs",
                "-U",
                "22222222-3333-4444-8555-666666666666",
            ],
            256,
        );
        let id = read_identity(img.path()).unwrap().unwrap();
        assert_eq!(id.fstype, "btrfs");
        assert_eq!(id.label, "ephbtrfs");
        // The fsid at 64 KiB + 0x20: the name of the filesystem's /sys/fs/btrfs directory.
        assert_eq!(id.uuid, "22222222-3333-4444-8555-666666666666");
    }

    #[test]
    fn blank_device_has_no_identity() {
        let img = tempfile::NamedTempFile::new().unwrap();
        img.as_file().set_len(1 << 20).unwrap();
        assert_eq!(read_identity(img.path()).unwrap(), None);
    }

    /// `tool` from `PATH` or the sbin directories, which a normal user's `PATH` lacks
    /// (Debian keeps `mkfs.*` and `sfdisk` in `/usr/sbin`; they run as any user on an image).
    fn sbin_tool(tool: &str) -> std::path::PathBuf {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(Into::into))
            .map(|d| d.join(tool))
            .find(|p| p.is_file())
            .unwrap_or_else(|| tool.into())
    }

    /// Partitions an image with util-linux's sfdisk, as an image builder would.
    fn sfdisk(img: &Path, script: &str) {
        let mut child = Command::new(sbin_tool("sfdisk"))
            .arg("-q")
            .arg(img)
            .stdin(std::process::Stdio::piped())
            .spawn()
            .expect("sfdisk (apt-get install fdisk) is required for this test");
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(script.as_bytes())
            .unwrap();
        assert!(child.wait().unwrap().success(), "sfdisk failed");
    }

    #[test]
    fn gpt_partition_guid_and_name_match_sfdisk() {
        let img = tempfile::NamedTempFile::new().unwrap();
        img.as_file().set_len(8 << 20).unwrap();
        let script = "label: gpt\nlabel-id: 5B9E3C2A-1111-4222-8333-444455556666\n\
                      start=2048, size=4096, name=\"containerd\", uuid=A1B2C3D4-E5F6-4789-8ABC-DEF012345678\n\
                      start=6144, size=4096, name=\"other\"\n";
        sfdisk(img.path(), script);
        let p = read_partition(img.path(), 1, 512).unwrap().unwrap();
        assert_eq!(p.partuuid, "a1b2c3d4-e5f6-4789-8abc-def012345678");
        assert_eq!(p.partlabel.as_deref(), Some("containerd"));
        assert_eq!(
            read_partition(img.path(), 2, 512)
                .unwrap()
                .unwrap()
                .partlabel
                .as_deref(),
            Some("other")
        );
        assert_eq!(
            read_partition(img.path(), 3, 512).unwrap(),
            None,
            "unused entry"
        );
    }

    #[test]
    fn mbr_partuuid_is_signature_dash_number() {
        let img = tempfile::NamedTempFile::new().unwrap();
        img.as_file().set_len(8 << 20).unwrap();
        sfdisk(
            img.path(),
            "label: dos\nlabel-id: 0xdeadbeef\nstart=2048, size=4096\n",
        );
        let p = read_partition(img.path(), 1, 512).unwrap().unwrap();
        assert_eq!(p.partuuid, "deadbeef-01");
        assert_eq!(p.partlabel, None);
    }

    /// A GPT header, in memory, whose entry table starts at `entries_lba`.
    fn gpt_disk(entries_lba: u64, count: u32, size: u32) -> Vec<u8> {
        let mut disk = vec![0u8; 2048];
        let h = &mut disk[512..];
        h[..8].copy_from_slice(b"EFI PART");
        h[72..80].copy_from_slice(&entries_lba.to_le_bytes());
        h[80..84].copy_from_slice(&count.to_le_bytes());
        h[84..88].copy_from_slice(&size.to_le_bytes());
        disk
    }

    #[test]
    fn a_gpt_table_beyond_any_disk_is_no_table_not_an_overflow() {
        // entries_lba * sector overflowed u64 (a panic in debug builds, a wrapped offset
        // in release); the table's LBA comes from the disk, so it is anything.
        let disk = gpt_disk(u64::MAX / 2, 4, 128);
        let got = partition_of(&mut std::io::Cursor::new(&disk), 1, 512).unwrap();
        assert_eq!(got, None);
        // A table past the end of this small disk is an I/O error, as on a real device.
        let disk = gpt_disk(1 << 40, 4, 128);
        assert!(partition_of(&mut std::io::Cursor::new(&disk), 1, 512).is_err());
        assert_eq!(
            partition_of(&mut std::io::Cursor::new(&disk), 0, 512).unwrap(),
            None
        );
    }
}
