//! `guard hygiene`: finds and cleans up what breaks pods while the node runs (leaked
//! containerd tasks, orphaned container payloads), without restarting containerd and
//! without touching the volume or images. Run by `containerd-guard-hygiene.timer`.

use super::{Context, Exit};
use crate::containerd::config::ContainerdConfig;
use crate::phases::runtime::Mode;
use crate::report::Report;

pub fn run(ctx: &Context, cd: &ContainerdConfig, dry_run: bool) -> Exit {
    let mode = Mode {
        // (`cli/writes.rs` decides: `--dry-run` writes nothing, phase 2 included)
        dry_run: ctx.writes == crate::context::Writes::Nothing,
        ..Mode::HYGIENE
    };
    let command = if dry_run {
        "guard hygiene --dry-run"
    } else {
        "guard hygiene"
    };
    match crate::phases::run_runtime(ctx, cd, mode, command) {
        Ok(gate) => super::finish(ctx, Report::new(gate.findings)),
        Err(e) => super::internal_error(&e),
    }
}
