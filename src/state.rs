//! The phase-2 state file (`state_dir/runtime.json`): this boot's restarts, the remedies
//! tried and their outcomes, the last verdict, and whether the guard is terminal. Written
//! atomically (temp file, fsync, rename, fsync of the directory) so a crash never leaves a
//! half-written file; a file that does not parse anyway is kept aside and treated as
//! "no budget left", never as "fresh".
//!
//! Next to it, `state_dir/runtime.status` holds one human line for people and monitoring.

use crate::host::Host;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const STATE_FILE: &str = "runtime.json";
pub const STATUS_FILE: &str = "runtime.status";
const FORMAT: u32 = 1;
/// History is evidence, not a log: keep the newest entries only.
const HISTORY_LIMIT: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// Time since boot, the clock the backoff is computed on.
    pub uptime_ms: u64,
    /// Wall clock, for people.
    pub unix: u64,
    /// What was acted on: `containerd`, the image reference, an archive path.
    pub item: String,
    /// `restart`, `refused-restart`, `import`, `pull`...
    pub action: String,
    pub outcome: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terminal {
    pub unix: u64,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub unix: u64,
    pub command: String,
    pub exit: i32,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub format: u32,
    pub boot_id: String,
    /// containerd restarts run this boot (the budget counts these).
    pub restarts: Vec<Record>,
    /// Every remedy tried this boot, restarts included, newest last.
    pub history: Vec<Record>,
    pub terminal: Option<Terminal>,
    /// Set when the budget cannot be trusted (the file was corrupt): no restarts this boot.
    pub void: Option<String>,
    pub last: Option<Outcome>,
}

impl State {
    pub fn fresh(boot_id: &str) -> State {
        State {
            format: FORMAT,
            boot_id: boot_id.to_string(),
            restarts: Vec::new(),
            history: Vec::new(),
            terminal: None,
            void: None,
            last: None,
        }
    }

    pub fn record(&mut self, r: Record) {
        if r.action == "restart" {
            self.restarts.push(r.clone());
        }
        self.history.push(r);
        if self.history.len() > HISTORY_LIMIT {
            let cut = self.history.len() - HISTORY_LIMIT;
            self.history.drain(..cut);
        }
    }
}

/// What loading found, so the caller can report it.
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

pub struct Store {
    pub dir: PathBuf,
    pub boot_id: String,
}

impl Store {
    pub fn new(host: &Host, state_dir: &Path) -> Result<Store, String> {
        let boot = host.boot_id_path();
        let boot_id = std::fs::read_to_string(&boot)
            .map_err(|e| format!("{}: {e}", boot.display()))?
            .trim()
            .to_string();
        Ok(Store {
            dir: host.path(state_dir),
            boot_id,
        })
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// Reads this boot's state. A corrupt file is moved aside (so `guard status` and the
    /// operator can see it) and replaced by a state whose budget is void for this boot.
    pub fn load(&self) -> (State, Loaded) {
        let path = self.path();
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return (State::fresh(&self.boot_id), Loaded::Fresh(None))
            }
            Err(e) => return self.corrupt(format!("cannot read {}: {e}", path.display())),
        };
        match serde_json::from_slice::<State>(&text) {
            Ok(s) if s.format != FORMAT => {
                self.corrupt(format!("unknown format {} in {}", s.format, path.display()))
            }
            Ok(s) if s.boot_id != self.boot_id => {
                (State::fresh(&self.boot_id), Loaded::Fresh(Some(s.boot_id)))
            }
            Ok(s) => (s, Loaded::Current),
            Err(e) => self.corrupt(format!("{} does not parse: {e}", path.display())),
        }
    }

    fn corrupt(&self, problem: String) -> (State, Loaded) {
        let kept = self.dir.join(format!("{STATE_FILE}.corrupt"));
        let _ = std::fs::rename(self.path(), &kept);
        let mut s = State::fresh(&self.boot_id);
        s.void = Some(format!(
            "the state file cannot be trusted ({problem}); kept as {}",
            kept.display()
        ));
        (s, Loaded::Corrupt { problem, kept })
    }

    pub fn save(&self, state: &State) -> Result<(), String> {
        let text = serde_json::to_vec_pretty(state).map_err(|e| e.to_string())?;
        write_atomic(&self.dir, STATE_FILE, &text)
    }

    pub fn write_status(&self, line: &str) -> Result<(), String> {
        write_atomic(&self.dir, STATUS_FILE, format!("{line}\n").as_bytes())
    }

    /// `guard reset`: forget this boot's budget and terminal state.
    pub fn reset(&self) -> Result<bool, String> {
        let mut removed = false;
        for name in [STATE_FILE.to_string(), format!("{STATE_FILE}.corrupt")] {
            match std::fs::remove_file(self.dir.join(&name)) {
                Ok(()) => removed = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(format!("{}: {e}", self.dir.join(name).display())),
            }
        }
        Ok(removed)
    }
}

/// temp file in the same directory, write, fsync, rename over, fsync the directory.
pub fn write_atomic(dir: &Path, name: &str, data: &[u8]) -> Result<(), String> {
    let target = dir.join(name);
    crate::state_file::write_atomic(&target, data)
        .map_err(|e| format!("cannot write {}: {e}", target.display()))
}

/// Time since boot from `/proc/uptime` (the clock restarts are spaced on).
pub fn uptime(host: &Host) -> Duration {
    std::fs::read_to_string(host.proc("uptime"))
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
        .map(Duration::from_secs_f64)
        .unwrap_or_default()
}

pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(tmp: &Path, boot: &str) -> Store {
        let host = Host::at(tmp);
        let p = host.boot_id_path();
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, format!("{boot}\n")).unwrap();
        Store::new(&host, Path::new("/run/containerd-guard")).unwrap()
    }

    #[test]
    fn round_trip_and_boot_change() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path(), "b1");
        let (mut st, how) = s.load();
        assert_eq!(how, Loaded::Fresh(None));
        st.record(Record {
            uptime_ms: 1,
            unix: 2,
            item: "containerd".into(),
            action: "restart".into(),
            outcome: "ok".into(),
        });
        s.save(&st).unwrap();
        let (again, how) = s.load();
        assert_eq!(how, Loaded::Current);
        assert_eq!(again.restarts.len(), 1);
        let s2 = store(tmp.path(), "b2");
        let (st2, how) = s2.load();
        assert_eq!(how, Loaded::Fresh(Some("b1".into())));
        assert!(st2.restarts.is_empty());
    }

    #[test]
    fn corrupt_file_voids_the_budget_and_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let s = store(tmp.path(), "b1");
        std::fs::create_dir_all(&s.dir).unwrap();
        std::fs::write(s.path(), b"{ not json").unwrap();
        let (st, how) = s.load();
        assert!(matches!(how, Loaded::Corrupt { .. }), "{how:?}");
        assert!(st.void.as_deref().unwrap().contains("corrupt"));
        assert!(s.dir.join("runtime.json.corrupt").exists());
        // Saved, the void survives the next load: corrupt never becomes fresh.
        s.save(&st).unwrap();
        let (st, _) = s.load();
        assert!(st.void.is_some());
        assert!(s.reset().unwrap());
        assert_eq!(s.load().1, Loaded::Fresh(None));
    }
}
