//! The one owner of `state_dir` (`/run/containerd-guard`). Everything the guard keeps
//! between runs goes through [`StateDir`]: this boot's id (read once), one reader and one
//! atomic writer per file, and the repair lock ([`lock`]).
//!
//! Files:
//! - `volume.ok`: this boot's id, written by `guard volume` on success, removed on
//!   failure: containerd's pre-start has verified the volume this boot, so a later start
//!   gets the quick check (`phases::volume`). Never written from the initrd.
//! - `volume.json`: phase 1's last verdict ([`volume::VolumeRecord`]).
//! - `runtime.json`, the ledger: the gate's budget, history and terminal state
//!   ([`ledger::State`]). A file that does not parse is kept as `runtime.json.corrupt`
//!   and means "no restart budget this boot", never "fresh".
//! - `runtime.status`: one human line for people and monitoring.
//! - `metrics.json`: what the Prometheus textfile is rebuilt from ([`crate::metrics`]).
//! - `repair.lock`: the repair lock.
//! - `kubelet.version.json`: `kubelet --version`'s answer this boot (`state/kubelet.rs`).
//! - `canary.<16 hex>.json`: one per canary pod in flight, written before it is made
//!   ([`canary`]): the proof that a sandbox is the guard's own.
//!
//! Writes are atomic (temp file, fsync, rename, fsync of the directory): a reader never
//! sees half a file, even when the guard is killed. Reads never wait on the lock.
//!
//! The guard runs as root and decides from these files whether it may restart containerd,
//! so `state_dir` is judged like a config file ([`crate::config::trust`]): a directory
//! (or one above it) that another user owns or can write is refused, naming it, its owner
//! and the fix; nothing is read from it or written to it. Every file is reached beneath
//! the directory's descriptor and never through a link ([`file`]).

pub mod canary;
pub mod file;
mod kubelet;
pub mod ledger;
pub mod lock;
pub mod volume;

use crate::config::trust::Distrust;
use crate::host::Host;
use crate::report::{Report, Verdict};
use file::Dir;
use ledger::State;
use lock::{LockError, RepairLock};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use volume::VolumeRecord;

pub const VOLUME_MARKER: &str = "volume.ok";
pub const VOLUME_RECORD: &str = "volume.json";
pub const STATE_FILE: &str = "runtime.json";
pub const STATUS_FILE: &str = "runtime.status";
pub const METRICS_FILE: &str = "metrics.json";

/// What `runtime.json` holds right now, read without changing anything.
#[derive(Debug, Clone, PartialEq, Eq)]
// (one value per command, read once: its size is no cost worth a box)
#[allow(clippy::large_enum_variant)]
pub enum LedgerFile {
    /// No file: nothing acted this boot.
    Absent,
    /// A file from another boot (its id): this boot starts fresh.
    OtherBoot(String),
    Current(State),
    /// It cannot be trusted; why.
    Corrupt(String),
}

/// What loading for a repair found, so the caller can report it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loaded {
    /// No file yet, or one from another boot (its boot id is given).
    Fresh(Option<String>),
    Current,
    /// The file did not parse; it was moved to the path given.
    Corrupt {
        problem: String,
        kept: PathBuf,
    },
}

/// Why `state_dir` or a file in it cannot be used. The text is what an operator reads
/// (the path, the cause and, for a write, the fix); `source()` keeps the cause. (Causes
/// are shared, so a state_dir that failed to open can be named by every later step.)
#[derive(Debug, Clone, thiserror::Error)]
pub enum StateError {
    #[error("cannot identify this boot: {}: {source}", path.display())]
    BootId {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    #[error("cannot {op} {}: {source}{}", path.display(), hint(op, source))]
    Io {
        op: Op,
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    /// Owned or writable by another user (see the module doc).
    #[error("state_dir refused: {why} (or set state_dir to a directory only root can write)")]
    Refused { why: Distrust },
    #[error("cannot encode {name}: {source}")]
    Encode {
        name: &'static str,
        source: Arc<serde_json::Error>,
    },
}

/// What the guard was doing in `state_dir` when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Open,
    Create,
    Read,
    Write,
    Remove,
    Lock,
}

impl std::fmt::Display for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::Open => "open",
            Op::Create => "create",
            Op::Read => "read",
            Op::Write => "write",
            Op::Remove => "remove",
            Op::Lock => "lock",
        })
    }
}

/// The fix, for the steps an operator can mend by changing `state_dir`.
fn hint(op: &Op, e: &std::io::Error) -> String {
    match op {
        Op::Open | Op::Create | Op::Write => format!("; {}", fix_for(e)),
        Op::Read | Op::Remove | Op::Lock => String::new(),
    }
}

fn io(op: Op, path: PathBuf) -> impl FnOnce(std::io::Error) -> StateError {
    move |e| StateError::Io {
        op,
        path,
        source: Arc::new(e),
    }
}

#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
    boot_id: String,
}

