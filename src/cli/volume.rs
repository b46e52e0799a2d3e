//! `guard volume`: phase 1, containerd's pre-start (see `phases::volume`).

use super::{Context, Exit};

pub fn run(ctx: &Context, pre_start: bool) -> Exit {
    let cd = match super::containerd_config(ctx) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let report = crate::phases::volume::run(ctx, &cd, pre_start);
    crate::notify::status(&crate::phases::volume::summary_line(&report));
    super::finish(ctx, report)
}
