//! A read-only reader of a bbolt file, the database containerd keeps its metadata in
//! (`io.containerd.metadata.v1.bolt/meta.db`): enough to walk its buckets and read values,
//! so a test reads which images containerd holds from the disk, not through a socket that
//! may be another containerd's (a stale one lists nothing).
//!
//! The format: fixed-size pages; pages 0 and 1 are meta pages (the newer valid one wins),
//! naming the root bucket's page. A bucket is a B+tree of branch pages (keys and child
//! page ids) and leaf pages (keys and values; a value flagged as a bucket holds a bucket
//! header, its root page, or, root 0, an inline page right after the header). Every offset
//! is checked against the file, and a walk deeper than [`MAX_DEPTH`] stops: the file may be
//! being written while it is read.

use std::path::Path;

const MAGIC: u32 = 0xED0C_DAED;
const PAGE_HEADER: usize = 16;
const ELEMENT: usize = 16;
const BRANCH: u16 = 0x01;
const LEAF: u16 = 0x02;
const BUCKET_VALUE: u32 = 0x01;
/// No real bucket tree is this deep; a cycle in a torn file would be.
const MAX_DEPTH: usize = 64;

/// A bbolt file, read whole.
pub struct Bolt {
    data: Vec<u8>,
    page_size: usize,
    root: u64,
}

/// A value in a bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Value(Vec<u8>),
    /// A nested bucket: its root page, or (0) its inline page's bytes.
    Bucket {
        root: u64,
        inline: Vec<u8>,
    },
}

impl Bolt {
    /// Reads `path`; an error names the file and what is wrong with it.
    pub fn open(path: &Path) -> Result<Bolt, String> {
        let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let metas = [0usize, 1].map(|n| meta(&data, n));
        let newest = metas.into_iter().flatten().max_by_key(|m| m.2);
        let (page_size, root, _) =
            newest.ok_or(format!("{}: no valid bbolt meta page", path.display()))?;
        Ok(Bolt {
            data,
            page_size,
            root,
        })
    }

    /// The root bucket's entries.
    pub fn root(&self) -> Vec<(Vec<u8>, Entry)> {
        self.entries(&Entry::Bucket {
            root: self.root,
            inline: Vec::new(),
        })
    }

    /// The entries of the bucket `bucket` (empty for a value or a broken page).
    pub fn entries(&self, bucket: &Entry) -> Vec<(Vec<u8>, Entry)> {
        let mut out = Vec::new();
        match bucket {
            Entry::Bucket { root: 0, inline } => walk(inline, &mut out),
            Entry::Bucket { root, .. } => self.walk_page(*root, 0, &mut out),
            Entry::Value(_) => {}
        }
        out
    }

    /// The entry at `path` from the root bucket, one key per level.
    pub fn get(&self, path: &[&[u8]]) -> Option<Entry> {
        let mut here = Entry::Bucket {
            root: self.root,
            inline: Vec::new(),
        };
        for key in path {
            here = self.entries(&here).into_iter().find(|(k, _)| k == key)?.1;
        }
        Some(here)
    }

    fn walk_page(&self, pgid: u64, depth: usize, out: &mut Vec<(Vec<u8>, Entry)>) {
        let Some(start) = (pgid as usize).checked_mul(self.page_size) else {
            return;
        };
        let Some(page) = self.data.get(start..) else {
            return;
        };
        if depth > MAX_DEPTH {
            return;
        }
        match u16_at(page, 8) {
            Some(BRANCH) => {
                for i in 0..u16_at(page, 10).unwrap_or(0) as usize {
                    if let Some(child) = u64_at(page, PAGE_HEADER + i * ELEMENT + 8) {
                        self.walk_page(child, depth + 1, out);
                    }
                }
            }
            _ => walk(page, out),
        }
    }
}

/// The elements of the leaf page at the start of `page` (an inline page, or a page of
/// the file from its start).
fn walk(page: &[u8], out: &mut Vec<(Vec<u8>, Entry)>) {
    if u16_at(page, 8) != Some(LEAF) {
        return;
    }
    for i in 0..u16_at(page, 10).unwrap_or(0) as usize {
        let at = PAGE_HEADER + i * ELEMENT;
        let (Some(flags), Some(pos), Some(ksize), Some(vsize)) = (
            u32_at(page, at),
            u32_at(page, at + 4),
            u32_at(page, at + 8),
            u32_at(page, at + 12),
        ) else {
            return;
        };
        let key_at = at + pos as usize;
        let value_at = key_at + ksize as usize;
        let (Some(key), Some(value)) = (
            page.get(key_at..value_at),
            page.get(value_at..value_at + vsize as usize),
        ) else {
            return;
        };
        let entry = match flags & BUCKET_VALUE {
            0 => Entry::Value(value.to_vec()),
            _ => Entry::Bucket {
                root: u64_at(value, 0).unwrap_or(0),
                inline: value.get(16..).unwrap_or_default().to_vec(),
            },
        };
        out.push((key.to_vec(), entry));
    }
}

/// `(page size, root bucket page, txid)` of meta page `n`, when it is valid.
fn meta(data: &[u8], n: usize) -> Option<(usize, u64, u64)> {
    // meta page 0 is at 0; page 1 at the page size page 0 names (or bbolt's 4096)
    let first_size = u32_at(data, PAGE_HEADER + 8).unwrap_or(4096) as usize;
    let m = data.get(n * first_size + PAGE_HEADER..)?;
    let (magic, page_size) = (u32_at(m, 0)?, u32_at(m, 8)? as usize);
    let (root, txid, checksum) = (u64_at(m, 16)?, u64_at(m, 48)?, u64_at(m, 56)?);
    let valid = magic == MAGIC && page_size >= 512 && fnv1a64(m.get(..56)?) == checksum;
    valid.then_some((page_size, root, txid))
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Every image containerd's metadata under `root` (containerd's root directory) holds, as
/// "namespace/name@digest" of its target: `v1/<namespace>/images/<name>/target/digest`.
/// Empty when there is no database yet.
pub fn images_on_disk(root: &Path) -> Result<Vec<String>, String> {
    let file = root.join("io.containerd.metadata.v1.bolt/meta.db");
    if !file.exists() {
        return Ok(Vec::new());
    }
    let db = Bolt::open(&file)?;
    let Some(v1) = db.get(&[b"v1"]) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for (namespace, ns) in db.entries(&v1) {
        let images = db.entries(&ns).into_iter().find(|(k, _)| k == b"images");
        for (name, image) in images.map(|(_, b)| db.entries(&b)).unwrap_or_default() {
            let target = db.entries(&image).into_iter().find(|(k, _)| k == b"target");
            let digest = target
                .map(|(_, t)| db.entries(&t))
                .unwrap_or_default()
                .into_iter()
                .find_map(|(k, v)| match (k.as_slice(), v) {
                    (b"digest", Entry::Value(d)) => Some(d),
                    _ => None,
                });
            if let Some(d) = digest {
                out.push(format!(
                    "{}/{}@{}",
                    String::from_utf8_lossy(&namespace),
                    String::from_utf8_lossy(&name),
                    String::from_utf8_lossy(&d)
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_is_not_bbolt_is_an_error_naming_it() {
        let dir = std::env::temp_dir().join(format!("bolt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("meta.db");
        std::fs::write(&f, vec![7u8; 8192]).unwrap();
        let err = Bolt::open(&f).err().unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(err.contains("meta.db: no valid bbolt meta page"), "{err}");
    }
}
