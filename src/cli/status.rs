//! `guard status`: this boot's last phase-1 outcome, the last phase-2 outcome and the
//! remediation history, from the files in `state_dir`. Read-only; never waits on the lock.
//! On a terminal its lines are drawn as `guard verify`'s table is (`cli/terminal.rs`):
//! trimmed to the width, each status word coloured.

use super::{Context, Exit};
use crate::report::{escape, styled_line, Status};
use crate::state::ledger::{Outcome, Record, State};
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
        plain(&format!("state file: {}", dir.ledger_path().display()));
        match &state {
            None => plain(&format!(
                "no phase-2 run recorded this boot (boot {})",
                dir.boot_id()
            )),
            Some(s) => print_state(s, ctx.loaded.settings.remediation.restart_budget),
        }
        if dir.corrupt_copy().exists() {
            let kept = dir.corrupt_copy();
            plain(&format!(
                "a corrupt state file was kept as {}",
                kept.display()
            ));
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
        let before = format!("state file {} is ", path.display());
        line(Some(Status::Fail), (&before, "CORRUPT", &format!(": {e}")));
        plain(
            "the guard treats this as: no restart budget left this boot; `guard reset` clears it",
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
        Some(l) => {
            let status = if l.exit == 0 {
                Status::Pass
            } else {
                Status::Fail
            };
            let exited = format!("exited {}", l.exit);
            let after = format!(" at {}: {}", when(l.unix), escape(&l.summary));
            line(
                Some(status),
                (&format!("last: {} ", l.command), &exited, &after),
            );
        }
        None => plain("last: (none)"),
    }
    if let Some(t) = &s.terminal {
        let after = format!(
            " remedy.budget: TERMINAL since {}: {} (`guard reset` after fixing)",
            when(t.unix),
            escape(&t.reason)
        );
        line(Some(Status::Fail), ("", "FAIL", &after));
    }
    if let Some(v) = &s.void {
        line(
            Some(Status::Warn),
            ("", "no restart budget", &format!(": {v}")),
        );
    }
    plain(&format!(
        "restarts this boot: {} of {budget}",
        s.restarts.len()
    ));
    for r in &s.history {
        let before = format!("  {}  ", when(r.unix));
        let after = format!(
            "{} {}: {}",
            " ".repeat(16usize.saturating_sub(r.word().chars().count())),
            escape(&r.item),
            escape(&r.message)
        );
        line(outcome_status(r), (&before, &r.word(), &after));
    }
}

/// The colour of a remedy's record: how it ended (a record still `started` has none).
fn outcome_status(r: &Record) -> Option<Status> {
    match r.outcome {
        Outcome::Ok => Some(Status::Pass),
        Outcome::Failed => Some(Status::Fail),
        Outcome::Refused => Some(Status::Warn),
        Outcome::Started => None,
    }
}

/// Phase 1 first: when it held containerd back, that is the reason the node is down.
fn print_volume(volume: Option<&VolumeRecord>) {
    const PHASE_1: &str = "phase 1 (guard volume): ";
    let Some(v) = volume else {
        plain(&format!("{PHASE_1}no run recorded this boot"));
        return;
    };
    let at = when(v.unix_time);
    if v.held_by().is_none() {
        let after = format!(" at {at}; containerd allowed to start");
        line(Some(Status::Pass), (PHASE_1, "volume verified", &after));
        return;
    }
    let after = format!(" at {at}; containerd is held back");
    line(Some(Status::Fail), (PHASE_1, "FAILED", &after));
    for f in v.findings.iter().filter(|f| f.status == Status::Fail) {
        plain(&format!("  {}: {}", f.id, escape(&f.summary)));
        for e in &f.evidence {
            plain(&format!("    seen: {e}"));
        }
        if !f.remedy.is_empty() {
            plain(&format!("    fix:  {}", f.remedy));
        }
    }
}

/// A line whose status word (the middle part) is coloured, trimmed to the terminal.
fn line(status: Option<Status>, parts: (&str, &str, &str)) {
    println!("{}", styled_line(status, parts, super::terminal::style()));
}

/// A line without a status word, trimmed to the terminal.
fn plain(text: &str) {
    line(None, ("", "", text));
}

/// A recorded wall-clock time as a person reads it: `09:41:03 UTC (5m ago)`.
fn when(unix: u64) -> String {
    crate::human::time_ago(unix, crate::state::unix_now())
}
