//! What a guest reports (vm-tests/guest/report.sh): one `key=value` per line, and blocks
//! of text whose lines are prefixed `name| `. Facts only: the checks decide.
//!
//! A report is untrusted text (a guest's serial port): read with a size bound, never
//! interpreted beyond these two line forms.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Larger than any real report (a few hundred KiB with the journals) by far, small
/// enough that a runaway guest cannot make the host read gigabytes.
pub const MAX_REPORT_BYTES: u64 = 32 << 20;

/// One guest's report, by lines.
#[derive(Debug, Default, Clone)]
pub struct Report {
    lines: Vec<String>,
}

impl Report {
    /// The report in `path`: `Ok(None)` when it is missing or empty (the guest sent none,
    /// the shell's `[ -s "$R" ]`), an error naming the file when it is unreadable or
    /// larger than [`MAX_REPORT_BYTES`].
    pub fn load(path: &Path) -> Result<Option<Report>, String> {
        match read_bounded(path, MAX_REPORT_BYTES) {
            Ok(None) => Ok(None),
            Ok(Some(text)) if text.is_empty() => Ok(None),
            Ok(Some(text)) => Ok(Some(Report::parse(&text))),
            Err(e) => Err(e),
        }
    }

    pub fn parse(text: &str) -> Report {
        Report {
            lines: text
                .lines()
                .map(|l| l.trim_end_matches('\r').to_string())
                .collect(),
        }
    }

    /// The first `key=value` line's value, "" when there is none.
    pub fn get(&self, key: &str) -> String {
        self.lines
            .iter()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
            .unwrap_or("")
            .to_string()
    }

    /// `get`, when the value is a number of digits; else 0 (a unit never entered the state).
    pub fn num(&self, key: &str) -> u64 {
        self.get(key).parse().unwrap_or(0)
    }

    /// A unit's property, from the report's `unit.UNIT.PROPERTY=` lines.
    pub fn unit(&self, unit: &str, prop: &str) -> String {
        self.get(&format!("unit.{unit}.{prop}"))
    }

    /// A unit's timestamp (a number, else 0).
    pub fn us(&self, unit: &str, prop: &str) -> u64 {
        self.num(&format!("unit.{unit}.{prop}"))
    }

    /// The block `name`: its lines without their `name| ` prefix, joined by newlines.
    pub fn block(&self, name: &str) -> String {
        let prefix = format!("{name}| ");
        let lines: Vec<&str> = self
            .lines
            .iter()
            .filter_map(|l| l.strip_prefix(&prefix))
            .collect();
        lines.join("\n")
    }

    /// The lines of block `name`.
    pub fn block_lines(&self, name: &str) -> Vec<String> {
        let prefix = format!("{name}| ");
        self.lines
            .iter()
            .filter_map(|l| l.strip_prefix(&prefix).map(str::to_string))
            .collect()
    }
}

/// A file's text, at most `max` bytes; `Ok(None)` when it does not exist. Invalid UTF-8
/// is replaced, not refused: a garbled byte on the serial line is still evidence.
pub fn read_bounded(path: &Path, max: u64) -> Result<Option<String>, String> {
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(format!("{}: larger than {max} bytes", path.display()));
    }
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

/// A small host-side file (host.txt, lint.rc, ...): its text, "" when missing or unreadable,
/// as the shell's `cat FILE 2>/dev/null`.
pub fn small_file(path: &Path) -> String {
    read_bounded(path, 1 << 20)
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Where one boot's files are, and its report.
#[derive(Debug, Clone)]
pub struct Boot {
    pub dir: PathBuf,
    pub report: Option<Report>,
}

impl Boot {
    /// The boot kept in `dir`: its report.txt, parsed (an unreadable report is an error).
    pub fn load(dir: &Path) -> Result<Boot, String> {
        Ok(Boot {
            dir: dir.to_path_buf(),
            report: Report::load(&dir.join("report.txt"))?,
        })
    }

    /// The report, or an empty one (every fact "") for a boot that sent none.
    pub fn r(&self) -> Report {
        self.report.clone().unwrap_or_default()
    }

    pub fn host_txt(&self) -> String {
        small_file(&self.dir.join("host.txt"))
    }

    /// "Ns wall, Ns CPU" of host.txt: the wall time a loaded host inflates, the CPU time
    /// much less.
    pub fn walls(&self) -> String {
        let host = self.host_txt();
        let int_of = |key: &str| -> String {
            let v: Vec<String> = host
                .lines()
                .filter_map(|l| l.strip_prefix(key))
                .map(|v| v.chars().take_while(char::is_ascii_digit).collect())
                .collect();
            v.join("\n")
        };
        format!("{}s wall, {}s CPU", int_of("wall_s="), int_of("cpu_s="))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_and_block() {
        let r = Report::parse("a=1\na.b=x=y\nj| one\nj| two\njx| no\na=2\n");
        assert_eq!(r.get("a"), "1");
        assert_eq!(r.get("a.b"), "x=y");
        assert_eq!(r.get("none"), "");
        assert_eq!(r.block("j"), "one\ntwo");
        assert_eq!(r.num("a.b"), 0);
    }

    #[test]
    fn bounded_read_names_the_file() {
        let d = std::env::temp_dir().join(format!("vmt-facts-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        let f = d.join("report.txt");
        fs::write(&f, "0123456789").unwrap();
        let e = read_bounded(&f, 4).unwrap_err();
        assert!(e.contains("report.txt") && e.contains("larger"), "{e}");
        assert_eq!(read_bounded(&d.join("none"), 4).unwrap(), None);
        fs::remove_dir_all(&d).unwrap();
    }
}
