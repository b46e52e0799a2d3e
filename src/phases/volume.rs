//! Phase 1, containerd's pre-start: wait a bounded time for the device and the mount
//! (mounting it itself when `[volume] mount = true`), judge the volume, and leave the
//! outcome where `guard status` and phase 2 look. Fails closed: containerd's drop-in runs
//! `guard volume --pre-start` as its `ExecStartPre=`, so a failure keeps containerd
//! stopped and containerd's own `Restart=` tries again.
//!
//! Which check a run makes ([`who_runs`]) depends on what this boot has seen:
//!
//! - the first start of containerd in a boot: phase 1 in full (waits `[volume] wait`,
//!   mounts when configured, every threshold).
//! - a later start (`--pre-start` once containerd has run this boot: a restart, a crash,
//!   its package upgrade): the quick check. The device must still resolve and be the
//!   writable, allowed-type filesystem at containerd's root, but the guard waits at most
//!   [`LATER_START_WAIT`], never mounts, and a volume that filled while the node ran only
//!   warns: a restart must not turn a full disk into an outage, nor wait out a disk that
//!   an HA failover took away.
//! - a later start in a boot where containerd ran before the guard judged anything (the
//!   guard installed or unmasked on a running node, an image build VM restarting
//!   containerd to pre-pull images): the quick check, but a failure only warns until the
//!   volume passed once ([`Run::Adopt`]): holding a containerd that already ran on this
//!   volume would make an outage of a warning. The install itself prints the verdict.
//! - containerd runs already: a hand run on a live node (containerd's own pre-start runs
//!   while containerd is stopped). Judge only, write nothing: removing `volume.ok` or
//!   writing a failed `volume.json` would make phase 2 believe phase 1 held containerd
//!   back, so a stale containerd would never be restarted. Exit 1; the finding points at
//!   `guard verify`, the check for a running node.
//! - from the initrd (`--sysroot`): phase 1 for the OS about to start, recording nothing
//!   (`/run` survives switch-root: a marker written here would pass for the OS's own), and
//!   leaving the volume to the OS when a filesystem above containerd's root (a separate
//!   `/var`) is mounted only after switch-root ([`left_to_the_os`]).

use crate::backoff::Backoff;
use crate::checks::volume::facts::{self, VolumeFacts};
use crate::checks::volume::rules::{evaluate, worth_waiting, Phase};
use crate::containerd::config::ContainerdConfig;
use crate::context::Context;
use crate::host::blockdev::Lookup;
use crate::host::Host;
use crate::progress::Progress;
use crate::report::{Finding, Id, Report, Status};
use crate::state::{StateDir, StateError};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

mod who_runs;
pub use who_runs::*;

/// The longest a later start of containerd waits for its volume: long enough for a udev
/// event in flight, short enough that a restart after an HA failover fails fast.
pub const LATER_START_WAIT: Duration = Duration::from_secs(10);

/// Why a failure does not hold containerd under [`Run::Adopt`].
const ADOPTED: &str = "not holding containerd: it has run this boot without the guard \
    (installed or unmasked on a running node, or an image build); the guard holds it once \
    the volume passed a check, and at every first start of a boot";

/// What a hand-run on a live node reports in place of `containerd-not-started`'s
/// "the boot order was lost" (pure): the same failure, why nothing changed, what to run.
pub fn on_a_live_node(report: Report, marker: &std::path::Path) -> Report {
    let findings = report.findings.into_iter().map(|f| {
        if f.id != Id::VolumeContainerdNotStarted || f.status != Status::Fail {
            return f;
        }
        let mut hand = Finding::fail(
            Id::VolumeContainerdNotStarted,
            "containerd is running: `guard volume` judges the volume before containerd starts",
        )
        .evidence(format!(
            "{} and volume.json are kept as containerd's pre-start left them; nothing was \
             written or mounted",
            marker.display()
        ))
        .evidence(f.summary);
        hand.evidence.extend(f.evidence);
        hand.remedy(
            "`guard volume` is containerd's pre-start, run by systemd; on a running node \
             run `guard verify` (read-only; `guard verify --repair` repairs within the budget)",
        )
    });
    Report::new(findings.collect())
}

