//! Finding config fragments the way systemd finds drop-ins: `*.toml` from each directory,
//! a same-named file in a later directory replaces the earlier one, a symlink to
//! `/dev/null` masks the name, and the survivors apply in file-name order.
//!
//! A directory decides which files apply and a mask link removes one, so both are judged
//! like the files ([`super::trust`]): a directory another user owns or can write, or a
//! mask link another user owns, is an error naming it, even when nothing is read from it.

use super::trust;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// `dirs` is ordered lowest precedence first. A missing directory is normal. An error
/// names the path at fault and says what is wrong and the fix.
pub fn find_fragments(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, (PathBuf, String)> {
    let mut layers = Vec::new();
    for dir in dirs {
        let cannot = |e: io::Error| (dir.clone(), format!("cannot read: {e}"));
        let opened = match open_dir(dir) {
            Ok(opened) => opened,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(cannot(e)),
        };
        trust::judge_directory(dir, &opened).map_err(|e| (dir.clone(), e.to_string()))?;
        for entry in std::fs::read_dir(dir).map_err(cannot)? {
            let entry = entry.map_err(cannot)?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !is_fragment(&name) {
                continue;
            }
            let path = entry.path();
            let masked = is_mask(&path);
            if masked {
                trust::judge_link(&path).map_err(|e| (path.clone(), e.to_string()))?;
            }
            layers.push((name, (!masked).then_some(path)));
        }
    }
    Ok(effective(layers))
}

/// The precedence rule alone: `layers` lowest precedence first, each a file name with its
/// path, or `None` where a mask removes the name. A later entry of the same name replaces
/// an earlier one; the survivors come out in file-name order.
pub fn effective<P>(layers: impl IntoIterator<Item = (String, Option<P>)>) -> Vec<P> {
    let by_name: BTreeMap<String, Option<P>> = layers.into_iter().collect();
    by_name.into_values().flatten().collect()
}

/// A file name the layered search reads: `*.toml`, not hidden.
pub fn is_fragment(name: &str) -> bool {
    name.ends_with(".toml") && !name.starts_with('.')
}

/// The directory itself, for judging through its descriptor (never blocks: a FIFO in its
/// place is not a directory).
fn open_dir(dir: &Path) -> io::Result<std::fs::File> {
    use nix::fcntl::OFlag;
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_DIRECTORY | OFlag::O_NONBLOCK).bits())
        .open(dir)
}

fn is_mask(path: &Path) -> bool {
    std::fs::read_link(path).is_ok_and(|target| target == Path::new("/dev/null"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn the_rule_alone_later_wins_masks_remove_names_sort() {
        let layer = |name: &str, path: Option<&'static str>| (name.to_string(), path);
        let out = effective([
            layer("b.toml", Some("/usr/b")),
            layer("a.toml", Some("/usr/a")),
            layer("c.toml", Some("/usr/c")),
            layer("c.toml", None),
            layer("a.toml", None),
            layer("a.toml", Some("/etc/a")),
        ]);
        assert_eq!(out, vec!["/etc/a", "/usr/b"]);
    }

    #[test]
    fn precedence_replacement_masking_and_order() {
        let tmp = tempfile::tempdir().unwrap();
        let [vendor, run, etc] = ["usr", "run", "etc"].map(|d| tmp.path().join(d));
        for d in [&vendor, &etc] {
            fs::create_dir_all(d).unwrap();
        }
        // /run does not exist at all: that is normal early in boot.
        fs::write(vendor.join("10-vendor.toml"), "").unwrap();
        fs::write(vendor.join("50-site.toml"), "").unwrap();
        fs::write(vendor.join("60-masked.toml"), "").unwrap();
        fs::write(vendor.join("README"), "").unwrap();
        fs::write(etc.join("50-site.toml"), "").unwrap();
        fs::write(etc.join("05-admin.toml"), "").unwrap();
        std::os::unix::fs::symlink("/dev/null", etc.join("60-masked.toml")).unwrap();

        let found = find_fragments(&[vendor.clone(), run, etc.clone()]).unwrap();
        assert_eq!(
            found,
            vec![
                etc.join("05-admin.toml"),
                vendor.join("10-vendor.toml"),
                etc.join("50-site.toml"),
            ]
        );
    }

    #[test]
    fn no_directories_means_no_files() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(find_fragments(&[tmp.path().join("nope")])
            .unwrap()
            .is_empty());
    }
}
