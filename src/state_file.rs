//! Files under `state_dir` (`/run/containerd-guard`): written atomically (temp file,
//! fsync, rename) so a reader never sees half a file, even if the guard is killed.

use crate::host::Host;
use crate::report::{Finding, Report, Verdict};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// Written by `guard volume` on success, removed on failure: containerd's drop-in asserts
/// it exists, so containerd cannot start in a boot whose volume was not verified.
pub const VOLUME_MARKER: &str = "volume.ok";
/// The last phase-1 outcome, for `guard status` and for the runtime gate.
pub const VOLUME_RECORD: &str = "volume.json";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeRecord {
    pub boot_id: String,
    pub unix_time: u64,
    pub verdict: Verdict,
    pub findings: Vec<Finding>,
}

impl VolumeRecord {
    pub fn new(boot_id: String, report: &Report) -> VolumeRecord {
        VolumeRecord {
            boot_id,
            unix_time: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            verdict: report.verdict(),
            findings: report.findings.clone(),
        }
    }

    /// The first failed check, as `id: summary`, when phase 1 held containerd back.
    pub fn held_by(&self) -> Option<String> {
        (self.verdict == Verdict::Unusable).then(|| {
            Report::new(self.findings.clone())
                .failures()
                .next()
                .map(|f| format!("{}: {}", f.id, f.summary))
                .unwrap_or_else(|| "phase 1 failed".into())
        })
    }
}

/// This boot's phase-1 record, if `guard volume` ran this boot and left a readable one.
pub fn read_volume_record(host: &Host, state_dir: &Path) -> Option<VolumeRecord> {
    let text = std::fs::read(host.path(state_dir).join(VOLUME_RECORD)).ok()?;
    let record: VolumeRecord = serde_json::from_slice(&text).ok()?;
    (record.boot_id == boot_id(host)).then_some(record)
}

pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile_in(dir, path)?;
    tmp.1.write_all(bytes)?;
    tmp.1.sync_all()?;
    std::fs::rename(&tmp.0, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp.0);
    })?;
    // The rename itself must reach the disk too (matters when state_dir is persistent).
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

fn tempfile_in(dir: &Path, target: &Path) -> std::io::Result<(std::path::PathBuf, std::fs::File)> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)?;
    Ok((tmp, file))
}

/// This boot's identity, so per-boot state from an earlier boot is never trusted.
pub fn boot_id(host: &Host) -> String {
    std::fs::read_to_string(host.boot_id_path())
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_whole_file_and_leaves_no_temp_behind() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/state.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("state.json")]);
    }
}
