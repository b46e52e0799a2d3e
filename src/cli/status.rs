//! `guard status`: the last phase-2 outcome and this boot's remediation history, from the
//! state file. Read-only.

use super::{Context, Exit};
use crate::state::{State, Store};

pub fn run(ctx: &Context) -> Exit {
    let store = match Store::new(&ctx.host, &ctx.loaded.settings.state_dir) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("guard: cannot identify this boot: {e}");
            return Exit::CheckFailed;
        }
    };
    let path = store.path();
    let corrupt_kept = store
        .dir
        .join(format!("{}.corrupt", crate::state::STATE_FILE));
    let parsed: Result<Option<State>, String> = match std::fs::read(&path) {
        Ok(t) => serde_json::from_slice(&t)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    };
    let state = match parsed {
        Ok(s) => s.filter(|s| s.boot_id == store.boot_id),
        Err(e) => {
            if ctx.json {
                println!(
                    "{}",
                    serde_json::json!({"state_file": path, "error": e, "corrupt": true})
                );
            } else {
                println!("state file {} is CORRUPT: {e}", path.display());
                println!("the guard treats this as: no restart budget left this boot; `guard reset` clears it");
            }
            return Exit::CheckFailed;
        }
    };
    if ctx.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "state_file": path,
                "boot_id": store.boot_id,
                "state": state,
                "corrupt_copy": corrupt_kept.exists().then_some(&corrupt_kept),
            }))
            .unwrap_or_default()
        );
    } else {
        println!("state file: {}", path.display());
        match &state {
            None => println!("no phase-2 run recorded this boot (boot {})", store.boot_id),
            Some(s) => {
                match &s.last {
                    Some(l) => println!("last: {} exited {}: {}", l.command, l.exit, l.summary),
                    None => println!("last: (none)"),
                }
                if let Some(t) = &s.terminal {
                    println!("TERMINAL: {} (`guard reset` after fixing)", t.reason);
                }
                if let Some(v) = &s.void {
                    println!("no restart budget: {v}");
                }
                println!(
                    "restarts this boot: {} of {}",
                    s.restarts.len(),
                    ctx.loaded.settings.remediation.restart_budget
                );
                for r in &s.history {
                    println!(
                        "  uptime {:>6}s  {:<16} {}: {}",
                        r.uptime_ms / 1000,
                        r.action,
                        r.item,
                        r.outcome
                    );
                }
            }
        }
        if corrupt_kept.exists() {
            println!(
                "a corrupt state file was kept as {}",
                corrupt_kept.display()
            );
        }
    }
    match state.as_ref().and_then(|s| s.terminal.as_ref()) {
        Some(_) => Exit::Terminal,
        None => Exit::Usable,
    }
}
