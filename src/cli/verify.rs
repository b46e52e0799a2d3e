//! `guard verify`: every check that exists, for a person after a failover. Read-only unless
//! `--repair`, which applies phase 2's remedies within the same budget as `guard runtime`.

use super::{Context, Exit};
use crate::policy::volume::{evaluate, Phase};
use crate::probe::volume::gather;
use crate::report::Report;
use crate::runtime::gate::{self, Mode};

pub fn run(ctx: &Context, repair: bool, force: bool) -> Exit {
    let containerd = match super::volume::containerd_config(ctx) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let socket = super::volume::socket_of(ctx, &containerd);
    let facts = gather(&ctx.host, &ctx.loaded.settings, &containerd.root, &socket);
    let mut report = Report::new(evaluate(&ctx.loaded.settings.volume, &facts, Phase::Verify));
    let mode = Mode {
        hold: false,
        repair,
        force,
    };
    let g = gate::run(
        &ctx.host,
        &ctx.loaded.settings,
        &containerd,
        mode,
        if repair {
            "guard verify --repair"
        } else {
            "guard verify"
        },
    );
    report.extend(g.findings);
    super::runtime::finish(ctx, report, g.end)
}
