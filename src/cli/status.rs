//! `guard status`: this boot's last phase-1 outcome, the last phase-2 outcome and the
//! remediation history, from the files in `state_dir`. Read-only.

use super::{Context, Exit};
use crate::report::Status;
use crate::state::{State, Store};
use crate::state_file::{read_volume_record, VolumeRecord};

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
    let volume = read_volume_record(&ctx.host, &ctx.loaded.settings.state_dir);
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
                "volume": volume,
                "state": state,
                "corrupt_copy": corrupt_kept.exists().then_some(&corrupt_kept),
            }))
            .unwrap_or_default()
        );
    } else {
        print_volume(volume.as_ref());
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
    let terminal = state.as_ref().and_then(|s| s.terminal.as_ref()).is_some();
    let held = volume.as_ref().and_then(VolumeRecord::held_by).is_some();
    match (terminal, held) {
        (true, _) => Exit::Terminal,
        (false, true) => Exit::CheckFailed,
        (false, false) => Exit::Usable,
    }
}

/// Phase 1 first: when it held containerd back, that is the reason the node is down.
fn print_volume(volume: Option<&VolumeRecord>) {
    let Some(v) = volume else {
        println!("phase 1 (guard volume): no run recorded this boot");
        return;
    };
    match v.held_by() {
        None => println!("phase 1 (guard volume): volume verified; containerd allowed to start"),
        Some(_) => {
            println!("phase 1 (guard volume): FAILED; containerd is held back");
            for f in v.findings.iter().filter(|f| f.status == Status::Fail) {
                println!("  {}: {}", f.id, f.summary);
                for e in &f.evidence {
                    println!("    seen: {e}");
                }
                if !f.remedy.is_empty() {
                    println!("    fix:  {}", f.remedy);
                }
            }
        }
    }
}
