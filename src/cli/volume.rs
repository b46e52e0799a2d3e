//! `guard volume`: phase 1, containerd's pre-start (see `phases::volume`).

use super::{Context, Exit};
use crate::containerd::config::ContainerdConfig;

pub fn run(ctx: &Context, cd: &ContainerdConfig, pre_start: bool) -> Exit {
    let report = crate::phases::volume::run(ctx, cd, pre_start);
    crate::notify::status(&crate::phases::volume::summary_line(&report));
    super::finish(ctx, report)
}
