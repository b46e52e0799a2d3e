//! The ledger: what the gate's state file (`state_dir/runtime.json`) holds: this boot's
//! restarts, the remedies tried and their outcomes, the last verdict, and whether the
//! guard is terminal.
//! [`super::StateDir`] reads and writes it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub(super) const FORMAT: u32 = 1;
/// History is evidence, not a log: keep the newest entries only.
const HISTORY_LIMIT: usize = 100;

/// One remedy the guard tried. The budget, the metrics, `guard status` and the dry run
/// decide on [`Action`] and [`Outcome`]; `message` is for people only, so rewording it
/// changes nothing they decide (`src/phases/gate/tests/history.rs` proves it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "wire::Record", into = "wire::Record")]
pub struct Record {
    /// Time since boot, the clock the backoff is computed on.
    pub uptime_ms: u64,
    /// Wall clock, for people.
    pub unix: u64,
    /// What was acted on: `containerd`, the image reference, an archive path.
    pub item: String,
    pub action: Action,
    pub outcome: Outcome,
    /// What happened, in words.
    pub message: String,
}

/// What the guard did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Restart,
    /// An image import from `[sandbox] archives`.
    Import,
    Pull,
    /// The sandbox image labelled pinned.
    Pin,
    DeleteTask,
    ReapOrphans,
    /// A word this guard does not know (a newer guard wrote it): kept, counted as nothing.
    Other(String),
}

/// How it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Recorded before it ran (a restart counts from then on); the end replaces it.
    Started,
    Ok,
    Failed,
    /// Not run: a rule said no (the restart would reach another runtime, the archive is
    /// not trusted...). Never counted in the budget.
    Refused,
}

impl Record {
    /// The word `guard status` and the state file show: today's and older guards' words.
    pub fn word(&self) -> String {
        wire::word(&self.action, self.outcome)
    }

    /// A restart that ran (or is running): what the budget counts.
    pub fn is_restart(&self) -> bool {
        self.action == Action::Restart && self.outcome != Outcome::Refused
    }

    /// The remedy kind and outcome this record counts as in
    /// `containerd_guard_remedies_total`, if it is a remedy.
    pub fn counted_as(&self) -> Option<(&'static str, &'static str)> {
        let kind = match self.action {
            Action::Restart => "restart",
            Action::Import => "restore-image",
            Action::Pull => "pull",
            Action::Pin => "pin-image",
            Action::DeleteTask => "delete-task",
            Action::ReapOrphans => "reap-orphans",
            Action::Other(_) => return None,
        };
        let outcome = match self.outcome {
            // Counted when it ends (a restart the guard did not see end is not counted
            // here; `containerd_guard_restarts_total` has it).
            Outcome::Started => return None,
            Outcome::Ok => "ok",
            Outcome::Failed => "failed",
            Outcome::Refused => "refused",
        };
        Some((kind, outcome))
    }
}

