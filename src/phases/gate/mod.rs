//! The gate: phase 2 as a state machine (observe -> decide -> act), one small function
//! per step:
//!
//! ```text
//! Begin -> Observe -> Decide -+-> Finish(usable | unusable | terminal)
//!             ^               +-> Restart --+
//!             |               +-> Hygiene --+            (delete leaked tasks, reap orphans)
//!             |               +-> Restore --+-> Pull --+
//!             |               +-> Hold -----+          |
//!             +---------------------------------------+
//! ```
//!
//! Run by `guard runtime` (hold + repair), `guard verify` (one read-only pass),
//! `guard verify --repair` (repair, no hold) and `guard hygiene` (repair, hygiene's
//! families only). Everything it touches, containerd, the
//! clock, the state directory and its lock, goes through [`World`], so every transition
//! is unit-tested against a fake world in milliseconds (`tests.rs`).
//!
//! Concurrency: a repairing run takes the repair lock before it observes and keeps it
//! through decide -> act -> observe again; it lets go whenever it sleeps (hold polling,
//! backoff, between pulls) and when it finishes. Each time it takes the lock it re-reads
//! the state file and looks again, because another guard may have fixed the fault or
//! spent the budget meanwhile. Read-only runs never take it.

pub mod decide;
mod machine;
#[cfg(test)]
mod tests;
mod world;

pub use crate::checks::FamilyId;
use crate::command::Command;
use crate::exit::Exit;
pub use decide::Scope;
pub use machine::run;
pub use world::{RealWorld, Target, World};

#[derive(Debug, Clone, Copy)]
pub struct Mode {
    /// Wait for the node to become usable up to `[hold] timeout`.
    pub hold: bool,
    /// Apply remedies (within the budget).
    pub repair: bool,
    /// Restart even when the stale containerd still runs tasks.
    pub force: bool,
    /// Say what would be done, change nothing (no lock, no state written).
    pub dry_run: bool,
    /// The check families this command covers: its facts are gathered, its findings
    /// reported, its remedies applied. Written once per command, below.
    pub scope: Scope,
    /// The whole run ends by then, answer or not (`guard verify --npd --timeout`).
    pub deadline: Option<std::time::Duration>,
}

impl Mode {
    /// `guard runtime`: hold kubelet, repair, and end with the canary (`[canary] enabled =
    /// false` takes it out).
    pub const RUNTIME: Mode = Mode {
        hold: true,
        repair: true,
        force: false,
        dry_run: false,
        scope: Scope::WITH_CANARY,
        deadline: None,
    };
    /// `guard verify`: one read-only look.
    pub const VERIFY: Mode = Mode {
        hold: false,
        repair: false,
        force: false,
        dry_run: false,
        scope: Scope::ALL,
        deadline: None,
    };
    /// `guard hygiene` (the 2-minute timer): what breaks pods while the node runs. Leaked
    /// tasks, orphans, and the sandbox image (kept: restored from the archives, pulled at
    /// most once a run where pulls are allowed). Never a restart, never the volume.
    pub const HYGIENE: Mode = Mode {
        hold: false,
        repair: true,
        force: false,
        dry_run: false,
        scope: Scope(&[
            FamilyId::LeakedTasks,
            FamilyId::Orphans,
            FamilyId::SandboxImage,
        ]),
        deadline: None,
    };

    /// The command line this run stands for, as the state file's last run and the status
    /// line name it (`guard verify --repair`, `guard hygiene --dry-run`): only `verify`
    /// has a `--repair` flag (`runtime` and `hygiene` always repair), and `--dry-run`
    /// exists only beside repairing.
    pub fn invocation(&self, command: Command) -> String {
        let repair = match command == Command::Verify && self.repair {
            true => " --repair",
            false => "",
        };
        let dry_run = match self.repair && self.dry_run {
            true => " --dry-run",
            false => "",
        };
        format!("guard {command}{repair}{dry_run}")
    }

    /// Whether this run changes anything (and so takes the repair lock).
    pub fn acts(&self) -> bool {
        self.repair && !self.dry_run
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    Usable,
    Unusable,
    Terminal,
}

impl End {
    /// The documented exit for this end.
    pub fn exit(self) -> Exit {
        match self {
            End::Usable => Exit::Usable,
            End::Unusable => Exit::CheckFailed,
            End::Terminal => Exit::Terminal,
        }
    }
}

/// The outcome: every finding (checks first, then remedies) and how it ended.
pub struct Gate {
    pub findings: Vec<crate::report::Finding>,
    pub end: End,
}

impl Gate {
    /// A run cut off by its deadline: containerd did not answer in time.
    pub fn timed_out(deadline: std::time::Duration) -> Gate {
        use crate::report::{Finding, Id};
        let took = crate::config::units::format_duration(deadline);
        let finding = Finding::fail(Id::RuntimeAnswers, format!("containerd does not answer within {took}"))
            .evidence("the socket accepts connections but no call completed: containerd hangs (stopped?)")
            .remedy("check `journalctl -u containerd` and the process state (`ps -o stat -p $(pidof containerd)`)");
        Gate {
            findings: vec![finding],
            end: End::Unusable,
        }
    }
}