impl StateDir {
    /// `state_dir` of this host, for this boot. Fails only when the boot id cannot be read.
    pub fn open(host: &Host, state_dir: &Path) -> Result<StateDir, StateError> {
        let path = host.boot_id_path();
        let boot_id = match std::fs::read_to_string(&path) {
            Ok(text) => text.trim().to_string(),
            Err(e) => {
                let source = Arc::new(e);
                return Err(StateError::BootId { path, source });
            }
        };
        Ok(StateDir {
            dir: host.path(state_dir),
            boot_id,
        })
    }

    pub fn boot_id(&self) -> &str {
        &self.boot_id
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn ledger_path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    pub fn corrupt_copy(&self) -> PathBuf {
        self.dir.join(format!("{STATE_FILE}.corrupt"))
    }

    /// The one reader of `runtime.json`. Changes nothing; never waits; reads at most
    /// [`MAX_STATE_FILE`] bytes.
    pub fn read_ledger(&self) -> LedgerFile {
        let path = self.ledger_path();
        match self.read(STATE_FILE) {
            Ok(Some(text)) => parse_ledger(&text, &path, &self.boot_id),
            // state_dir is not a directory: no state file can have been written there
            // (and none will be: a restart needs one, so none happens).
            Ok(None) => LedgerFile::Absent,
            Err(e) => LedgerFile::Corrupt(e.to_string()),
        }
    }

    /// This boot's state for a repairing run (under the repair lock). A corrupt file is
    /// moved aside (so `guard status` and the operator can see it) and replaced by a state
    /// whose budget is void for this boot.
    pub fn load_ledger(&self) -> (State, Loaded) {
        match self.read_ledger() {
            LedgerFile::Absent => (State::fresh(&self.boot_id), Loaded::Fresh(None)),
            LedgerFile::OtherBoot(b) => (State::fresh(&self.boot_id), Loaded::Fresh(Some(b))),
            LedgerFile::Current(s) => (s, Loaded::Current),
            LedgerFile::Corrupt(problem) => self.quarantine(problem),
        }
    }

    fn quarantine(&self, problem: String) -> (State, Loaded) {
        let kept = self.corrupt_copy();
        let moved = self.open_dir().and_then(|dir| {
            let corrupt = format!("{STATE_FILE}.corrupt");
            dir.rename(STATE_FILE, &corrupt)
                .map_err(io(Op::Write, self.corrupt_copy()))
        });
        let where_ = match moved {
            Ok(()) => format!("kept as {}", kept.display()),
            Err(e) => format!(
                "left in place: it cannot be moved to {} ({e})",
                kept.display()
            ),
        };
        let mut s = State::fresh(&self.boot_id);
        s.void = Some(format!(
            "the state file cannot be trusted ({problem}); {where_}"
        ));
        (s, Loaded::Corrupt { problem, kept })
    }

    pub fn save_ledger(&self, state: &State) -> Result<(), StateError> {
        self.write(STATE_FILE, &encode(STATE_FILE, state)?)
    }

    pub fn write_status(&self, line: &str) -> Result<(), StateError> {
        self.write(STATUS_FILE, format!("{line}\n").as_bytes())
    }

    /// This boot's phase-1 record, if `guard volume` ran this boot and left a readable one.
    pub fn read_volume(&self) -> Option<VolumeRecord> {
        let text = self.read(VOLUME_RECORD).ok()??;
        parse_volume(&text, &self.boot_id)
    }

    /// Leaves phase 1's outcome where `guard status`, phase 2 and containerd's unit look:
    /// the record, and the marker only when the volume was verified.
    pub fn record_volume(&self, report: &Report) -> Result<(), StateError> {
        let record = VolumeRecord::new(&self.boot_id, report);
        let written = self.write(VOLUME_RECORD, &encode(VOLUME_RECORD, &record)?);
        let marker = match report.verdict() {
            Verdict::Usable => self.write(VOLUME_MARKER, format!("{}\n", self.boot_id).as_bytes()),
            Verdict::Unusable => self.remove(VOLUME_MARKER).map(|_| ()),
        };
        written.and(marker)
    }

    /// What the metrics keep between commands (`metrics.json`, the metrics' own type);
    /// empty when unreadable (the metrics are a view, never a reason to fail).
    pub fn read_metrics<Kept: serde::de::DeserializeOwned + Default>(&self) -> Kept {
        self.read(METRICS_FILE)
            .ok()
            .flatten()
            .and_then(|t| serde_json::from_slice(&t).ok())
            .unwrap_or_default()
    }

    pub fn save_metrics(&self, kept: &impl serde::Serialize) -> Result<(), StateError> {
        self.write(METRICS_FILE, &encode(METRICS_FILE, kept)?)
    }

    /// `guard reset`: forget this boot's budget and terminal state. True if anything was
    /// there to forget.
    pub fn reset(&self) -> Result<bool, StateError> {
        let state = self.remove(STATE_FILE)?;
        let corrupt = self.remove(&format!("{STATE_FILE}.corrupt"))?;
        Ok(state || corrupt)
    }

    /// One attempt at the repair lock; see [`lock`].
    pub fn try_lock(&self) -> Result<RepairLock, LockError> {
        let dir = self.make_dir()?;
        lock::try_lock(&dir)
    }

    fn remove(&self, name: &str) -> Result<bool, StateError> {
        let dir = match self.open_dir() {
            Ok(dir) => dir,
            Err(_) if !self.dir.is_dir() => return Ok(false),
            Err(e) => return Err(e),
        };
        dir.remove(name)
            .map_err(io(Op::Remove, self.dir.join(name)))
    }

    fn write(&self, name: &str, data: &[u8]) -> Result<(), StateError> {
        self.make_dir()?
            .write_atomic(name, data)
            .map_err(io(Op::Write, self.dir.join(name)))
    }

    /// A file of `state_dir`, at most [`MAX_STATE_FILE`] bytes; `None` when it (or
    /// `state_dir`) is not there.
    fn read(&self, name: &str) -> Result<Option<Vec<u8>>, StateError> {
        use std::io::ErrorKind::{NotADirectory, NotFound};
        let dir = match Dir::open(&self.dir) {
            Ok(dir) => dir,
            Err(e) if matches!(e.kind(), NotFound | NotADirectory) => return Ok(None),
            Err(e) => return Err(io(Op::Read, self.dir.join(name))(e)),
        };
        self.judge(&dir)?;
        match dir.read_at_most(name, MAX_STATE_FILE) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == NotFound => Ok(None),
            Err(e) => Err(io(Op::Read, self.dir.join(name))(e)),
        }
    }

