//! Command line: global options, one file per subcommand, documented exit codes.

// First: its print!/println! serve every module below (a closed pipe is no panic).
#[macro_use]
mod out;
mod args;
mod config;
mod exits;
mod help;
mod hygiene;
mod lint;
mod logging;
mod manual;
mod manual_examples;
mod reset;
mod runtime;
mod status;
mod terminal;
mod verify;
mod volume;
mod writes;

use crate::config::ConfigError;
use crate::containerd::config::ContainerdConfig;
pub use crate::context::Context;
pub use crate::exit::Exit;
use crate::host::Host;
use crate::report::{Report, Verdict};
use crate::state::StateDir;
use clap::{FromArgMatches, Parser, Subcommand};
pub use exits::{of as exit_codes, Meaning, NPD as NPD_EXIT_CODES};
pub use manual::{completion, man_page, CompletionShell};
use std::path::PathBuf;

/// The exit codes at the end of each `--help` come from `exits` (see [`command`]).
#[derive(Debug, Parser)]
#[command(
    name = "guard",
    version,
    about = "Keeps containerd off the wrong filesystem and kubelet off a broken runtime",
    max_term_width = 100
)]
pub struct Cli {
    /// Use exactly this config file instead of the layered search
    /// (/usr/lib, /run, /etc containerd-guard/config.d/*.toml).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Print one JSON object instead of the table.
    #[arg(long, global = true)]
    pub json: bool,

    /// More log output: -v adds the reasons (each look and decision), -vv the span
    /// timings.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// Show every line in full: on a terminal the table is otherwise trimmed to its width.
    #[arg(short = 'l', long, global = true)]
    pub full: bool,

    /// Colour the table by status: on a terminal only (auto; NO_COLOR turns it off),
    /// always, or never.
    #[arg(long, global = true, value_name = "WHEN", default_value = "auto")]
    pub color: args::Color,

    /// Check the OS mounted here rather than the running one (the initrd's /sysroot):
    /// its config and volume path are read below DIR.
    #[arg(long, global = true, value_name = "DIR", default_value = "/")]
    pub sysroot: PathBuf,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Phase 1, before containerd: prove the volume at containerd's root is the intended
    /// ephemeral volume. Fails closed.
    ///
    /// Writes: this boot's phase-1 record in state_dir (volume.ok, volume.json), the
    /// status line, the metrics textfile and metrics.json, the journal; with [volume]
    /// mount = true it mounts the device (never formats).
    Volume {
        /// Run as containerd's ExecStartPre=: the first start of a boot gets every check;
        /// once containerd has run this boot, the quick check (the volume mounted, the
        /// configured device, writable, an allowed type; waits at most 10 s, never mounts,
        /// low space only warns).
        #[arg(long)]
        pre_start: bool,
    },
    /// Every check (phase 1 and 2), read-only: what to run by hand after an HA failover.
    ///
    /// Writes: plain `verify` changes nothing on the node but publishes its verdict (the
    /// metrics textfile, state_dir's metrics.json, the journal), as it feeds node_exporter,
    /// and keeps kubelet's version for the boot; --repair writes what `guard runtime`
    /// writes; --repair --dry-run and --npd write nothing at all.
    Verify {
        /// Apply phase 2's remedies (restart a stale containerd, restore the sandbox
        /// image) within the same budget as `guard runtime`.
        #[arg(long)]
        repair: bool,
        /// With --repair: restart a stale containerd even if it still runs tasks.
        #[arg(long, requires = "repair")]
        force: bool,
        /// With --repair: print each action it would take (restart, delete task X, kill
        /// cgroup Y with pids ..., the canary) and change nothing: no canary, no state, no
        /// metrics, no journal.
        #[arg(long, requires = "repair")]
        dry_run: bool,
        /// Node Problem Detector custom-plugin mode: read-only, one line of at most 80
        /// bytes (the worst finding; `terminal: ...` first on a terminal boot), exit 0 OK,
        /// 1 NonOK, 2 Unknown; writes nothing (no journal, no metrics, no state).
        #[arg(long, conflicts_with = "repair")]
        npd: bool,
        /// With --npd: answer within this long even when containerd hangs.
        #[arg(long, requires = "npd", default_value = "3s", value_parser = args::duration)]
        timeout: std::time::Duration,
        /// Also run the canary: create and remove a host-network pod sandbox through CRI
        /// (runtime.can-create), whatever [canary] enabled says. It stops and removes no
        /// other sandbox (with --repair: also leftovers of a guard that died).
        #[arg(long, conflicts_with = "npd")]
        deep: bool,
    },
    // (its long help, with the bounds, is `help::runtime`)
    /// Phase 2, kubelet's gate: holds kubelet until containerd can start a pod; may restart
    /// containerd within the budget.
    Runtime {
        /// Restart a stale containerd even if it still runs tasks (they will be orphaned).
        #[arg(long)]
        force: bool,
    },
    // (its long help, with the bounds, is `help::hygiene`)
    /// Deletes leaked containerd tasks, kills orphaned container cgroups, restores the
    /// sandbox image; never restarts containerd.
    Hygiene {
        /// Print each action it would take and change nothing (no state, no metrics, no
        /// journal).
        #[arg(long)]
        dry_run: bool,
    },
    /// This boot's phase-1 verdict, the last phase-2 outcome and the remediation history;
    /// exits as `verify` would answer: 1 phase 1 held or phase 2 not usable, 4 terminal.
    ///
    /// Writes nothing; reads state_dir only, never containerd.
    Status,
    /// Clear this boot's terminal state and restart budget (after fixing the cause).
    ///
    /// Writes: removes the state file (runtime.json, and a kept corrupt copy) from
    /// state_dir and sets the status line; waits up to 30 s for the repair lock.
    Reset,
    /// Print the effective configuration and which file each value came from.
    ///
    /// Writes nothing.
    Config,
    /// Check a node image before it ships (a mounted image or a build chroot): containerd
    /// ordered after its volume and the guard, the mount, cloud-init, kubelet, kill-mode,
    /// the baked sandbox image, containerd's deprecated settings, the guard's config.
    ///
    /// Writes nothing: reads DIR only, runs nothing from it.
    Lint {
        /// The image's root directory (as `systemd-analyze --root`, `dpkg --root`). The
        /// image's own guard config is read: --config and --sysroot do not apply (a usage
        /// error).
        #[arg(long, value_name = "DIR")]
        root: PathBuf,
        /// The cloud-init user data the node gets at provision time (its mounts and disk
        /// setup); without it, what only user data could provide is a warning.
        #[arg(long, value_name = "FILE")]
        user_data: Option<PathBuf>,
        /// Exit 1 on a warning too.
        #[arg(long)]
        warn_is_error: bool,
    },
    /// Print a shell's completion script, the file the package installs for that shell.
    ///
    /// Writes nothing but its output.
    Completion {
        /// bash, zsh or fish.
        #[arg(value_enum)]
        shell: CompletionShell,
    },
    /// Print guard(8) in roff, the page the package installs.
    ///
    /// Writes nothing but its output.
    Man,
}

