//! The mount points an OS's `/etc/fstab` names, for the initrd's question "does the OS
//! mount a filesystem above containerd's root after switch-root?". Only the second field
//! is read; fstab(5) escapes blanks in it as octal (`\040`).

use crate::host::proc::{read_bounded, Links};
use std::path::{Path, PathBuf};

/// An fstab is a few lines; a bigger file is not one.
const MAX_FSTAB: u64 = 1 << 20;

/// The mount points, in file order; no file means none. Links are refused: below
/// `/sysroot`, an absolute link would name the initrd's own file.
pub fn mount_points(path: &Path) -> Result<Vec<PathBuf>, String> {
    match read_bounded(path, MAX_FSTAB, Links::Refuse) {
        Ok(bytes) => Ok(parse(&String::from_utf8_lossy(&bytes))),
        Err(e) if e.is_not_found() => Ok(Vec::new()),
        Err(e) => Err(e.text().to_string()),
    }
}

/// Pure: the absolute mount points (swap's `none` and the like are not paths).
pub fn parse(text: &str) -> Vec<PathBuf> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(unescape)
        .filter(|p| p.starts_with('/'))
        .map(|p| Path::new(&p).components().collect())
        .collect()
}

/// One fstab line: `spec file type options`, with its 1-based line number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub spec: String,
    pub file: PathBuf,
    pub fstype: String,
    pub options: Vec<String>,
    pub line: usize,
}

impl Entry {
    /// The value of `x-systemd.KEY=` options (each may be given more than once).
    pub fn systemd_option<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.options.iter().filter_map(move |o| {
            o.strip_prefix("x-systemd.")?
                .strip_prefix(key)?
                .strip_prefix('=')
        })
    }
}

/// Pure: every line with at least a spec and a mount point, in file order.
pub fn entries(text: &str) -> Vec<Entry> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .filter_map(|(i, l)| {
            let mut f = l.split_whitespace().map(unescape);
            let spec = f.next()?;
            let file = PathBuf::from(f.next()?);
            let fstype = f.next().unwrap_or_default();
            let options = f
                .next()
                .map(|o| o.split(',').map(str::to_string).collect())
                .unwrap_or_default();
            Some(Entry {
                spec,
                file,
                fstype,
                options,
                line: i + 1,
            })
        })
        .collect()
}

/// `\040` -> ' ' and the like; anything else is kept as written.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                let v = d.iter().fold(0u32, |v, b| v * 8 + u32::from(b - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_skip_comments_swap_and_keep_escaped_blanks() {
        let text =
            "# /etc/fstab\n\nLABEL=root / ext4 defaults 0 1\nLABEL=var\t/var ext4 defaults 0 2\n\
                    /swap none swap sw 0 0\nUUID=x /srv/my\\040data xfs defaults 0 0\n  \
                    LABEL=eph /var/lib/containerd/ ext4 nofail 0 2\nbroken-line\n";
        let got = parse(text);
        let want: Vec<PathBuf> = ["/", "/var", "/srv/my data", "/var/lib/containerd"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn entries_keep_options_and_lines() {
        let text = "# c\nLABEL=eph /var/lib/containerd ext4 nofail,x-systemd.after=containerd.service 0 2\n\n/dev/x /a\n";
        let e = entries(text);
        assert_eq!(e.len(), 2);
        assert_eq!(e[0].spec, "LABEL=eph");
        assert_eq!(e[0].line, 2);
        assert_eq!(
            e[0].systemd_option("after").collect::<Vec<_>>(),
            ["containerd.service"]
        );
        assert!(e[0].options.iter().any(|o| o == "nofail"));
        assert_eq!((e[1].file.as_path(), e[1].line), (Path::new("/a"), 4));
        assert!(e[1].options.is_empty());
    }

    #[test]
    fn a_missing_fstab_names_no_mount_point_and_a_link_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(mount_points(&dir.path().join("fstab")), Ok(Vec::new()));
        std::os::unix::fs::symlink("/etc/fstab", dir.path().join("link")).unwrap();
        let err = mount_points(&dir.path().join("link")).unwrap_err();
        assert!(err.contains("link"), "{err}");
    }
}