pub fn run(ctx: &Context, cd: &ContainerdConfig, pre_start: bool) -> Report {
    let settings = &ctx.loaded.settings;
    let initrd = ctx.host.checks_another_os();
    if initrd {
        if let Some(skip) = left_to_the_os(&ctx.host, &cd.root) {
            return Report::new(vec![skip]);
        }
    }
    let socket = crate::containerd::config::socket(settings, cd);
    let state = StateDir::open(&ctx.host, &settings.state_dir);
    let ran = (pre_start && !initrd)
        .then(|| containerd_ran(&ctx.host, cd))
        .flatten();
    let seen = Seen {
        initrd,
        containerd_running: !initrd
            && tracing::debug_span!("containerd running?")
                .in_scope(|| facts::seen(&ctx.host, &cd.root, &socket).running()),
        containerd_ran: ran.is_some(),
        judged: state.as_ref().is_ok_and(|s| s.read_volume().is_some()),
    };
    let run = who_runs(seen, pre_start);
    let plan = run.plan(settings.volume.wait, settings.volume.mount);
    announce(run, ran.as_deref());
    let look = |under| {
        let look = facts::Look {
            under,
            for_containerd: true,
            kubelet: false,
        };
        tracing::debug_span!("volume facts")
            .in_scope(|| facts::gather(&ctx.host, settings, &cd.root, &socket, look))
    };
    let look_now = || look(plan.look_under);
    let deadline = Instant::now() + plan.wait;
    let facts = wait_for_volume(ctx, plan, deadline, &look_now);
    if run == Run::HandRunOnALiveNode {
        let judged = Report::new(evaluate(&settings.volume, &facts, plan.phase));
        let marker = settings.state_dir.join(crate::state::VOLUME_MARKER);
        return on_a_live_node(judged, &marker);
    }
    let (facts, acted) = mount_what_was_found(ctx, plan, deadline, &cd.root, facts, &look_now);
    let mut report = Report::new(acted);
    report.extend(evaluate(&settings.volume, &facts, plan.phase));
    recorded(plan, state, report)
}

/// Whether containerd's root is the verified volume now, for phase 2's remedies that
/// would start containerd or write into it ([`crate::checks::volume::rules::unverified`]).
/// A quick look: no walk under the mount point, no process scan, no kubelet files.
pub fn unverified(
    host: &Host,
    settings: &crate::config::Settings,
    root: &Path,
    socket: &Path,
) -> Option<crate::checks::volume::rules::Unverified> {
    let look = facts::Look {
        under: false,
        for_containerd: false,
        kubelet: false,
    };
    let facts = tracing::debug_span!("volume facts for a remedy")
        .in_scope(|| facts::gather(host, settings, root, socket, look));
    crate::checks::volume::rules::unverified(&settings.volume, &facts)
}

/// The report as `plan` says: recorded in the state directory (always, only a pass, or
/// never), and turned into warnings where the run only advises.
fn recorded(plan: Plan, state: Result<StateDir, StateError>, report: Report) -> Report {
    let passed = report.verdict() == crate::report::Verdict::Usable;
    match plan.record {
        Record::Always => record(state, &report),
        Record::OnlyAPass if passed => record(state, &report),
        Record::OnlyAPass | Record::Never => {}
    }
    if !plan.advisory {
        return report;
    }
    let findings = report.findings.into_iter();
    Report::new(findings.map(|f| f.only_warns(ADOPTED)).collect())
}

/// One journal line on which check this is and why: the first thing an operator reading
/// `journalctl -u containerd` needs to know.
fn announce(run: Run, ran: Option<&str>) {
    let why = ran.unwrap_or("nothing says containerd has run this boot");
    match run {
        Run::LaterStart | Run::Adopt => tracing::info!(
            "quick check before a later start of containerd ({why}): the volume must be \
             mounted, the configured device, writable and an allowed type; waiting at most \
             {}s, never mounting; low space only warns{}",
            LATER_START_WAIT.as_secs(),
            if run == Run::Adopt {
                "; the guard has not judged the volume this boot, so a failure only warns"
            } else {
                ""
            }
        ),
        Run::Phase1 => tracing::info!("phase 1 in full before containerd starts ({why})"),
        Run::Initrd => tracing::info!("phase 1 for the OS below --sysroot; nothing is recorded"),
        Run::HandRunOnALiveNode => tracing::info!("containerd runs ({why}): judging only"),
    }
}

/// The initrd must not mount the volume under a filesystem that the OS mounts later: the
/// OS's `var.mount` would hide it, and containerd would start on the directory beneath.
/// A mount point between `/` and containerd's root in the OS's `/etc/fstab` that is not
/// mounted below `/sysroot` yet means exactly that. The volume is then the OS's to check
/// (containerd's pre-start runs the full phase 1 after switch-root).
fn left_to_the_os(host: &Host, root: &Path) -> Option<Finding> {
    let fstab = Path::new("/etc/fstab");
    let above = match crate::host::fstab::mount_points(&host.os_file(fstab)) {
        Ok(points) => points,
        Err(why) => {
            return Some(
                Finding::skip(Id::VolumeMounted, "left to the OS: its /etc/fstab is unreadable")
                    .evidence(why)
                    .remedy("nothing to do in the initrd: containerd's pre-start checks the volume after switch-root"),
            )
        }
    };
    let table = crate::host::mountinfo::MountTable::read(&host.mountinfo()).ok()?;
    let later = above
        .into_iter()
        .filter(|p| p != Path::new("/") && root.starts_with(p) && p != root)
        .find(|p| table.at(&host.in_namespace(p)).is_none())?;
    Some(
        Finding::skip(
            Id::VolumeMounted,
            format!(
                "left to the OS: {} is a separate filesystem the OS mounts after switch-root",
                later.display()
            ),
        )
        .evidence(format!(
            "{} names {} in the OS's /etc/fstab and it is not mounted at {}; a volume mounted \
             at {} now would be hidden under it",
            host.in_namespace(fstab).display(),
            later.display(),
            host.in_namespace(&later).display(),
            host.in_namespace(root).display()
        ))
        .remedy(format!(
            "nothing to do: containerd's pre-start checks the volume after switch-root; to \
             mount it from the initrd, mount {} there too (x-initrd.mount in fstab)",
            later.display()
        )),
    )
}

