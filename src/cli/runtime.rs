//! `guard runtime`: phase 2, kubelet's gate (`ExecStartPre=` or its own oneshot before
//! kubelet). Holds until containerd is usable or `[hold] timeout` passes, repairing within
//! the restart budget. Exit 0 only when usable; 4 when terminal.

use super::{Context, Exit};
use crate::command::Command;
use crate::containerd::config::ContainerdConfig;
use crate::phases::gate::{End, Mode, Scope};
use crate::report::Report;

pub fn run(ctx: &Context, cd: &ContainerdConfig, force: bool) -> Exit {
    let scope = match ctx.loaded.settings.canary.enabled {
        true => Scope::WITH_CANARY,
        false => Scope::ALL,
    };
    let mode = Mode {
        force,
        scope,
        ..Mode::RUNTIME
    };
    match crate::phases::run_gate(ctx, cd, mode) {
        Ok(gate) => finish(ctx, Report::new(gate.findings), gate.end),
        Err(e) => super::internal_error(&e),
    }
}

pub(crate) fn finish(ctx: &Context, report: Report, end: End) -> Exit {
    let exit = super::finish(ctx, report);
    let answered = crate::timing::cri_answered().filter(|_| ctx.command == Command::Runtime);
    if let Some(at) = answered {
        // Tells a slow boot's wait for containerd from the gate's own work (docs/fleet.md).
        let after = at.saturating_sub(crate::timing::monotonic() - ctx.started.elapsed());
        tracing::info!(
            "containerd's CRI first answered at CLOCK_MONOTONIC {} us, {} ms after the guard started",
            at.as_micros(),
            after.as_millis()
        );
    }
    match end {
        End::Terminal => {
            eprintln!(
                "guard: TERMINAL: the restart budget for this boot is spent; nothing more will be \
                 restarted until `guard reset` or a reboot"
            );
            Exit::Terminal
        }
        _ => exit,
    }
}
