//! `guard reset`: clears this boot's terminal state and restart budget, after an operator
//! fixed the cause. Changes nothing else.

use super::{Context, Exit};
use crate::state::Store;

pub fn run(ctx: &Context) -> Exit {
    let store = match Store::new(&ctx.host, &ctx.loaded.settings.state_dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("guard: cannot identify this boot: {e}");
            return Exit::CheckFailed;
        }
    };
    match store.reset() {
        Ok(true) => {
            tracing::info!(
                "state cleared in {}: restart budget restored",
                store.dir.display()
            );
            let _ = store.write_status("reset by operator");
            println!(
                "cleared {}: the restart budget is restored",
                store.path().display()
            );
            Exit::Usable
        }
        Ok(false) => {
            println!("nothing to clear in {}", store.dir.display());
            Exit::Usable
        }
        Err(e) => {
            eprintln!("guard: cannot clear the state: {e}");
            Exit::CheckFailed
        }
    }
}
