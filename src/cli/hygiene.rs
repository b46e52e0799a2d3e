//! `guard hygiene`: finds and cleans up what breaks pods while the node runs (leaked
//! containerd tasks, orphaned container payloads), without restarting containerd and
//! without touching the volume or images. Run by `containerd-guard-hygiene.timer`.

use super::{Context, Exit};
use crate::containerd::config::ContainerdConfig;
use crate::phases::gate::Mode;
use crate::report::Report;
use std::path::Path;

pub fn run(ctx: &Context, cd: &ContainerdConfig) -> Exit {
    let socket = crate::containerd::config::socket(&ctx.loaded.settings, cd);
    if nothing_at(&ctx.host.path(&socket)) {
        return skipped(ctx, &socket);
    }
    let mode = Mode {
        // (`cli/writes.rs` decides: `--dry-run` writes nothing, phase 2 included)
        dry_run: ctx.writes == crate::context::Writes::Nothing,
        ..Mode::HYGIENE
    };
    match crate::phases::run_gate(ctx, cd, mode) {
        Ok(gate) => super::finish(ctx, Report::new(gate.findings)),
        Err(e) => super::internal_error(&e),
    }
}

/// Nothing at all at the socket's path (not followed: a link, even a dangling one, or a
/// file that is no socket is phase 2's to report, as `runtime.answers` names it).
fn nothing_at(socket: &Path) -> bool {
    matches!(
        std::fs::symlink_metadata(socket),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound
    )
}

/// containerd has not made its socket (not started yet, or stopped on purpose): nothing
/// to clean up and nothing to report. The unit runs on every node whatever socket the
/// config names (a fixed `ConditionPathExists=` skipped it, silently, where the socket is
/// elsewhere), so the guard decides here: exit 0, one line, nothing written.
fn skipped(ctx: &Context, socket: &Path) -> Exit {
    let line = format!("skipped: no containerd socket at {}", socket.display());
    match ctx.json {
        true => println!(
            "{}",
            serde_json::json!({"verdict": "skipped", "reason": line, "findings": []})
        ),
        false => println!("{line}"),
    }
    Exit::Usable
}