/// How many remedies of each kind ended with each outcome this boot: kind -> outcome ->
/// count. A true counter, apart from the history (which keeps the newest records only):
/// it grows by one with each remedy's end and restarts from 0 only with a new state file.
pub type Counts = BTreeMap<String, BTreeMap<String, u64>>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terminal {
    pub unix: u64,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastRun {
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
    pub last: Option<LastRun>,
    /// `None` in a file of an older guard: counted from its history on first use, which
    /// is what that guard's metrics showed, so the series goes on from there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<Counts>,
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
            counts: Some(Counts::new()),
        }
    }

    /// Adds `r` to the history (trimmed to the newest records) and counts it, unless it is
    /// a restart just started: that one is counted when it ends ([`State::end_restart`]).
    pub fn record(&mut self, r: Record) {
        // (an older guard's file: counted from its history before the trim drops any)
        let history = &self.history;
        self.counts.get_or_insert_with(|| counted(history));
        self.count(&r);
        if r.is_restart() {
            self.restarts.push(r.clone());
        }
        self.history.push(r);
        if self.history.len() > HISTORY_LIMIT {
            let cut = self.history.len() - HISTORY_LIMIT;
            self.history.drain(..cut);
        }
    }

    /// The end of the restart recorded last as started: its outcome and message replace
    /// the started record's, and it is counted now.
    pub fn end_restart(&mut self, outcome: Outcome, message: String) {
        let history = &self.history;
        self.counts.get_or_insert_with(|| counted(history));
        for last in [self.restarts.last_mut(), self.history.last_mut()]
            .into_iter()
            .flatten()
        {
            last.outcome = outcome;
            last.message.clone_from(&message);
        }
        if let Some(ended) = self.history.last().cloned() {
            self.count(&ended);
        }
    }

    /// This boot's remedy counts (an older guard's file: counted from its history).
    pub fn counts(&self) -> Counts {
        self.counts
            .clone()
            .unwrap_or_else(|| counted(&self.history))
    }

    fn count(&mut self, r: &Record) {
        let Some((kind, outcome)) = r.counted_as() else {
            return;
        };
        let counts = self.counts.get_or_insert_with(Counts::new);
        let n = counts
            .entry(kind.to_string())
            .or_default()
            .entry(outcome.to_string())
            .or_default();
        *n = n.saturating_add(1);
    }
}

fn counted(history: &[Record]) -> Counts {
    let mut counts = Counts::new();
    for (kind, outcome) in history.iter().filter_map(Record::counted_as) {
        *counts
            .entry(kind.to_string())
            .or_default()
            .entry(outcome.to_string())
            .or_default() += 1;
    }
    counts
}

