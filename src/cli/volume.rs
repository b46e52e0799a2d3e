//! `guard volume`: phase 1, run by systemd before containerd. Waits a bounded time for the
//! device and the mount, then fails closed with what it saw.

use super::{Context, Exit};
use crate::config::containerd::ContainerdConfig;
use crate::policy::volume::{evaluate, worth_waiting, Phase};
use crate::probe::volume::{gather, VolumeFacts};
use crate::report::Report;
use std::time::{Duration, Instant};

pub fn run(ctx: &Context) -> Exit {
    let containerd = match containerd_config(ctx) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let facts = wait_for_volume(ctx, &containerd);
    let report = Report::new(evaluate(
        &ctx.loaded.settings.volume,
        &facts,
        Phase::BeforeContainerd,
    ));
    let exit = super::finish(ctx, &report);
    crate::notify::status(&summary_line(&report));
    exit
}

/// Reads containerd's config named by `[containerd] config`; its errors are config errors.
pub(crate) fn containerd_config(ctx: &Context) -> Result<ContainerdConfig, Exit> {
    let path = ctx.host.path(&ctx.loaded.settings.containerd.config);
    crate::config::containerd::load(&path).map_err(|e| {
        eprintln!("guard: configuration error: {e}");
        eprintln!(
            "guard: (containerd's config, named by [containerd] config); nothing was checked"
        );
        Exit::Config
    })
}

pub(crate) fn socket_of(ctx: &Context, c: &ContainerdConfig) -> std::path::PathBuf {
    ctx.loaded
        .settings
        .containerd
        .socket
        .clone()
        .unwrap_or_else(|| c.address.clone())
}

/// Polls until the device and mount are there or `[volume] wait` passes. Each poll is a
/// full probe; the interval grows from 100 ms to 2 s so a late disk is seen quickly.
fn wait_for_volume(ctx: &Context, containerd: &ContainerdConfig) -> VolumeFacts {
    let settings = &ctx.loaded.settings;
    let socket = socket_of(ctx, containerd);
    let deadline = Instant::now() + settings.volume.wait;
    let mut interval = Duration::from_millis(100);
    let mut last_log = Instant::now();
    loop {
        let facts = gather(&ctx.host, settings, &containerd.root, &socket);
        let now = Instant::now();
        if !worth_waiting(&facts) || now >= deadline {
            return facts;
        }
        let left = deadline - now;
        let what = waiting_for(&facts, ctx);
        if last_log.elapsed() >= Duration::from_secs(5) || interval == Duration::from_millis(100) {
            tracing::info!("waiting up to {}s more for {what}", left.as_secs());
            crate::notify::status(&format!("waiting for {what} ({}s left)", left.as_secs()));
            last_log = Instant::now();
        }
        std::thread::sleep(interval.min(left));
        interval = (interval * 2).min(Duration::from_secs(2));
    }
}

fn waiting_for(facts: &VolumeFacts, ctx: &Context) -> String {
    match (&ctx.loaded.settings.volume.device, facts.mount()) {
        (Some(spec), None) => format!("{spec} to be mounted at {}", facts.path.display()),
        (Some(spec), Some(_)) => format!("device {spec}"),
        (None, _) => format!("a mount at {}", facts.path.display()),
    }
}

fn summary_line(report: &Report) -> String {
    match report.failures().next() {
        None => "volume verified".to_string(),
        Some(f) => format!("FAILED {}: {}", f.id, f.summary),
    }
}
