//! `guard verify`: phase 1's checks (as on a running node) and then phase 2's, read-only
//! unless `--repair`.

use super::gate::{End, Mode};
use super::PhaseError;
use crate::checks::volume::{facts, rules};
use crate::containerd::config::ContainerdConfig;
use crate::context::Context;
use crate::phases::Later;
use crate::report::Report;

/// containerd runs during verify: no search for it (its check is skipped there).
const VERIFY_LOOK: facts::Look = facts::Look {
    under: true,
    for_containerd: false,
    kubelet: true,
};

/// Phase 1's look runs on a thread of its own beside phase 2, whose stale check takes its
/// mounts: where the kernel cannot describe them by path it reads `/proc/self/mountinfo`
/// (which grows by about 5 mounts a pod), the longest host read on a busy node, and on
/// its own thread it overlaps containerd's answers instead of delaying phase 2's other
/// host reads (docs/performance.md).
pub fn run(ctx: &Context, cd: &ContainerdConfig, mode: Mode) -> Result<(Report, End), PhaseError> {
    let settings = &ctx.loaded.settings;
    let socket = crate::containerd::config::socket(settings, cd);
    let (send_mounts, mounts) = Later::channel();
    let look = move || {
        let span = tracing::debug_span!("volume facts");
        let volume =
            span.in_scope(|| facts::gather(&ctx.host, settings, &cd.root, &socket, VERIFY_LOOK));
        if let Ok(table) = &volume.mounts {
            let _ = send_mounts.send(table.clone());
        }
        volume
    };
    let (volume, gate) = std::thread::scope(|s| {
        let volume = s.spawn(look);
        let gate = super::run_gate_with(ctx, cd, mode, Some(mounts));
        (volume.join(), gate)
    });
    // (a panic aborts the guard: the join cannot fail)
    let volume = volume.map_err(|_| PhaseError::VolumeLook)?;
    let gate = gate?;
    let mut report = Report::new(rules::evaluate(
        &settings.volume,
        &volume,
        rules::Phase::Verify,
    ));
    report.extend(gate.findings);
    Ok((report, gate.end))
}
