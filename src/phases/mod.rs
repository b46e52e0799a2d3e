//! Phases orchestrate: they gather each family's facts, apply its rules, and run the
//! remedies the findings call for, within their bounds. They hold no rules of their own.
//!
//! - [`volume`]: phase 1, before containerd (`guard volume`).
//! - [`runtime`]: phase 2, before kubelet (`guard runtime`, `guard verify [--repair]`).
//! - [`verify`]: every check, for a person after a failover.

pub mod runtime;
pub mod verify;
pub mod volume;

use crate::cli::Context;
use crate::containerd::config::ContainerdConfig;

/// Reads containerd's config named by `[containerd] config`. Its errors are configuration
/// errors (exit 3): nothing is checked against a config the guard cannot read.
pub fn containerd_config(ctx: &Context) -> Result<ContainerdConfig, String> {
    let path = ctx.host.os_file(&ctx.loaded.settings.containerd.config);
    crate::containerd::config::load(&path)
}

/// Phase 2 on a current-thread runtime (phase 1 never starts one).
pub fn run_runtime(
    ctx: &Context,
    cd: &ContainerdConfig,
    mode: runtime::Mode,
    command: &str,
) -> Result<runtime::Gate, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the guard's I/O runtime: {e}"))?;
    let settings = &ctx.loaded.settings;
    let mut node = runtime::Node::new(&ctx.host, settings, cd);
    Ok(rt.block_on(runtime::run(&mut node, settings, mode, command)))
}
