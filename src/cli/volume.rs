//! `guard volume`: phase 1, run by systemd before containerd (see `phases::volume`).

use super::{Context, Exit};

pub fn run(ctx: &Context) -> Exit {
    let cd = match super::containerd_config(ctx) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let report = crate::phases::volume::run(ctx, &cd);
    crate::notify::status(&crate::phases::volume::summary_line(&report));
    super::finish(ctx, report)
}
