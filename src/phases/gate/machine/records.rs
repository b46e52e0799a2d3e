//! The repair lock and the state file: taking and letting go of the lock, loading this
//! boot's state under it, recording each remedy, saving, and the run's last outcome.

use super::{Machine, World};
use crate::backoff::Backoff;
use crate::config::units::format_duration;
use crate::phases::gate::End;
use crate::report::{escape, Finding, Id};
use crate::state::ledger::{Action, LastRun, Outcome, Record};
use crate::state::lock::{self, LockError};
use crate::state::Loaded;
use std::time::Duration;

/// The longest pause between two tries of a busy repair lock.
const LOCK_POLL_MAX: Duration = Duration::from_millis(100);

impl<W: World> Machine<'_, W> {
    /// Takes the repair lock, waiting (unlocked, with backoff) while another guard holds
    /// it, then loads the state that guard may have changed.
    pub(super) async fn lock(&mut self) -> Result<(), End> {
        let bound = match self.mode.hold {
            true => self.left(),
            false => self.one_restart(),
        };
        let give_up = self.w.now() + bound;
        // A short cap: waiters that started together would otherwise be let through one
        // per cap once the holder is done, each a whole cap after the one before.
        let mut pause = Backoff::new(Duration::from_millis(10), LOCK_POLL_MAX);
        loop {
            match self.w.try_lock() {
                Ok(()) => break,
                Err(unavailable @ LockError::Unavailable(_)) => {
                    // No lock means no state file either: saving fails, so nothing restarts.
                    tracing::warn!("{unavailable}");
                    self.state_unusable(unavailable.to_string());
                    break;
                }
                Err(busy) if self.w.now() >= give_up => {
                    self.set(
                        Finding::fail(Id::RemedyBudget, "not repairing: the repair lock is held")
                            .evidence(format!("{busy} for longer than {}", format_duration(bound)))
                            .remedy("wait for the other guard to finish, then run again"),
                    );
                    return Err(End::Unusable);
                }
                Err(busy) => {
                    tracing::debug!("{busy}; waiting");
                    let left = give_up.saturating_sub(self.w.now());
                    self.progress.waiting(lock::WAITING, left);
                    self.progress
                        .during(self.w.sleep(pause.next().min(left)))
                        .await;
                }
            }
        }
        self.locked = true;
        self.load_state();
        Ok(())
    }

    fn load_state(&mut self) {
        let (state, how) = self.w.load_state();
        if let Loaded::Corrupt { problem, kept } = how {
            self.set(
                Finding::warn(
                    Id::RemedyBudget,
                    "the state file was corrupt: no restart budget left this boot",
                )
                .evidence(problem)
                .evidence(format!("kept as {}", kept.display()))
                .remedy("inspect it, then `guard reset` to allow restarts again"),
            );
        }
        self.state = Some(state);
    }

    pub(super) fn unlock(&mut self) {
        if self.locked {
            self.w.unlock();
            self.locked = false;
        }
    }

    pub(super) fn record(&mut self, item: &str, action: Action, outcome: Outcome, message: &str) {
        let record = Record {
            uptime_ms: self.w.now().as_millis() as u64,
            unix: crate::state::unix_now(),
            item: item.to_string(),
            action,
            outcome,
            message: message.to_string(),
        };
        let (word, shown, said) = (record.word(), escape(item), escape(message));
        tracing::info!("{word} {shown}: {said}");
        if let Some(s) = self.state.as_mut() {
            s.record(record);
        }
    }

    pub(super) fn save(&mut self) -> Result<(), String> {
        let saved = match &self.state {
            Some(state) => self.w.save_state(state).map_err(|e| e.to_string()),
            None => Err("no state loaded".into()),
        };
        saved.inspect_err(|e| {
            tracing::warn!("cannot save the state file: {e}");
            self.state_unusable(e.clone());
        })
    }

    /// state_dir cannot be used: said once, as a warning (the node's verdict is
    /// containerd's, not the guard's bookkeeping), unless a budget finding already says
    /// more (a refused restart, terminal).
    fn state_unusable(&mut self, e: String) {
        if self.remedies.iter().any(|f| f.id == Id::RemedyBudget) {
            return;
        }
        let dir = self.s.state_dir.display();
        self.set(
            Finding::warn(
                Id::RemedyBudget,
                format!("state_dir {dir} cannot be written: containerd will not be restarted"),
            )
            .evidence(e)
            .remedy("a restart needs a durable record first; fix state_dir as the evidence says"),
        );
    }

    pub(super) async fn record_outcome(&mut self, end: End, summary: &str) {
        if !self.locked && self.terminal.is_none() {
            if self.w.try_lock().is_err() {
                return; // another guard is acting; its own outcome will be the last
            }
            self.locked = true;
            self.load_state();
        }
        let command = self.mode.invocation(self.command);
        if let Some(s) = self.state.as_mut() {
            s.last = Some(LastRun {
                unix: crate::state::unix_now(),
                command,
                exit: end.exit().code(),
                summary: summary.to_string(),
            });
            let _ = self.save();
        }
    }
}