/// The clap definition of the whole command line, what `--help`, the man page and the
/// completions are made from: each subcommand ends with its exit codes (`exits`), and
/// `runtime`'s and `hygiene`'s long help names their bounds from the config's defaults.
pub fn command() -> clap::Command {
    use crate::command::Command as Kind;
    let mut cmd = <Cli as clap::CommandFactory>::command().after_help(exits::global_help());
    // (in `guard --help`'s order: clap moves a subcommand it mutates to the end)
    for kind in Kind::ALL {
        cmd = cmd.mut_subcommand(kind.as_str(), |sub| {
            let sub = sub.after_help(exits::help(kind));
            match kind {
                Kind::Runtime => sub.long_about(help::runtime()),
                Kind::Hygiene => sub.long_about(help::hygiene()),
                _ => sub,
            }
        });
    }
    cmd
}

impl Command {
    /// The command without its flags: what the state file, metrics and journal name.
    fn kind(&self) -> crate::command::Command {
        use crate::command::Command as Kind;
        match self {
            Command::Volume { .. } => Kind::Volume,
            Command::Verify { .. } => Kind::Verify,
            Command::Runtime { .. } => Kind::Runtime,
            Command::Hygiene { .. } => Kind::Hygiene,
            Command::Status => Kind::Status,
            Command::Reset => Kind::Reset,
            Command::Config => Kind::Config,
            Command::Lint { .. } => Kind::Lint,
            Command::Completion { .. } => Kind::Completion,
            Command::Man => Kind::Man,
        }
    }
}

pub fn main() -> i32 {
    // First: from here a signal inside a critical section waits for its end.
    if let Err(e) = crate::signals::install() {
        eprintln!("guard: internal error: cannot handle SIGTERM and SIGINT: {e}");
        return Exit::CheckFailed as i32;
    }
    out::unless_closed(run())
}

fn run() -> i32 {
    let cli = match parse() {
        Ok(cli) => cli,
        // --help and --version print to stdout and succeed; a usage error exits 2
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                Exit::Usage as i32
            } else {
                Exit::Usable as i32
            };
        }
    };
    let npd = matches!(cli.command, Command::Verify { npd: true, .. });
    terminal::decide(cli.full, cli.color);
    // NPD reads one line on stdout; the guard's own log stays out of its way.
    logging::init_logging(if npd { 0 } else { cli.verbose + 1 });
    // neither reads this host: no host configuration is loaded
    match &cli.command {
        Command::Lint {
            root,
            user_data,
            warn_is_error,
        } => return lint::run(root, user_data.as_deref(), *warn_is_error, cli.json) as i32,
        Command::Completion { shell } => return manual::print_completion(*shell) as i32,
        Command::Man => return manual::print_man_page() as i32,
        _ => {}
    }
    match context(&cli, npd) {
        Ok(ctx) => dispatch(&ctx, cli.command),
        Err(exit) => exit,
    }
}

