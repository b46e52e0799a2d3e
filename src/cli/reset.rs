//! `guard reset`: clears this boot's terminal state and restart budget, after an operator
//! fixed the cause. Changes nothing else. Takes the repair lock, so it never clears the
//! budget under a guard that is counting on it.

use super::{Context, Exit};
use std::time::Duration;

/// A reset waits this long for a repairing guard to finish its cycle.
const LOCK_WAIT: Duration = Duration::from_secs(30);

pub fn run(ctx: &Context) -> Exit {
    let dir = match super::state_dir(ctx) {
        Ok(d) => d,
        Err(exit) => return exit,
    };
    let _lock = match crate::state::lock::wait_for(&dir, LOCK_WAIT) {
        Ok(lock) => lock,
        Err(e) => {
            eprintln!("guard: cannot reset now: {e}");
            return Exit::CheckFailed;
        }
    };
    match dir.reset() {
        Ok(true) => {
            tracing::info!(
                "state cleared in {}: restart budget restored",
                dir.dir().display()
            );
            let _ = dir.write_status("reset by operator");
            println!(
                "cleared {}: the restart budget is restored",
                dir.ledger_path().display()
            );
            Exit::Usable
        }
        Ok(false) => {
            println!("nothing to clear in {}", dir.dir().display());
            Exit::Usable
        }
        Err(e) => {
            eprintln!("guard: cannot clear the state: {e}");
            Exit::CheckFailed
        }
    }
}
