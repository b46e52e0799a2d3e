//! `guard verify`: every check that exists, read-only, for a person after a failover.

use super::{Context, Exit};
use crate::policy::volume::{evaluate, Phase};
use crate::probe::volume::gather;
use crate::report::Report;

pub fn run(ctx: &Context) -> Exit {
    let containerd = match super::volume::containerd_config(ctx) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let socket = super::volume::socket_of(ctx, &containerd);
    let facts = gather(&ctx.host, &ctx.loaded.settings, &containerd.root, &socket);
    let report = Report::new(evaluate(&ctx.loaded.settings.volume, &facts, Phase::Verify));
    super::finish(ctx, &report)
}