    /// `state_dir`, opened and judged; it must exist.
    fn open_dir(&self) -> Result<Dir, StateError> {
        let dir = Dir::open(&self.dir).map_err(io(Op::Open, self.dir.clone()))?;
        self.judge(&dir)?;
        Ok(dir)
    }

    /// `state_dir`, created (0755) when missing, opened and judged.
    fn make_dir(&self) -> Result<Dir, StateError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(&self.dir)
            .map_err(io(Op::Create, self.dir.clone()))?;
        self.open_dir()
    }

    /// Refuses a `state_dir` another user owns or can write (see the module doc).
    fn judge(&self, dir: &Dir) -> Result<(), StateError> {
        let file = dir.as_file().map_err(io(Op::Open, self.dir.clone()))?;
        crate::config::trust::judge_directory(&self.dir, &file)
            .map_err(|why| StateError::Refused { why })
    }
}

/// The guard writes every file here itself and keeps them small (the history holds 100
/// records, a few tens of KiB): a larger file is not one it wrote, and reading it whole
/// would let it cost any amount of memory. Larger files are refused, unread.
pub const MAX_STATE_FILE: u64 = 1 << 20;

/// What to do when `state_dir` cannot be written, by the kind of error.
pub fn fix_for(e: &std::io::Error) -> &'static str {
    use std::io::ErrorKind::*;
    match e.kind() {
        ReadOnlyFilesystem => {
            "state_dir is on a read-only filesystem: set state_dir to a writable directory \
             (the default /run/containerd-guard is on /run's tmpfs) or remount it read-write"
        }
        StorageFull | QuotaExceeded => "the filesystem of state_dir is full: free space there",
        NotADirectory | AlreadyExists => {
            "state_dir (or a directory above it) is not a directory: move the file away or \
             set state_dir elsewhere"
        }
        PermissionDenied => "the guard may not write there: run it as root",
        _ => "make state_dir a writable directory",
    }
}

/// The ledger's bytes (`runtime.json`) (read from `path`) as this boot (`boot_id`) sees them.
pub fn parse_ledger(text: &[u8], path: &Path, boot_id: &str) -> LedgerFile {
    match serde_json::from_slice::<State>(text) {
        Ok(s) if s.format != ledger::FORMAT => {
            LedgerFile::Corrupt(format!("unknown format {} in {}", s.format, path.display()))
        }
        Ok(s) if s.boot_id != boot_id => LedgerFile::OtherBoot(s.boot_id),
        Ok(s) => LedgerFile::Current(s),
        Err(e) => LedgerFile::Corrupt(format!("{} does not parse: {e}", path.display())),
    }
}

/// Phase 1's record from its bytes, when it parses and is this boot's.
pub fn parse_volume(text: &[u8], boot_id: &str) -> Option<VolumeRecord> {
    let record: VolumeRecord = serde_json::from_slice(text).ok()?;
    (record.boot_id == boot_id).then_some(record)
}

/// A file's JSON, as the guard writes its state.
fn encode(name: &'static str, value: &impl serde::Serialize) -> Result<Vec<u8>, StateError> {
    serde_json::to_vec_pretty(value).map_err(|e| StateError::Encode {
        name,
        source: Arc::new(e),
    })
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