/// The device to mount, when mounting is configured and the device is there unmounted.
fn should_mount(plan: Plan, facts: &VolumeFacts) -> Option<PathBuf> {
    match (&facts.device, facts.mount()) {
        (Some((_, Lookup::Found { node, .. })), None) if plan.may_mount => Some(node.clone()),
        _ => None,
    }
}

/// Mounts the device `facts` found, when the plan may mount, and looks again. A device
/// gone between that look and the mount (the mount failed and the next look finds nothing
/// carrying the name: detached, failed over) is waited for again until `deadline`, as
/// before it first appeared: a disk that comes back in time is mounted, and one that does
/// not is reported not found, never as a disk without a filesystem, whose fix would be
/// to format it.
fn mount_what_was_found(
    ctx: &Context,
    plan: Plan,
    deadline: Instant,
    root: &Path,
    mut facts: VolumeFacts,
    look: &dyn Fn() -> VolumeFacts,
) -> (VolumeFacts, Vec<Finding>) {
    loop {
        let Some(node) = should_mount(plan, &facts) else {
            return (facts, Vec::new());
        };
        crate::signals::hook("volume device found"); // (tests: between the look and the mount)
        let (device, target) = (ctx.host.path(&node), ctx.host.os_file(root));
        let mounted =
            crate::remedies::mount::mount_volume(&ctx.loaded.settings.volume, &device, &target);
        let after = look();
        let gone = matches!(after.device, Some((_, Lookup::Absent { .. })));
        if mounted.status != Status::Fail || !gone {
            return (after, vec![mounted]);
        }
        tracing::warn!(
            "{} was gone before it could be mounted ({}): waiting for it again",
            node.display(),
            mounted.summary
        );
        if Instant::now() >= deadline {
            return (after, Vec::new());
        }
        facts = wait_for_volume(ctx, plan, deadline, look);
    }
}

/// Polls until the device and mount are there or `deadline` (the plan's wait from the
/// start) passes. Each poll is a full look; the interval grows from 100 ms to 2 s so a
/// late disk is seen quickly. When the plan may mount, only the device is awaited: the
/// guard mounts it itself.
fn wait_for_volume(
    ctx: &Context,
    plan: Plan,
    deadline: Instant,
    look: &dyn Fn() -> VolumeFacts,
) -> VolumeFacts {
    let started = deadline.checked_sub(plan.wait).unwrap_or_else(Instant::now);
    let mut interval = Backoff::new(Duration::from_millis(100), Duration::from_secs(2));
    let mut progress = Progress::default();
    loop {
        let facts = look();
        let now = Instant::now();
        if !worth_waiting(&facts) || should_mount(plan, &facts).is_some() {
            return facts;
        }
        let what = waiting_for(&facts, ctx);
        if now >= deadline {
            let waited = (now - started).as_secs_f64();
            tracing::warn!("gave up after {waited:.1}s waiting for {what}");
            return facts;
        }
        let left = deadline - now;
        progress.waiting(&format!("waiting for {what}"), left);
        progress.tick();
        crate::notify::extend_timeout(left + Duration::from_secs(10));
        std::thread::sleep(progress.quiet_for(interval.next().min(left)));
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
#[tracing::instrument(level = "debug", name = "record", skip_all)]
fn record(state: Result<StateDir, StateError>, report: &Report) {
    let written = state.and_then(|dir| dir.record_volume(report));
    if let Err(e) = written {
        tracing::warn!("cannot record phase 1's outcome: {e}");
    }
}

/// One line for systemd's StatusText.
pub fn summary_line(report: &Report) -> String {
    let all_skipped = report.findings.iter().all(|f| f.status == Status::Skip);
    match (report.failures().next(), report.findings.first()) {
        (Some(f), _) => format!("FAILED {}: {}", f.id, f.summary),
        (None, Some(f)) if all_skipped => format!("not checked: {}", f.summary),
        (None, _) => "volume verified".to_string(),
    }
}

#[cfg(test)]
mod tests;
