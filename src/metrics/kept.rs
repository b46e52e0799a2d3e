//! What the metrics keep between commands (`state_dir/metrics.json`): each finding's
//! latest status with its time, and each command's last run, for this boot only. The
//! node's verdict (`containerd_guard_usable`) is computed from every status still fresh,
//! never from the last command alone: a run that covers fewer families (`guard hygiene`)
//! cannot turn a failing node usable.
//!
//! How long a status counts ([`max_age`]) follows the run that covers its family:
//!
//! - the families `guard hygiene` covers (every 2 minutes): twice its period, so a status
//!   counts until the timer has missed a run; a later status replaces it;
//! - the remedies' and the metrics' own findings (the outcome of one run's action, not a
//!   state of the node): the same;
//! - everything else (the volume: `guard volume` at each containerd start; the runtime,
//!   stale, canary, kill-mode and eviction families: `guard runtime` at each kubelet
//!   start): until a later run reports it again, within this boot. Nothing runs them
//!   on a timer, and the fault they saw stays until someone acts, which ends with one of
//!   those runs or a `guard verify`.
//!
//! Nothing counts beyond this boot: a file of another boot is dropped whole.

use crate::command::Command;
use crate::report::{Id, Report, Status};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `containerd-guard-hygiene.timer`'s period (`OnUnitInactiveSec=`; a test compares).
pub const HYGIENE_PERIOD_SECS: u64 = 120;

/// One command's last run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub unix: u64,
    pub seconds: f64,
}

/// A finding's latest status, when it was seen and until when it counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Seen {
    pub status: String,
    pub unix: u64,
    /// Unix time after which it no longer counts; `None`: for the rest of this boot.
    pub until: Option<u64>,
}

/// What the metrics remember between commands (`state_dir/metrics.json`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Kept {
    /// The boot all of this belongs to.
    #[serde(default)]
    pub boot_id: String,
    /// Each finding id's latest status.
    pub checks: BTreeMap<String, Seen>,
    /// Per command (`volume`, `runtime`, `verify`, `hygiene`): its last run this boot.
    pub runs: BTreeMap<String, Run>,
}

/// How long a status of `id` counts after it was seen; `None`: for the rest of the boot
/// (until a later run reports it). `hygiene_covers`: the 2-minute hygiene run reports it
/// (the phases say which: `Mode::HYGIENE`). Pure; the module's doc says why.
pub fn max_age(id: Id, hygiene_covers: bool) -> Option<u64> {
    let outcome = matches!(id.as_str().split('.').next(), Some("remedy" | "metrics"));
    (hygiene_covers || outcome).then_some(2 * HYGIENE_PERIOD_SECS)
}

impl Kept {
    /// Folds one command's report in (a `Kept` of another boot is dropped first);
    /// `hygiene_covers` says which findings the 2-minute hygiene run reports.
    pub fn update(
        &mut self,
        boot_id: &str,
        command: Command,
        report: &Report,
        run: Run,
        hygiene_covers: &dyn Fn(Id) -> bool,
    ) {
        if self.boot_id != boot_id {
            *self = Kept {
                boot_id: boot_id.to_string(),
                ..Kept::default()
            };
        }
        for f in &report.findings {
            let seen = Seen {
                status: word(f.status).to_string(),
                unix: run.unix,
                until: max_age(f.id, hygiene_covers(f.id)).map(|a| run.unix.saturating_add(a)),
            };
            self.checks.insert(f.id.as_str().to_string(), seen);
        }
        self.runs.insert(command.as_str().to_string(), run);
    }

    /// The statuses that still count at `now`: id -> status.
    pub fn fresh(&self, now: u64) -> BTreeMap<&str, &str> {
        self.checks
            .iter()
            .filter(|(_, seen)| seen.until.is_none_or(|until| now <= until))
            .map(|(id, seen)| (id.as_str(), seen.status.as_str()))
            .collect()
    }

    /// The node's verdict at `now`: something still counts and nothing of it fails.
    pub fn usable(&self, now: u64) -> bool {
        let fresh = self.fresh(now);
        !fresh.is_empty() && fresh.values().all(|s| *s != word(Status::Fail))
    }
}

fn word(status: Status) -> &'static str {
    match status {
        Status::Pass => "pass",
        Status::Warn => "warn",
        Status::Fail => "fail",
        Status::Skip => "skip",
    }
}