/// This host and the guard's configuration; a configuration error ends the run here.
fn context(cli: &Cli, npd: bool) -> Result<Context, i32> {
    let host = Host::live().with_sysroot(&cli.sysroot);
    args::sysroot_is_there(&host, npd)?;
    let loaded = tracing::debug_span!("config")
        .in_scope(|| crate::config::load(&host, cli.config.as_deref()));
    let loaded = match loaded {
        Ok(loaded) => loaded,
        Err(e) if npd => return Err(verify::npd_unknown(&format!("configuration error: {e}"))),
        Err(e) => return Err(config_error(&e)),
    };
    Ok(Context {
        host,
        loaded,
        json: cli.json,
        command: cli.command.kind(),
        npd,
        writes: cli.command.writes(),
        started: std::time::Instant::now(),
    })
}

fn dispatch(ctx: &Context, command: Command) -> i32 {
    let exit = match command {
        Command::Volume { pre_start } => with_containerd(ctx, |cd| volume::run(ctx, cd, pre_start)),
        Command::Verify {
            npd: true, timeout, ..
        } => return verify::npd(ctx, timeout),
        Command::Verify {
            repair,
            force,
            deep,
            ..
        } => {
            let flags = verify::Flags {
                repair,
                force,
                deep,
            };
            with_containerd(ctx, |cd| verify::run(ctx, cd, flags))
        }
        Command::Hygiene { .. } => with_containerd(ctx, |cd| hygiene::run(ctx, cd)),
        Command::Runtime { force } => with_containerd(ctx, |cd| runtime::run(ctx, cd, force)),
        Command::Status => status::run(ctx),
        Command::Reset => reset::run(ctx),
        Command::Config => config::run(ctx),
        // need no host context; main runs them before reading any
        Command::Lint { .. } | Command::Completion { .. } | Command::Man => Exit::Usage,
    };
    exit as i32
}

/// Runs a command that checks containerd with containerd's config, named by `[containerd]
/// config`; its errors are config errors: exit 3, nothing checked.
fn with_containerd(ctx: &Context, command: impl FnOnce(&ContainerdConfig) -> Exit) -> Exit {
    match ctx.containerd_config() {
        Ok(cd) => command(&cd),
        Err(e) => {
            eprintln!("guard: configuration error: {e}");
            eprintln!(
                "guard: (containerd's config, named by [containerd] config); nothing was checked"
            );
            Exit::Config
        }
    }
}

/// The command line, or a usage error: clap's own, or a flag given where it would do
/// nothing (`args::not_applying`), named with why rather than silently ignored.
fn parse() -> Result<Cli, clap::Error> {
    let matches = command().try_get_matches()?;
    let cli = Cli::from_arg_matches(&matches)?;
    match args::not_applying(&cli.command, |id| args::given(&matches, id)) {
        None => Ok(cli),
        Some(why) => Err(command().error(clap::error::ErrorKind::ArgumentConflict, why)),
    }
}

/// `state_dir` for this boot, for `status` and `reset`.
pub(crate) fn state_dir(ctx: &Context) -> Result<StateDir, Exit> {
    StateDir::open(&ctx.host, &ctx.loaded.settings.state_dir).map_err(|e| {
        eprintln!("guard: {e}");
        Exit::CheckFailed
    })
}

/// The guard itself failed (not a check): said plainly, never a panic.
pub(crate) fn internal_error(e: &impl std::fmt::Display) -> Exit {
    eprintln!("guard: internal error: {e}");
    Exit::CheckFailed
}

pub(crate) fn config_error(e: &ConfigError) -> i32 {
    eprintln!("guard: configuration error: {e}");
    eprintln!("guard: nothing was checked or changed; fix the file and run again");
    Exit::Config as i32
}

/// Prints a report in the requested form and maps its verdict to an exit code. On the way
/// the report goes to the journal and the metrics file, where the command writes (a
/// metrics failure is a warning in the report, never a change of the verdict).
pub(crate) fn finish(ctx: &Context, mut report: Report) -> Exit {
    let verdict = report.verdict();
    if ctx.writes != crate::context::Writes::Nothing {
        let metrics = tracing::debug_span!("metrics")
            .in_scope(|| crate::phases::publish_metrics(ctx, &report));
        if let Err(warning) = metrics {
            report.findings.push(warning);
        }
        tracing::debug_span!("journal").in_scope(|| crate::journal::record(&report, ctx.command));
    }
    let _span = tracing::debug_span!("output").entered();
    if ctx.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_table_in(terminal::style()));
    }
    match verdict {
        Verdict::Usable => Exit::Usable,
        Verdict::Unusable => Exit::CheckFailed,
    }
}

#[cfg(test)]
mod tests;
