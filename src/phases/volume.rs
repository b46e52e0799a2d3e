//! Phase 1, before containerd: wait a bounded time for the device and the mount (mounting
//! it itself when `[volume] mount = true`), judge the volume, and leave the outcome where
//! `guard status` and containerd's unit look (containerd refuses to start without this
//! boot's `volume.ok`). Fails closed.

use crate::backoff::Backoff;
use crate::checks::volume::facts::{gather, VolumeFacts};
use crate::checks::volume::rules::{evaluate, worth_waiting, Phase};
use crate::cli::Context;
use crate::containerd::config::ContainerdConfig;
use crate::host::blockdev::Lookup;
use crate::report::Report;
use crate::state::StateDir;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub fn run(ctx: &Context, cd: &ContainerdConfig) -> Report {
    let settings = &ctx.loaded.settings;
    let socket = crate::containerd::config::socket(settings, cd);
    let look = || gather(&ctx.host, settings, &cd.root, &socket);
    let mut facts = wait_for_volume(ctx, &look);
    let mut acted = Vec::new();
    if let Some(node) = should_mount(ctx, &facts) {
        let target = ctx.host.os_file(&cd.root);
        acted.push(crate::remedies::mount::mount_volume(
            &settings.volume,
            &ctx.host.path(&node),
            &target,
        ));
        facts = look();
    }
    let mut report = Report::new(acted);
    report.extend(evaluate(&settings.volume, &facts, Phase::BeforeContainerd));
    record(ctx, &report);
    report
}

/// The device to mount, when mounting is configured and the device is there unmounted.
fn should_mount(ctx: &Context, facts: &VolumeFacts) -> Option<PathBuf> {
    match (&facts.device, facts.mount()) {
        (Some((_, Lookup::Found { node, .. })), None) if ctx.loaded.settings.volume.mount => {
            Some(node.clone())
        }
        _ => None,
    }
}

/// Polls until the device and mount are there or `[volume] wait` passes. Each poll is a
/// full look; the interval grows from 100 ms to 2 s so a late disk is seen quickly.
/// With `[volume] mount = true` only the device is awaited: the guard mounts it itself.
fn wait_for_volume(ctx: &Context, look: &dyn Fn() -> VolumeFacts) -> VolumeFacts {
    let started = Instant::now();
    let deadline = started + ctx.loaded.settings.volume.wait;
    let mut interval = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    let mut last_log: Option<Instant> = None;
    loop {
        let facts = look();
        let now = Instant::now();
        if !worth_waiting(&facts) || should_mount(ctx, &facts).is_some() {
            return facts;
        }
        let what = waiting_for(&facts, ctx);
        if now >= deadline {
            let waited = (now - started).as_secs_f64();
            tracing::warn!("gave up after {waited:.1}s waiting for {what}");
            return facts;
        }
        let left = deadline - now;
        if last_log.is_none_or(|t| t.elapsed() >= Duration::from_secs(5)) {
            let secs = left.as_secs_f64().ceil();
            tracing::info!("waiting up to {secs}s for {what}");
            crate::notify::status(&format!("waiting for {what} ({secs}s left)"));
            crate::notify::extend_timeout(left + Duration::from_secs(10));
            last_log = Some(now);
        }
        std::thread::sleep(interval.next().min(left));
    }
}

fn waiting_for(facts: &VolumeFacts, ctx: &Context) -> String {
    match (&ctx.loaded.settings.volume.device, facts.mount()) {
        (Some(spec), None) => format!("{spec} to be mounted at {}", facts.path.display()),
        (Some(spec), Some(_)) => format!("device {spec}"),
        (None, _) => format!("a mount at {}", facts.path.display()),
    }
}

/// A failure to record is logged, never fatal: the exit code already tells systemd.
/// Phase 1 never takes the repair lock: phase 2's restart of containerd starts phase 1.
fn record(ctx: &Context, report: &Report) {
    let written = StateDir::open(&ctx.host, &ctx.loaded.settings.state_dir)
        .and_then(|dir| dir.record_volume(report));
    if let Err(e) = written {
        tracing::warn!("cannot record phase 1's outcome: {e}");
    }
}

/// One line for systemd's StatusText.
pub fn summary_line(report: &Report) -> String {
    match report.failures().next() {
        None => "volume verified".to_string(),
        Some(f) => format!("FAILED {}: {}", f.id, f.summary),
    }
}
