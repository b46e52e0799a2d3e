//! `guard status`: this boot's last phase-1 outcome, the last phase-2 outcome and the
//! remediation history, from the files in `state_dir`. Read-only; never waits on the lock.

use super::{Context, Exit};
use crate::report::{escape, Status};
use crate::state::ledger::State;
use crate::state::volume::VolumeRecord;
use crate::state::{LedgerFile, StateDir};

pub fn run(ctx: &Context) -> Exit {
    let dir = match super::state_dir(ctx) {
        Ok(d) => d,
        Err(exit) => return exit,
    };
    let volume = dir.read_volume();
    let state = match dir.read_ledger() {
        LedgerFile::Current(s) => Some(s),
        LedgerFile::Absent | LedgerFile::OtherBoot(_) => None,
        LedgerFile::Corrupt(e) => return corrupt(ctx, &dir, &e),
    };
    if ctx.json {
        print_json(&dir, volume.as_ref(), state.as_ref());
    } else {
        print_volume(volume.as_ref());
        println!("state file: {}", dir.ledger_path().display());
        match &state {
            None => println!("no phase-2 run recorded this boot (boot {})", dir.boot_id()),
            Some(s) => print_state(s, ctx.loaded.settings.remediation.restart_budget),
        }
        if dir.corrupt_copy().exists() {
            let kept = dir.corrupt_copy();
            println!("a corrupt state file was kept as {}", kept.display());
        }
    }
    verdict(volume.as_ref(), state.as_ref())
}

/// The answer of this boot's records, as `guard verify` would give it: 4 terminal, 1 when
/// phase 1 held containerd or the last phase-2 run did not end usable, else 0.
fn verdict(volume: Option<&VolumeRecord>, state: Option<&State>) -> Exit {
    let terminal = state.is_some_and(|s| s.terminal.is_some());
    let held = volume.and_then(VolumeRecord::held_by).is_some();
    let last_failed = state
        .and_then(|s| s.last.as_ref())
        .is_some_and(|l| l.exit != 0);
    match (terminal, held || last_failed) {
        (true, _) => Exit::Terminal,
        (false, true) => Exit::CheckFailed,
        (false, false) => Exit::Usable,
    }
}

fn corrupt(ctx: &Context, dir: &StateDir, e: &str) -> Exit {
    let path = dir.ledger_path();
    if ctx.json {
        println!(
            "{}",
            serde_json::json!({"state_file": path, "error": e, "corrupt": true})
        );
    } else {
        println!("state file {} is CORRUPT: {e}", path.display());
        println!(
            "the guard treats this as: no restart budget left this boot; `guard reset` clears it"
        );
    }
    Exit::CheckFailed
}

fn print_json(dir: &StateDir, volume: Option<&VolumeRecord>, state: Option<&State>) {
    let kept = dir.corrupt_copy();
    let body = serde_json::json!({
        "state_file": dir.ledger_path(),
        "boot_id": dir.boot_id(),
        "volume": volume,
        "state": state,
        "corrupt_copy": kept.exists().then_some(&kept),
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&body).unwrap_or_default()
    );
}

fn print_state(s: &State, budget: u32) {
    match &s.last {
        Some(l) => println!(
            "last: {} exited {} at {}: {}",
            l.command,
            l.exit,
            when(l.unix),
            escape(&l.summary)
        ),
        None => println!("last: (none)"),
    }
    if let Some(t) = &s.terminal {
        println!(
            "FAIL remedy.budget: TERMINAL since {}: {} (`guard reset` after fixing)",
            when(t.unix),
            escape(&t.reason)
        );
    }
    if let Some(v) = &s.void {
        println!("no restart budget: {v}");
    }
    println!("restarts this boot: {} of {budget}", s.restarts.len());
    for r in &s.history {
        println!(
            "  {}  {:<16} {}: {}",
            when(r.unix),
            r.word(),
            escape(&r.item),
            escape(&r.message)
        );
    }
}

/// Phase 1 first: when it held containerd back, that is the reason the node is down.
fn print_volume(volume: Option<&VolumeRecord>) {
    let Some(v) = volume else {
        println!("phase 1 (guard volume): no run recorded this boot");
        return;
    };
    let at = when(v.unix_time);
    if v.held_by().is_none() {
        println!("phase 1 (guard volume): volume verified at {at}; containerd allowed to start");
        return;
    }
    println!("phase 1 (guard volume): FAILED at {at}; containerd is held back");
    for f in v.findings.iter().filter(|f| f.status == Status::Fail) {
        println!("  {}: {}", f.id, escape(&f.summary));
        for e in &f.evidence {
            println!("    seen: {e}");
        }
        if !f.remedy.is_empty() {
            println!("    fix:  {}", f.remedy);
        }
    }
}

/// A recorded wall-clock time as a person reads it: `09:41:03 UTC (5m ago)`.
fn when(unix: u64) -> String {
    crate::human::time_ago(unix, crate::state::unix_now())
}
