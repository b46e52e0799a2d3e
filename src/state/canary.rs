//! The canary's records: `canary.<16 hex>.json` in `state_dir`, one per canary pod a guard
//! is about to make. A record is written (atomically, [`super::file`]) before
//! RunPodSandbox is sent and removed once its sandbox is gone, so a guard killed in the
//! middle leaves a record naming what it may have made. It is the only proof the guard
//! accepts that a sandbox is its own: the pod's uid (random, never shown before the call)
//! and the process that made it (pid, start time, boot), so a later guard can tell
//! whether that process still runs (`checks::canary`).

use super::{encode, io, Op, StateDir, StateError};
use serde::{Deserialize, Serialize};

/// Each record's file name starts so.
pub const PREFIX: &str = "canary.";
/// Records read at most: more can only be left by guards that could not remove their
/// canaries; the sandboxes of the others are reported, never removed, until these go.
pub const MAX_RECORDS: usize = 32;
/// A record is a few hundred bytes; a larger file is not one the guard wrote.
const MAX_RECORD: u64 = 4 << 10;
const FORMAT: u32 = 1;

/// One canary in flight, as its guard recorded it before making it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CanaryRecord {
    pub format: u32,
    /// The pod uid the sandbox was asked for (32 random hex digits).
    pub uid: String,
    /// The guard that makes it: its pid and start time (`/proc/PID/stat` field 22), in
    /// this boot.
    pub pid: u32,
    pub start_ticks: u64,
    pub boot_id: String,
}

impl CanaryRecord {
    pub fn new(uid: &str, pid: u32, start_ticks: u64, boot_id: &str) -> CanaryRecord {
        CanaryRecord {
            format: FORMAT,
            uid: uid.to_string(),
            pid,
            start_ticks,
            boot_id: boot_id.to_string(),
        }
    }
}

/// A record file as read: its name, and the record or why it cannot be used.
pub type ReadRecord = (String, Result<CanaryRecord, String>);

impl StateDir {
    /// Writes `record` under a new random name, which it returns.
    pub fn write_canary(&self, record: &CanaryRecord) -> Result<String, StateError> {
        let name = format!("{PREFIX}{}.json", random_name(&self.dir)?);
        self.write(&name, &encode("a canary record", record)?)?;
        Ok(name)
    }

    /// Every record (at most [`MAX_RECORDS`]); none when `state_dir` is not there.
    pub fn canary_records(&self) -> Result<Vec<ReadRecord>, StateError> {
        use std::io::ErrorKind::{NotADirectory, NotFound};
        let dir = match super::file::Dir::open(&self.dir) {
            Ok(dir) => dir,
            Err(e) if matches!(e.kind(), NotFound | NotADirectory) => return Ok(Vec::new()),
            Err(e) => return Err(io(Op::Read, self.dir.clone())(e)),
        };
        self.judge(&dir)?;
        let names = dir
            .names_starting(PREFIX, MAX_RECORDS)
            .map_err(io(Op::Read, self.dir.clone()))?;
        let read = |name: &str| -> Result<CanaryRecord, String> {
            let path = self.dir.join(name);
            let text = dir
                .read_at_most(name, MAX_RECORD)
                .map_err(|e| format!("{}: {e}", path.display()))?;
            match serde_json::from_slice::<CanaryRecord>(&text) {
                Ok(r) if r.format == FORMAT => Ok(r),
                Ok(r) => Err(format!("{}: unknown format {}", path.display(), r.format)),
                Err(e) => Err(format!("{} does not parse: {e}", path.display())),
            }
        };
        // (a temporary file of a write in progress starts with a dot: never listed)
        Ok(names.into_iter().map(|n| (n.clone(), read(&n))).collect())
    }

    /// Removes the record `name` (a name [`StateDir::canary_records`] or
    /// [`StateDir::write_canary`] gave).
    pub fn remove_canary(&self, name: &str) -> Result<bool, StateError> {
        if !name.starts_with(PREFIX) || name.contains('/') {
            return Ok(false);
        }
        self.remove(name)
    }
}

/// 16 random hex digits, or the error that names `state_dir`.
fn random_name(dir: &std::path::Path) -> Result<String, StateError> {
    super::file::random_hex().map_err(io(Op::Write, dir.to_path_buf()))
}

/// A pod uid no one can guess before the guard sends it: 32 random hex digits.
pub fn random_uid() -> std::io::Result<String> {
    Ok(format!(
        "{}{}",
        super::file::random_hex()?,
        super::file::random_hex()?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(tmp: &tempfile::TempDir) -> StateDir {
        StateDir {
            dir: tmp.path().join("state"),
            boot_id: "boot-1".into(),
        }
    }

    #[test]
    fn records_are_written_read_back_and_removed_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let s = state(&tmp);
        assert_eq!(
            s.canary_records().unwrap(),
            vec![],
            "no state_dir: no record"
        );
        let record = CanaryRecord::new(&random_uid().unwrap(), 42, 7, "boot-1");
        let name = s.write_canary(&record).unwrap();
        assert!(
            name.starts_with(PREFIX) && name.ends_with(".json"),
            "{name}"
        );
        assert_eq!(
            s.canary_records().unwrap(),
            vec![(name.clone(), Ok(record))]
        );
        assert!(s.remove_canary(&name).unwrap());
        assert!(!s.remove_canary("runtime.json").unwrap(), "only records");
        assert_eq!(s.canary_records().unwrap(), vec![]);
    }

    #[test]
    fn a_hostile_record_is_refused_unread_and_their_number_is_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let s = state(&tmp);
        std::fs::create_dir(s.dir()).unwrap();
        std::fs::write(s.dir().join("canary.big.json"), vec![b' '; 8 << 10]).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", s.dir().join("canary.link.json")).unwrap();
        nix::unistd::mkfifo(
            &s.dir().join("canary.fifo.json"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        std::fs::write(s.dir().join("canary.junk.json"), "{").unwrap();
        let read = s.canary_records().unwrap();
        assert_eq!(read.len(), 4, "{read:?}");
        for (name, r) in &read {
            assert!(r.is_err(), "{name}: {r:?}");
        }
        for i in 0..MAX_RECORDS {
            std::fs::write(s.dir().join(format!("canary.{i:02}.json")), "{}").unwrap();
        }
        assert_eq!(s.canary_records().unwrap().len(), MAX_RECORDS);
    }
}
