//! `guard volume`: phase 1, run by systemd before containerd. Waits a bounded time for the
//! device and the mount (mounting it itself when `[volume] mount = true`), then fails
//! closed with what it saw. Its outcome is left in `state_dir` for `guard status` and for
//! containerd's unit, which refuses to start without this boot's `volume.ok`.

use super::{Context, Exit};
use crate::config::containerd::ContainerdConfig;
use crate::policy::volume::{evaluate, worth_waiting, Phase};
use crate::probe::blockdev::Lookup;
use crate::probe::volume::{gather, VolumeFacts};
use crate::report::{Report, Verdict};
use crate::state_file::{write_atomic, VolumeRecord, VOLUME_MARKER, VOLUME_RECORD};
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub fn run(ctx: &Context) -> Exit {
    let containerd = match containerd_config(ctx) {
        Ok(c) => c,
        Err(exit) => return exit,
    };
    let mut facts = wait_for_volume(ctx, &containerd);
    let mut acted = Vec::new();
    if let Some(node) = should_mount(ctx, &facts) {
        let target = ctx.host.os_file(&containerd.root);
        acted.push(crate::act::mount::mount_volume(
            &ctx.loaded.settings.volume,
            &ctx.host.path(&node),
            &target,
        ));
        facts = gather(
            &ctx.host,
            &ctx.loaded.settings,
            &containerd.root,
            &socket_of(ctx, &containerd),
        );
    }
    let mut report = Report::new(acted);
    report.extend(evaluate(
        &ctx.loaded.settings.volume,
        &facts,
        Phase::BeforeContainerd,
    ));
    record(ctx, &report);
    let exit = super::finish(ctx, &report);
    crate::notify::status(&summary_line(&report));
    exit
}

/// Reads containerd's config named by `[containerd] config`; its errors are config errors.
pub(crate) fn containerd_config(ctx: &Context) -> Result<ContainerdConfig, Exit> {
    let path = ctx.host.os_file(&ctx.loaded.settings.containerd.config);
    crate::config::containerd::load(&path).map_err(|e| {
        eprintln!("guard: configuration error: {e}");
        eprintln!(
            "guard: (containerd's config, named by [containerd] config); nothing was checked"
        );
        Exit::Config
    })
}

pub(crate) fn socket_of(ctx: &Context, c: &ContainerdConfig) -> PathBuf {
    ctx.loaded
        .settings
        .containerd
        .socket
        .clone()
        .unwrap_or_else(|| c.address.clone())
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
/// full probe; the interval grows from 100 ms to 2 s so a late disk is seen quickly.
/// With `[volume] mount = true` only the device is awaited: the guard mounts it itself.
fn wait_for_volume(ctx: &Context, containerd: &ContainerdConfig) -> VolumeFacts {
    let settings = &ctx.loaded.settings;
    let socket = socket_of(ctx, containerd);
    let started = Instant::now();
    let deadline = started + settings.volume.wait;
    let mut interval = Duration::from_millis(100);
    let mut last_log: Option<Instant> = None;
    loop {
        let facts = gather(&ctx.host, settings, &containerd.root, &socket);
        let now = Instant::now();
        if !worth_waiting(&facts) || should_mount(ctx, &facts).is_some() {
            return facts;
        }
        let what = waiting_for(&facts, ctx);
        if now >= deadline {
            tracing::warn!(
                "gave up after {:.1}s waiting for {what}",
                (now - started).as_secs_f64()
            );
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

/// Leaves the outcome where `guard status` and containerd's unit look. A failure to
/// record is logged, never fatal: the exit code already tells systemd.
fn record(ctx: &Context, report: &Report) {
    let dir = ctx.host.path(&ctx.loaded.settings.state_dir);
    let record = VolumeRecord::new(crate::state_file::boot_id(&ctx.host), report);
    let body = serde_json::to_vec_pretty(&record).unwrap_or_default();
    if let Err(e) = write_atomic(&dir.join(VOLUME_RECORD), &body) {
        tracing::warn!("cannot write {}: {e}", dir.join(VOLUME_RECORD).display());
    }
    let marker = dir.join(VOLUME_MARKER);
    let result = match report.verdict() {
        Verdict::Usable => write_atomic(&marker, format!("{}\n", record.boot_id).as_bytes()),
        Verdict::Unusable => match std::fs::remove_file(&marker) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
    };
    if let Err(e) = result {
        tracing::warn!("cannot update {}: {e}", marker.display());
    }
}

fn summary_line(report: &Report) -> String {
    match report.failures().next() {
        None => "volume verified".to_string(),
        Some(f) => format!("FAILED {}: {}", f.id, f.summary),
    }
}
