//! `guard verify`: every check that exists, for a person after a failover. Read-only unless
//! `--repair`, which applies phase 2's remedies within the same budget as `guard runtime`.

use super::{Context, Exit};
use crate::phases::runtime::Mode;

pub fn run(ctx: &Context, repair: bool, force: bool, dry_run: bool) -> Exit {
    let cd = match super::containerd_config(ctx) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let mode = Mode {
        repair,
        force,
        dry_run,
        ..Mode::VERIFY
    };
    match crate::phases::verify::run(ctx, &cd, mode) {
        Ok((report, end)) => super::runtime::finish(ctx, report, end),
        Err(e) => super::internal_error(&e),
    }
}
