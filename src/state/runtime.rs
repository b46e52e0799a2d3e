//! What the phase-2 state file (`state_dir/runtime.json`) holds: this boot's restarts, the
//! remedies tried and their outcomes, the last verdict, and whether the guard is terminal.
//! [`super::StateDir`] reads and writes it.

use serde::{Deserialize, Serialize};

pub(super) const FORMAT: u32 = 1;
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