/// The state file's form of a [`Record`], as every guard since the first wrote it: the
/// action and outcome as words, the message under `outcome`. `result` is new: a file
/// written before it existed is read by the words alone (the only place a message is read).
mod wire {
    use super::{Action, Outcome};
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize)]
    pub struct Record {
        uptime_ms: u64,
        unix: u64,
        item: String,
        action: String,
        outcome: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Outcome>,
    }

    pub fn word(action: &Action, outcome: Outcome) -> String {
        let word = match (action, outcome) {
            (Action::Restart, Outcome::Refused) => "refused-restart",
            (Action::Import, Outcome::Refused) => "refused-archive",
            (Action::Restart, _) => "restart",
            (Action::Import, _) => "import",
            (Action::Pull, _) => "pull",
            (Action::Pin, _) => "pin",
            (Action::DeleteTask, _) => "delete-task",
            (Action::ReapOrphans, _) => "reap-orphans",
            (Action::Other(word), _) => word,
        };
        word.to_string()
    }

    fn action(word: &str) -> (Action, Option<Outcome>) {
        match word {
            "refused-restart" => (Action::Restart, Some(Outcome::Refused)),
            "refused-archive" => (Action::Import, Some(Outcome::Refused)),
            "restart" => (Action::Restart, None),
            "import" => (Action::Import, None),
            "pull" => (Action::Pull, None),
            "pin" => (Action::Pin, None),
            "delete-task" => (Action::DeleteTask, None),
            "reap-orphans" => (Action::ReapOrphans, None),
            other => (Action::Other(other.to_string()), None),
        }
    }

    /// A record without `result` (guard 0.2.0 and older): its outcome as those guards'
    /// metrics read it from the message.
    fn legacy_outcome(action: &Action, message: &str) -> Outcome {
        let failed = match action {
            Action::Pull => !message.starts_with("pulled"),
            _ => message.contains("failed") || message.contains("did not finish"),
        };
        if failed {
            Outcome::Failed
        } else {
            Outcome::Ok
        }
    }

    impl From<Record> for super::Record {
        fn from(w: Record) -> Self {
            let (action, refused) = action(&w.action);
            let outcome = w
                .result
                .or(refused)
                .unwrap_or_else(|| legacy_outcome(&action, &w.outcome));
            super::Record {
                uptime_ms: w.uptime_ms,
                unix: w.unix,
                item: w.item,
                action,
                outcome,
                message: w.outcome,
            }
        }
    }

    impl From<super::Record> for Record {
        fn from(r: super::Record) -> Self {
            Record {
                action: word(&r.action, r.outcome),
                uptime_ms: r.uptime_ms,
                unix: r.unix,
                item: r.item,
                outcome: r.message,
                result: Some(r.outcome),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A history as guard 0.2.0 wrote it: no `result`, the outcome only in words.
    const OLD: &str = r#"{"format":1,"boot_id":"b","restarts":[],"terminal":null,"void":null,"last":null,"history":[
        {"uptime_ms":1,"unix":2,"item":"containerd","action":"restart","outcome":"stale: `systemctl restart containerd` exited 0"},
        {"uptime_ms":1,"unix":2,"item":"containerd","action":"refused-restart","outcome":"running tasks: a"},
        {"uptime_ms":1,"unix":2,"item":"/a.tar","action":"import","outcome":"failed: short read"},
        {"uptime_ms":1,"unix":2,"item":"/a.tar","action":"refused-archive","outcome":"content does not match"},
        {"uptime_ms":1,"unix":2,"item":"pause","action":"pull","outcome":"attempt 1: connection refused"},
        {"uptime_ms":1,"unix":2,"item":"pause","action":"pull","outcome":"pulled pause in 2 s"},
        {"uptime_ms":1,"unix":2,"item":"abc","action":"delete-task","outcome":"deleted in 30 ms"},
        {"uptime_ms":1,"unix":2,"item":"/kubepods/x","action":"reap-orphans","outcome":"`x` did not finish within 2 s; killed"},
        {"uptime_ms":1,"unix":2,"item":"x","action":"resize-volume","outcome":"a word from a newer guard"}
    ]}"#;

    #[test]
    fn a_state_file_of_an_older_guard_reads_as_it_meant() {
        let state: State = serde_json::from_str(OLD).unwrap();
        let read: Vec<(Action, Outcome)> = state
            .history
            .iter()
            .map(|r| (r.action.clone(), r.outcome))
            .collect();
        let other = Action::Other("resize-volume".into());
        assert_eq!(
            read,
            vec![
                (Action::Restart, Outcome::Ok),
                (Action::Restart, Outcome::Refused),
                (Action::Import, Outcome::Failed),
                (Action::Import, Outcome::Refused),
                (Action::Pull, Outcome::Failed),
                (Action::Pull, Outcome::Ok),
                (Action::DeleteTask, Outcome::Ok),
                (Action::ReapOrphans, Outcome::Failed),
                (other, Outcome::Ok),
            ]
        );
    }

    #[test]
    fn records_are_written_with_the_old_words_and_their_result() {
        let state: State = serde_json::from_str(OLD).unwrap();
        let text = serde_json::to_string(&state).unwrap();
        let again: serde_json::Value = serde_json::from_str(&text).unwrap();
        let old: serde_json::Value = serde_json::from_str(OLD).unwrap();
        for (new, old) in again["history"]
            .as_array()
            .unwrap()
            .iter()
            .zip(old["history"].as_array().unwrap())
        {
            for key in ["uptime_ms", "unix", "item", "action", "outcome"] {
                assert_eq!(new[key], old[key], "{key} of {old}");
            }
            assert!(new["result"].is_string(), "{new}");
        }
        let back: State = serde_json::from_str(&text).unwrap();
        assert_eq!(back, state);
    }

    #[test]
    fn only_restarts_that_ran_count() {
        let mut state = State::fresh("b");
        for outcome in [
            Outcome::Started,
            Outcome::Ok,
            Outcome::Failed,
            Outcome::Refused,
        ] {
            state.record(Record {
                uptime_ms: 0,
                unix: 0,
                item: "containerd".into(),
                action: Action::Restart,
                outcome,
                message: "restart".into(),
            });
        }
        assert_eq!(state.restarts.len(), 3);
        assert_eq!(state.history.len(), 4);
    }
}
