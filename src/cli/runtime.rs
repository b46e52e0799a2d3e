//! `guard runtime`: phase 2, kubelet's gate (`ExecStartPre=` or its own oneshot before
//! kubelet). Holds until containerd is usable or `[hold] timeout` passes, repairing within
//! the restart budget. Exit 0 only when usable; 4 when terminal.

use super::{Context, Exit};
use crate::report::Report;
use crate::runtime::gate::{self, End, Mode};

pub fn run(ctx: &Context, force: bool) -> Exit {
    let containerd = match super::volume::containerd_config(ctx) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let mode = Mode {
        hold: true,
        repair: true,
        force,
    };
    let g = gate::run(
        &ctx.host,
        &ctx.loaded.settings,
        &containerd,
        mode,
        "guard runtime",
    );
    finish(ctx, Report::new(g.findings), g.end)
}

pub(crate) fn finish(ctx: &Context, report: Report, end: End) -> Exit {
    let exit = super::finish(ctx, &report);
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
