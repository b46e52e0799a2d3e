//! Phase 1, before containerd: wait a bounded time for the device and the mount (mounting
//! it itself when `[volume] mount = true`), judge the volume, and leave the outcome where
//! `guard status` and containerd's unit look (containerd refuses to start without this
//! boot's `volume.ok`). Fails closed.
//!
//! Run by hand, it never undoes what this boot's phase 1 proved ([`who_runs`]):
//!
//! - this boot's `volume.ok` is there and containerd runs: phase 1 passed and let it start.
//!   `containerd-not-started` fails as always, but nothing is mounted and nothing is
//!   written (removing `volume.ok` would make containerd's next start fail its
//!   `AssertPathExists=`, and a failed `volume.json` would make phase 2 believe phase 1
//!   held containerd back, so a stale containerd would never be restarted). Exit 1; the
//!   finding says so and points at `guard verify`, the check for a running node.
//! - this boot's `volume.ok` is there and containerd is stopped (it crashed; the operator
//!   fixed the disk and re-checks): a real re-check. Passing rewrites the marker; failing
//!   removes it: nothing runs that it would disarm, and containerd must not start again
//!   on a volume that is now wrong.
//! - no `volume.ok` of this boot: the boot's phase 1, as above.

use crate::backoff::Backoff;
use crate::checks::volume::facts::{gather, VolumeFacts};
use crate::checks::volume::rules::{evaluate, worth_waiting, Phase};
use crate::cli::Context;
use crate::containerd::config::ContainerdConfig;
use crate::host::blockdev::Lookup;
use crate::report::{Finding, Id, Report, Status};
use crate::state::StateDir;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Who this run of `guard volume` is, for what it may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// The boot's phase 1, or a re-check with containerd stopped: judge, mount when
    /// configured, record the outcome (marker and record).
    Phase1,
    /// This boot's phase 1 passed and containerd runs: judge only, change nothing.
    HandRunOnALiveNode,
}

/// The hand-run rule (pure): `proved` is "this boot's `volume.ok` is there".
pub fn who_runs(proved: bool, containerd_running: bool) -> Run {
    match (proved, containerd_running) {
        (true, true) => Run::HandRunOnALiveNode,
        _ => Run::Phase1,
    }
}

/// What a hand-run on a live node reports in place of `containerd-not-started`'s
/// "the boot order was lost" (pure): the same failure, why nothing changed, what to run.
pub fn on_a_live_node(report: Report, marker: &std::path::Path) -> Report {
    let findings = report.findings.into_iter().map(|f| {
        if f.id != Id::VolumeContainerdNotStarted || f.status != Status::Fail {
            return f;
        }
        let mut hand = Finding::fail(
            Id::VolumeContainerdNotStarted,
            "containerd is running: this boot's phase 1 verified the volume before it started",
        )
        .evidence(format!(
            "{} is this boot's: phase 1 passed; it and volume.json are kept as phase 1 left \
             them, nothing was written or mounted",
            marker.display()
        ));
        hand.evidence.extend(f.evidence);
        hand.remedy(
            "`guard volume` is phase 1, run by systemd before containerd; on a running node \
             run `guard verify` (read-only; `guard verify --repair` repairs within the budget)",
        )
    });
    Report::new(findings.collect())
}

pub fn run(ctx: &Context, cd: &ContainerdConfig) -> Report {
    let settings = &ctx.loaded.settings;
    let socket = crate::containerd::config::socket(settings, cd);
    let state = StateDir::open(&ctx.host, &settings.state_dir);
    let proved = state.as_ref().is_ok_and(StateDir::volume_proved);
    let look = || gather(&ctx.host, settings, &cd.root, &socket);
    let mut facts = wait_for_volume(ctx, &look);
    let running = facts.containerd.running();
    if who_runs(proved, running) == Run::HandRunOnALiveNode {
        let judged = Report::new(evaluate(&settings.volume, &facts, Phase::BeforeContainerd));
        let marker = settings.state_dir.join(crate::state::VOLUME_MARKER);
        return on_a_live_node(judged, &marker);
    }
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
    record(state, &report);
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
fn record(state: Result<StateDir, String>, report: &Report) {
    let written = state.and_then(|dir| dir.record_volume(report));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_proved_boot_with_containerd_running_is_a_hand_run_that_changes_nothing() {
        assert_eq!(who_runs(true, true), Run::HandRunOnALiveNode);
        assert_eq!(
            who_runs(true, false),
            Run::Phase1,
            "a re-check after a crash"
        );
        assert_eq!(
            who_runs(false, true),
            Run::Phase1,
            "the boot order was lost"
        );
        assert_eq!(who_runs(false, false), Run::Phase1, "the boot's phase 1");
    }

    #[test]
    fn a_hand_run_on_a_live_node_fails_naming_verify_and_keeps_the_evidence() {
        let report = Report::new(vec![
            Finding::pass(Id::VolumeMounted, "mounted"),
            Finding::fail(Id::VolumeContainerdNotStarted, "already running")
                .evidence("pid 42: containerd"),
        ]);
        let out = on_a_live_node(
            report,
            std::path::Path::new("/run/containerd-guard/volume.ok"),
        );
        assert_eq!(out.verdict(), crate::report::Verdict::Unusable);
        let f = out.failures().next().unwrap();
        assert!(f.remedy.contains("guard verify"), "{f:?}");
        assert!(
            f.evidence[0].contains("/run/containerd-guard/volume.ok"),
            "{f:?}"
        );
        assert!(f.evidence[0].contains("nothing was written"), "{f:?}");
        assert_eq!(f.evidence[1], "pid 42: containerd");
        assert_eq!(out.findings[0].status, Status::Pass);
    }
}
