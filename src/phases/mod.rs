//! Phases orchestrate: they gather each family's facts, apply its rules, and run the
//! remedies the findings call for, within their bounds. They hold no rules of their own.
//!
//! - [`volume`]: phase 1, before containerd (`guard volume`).
//! - [`gate`]: phase 2, the gate before kubelet (`guard runtime`, `guard verify
//!   [--repair]`, `guard hygiene`).
//! - [`verify`]: every check, for a person after a failover.

pub mod gate;
pub mod verify;
pub mod volume;

use crate::containerd::config::ContainerdConfig;
use crate::context::Context;

/// A value another thread is still working out: [`Later::get`] waits for it (once; every
/// later call gets the same). `guard verify` reads its mount table beside phase 2.
pub struct Later<T> {
    value: std::sync::OnceLock<Option<T>>,
    from: std::sync::Mutex<std::sync::mpsc::Receiver<T>>,
}

impl<T> Later<T> {
    /// The value to come, and where to send it.
    pub fn channel() -> (std::sync::mpsc::SyncSender<T>, Later<T>) {
        let (send, from) = std::sync::mpsc::sync_channel(1);
        let later = Later {
            value: std::sync::OnceLock::new(),
            from: std::sync::Mutex::new(from),
        };
        (send, later)
    }

    /// The value; `None` when its sender went away without one.
    pub fn get(&self) -> Option<&T> {
        let wait = || self.from.lock().ok()?.recv().ok();
        self.value.get_or_init(wait).as_ref()
    }
}

/// Why a phase could not run at all (its checks say what is wrong with the node; this is
/// what is wrong with the guard's own run).
#[derive(Debug, thiserror::Error)]
pub enum PhaseError {
    #[error("cannot start the guard's I/O runtime: {0}")]
    Runtime(std::io::Error),
    #[error("the volume look did not finish")]
    VolumeLook,
}

/// The guard's own mount table, as `guard verify`'s volume look reads it.
pub type OwnMounts = Later<std::sync::Arc<crate::host::mountinfo::MountTable>>;

/// Phase 2 on a current-thread runtime (phase 1 never starts one).
pub fn run_gate(
    ctx: &Context,
    cd: &ContainerdConfig,
    mode: gate::Mode,
) -> Result<gate::Gate, PhaseError> {
    run_gate_with(ctx, cd, mode, None)
}

/// Phase 2, given the guard's own mount table, which the caller reads beside it (`guard
/// verify`'s phase 1 look): the stale check takes it for a containerd in the same mount
/// namespace instead of reading another copy (`mountinfo` grows by about 3 mounts a pod).
pub fn run_gate_with(
    ctx: &Context,
    cd: &ContainerdConfig,
    mode: gate::Mode,
    mounts: Option<OwnMounts>,
) -> Result<gate::Gate, PhaseError> {
    // One thread for the reads of the host's files beside the loop (off_the_loop): they
    // overlap containerd's answers; more threads would only add memory (a glibc arena each).
    let rt = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .map_err(PhaseError::Runtime)?;
    let settings = &ctx.loaded.settings;
    let mut world = gate::RealWorld::new(&ctx.host, settings, cd)
        .with_own_mounts(mounts)
        .within(mode.deadline);
    // kubelet's version: `guard verify` asks its binary; `guard runtime` runs on kubelet's
    // start path and never runs kubelet itself
    if ctx.command == crate::command::Command::Verify {
        world = world.asking_kubelet_version(ctx.writes != crate::context::Writes::Nothing);
    }
    // (boxed: the gate's future is tens of KiB, and each move of it, into the deadline's
    // wrapper and into the runtime, would copy it to fresh stack)
    let gate = Box::pin(gate::run(&mut world, settings, mode, ctx.command));
    let Some(deadline) = mode.deadline else {
        return Ok(rt.block_on(gate));
    };
    // A hung containerd (stopped with SIGSTOP) accepts connections and never answers:
    // the deadline covers the whole run, not only each call.
    let left = deadline.saturating_sub(ctx.started.elapsed());
    Ok(rt.block_on(async {
        match tokio::time::timeout(left, gate).await {
            Ok(gate) => gate,
            Err(_) => gate::Gate::timed_out(deadline),
        }
    }))
}

/// Rewrites the Prometheus textfile (`[metrics] textfile`) after a command. The default
/// path is written only when its directory exists (node_exporter is installed); a path an
/// operator configured must be writable. Errors come back as the warning to report.
pub fn publish_metrics(
    ctx: &Context,
    report: &crate::report::Report,
) -> Result<(), crate::report::Finding> {
    use crate::config::Source;
    use crate::report::{Finding, Id};
    let settings = &ctx.loaded.settings;
    if !ctx.command.is_metered() {
        return Ok(());
    }
    let Some(textfile) = &settings.metrics.textfile else {
        return Ok(());
    };
    let path = ctx.host.path(textfile);
    let dir_missing = !path.parent().is_some_and(|d| d.is_dir());
    if dir_missing && *ctx.loaded.source_of("metrics.textfile") == Source::Default {
        return Ok(());
    }
    let warn = |e: String| {
        Finding::warn(Id::MetricsTextfile, "the metrics textfile was not written")
            .evidence(e)
            .remedy("fix what `seen:` names (a read-only or full directory, one others may write, or state_dir), or set [metrics] textfile = \"\" to turn metrics off")
    };
    let state = crate::state::StateDir::open(&ctx.host, &settings.state_dir)
        .map_err(|e| warn(e.to_string()))?;
    let mut kept: crate::metrics::Kept = state.read_metrics();
    let run = crate::metrics::Run {
        unix: crate::state::unix_now(),
        seconds: ctx.started.elapsed().as_secs_f64(),
    };
    let now = run.unix;
    let hygiene_covers =
        |id| crate::checks::FamilyId::of(id).is_some_and(|f| gate::Mode::HYGIENE.scope.covers(f));
    kept.update(state.boot_id(), ctx.command, report, run, &hygiene_covers);
    let saved = state.save_metrics(&kept);
    let runtime = match state.read_ledger() {
        crate::state::LedgerFile::Current(s) => Some(s),
        _ => None,
    };
    let version = env!("CARGO_PKG_VERSION");
    let text = crate::metrics::render(&kept, runtime.as_ref(), version, now);
    crate::metrics::write_textfile(&path, text.as_bytes()).map_err(warn)?;
    saved.map_err(|e| warn(e.to_string()))
}
