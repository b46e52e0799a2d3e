//! `guard verify`: phase 1's checks (as on a running node) and then phase 2's, read-only
//! unless `--repair`.

use super::runtime::{End, Mode};
use crate::checks::volume::{facts, rules};
use crate::cli::Context;
use crate::containerd::config::ContainerdConfig;
use crate::report::Report;

/// containerd runs during verify: no search for it (its check is skipped there).
const VERIFY_LOOK: facts::Look = facts::Look {
    under: true,
    for_containerd: false,
};

pub fn run(ctx: &Context, cd: &ContainerdConfig, mode: Mode) -> Result<(Report, End), String> {
    let settings = &ctx.loaded.settings;
    let socket = crate::containerd::config::socket(settings, cd);
    let volume = tracing::debug_span!("volume facts")
        .in_scope(|| facts::gather(&ctx.host, settings, &cd.root, &socket, VERIFY_LOOK));
    let mut report = Report::new(rules::evaluate(
        &settings.volume,
        &volume,
        rules::Phase::Verify,
    ));
    let command = match (mode.repair, mode.dry_run) {
        (true, false) => "guard verify --repair",
        (true, true) => "guard verify --repair --dry-run",
        (false, _) => "guard verify",
    };
    // the mount table just read goes on to the stale check
    let gate = super::run_runtime(ctx, cd, mode, command, volume.mounts.ok())?;
    report.extend(gate.findings);
    Ok((report, gate.end))
}
