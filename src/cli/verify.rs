//! `guard verify`: every check that exists, for a person after a failover. Read-only unless
//! `--repair`, which applies phase 2's remedies within the same budget as `guard runtime`.

use super::{Context, Exit};
use crate::containerd::config::ContainerdConfig;
use crate::context::Writes;
use crate::phases::gate::{Mode, Scope};
use crate::report::Report;
use crate::state::{LedgerFile, StateDir};
use std::time::Duration;

/// `guard verify`'s flags (`--npd` is its own entry point).
pub struct Flags {
    pub repair: bool,
    pub force: bool,
    /// `--deep`: the canary pod too.
    pub deep: bool,
}

pub fn run(ctx: &Context, cd: &ContainerdConfig, flags: Flags) -> Exit {
    let mode = Mode {
        repair: flags.repair,
        force: flags.force,
        // (`cli/writes.rs` decides: `--dry-run` writes nothing, phase 2 included)
        dry_run: ctx.writes == Writes::Nothing,
        scope: match flags.deep {
            true => Scope::WITH_CANARY,
            false => Scope::ALL,
        },
        ..Mode::VERIFY
    };
    match crate::phases::verify::run(ctx, cd, mode) {
        Ok((report, end)) => super::runtime::finish(ctx, report, end),
        Err(e) => super::internal_error(&e),
    }
}

/// NPD's exit codes (custom plugin protocol): OK, NonOK, Unknown.
const NPD_OK: i32 = 0;
const NPD_NON_OK: i32 = 1;
const NPD_UNKNOWN: i32 = 2;
/// NPD's default `max_output_length`.
const NPD_MAX_OUTPUT: usize = 80;

/// `guard verify --npd`: one read-only look, bounded by `timeout`, answered as NPD's
/// custom plugins answer. Writes nothing (no journal, no metrics, no state).
pub fn npd(ctx: &Context, timeout: Duration) -> i32 {
    let cd = match ctx.containerd_config() {
        Ok(c) => c,
        Err(e) => return npd_unknown(&format!("configuration error: {e}")),
    };
    let mode = Mode {
        deadline: Some(timeout),
        ..Mode::VERIFY
    };
    match crate::phases::verify::run(ctx, &cd, mode) {
        Ok((report, _)) => npd_answer(ctx, &report),
        Err(e) => npd_unknown(&e.to_string()),
    }
}

fn npd_answer(ctx: &Context, report: &Report) -> i32 {
    // NPD knows only OK/NonOK/Unknown: terminal is NonOK, said first on its line.
    if let Some(reason) = terminal(ctx) {
        println!("{}", one_line(&format!("terminal: {reason}")));
        return NPD_NON_OK;
    }
    match report.failures().next() {
        Some(f) => {
            println!("{}", one_line(&format!("{}: {}", f.id, f.summary)));
            NPD_NON_OK
        }
        None => {
            println!("containerd-guard: the container runtime is usable");
            NPD_OK
        }
    }
}

/// The guard could not decide (bad config, internal error): NPD's Unknown.
pub fn npd_unknown(why: &str) -> i32 {
    println!("{}", one_line(&format!("guard: {why}")));
    NPD_UNKNOWN
}

/// This boot's terminal reason, read without the lock.
fn terminal(ctx: &Context) -> Option<String> {
    let dir = StateDir::open(&ctx.host, &ctx.loaded.settings.state_dir).ok()?;
    match dir.read_ledger() {
        LedgerFile::Current(s) => s.terminal.map(|t| t.reason),
        _ => None,
    }
}

/// At most [`NPD_MAX_OUTPUT`] bytes on one line (control characters escaped, as in the
/// table), cut at a character boundary.
fn one_line(text: &str) -> String {
    let flat = crate::report::escape(text);
    let mut end = flat.len().min(NPD_MAX_OUTPUT);
    while !flat.is_char_boundary(end) {
        end -= 1;
    }
    flat[..end].to_string()
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn npd_output_is_one_line_of_at_most_80_bytes() {
        let long = format!("runtime.stale: {}\nsecond line", "é".repeat(60));
        let line = one_line(&long);
        assert!(line.len() <= 80 && !line.contains('\n'), "{line:?}");
        assert!(line.starts_with("runtime.stale: é"));
        assert_eq!(one_line("short"), "short");
    }
}
