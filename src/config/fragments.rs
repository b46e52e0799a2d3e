//! Finding config fragments the way systemd finds drop-ins: `*.toml` from each directory,
//! a same-named file in a later directory replaces the earlier one, a symlink to
//! `/dev/null` masks the name, and the survivors apply in file-name order.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// `dirs` is ordered lowest precedence first. A missing directory is normal.
pub fn find_fragments(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, (PathBuf, io::Error)> {
    let mut by_name: BTreeMap<String, Option<PathBuf>> = BTreeMap::new();
    for dir in dirs {
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err((dir.clone(), e)),
        };
        for entry in entries {
            let entry = entry.map_err(|e| (dir.clone(), e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !name.ends_with(".toml") || name.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let masked = is_mask(&path);
            by_name.insert(name, (!masked).then_some(path));
        }
    }
    Ok(by_name.into_values().flatten().collect())
}

fn is_mask(path: &Path) -> bool {
    std::fs::read_link(path).is_ok_and(|target| target == Path::new("/dev/null"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

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
